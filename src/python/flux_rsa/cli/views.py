"""How `flux rsa status` and `flux rsa pool` show what they show (formats,
fields, filters, sort keys, as `flux jobs` does), and what `flux rsa wait`
says."""

import datetime
import math
import pwd
import time

import flux.hostlist
import flux.util
from flux.job import JobID

from flux_rsa.core import outputs
from flux_rsa.core.handoff import may_read_ramdisk
from flux_rsa.core.paths import seen as job_paths
from flux_rsa.core.record import Record, Request
from flux_rsa.core.states import ENDED, JobState, RsaState
from flux_rsa.core.units import format_size

#: names `status --filter` takes: job-states and rsa-states
STATE_NAMES = [s.value for s in JobState] + [s.value for s in RsaState]


class Config(flux.util.UtilConfig):
    """Named formats of `flux rsa status` and `flux rsa pool`
    (flux-rsa.toml: [status.formats.NAME], [pool.formats.NAME])."""

    builtin_formats = {
        "status": {
            "default": {
                "description": "job-state, rsa-state, RSA nodes, capacity, progress",
                "format": (
                    "{id.f58:>12} {job_state:<9} {rsa_state:<11} {nodes:<10} "
                    "{capacity:>8} {progress:>18} {note}"
                ),
            },
            "long": {
                "description": "default plus owner, what the pool charges, paths, what the job saw "
                "at them, restages, where attached",
                "format": (
                    "{id.f58:>12} {user:<8.8} {job_state:<9} {rsa_state:<11} {nodes:<10} {capacity:>8} "
                    "{charged:>8} {progress:>18} {restages:>3} {data_in} -> {data_out} {paths} "
                    "{attached} {note}"
                ),
            },
            "paths": {
                "description": "what the job sees at its own data_in and data_out (rsa.paths)",
                "format": "{id.f58:>12} {job_state:<9} {rsa_state:<11} {paths:<22} {data_in} -> {data_out}",
            },
            "progress": {
                "description": "staging jobs: how far, how fast, how long still",
                "format": (
                    "{id.f58:>12} {rsa_state:<11} {percent:>6.1f}% {done:>8} {size:>8} "
                    "{rate:>10} {eta:>8}"
                ),
            },
            "times": {
                "description": "when each rsa-state was entered (seconds after submit), "
                "and how long the compute node's attach and detach took",
                "format": (
                    "{id.f58:>12} {rsa_state:<11} {t.REQUESTED:>7} {t.BOOTED:>7} {t.STAGING_IN:>7} "
                    "{t.READY:>7} {t.INUSE_IN:>7} {t.STAGING_OUT:>7} {t.DESTROYED:>7} "
                    "{attach:>7} {detach:>7}"
                ),
            },
        },
        "pool": {
            "default": {
                "description": "capacity of each RSA node and the jobs holding it",
                "format": "{host:<12} {total:>8} {reserved:>8} {free:>8} {state:<8} {jobs}",
            },
            "long": {
                "description": "default plus rank, share used and why a node is drained",
                "format": (
                    "{host:<12} {rank:>4} {total:>8} {reserved:>8} {free:>8} {used:>5.0%} "
                    "{state:<8} {njobs:>4} {jobs} {reason}"
                ),
            },
        },
    }

    def __init__(self, subcommand):
        super().__init__(
            name="flux-rsa",
            subcommand=subcommand,
            initial_dict={
                name: {"formats": dict(f)} for name, f in self.builtin_formats.items()
            },
        )
        self.config = self.dict[subcommand]


class Size(int):
    """Bytes that sort as numbers and show as "16M"."""

    def __format__(self, spec):
        return format(format_size(int(self)), spec)


def duration(seconds):
    """Seconds as `flux rsa status` shows them (0:12:05)."""
    return str(datetime.timedelta(seconds=int(seconds)))


class StatusFormat(flux.util.OutputFormat):
    headings = {
        "id": "JOBID",
        "id.f58": "JOBID",
        "id.dec": "JOBID",
        "userid": "UID",
        "user": "USER",
        "job_state": "JOBSTATE",
        "rsa_state": "RSASTATE",
        "nodes": "RSANODES",
        "capacity": "CAPACITY",
        "charged": "CHARGED",
        "progress": "PROGRESS",
        "attach": "ATTACH",
        "detach": "DETACH",
        "percent": "PCT",
        "done": "DONE",
        "size": "SIZE",
        "rate": "RATE",
        "eta": "ETA",
        "restages": "RS",
        "data_in": "DATA_IN",
        "data_out": "DATA_OUT",
        "ramdisk": "RAMDISK",
        "attached": "ATTACHED",
        "paths": "PATHS",
        "note": "NOTE",
        "error": "ERROR",
        "t_submit": "SUBMIT",
        "t_state": "SINCE",
        "t.REQUESTED": "REQ",
        "t.BOOTED": "BOOTED",
        "t.STAGING_IN": "STAGEIN",
        "t.READY": "READY",
        "t.INUSE_IN": "START",
        "t.STAGING_OUT": "STAGEOUT",
        "t.DESTROYED": "DONE",
    }


class PoolFormat(flux.util.OutputFormat):
    headings = {
        "host": "NODE",
        "rank": "RANK",
        "total": "TOTAL",
        "reserved": "RESERVED",
        "free": "FREE",
        "used": "USED",
        "state": "STATE",
        "reason": "REASON",
        "jobs": "JOBS",
        "njobs": "NJOBS",
    }


class Times:
    """Seconds from the record's first transition to each rsa-state
    (``Record.times``), as `{t.STATE}` in a format."""

    def __init__(self, record):
        self.t0 = record.history[0].t if record.history else 0.0
        self.first = record.times()

    def __getattr__(self, state):
        if state.startswith("_"):
            raise AttributeError(state)
        t = self.first.get(state)
        return "-" if t is None else f"{t - self.t0:.1f}"


def user_name(userid):
    try:
        return pwd.getpwuid(userid).pw_name
    except KeyError:
        return str(userid)


class RsaJob:
    """One row of `flux rsa status`; ``hosts``: the instance's host names in
    rank order (to say where the RAM disk is attached)."""

    def __init__(self, rec, hosts=()):
        self.rec = rec
        self.record = Record.from_dict(rec)
        self.id = JobID(rec["jobid"])
        self.userid = rec["userid"]
        self.user = user_name(self.userid)
        self.job_state = rec["job_state"]
        self.rsa_state = rec["rsa_state"]
        self.nodes = flux.hostlist.Hostlist(rec.get("nodes") or []).encode() or "-"
        req = rec.get("request", {})
        # what was asked (rsa.capacity, else the site's default as reserved)
        # and what the pool charges for it (with a spanning RAM disk's
        # headroom: doc/pool.md "A full brick"; 0 while nothing is held)
        self.capacity = Size(self.record.request.capacity or rec.get("need") or 0)
        self.charged = Size(rec.get("granted") or 0)
        self.restages = rec.get("restages", 0)
        self.data_in = req.get("data_in") or "-"
        self.data_out = req.get("data_out") or "-"
        self.ramdisk = rec.get("ramdisk") or "-"
        self.attached = attached(rec, hosts)
        self.paths = job_paths(rec)
        self.error = rec.get("error") or ""
        self.t = Times(self.record)
        self.t_submit = self.t.t0
        self.t_state = rec.get("state_since", 0.0)
        # the stage's last reading, while it runs
        self.staging = rec["rsa_state"] in ("STAGING_IN", "STAGING_OUT")
        p = (rec.get("progress") or {}) if self.staging else {}
        self.done = Size(p.get("bytes_done", 0))
        self.size = Size(p.get("bytes_total", 0))
        self.bytes_rate = p.get("rate", 0) or 0
        self.attach = Seconds(self.record.mount_seconds("attach"))
        self.detach = Seconds(self.record.mount_seconds("detach"))

    @property
    def final(self):
        return self.record.final

    @property
    def at_rest(self):
        """Nothing more happens to this job without a person: it ended and
        its outputs are settled (home, lost, none, or HELD)."""
        if self.record.job_state not in ENDED:
            return False
        return outputs.outputs(self.record)[0] != outputs.MOVING

    @property
    def percent(self):
        return 100.0 * self.done / self.size if self.size else 0.0

    @property
    def progress(self):
        if not self.size:
            return "-"
        return f"{self.percent:3.0f}% {format_size(self.done)}/{format_size(self.size)}"

    @property
    def rate(self):
        return f"{format_size(self.bytes_rate)}/s" if self.bytes_rate else "-"

    @property
    def eta(self):
        if not self.bytes_rate or not self.size:
            return "-"
        return duration(math.ceil(max(0.0, (self.size - self.done) / self.bytes_rate)))

    @property
    def note(self):
        """What to know about the job, and its default reservation clamped."""
        note = self._note()
        clamped = self.rec.get("clamped")
        if not clamped:
            return note
        clamp = (
            f"default {format_size(clamped)} clamped to {format_size(self.rec['need'])}, "
            "the most the RSA pool holds"
        )
        return f"{note}; {clamp}" if note else clamp

    def _note(self):
        rec = self.rec
        if rec.get("mount") == "detaching":
            # the job ended: its compute node writes back what it still
            # holds of the RAM disk, then lets go (the stage-out waits)
            return "detaching: the compute node writes back its data"
        if rec["rsa_state"] == "INELIGIBLE":
            return rec.get("reason") or ""
        quiet = self.record.quiet_script()
        if quiet is not None:
            script, seconds = quiet
            way = "stage-in" if self.record.stage_dir == "in" else "stage-out"
            return (
                f"{way} script {script} has printed nothing and written nothing for "
                f"{duration(seconds)} (the stage ends at [rsa] stage-timeout, "
                f"{duration(self.record.limits.stage_timeout)})"
            )
        if rec["rsa_state"] == "KEPT":
            readers = ", ".join(JobID(c).f58 for c in rec.get("consumers", ()))
            until = time.strftime(
                "%H:%M:%S",
                time.localtime(
                    rec["state_since"]
                    + (rec.get("limits") or {}).get("handoff_keep", 0)
                ),
            )
            return f"output home; RAM disk kept for {readers or '-'} until {until}"
        handoff = rec.get("handoff")
        if handoff and rec.get("reused") and not handoff.get("failed"):
            home = "; output home" if rec.get("output_home") else ""
            return f"inputs from {handoff['name']}'s RAM disk{home}"
        if handoff and not rec.get("env") and not handoff.get("failed"):
            if may_read_ramdisk(self.record):
                return f"inputs from {handoff['name']}'s RAM disk, when staged"
            return f"inputs from data_in once {handoff['name']}'s outputs are home"
        if rec.get("output_home"):
            lost = rec.get("reclaim") and rec.get("error")
            return f"output home; {rec['error']}" if lost else "output home"
        if not rec.get("error") and Request.from_dict(rec.get("request") or {}).scratch:
            return "scratch RAM disk"
        return rec.get("error") or ""


class Seconds:
    """A duration in seconds for a field ("-" when unknown)."""

    def __init__(self, value):
        self.value = value

    def __format__(self, spec):
        return format("-" if self.value is None else f"{self.value:.3f}s", spec)


def attached(rec, hosts):
    """Where the job's compute nodes have the RAM disk (``node[0-1]:PATH``),
    with what is under way ("attaching" or "detaching") or failed; "-"
    when it is attached nowhere."""
    state = rec.get("mount") or ""
    if not state or not rec.get("ranks"):
        return "-"
    names = flux.hostlist.Hostlist(
        [hosts[r] if r < len(hosts) else str(r) for r in rec["ranks"]]
    ).encode()
    where = f"{names}:{rec.get('mount_path') or '-'}"
    return where if state == "attached" else f"{where} ({state})"


class PoolNode:
    def __init__(self, node):
        self.host = node["host"]
        self.rank = node.get("rank", "-")
        self.total = Size(node.get("total", 0))
        self.reserved = Size(node.get("reserved", 0))
        self.free = Size(node.get("free", 0))
        self.used = self.reserved / self.total if self.total else 0.0
        self.state = (
            "drained"
            if node.get("drained")
            else ("down" if node.get("state") == "down" else "ok")
        )
        self.reason = node.get("reason") or ""
        holders = node.get("holders", [])
        self.jobs = " ".join(JobID(h["jobid"]).f58 for h in holders)
        self.njobs = len(holders)


def select(items, states=(), user=None, everything=False):
    """Status rows to show: those of ``user`` (a userid; None: anyone), in
    one of ``states`` (job-state or rsa-state names; none: any), and,
    unless ``everything``, only jobs whose RSA work is not over."""
    if user is not None:
        items = [i for i in items if i.userid == user]
    if states:
        return [i for i in items if i.job_state in states or i.rsa_state in states]
    if not everything:
        items = [i for i in items if not i.final]
    return items


def parse_states(text):
    """ "staging_in,READY" -> {"STAGING_IN", "READY"}; ValueError names a bad one."""
    names = {s.strip().upper() for s in text.split(",") if s.strip()}
    bad = sorted(names - set(STATE_NAMES))
    if bad:
        raise ValueError(
            f"--filter: {bad[0]}: not a state (job-states and rsa-states: {', '.join(STATE_NAMES)})"
        )
    return names


def parse_user(text):
    """A userid from a name or number; None for "all"."""
    if text == "all":
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return pwd.getpwnam(text).pw_uid
    except KeyError:
        raise ValueError(
            f'--user: {text!r}: no such user (give a name, a userid or "all")'
        ) from None


def formatter(cls, subcommand, fmt, sort=""):
    """An OutputFormat of ``cls`` for a named format or a format string,
    with --sort keys; ValueError says what is wrong."""
    out = cls(Config(subcommand).load().get_format_string(fmt))
    if sort:
        out.set_sort_keys(sort)
    return out


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
        "nnodes": 0,
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
