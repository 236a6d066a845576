"""bench/pipeline inside its test instance (`--inside PLAN`, the
instance's initial program): each phase's chain run each way, its steps
submitted, waited for and measured from their eventlogs and RSA records.
"""

import argparse
import json
import os
import signal
import subprocess
import threading
import time

from benchlib import PY
from benchlib.instance import Instance, first_times, phase_span
from benchlib.pipeline_fs import device_bytes, drop_caches, syncfs
from benchlib.system import run, say

WAYS = ("direct", "afterstaged", "handoff")
TITLES = {
    "direct": "direct",
    "afterstaged": "RSA afterstaged",
    "handoff": "RSA hand-off",
}
SETTLED = ("HELD", "DESTROYED")  # rsa-states where a job's outputs move no more
TIMEOUT = 7200


class Chain:
    """One way of one phase: the steps submitted, waited for, measured."""

    handoff_refused = None  # why flux-rsa refused rsa.handoff=off, if it did
    submitted = []  # every job, to cancel and wait for when interrupted

    def __init__(self, inst, plan, phase, way):
        self.inst, self.plan, self.phase, self.way = inst, plan, phase, way
        self.a = argparse.Namespace(**plan["args"])
        self.base = os.path.join(plan["mnt"], phase, way)
        self.drops = []
        self.done = threading.Event()
        self.dep = "afterstaged" if way == "afterstaged" else "afterok"
        self.dep_event = "afterstaged" if way == "afterstaged" else "after-success"

    def flux(self, *args, check=True):
        return self.inst.flux(*args, check=check, timeout=TIMEOUT)

    def submit(self, k, src, dst, prev):
        jobid = self._submit(k, src, dst, prev)
        Chain.submitted.append(jobid)
        return jobid

    def _submit(self, k, src, dst, prev):
        a = self.a
        cmd = [
            "submit",
            "-N1",
            "--exclusive",
            "-t",
            "2h",
            f"--job-name={self.way}-s{k}",
        ]
        prog = [PY, self.plan["script"], "--step", "--compute", str(a.compute)]
        prog += ["--input", src, "--output", dst]
        if prev:
            cmd.append(f"--dependency={self.dep}:{prev}")
        if self.way == "direct":
            prog += ["--sync"] + (["--drop"] if k < a.steps else [])
            return self.flux(*cmd, *prog).stdout.strip()
        cmd += [f"--setattr=rsa.data_in={src}", f"--setattr=rsa.data_out={dst}"]
        cmd += ["--setattr=rsa.on_late=wait", f"--setattr=rsa.capacity={a.capacity}"]
        if self.way != "afterstaged" or Chain.handoff_refused:
            return self.flux(*cmd, *prog).stdout.strip()
        r = self.flux(*cmd, "--setattr=rsa.handoff=off", *prog, check=False)
        if r.returncode == 0:
            return r.stdout.strip()
        if "rsa.handoff" not in r.stderr:
            raise RuntimeError(f"flux submit: {r.stderr.strip()}")
        # a flux-rsa older than the hand-off: its afterstaged way is the same
        Chain.handoff_refused = r.stderr.strip().splitlines()[-1]
        say(f"rsa.handoff=off refused ({Chain.handoff_refused}): running without it")
        return self.flux(*cmd, *prog).stdout.strip()

    def dropper(self, ids):
        """RSA ways: drop the page cache as soon as step k's outputs are
        home, so that step k+1's stage-in reads them from the device.  The
        service's records are polled every 0.1 s from step k's end (`flux
        rsa wait` polls up to 1 s apart: too late for a stage-in that
        begins a second after)."""
        import flux as fluxapi
        from flux.job import JobID

        h = fluxapi.Flux()
        for jobid in ids[:-1]:
            self.flux(
                "job", "wait-event", "-t", str(TIMEOUT), jobid, "finish", check=False
            )
            ask = {"jobids": [int(JobID(jobid))]}
            while not self.done.is_set():
                recs = h.rpc("rsa.status", ask).get()["jobs"]
                rec = recs[0] if recs else {}
                if rec.get("output_home") or rec.get("rsa_state") in SETTLED:
                    break
                time.sleep(0.1)
            t = time.time()
            drop_caches(self.plan["mnt"])
            self.drops.append({"after": jobid, "home": t, "done": time.time()})

    def run(self):
        a, dev = self.a, self.plan["device"]
        dirs = [os.path.join(self.plan["mnt"], self.phase, "input")]
        for k in range(1, a.steps + 1):
            dirs.append(os.path.join(self.base, f"s{k}"))
            os.makedirs(dirs[-1])
        drop_caches(self.plan["mnt"])
        read0, written0 = device_bytes(dev)
        t0 = time.time()
        ids = []
        for k in range(1, a.steps + 1):
            ids.append(self.submit(k, dirs[k - 1], dirs[k], ids[-1] if ids else None))
        dropper = threading.Thread(target=self.dropper, args=(ids,), daemon=True)
        if self.way != "direct":
            dropper.start()
        for jobid in ids:
            self.flux("job", "wait-event", "-t", str(TIMEOUT), jobid, "clean")
        if self.way != "direct":
            for jobid in ids:
                self.flux("rsa", "wait", jobid, check=False)
            self.done.set()
            dropper.join(60)
        syncfs(self.plan["mnt"])
        t_synced = time.time()
        read1, written1 = device_bytes(dev)
        steps = [self.measure_step(k + 1, jobid) for k, jobid in enumerate(ids)]
        self.note_late_drops(steps)
        end = max(max(s["free"], s.get("home") or 0) for s in steps)
        res = {
            "way": self.way,
            "t0": t0,
            "end_to_end_s": end - t0,
            "synced_s": t_synced - t0,
            "pfs_read": read1 - read0,
            "pfs_written": written1 - written0,
            "steps": steps,
            "drops": self.drops,
            "handed_off": sum(bool(s.get("handed_off")) for s in steps),
        }
        for key in ("waiting", "before", "io", "other"):
            res[f"{key}_node_s"] = sum(s[key] for s in steps)
        run(["rm", "-rf", self.base])
        return res

    def measure_step(self, k, jobid):
        evs = self.inst.eventlog(jobid)
        ev = first_times(evs)
        out = self.flux("job", "attach", jobid, check=False).stdout.splitlines()
        prog = next((json.loads(s) for s in out if s.startswith("{")), None)
        if prog is None or ev.get("finish") is None:
            raise RuntimeError(
                f"{self.way} step {k} ({jobid}) failed: see flux job attach"
            )
        s = {"step": k, "jobid": jobid, "prog": prog, "events": evs}
        for name in ("alloc", "start", "finish", "free"):
            s[name] = ev[name]
        s["before"] = s["start"] - s["alloc"]
        s["io"] = prog["read_s"] + prog["write_s"] + prog["sync_s"]
        s["waiting"] = s["free"] - s["alloc"] - self.a.compute - prog["drop_s"]
        s["other"] = s["waiting"] - s["before"] - s["io"]
        # dependencies the bench did not ask for (the RSA's afterstaged)
        s["deps_added"] = [
            e["context"].get("description", "").split("=")[0]
            for e in evs
            if e["name"] == "dependency-add"
            and not e["context"].get("description", "").startswith(self.dep_event + "=")
        ]
        if self.way != "direct":
            rec = self.inst.record(jobid) or {}
            s["record"] = rec
            ready = next((e["context"] for e in evs if e["name"] == "rsa-ready"), {})
            s["staged_in"] = ready.get("staged_in")
            s["stage_in"] = phase_span(rec, "STAGING_IN")
            s["stage_out"] = phase_span(rec, "STAGING_OUT")
            s["home"] = s["stage_out"][1] if rec.get("output_home") else None
            s["handed_off"] = handed_off(evs)
        return s

    def note_late_drops(self, steps):
        """Says where step k+1 began reading before step k's outputs were
        dropped from the page cache (not a step handed off: it reads step
        k's RAM disk, not the device)."""
        for drop, nxt in zip(self.drops, steps[1:]):
            if nxt.get("handed_off"):
                continue
            began = (nxt.get("stage_in") or (None, None))[0] or nxt["start"]
            if began < drop["done"]:
                say(
                    f"{self.way} step {nxt['step']} began reading {began - drop['done']:+.2f} s "
                    "after the page cache was dropped: part of its input may have come from memory"
                )


def handed_off(evs):
    """The producer whose RAM disk a step's inputs came from, as its
    eventlog says (`rsa-handoff from=`, then `rsa-staged-in handoff=`), or
    None."""
    told = next((e["context"] for e in evs if e["name"] == "rsa-handoff"), None)
    staged = next((e["context"] for e in evs if e["name"] == "rsa-staged-in"), {})
    if told and staged.get("handoff"):
        return staged["handoff"]
    return None


def settle(inst):
    """Cancel every job, and wait (bounded) until no RAM disk is left."""
    inst.flux("cancel", "--all", check=False)
    for jobid in Chain.submitted:
        inst.flux("rsa", "wait", "-q", "-t", "120", jobid, check=False)


def inside_main(args):
    """The initial program of the test instance: run every phase and way,
    write the results to PLAN's results file."""
    with open(args.inside) as f:
        plan = json.load(f)
    with open(plan["pidfile"], "w") as f:
        f.write(f"{os.getpid()}\n")

    def on_term(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, on_term)
    inst = Instance.inside()
    results = {"phases": {}}
    try:
        inst.flux("rsa", "pool", "--wait=120")
        for phase in plan["args"]["phases"]:
            results["phases"][phase] = {}
            for way in plan["args"]["ways"]:
                say(f"{phase}: {TITLES[way]}")
                chain = Chain(inst, plan, phase, way)
                try:
                    res = chain.run()
                except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
                    say(f"{phase}: {TITLES[way]} failed: {exc}")
                    results["phases"][phase][way] = {"failed": str(exc)}
                    settle(inst)
                    subprocess.run(["rm", "-rf", chain.base], check=False)
                    continue
                results["phases"][phase][way] = res
                say(
                    f"{phase}: {TITLES[way]}: {res['end_to_end_s']:.1f} s end to end, "
                    f"{res['waiting_node_s']:.1f} node-s waiting"
                )
    except KeyboardInterrupt:
        say("interrupted: cancelling the jobs, waiting for their RAM disks to go")
        settle(inst)
        return 130
    finally:
        results["handoff_refused"] = Chain.handoff_refused
        with open(plan["results"], "w") as f:
            json.dump(results, f)
    return 0
