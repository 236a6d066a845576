"""How `flux rsa status` shows a record, and what `flux rsa wait` says."""

import time

import flux.hostlist
import flux.util
from flux.job import JobID

from flux_rsa.core import outputs
from flux_rsa.core.record import Record
from flux_rsa.core.units import format_size

STATES_DONE = ("INITIAL", "INELIGIBLE", "DESTROYED")


class StatusConfig(flux.util.UtilConfig):
    builtin_formats = {
        "default": {
            "description": "job-state, rsa-state, RSA nodes, capacity, progress",
            "format": (
                "{id.f58:>12} {job_state:<9} {rsa_state:<11} {nodes:<10} "
                "{capacity:>8} {progress:>18} {note}"
            ),
        },
        "long": {
            "description": "default plus paths and restages",
            "format": (
                "{id.f58:>12} {job_state:<9} {rsa_state:<11} {nodes:<10} {capacity:>8} "
                "{progress:>18} {restages:>3} {data_in} -> {data_out} {note}"
            ),
        },
        "times": {
            "description": "when each rsa-state was entered (seconds after submit)",
            "format": (
                "{id.f58:>12} {rsa_state:<11} {t.REQUESTED:>7} {t.BOOTED:>7} {t.STAGING_IN:>7} "
                "{t.READY:>7} {t.INUSE_IN:>7} {t.STAGING_OUT:>7} {t.DESTROYED:>7}"
            ),
        },
    }

    def __init__(self):
        super().__init__(name="flux-rsa", initial_dict={"formats": dict(self.builtin_formats)})


class StatusFormat(flux.util.OutputFormat):
    headings = {
        "id": "JOBID",
        "id.f58": "JOBID",
        "id.dec": "JOBID",
        "userid": "UID",
        "job_state": "JOBSTATE",
        "rsa_state": "RSASTATE",
        "nodes": "RSANODES",
        "capacity": "CAPACITY",
        "progress": "PROGRESS",
        "restages": "RS",
        "data_in": "DATA_IN",
        "data_out": "DATA_OUT",
        "ramdisk": "RAMDISK",
        "note": "NOTE",
        "error": "ERROR",
        "t.REQUESTED": "REQ",
        "t.BOOTED": "BOOTED",
        "t.STAGING_IN": "STAGEIN",
        "t.READY": "READY",
        "t.INUSE_IN": "START",
        "t.STAGING_OUT": "STAGEOUT",
        "t.DESTROYED": "DONE",
    }


class Times:
    """Seconds from the record's first transition to each rsa-state."""

    def __init__(self, history):
        self.t0 = history[0][0] if history else 0.0
        self.first = {}
        for t, _, state in history:
            self.first.setdefault(state, t)

    def __getattr__(self, state):
        if state.startswith("_"):
            raise AttributeError(state)
        t = self.first.get(state)
        return "-" if t is None else f"{t - self.t0:.1f}"


class RsaJob:
    def __init__(self, rec):
        self.rec = rec
        self.id = JobID(rec["jobid"])
        self.userid = rec["userid"]
        self.job_state = rec["job_state"]
        self.rsa_state = rec["rsa_state"]
        self.nodes = flux.hostlist.Hostlist(rec.get("nodes") or []).encode() or "-"
        self.capacity = format_size(rec.get("granted") or rec.get("need"))
        self.restages = rec.get("restages", 0)
        req = rec.get("request", {})
        self.data_in = req.get("data_in") or "-"
        self.data_out = req.get("data_out") or "-"
        self.ramdisk = rec.get("ramdisk") or "-"
        self.error = rec.get("error") or ""
        self.t = Times(rec.get("history", []))

    @property
    def final(self):
        return self.job_state in ("FINISHED", "CANCELED") and self.rsa_state in STATES_DONE

    @property
    def progress(self):
        p = self.rec.get("progress")
        if not p or not p.get("bytes_total"):
            return "-"
        pct = 100.0 * p["bytes_done"] / p["bytes_total"]
        return f"{pct:3.0f}% {format_size(p['bytes_done'])}/{format_size(p['bytes_total'])}"

    @property
    def note(self):
        rec = self.rec
        if rec["rsa_state"] == "INELIGIBLE":
            return rec.get("reason") or ""
        if rec.get("output_home"):
            return "output home"
        return rec.get("error") or ""


def ineligible_row(jobid, userid, flux_state):
    """A status row for a job without rsa attributes."""
    if flux_state in ("DEPEND", "PRIORITY", "SCHED"):
        job_state = "PENDING"
    elif flux_state == "RUN":
        job_state = "RUNNING"
    else:
        job_state = "FINISHED"
    return {
        "jobid": jobid,
        "userid": userid,
        "job_state": job_state,
        "rsa_state": "INELIGIBLE",
        "reason": "not an RSA job (no rsa.data_in, rsa.data_out or rsa.capacity)",
        "request": {},
        "history": [],
    }


def wait_verdict(rec):
    """(exit code, message) once a job's outputs are settled, else None."""
    jobid = JobID(rec["jobid"]).f58
    word, why = outputs.outputs(Record.from_dict(rec))
    if word == outputs.MOVING:
        return None
    if word == outputs.HELD:
        env_out = (rec.get("env") or {}).get("data_out")
        nodes = ",".join(rec.get("nodes") or [])
        return 1, (
            f"stage-out failed: {why}; the outputs are kept on the RAM disk "
            f"({nodes}:{env_out}); fix the cause and run `flux rsa retry {jobid}`, "
            f"or `flux rsa release {jobid}` to give them up"
        )
    return (1 if word == outputs.LOST else 0), why


def elapsed(t):
    return flux.util.fsd(max(0.0, time.time() - t))


def print_pool(status, no_header=False):
    """One line per RSA node: capacity total, reserved, free; holders."""
    if not no_header:
        print(f"{'NODE':<12} {'TOTAL':>8} {'RESERVED':>8} {'FREE':>8} {'STATE':<8} JOBS")
    for node in status.get("nodes", []):
        jobs = " ".join(JobID(h["jobid"]).f58 for h in node.get("holders", []))
        state = "drained" if node.get("drained") else "ok"
        print(
            f"{node['host']:<12} {format_size(node.get('total', 0)):>8} "
            f"{format_size(node.get('reserved', 0)):>8} {format_size(node.get('free', 0)):>8} "
            f"{state:<8} {jobs}"
        )
