"""A real test instance (t/rsa-instance: 2 compute nodes, 2 RSA nodes,
this build tree) driven from outside: jobs submitted, attached, their
events and RSA records read, as bench/thesis and bench/campaign run them.
"""

import json
import os
import signal
import subprocess
import time

from benchlib.system import say

#: a job that never ends within this is reported as failed (s)
JOB_TIMEOUT = 1800


class Instance:
    """t/rsa-instance started with an initial program that writes its
    environment to a file and waits on its stdin: this driver runs `flux`
    with that environment, and closing the pipe ends the instance."""

    def __init__(self, builddir, work, conf, size=4, nrsa=2, options=()):
        self.script = os.path.join(builddir, "t", "rsa-instance")
        self.work, self.conf, self.size, self.nrsa = work, conf, size, nrsa
        self.options = list(options)  # more t/rsa-instance options (--no-rsa)
        self.envfile = os.path.join(work, "instance.env")
        self.log = os.path.join(work, "instance.log")
        self.proc = None
        self.env = None

    @classmethod
    def inside(cls):
        """The instance this process runs in (an initial program: its
        environment is the instance's), to run `flux` and read jobs as
        from outside."""
        inst = cls.__new__(cls)
        inst.proc, inst.env, inst.flux_cmd = None, dict(os.environ), "flux"
        return inst

    def start(self, undo, timeout=180):
        if not os.access(self.script, os.X_OK):
            raise RuntimeError(
                f"{self.script} missing: build the tree first "
                "(./autogen.sh && ./configure && make)"
            )
        hold = 'env -0 > "$0.tmp" && mv "$0.tmp" "$0" && exec cat > /dev/null'
        cmd = [
            self.script,
            "--size",
            str(self.size),
            "--rsa",
            str(self.nrsa),
            "--config",
            self.conf,
            *self.options,
            "--",
            "sh",
            "-c",
            hold,
            self.envfile,
        ]
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=open(self.log, "w"),
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        undo.push("test instance", self.stop)
        deadline = time.monotonic() + timeout
        while not os.path.exists(self.envfile):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the test instance did not start: see {self.log}")
            time.sleep(0.2)
        with open(self.envfile, "rb") as f:
            pairs = [e.split(b"=", 1) for e in f.read().split(b"\0") if b"=" in e]
        self.env = {k.decode(): v.decode() for k, v in pairs}
        self.flux_cmd = (
            subprocess.run(
                ["sh", "-c", "command -v flux"],
                env=self.env,
                capture_output=True,
                text=True,
            ).stdout.strip()
            or "flux"
        )
        if "--no-rsa" not in self.options:
            self.flux("rsa", "pool", "--wait=120")

    def stop(self):
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(120)
        except subprocess.TimeoutExpired:
            say(
                f"the test instance did not end 120 s after its initial program: "
                f"signalling its process group {self.proc.pid}"
            )
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(30)

    def tail(self, lines=40):
        """The end of the instance's log (brokers' stderr), for a failure report."""
        try:
            with open(self.log, errors="replace") as f:
                return "".join(f.readlines()[-lines:])
        except OSError:
            return ""

    def flux(self, *args, check=True, timeout=JOB_TIMEOUT):
        r = subprocess.run(
            [self.flux_cmd, *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if check and r.returncode != 0:
            raise RuntimeError(
                f"flux {' '.join(args)}: exit {r.returncode}: "
                f"{r.stderr.strip()[-2000:]}"
            )
        return r

    def submit(
        self, command, nodes=1, tasks_per_node=1, attrs=None, name=None, extra=()
    ):
        args = ["submit", f"-N{nodes}", f"--tasks-per-node={tasks_per_node}"]
        if name:
            args.append(f"--job-name={name}")
        for key, value in (attrs or {}).items():
            args.append(f"--setattr=rsa.{key}={value}")
        return self.flux(*args, *extra, *command).stdout.strip()

    def eventlog(self, jobid):
        """The job's eventlog: its events as read, in order."""
        out = self.flux("job", "eventlog", "-f", "json", jobid).stdout
        return [json.loads(line) for line in out.splitlines()]

    def events(self, jobid):
        """{event name: first timestamp} of the job's eventlog."""
        return first_times(self.eventlog(jobid))

    def record(self, jobid):
        """The job's RSA record (flux rsa status -o json), or None."""
        r = self.flux("rsa", "status", "-a", "-o", "json", jobid, check=False)
        if r.returncode != 0:
            return None
        records = json.loads(r.stdout or "[]")
        return records[0] if records else None

    def wait_staged(self, jobid):
        """flux rsa wait: (settled fine, its message)."""
        r = self.flux("rsa", "wait", jobid, check=False)
        return r.returncode == 0, (r.stdout + r.stderr).strip()


def first_times(eventlog):
    """{event name: first timestamp} of an eventlog's events."""
    out = {}
    for ev in eventlog:
        out.setdefault(ev["name"], ev["timestamp"])
    return out


def phase_span(record, state):
    """(first entered, left) rsa-state STATE in the record's history; None
    for what did not happen."""
    hist = (record or {}).get("history") or []
    for i, (ts, _job, rsa) in enumerate(hist):
        if rsa == state:
            left = next((t2 for t2, _j2, r2 in hist[i + 1 :] if r2 != state), None)
            return ts, left
    return None, None


def phase_seconds(record, state):
    """Seconds the record's history spent in rsa-state STATE (first time
    entered to the next change of rsa-state), or None."""
    entered, left = phase_span(record, state)
    return left - entered if entered is not None and left is not None else None


def mount_seconds(record, step):
    """How long the compute side's STEP ("attach", "detach") of the job's
    RAM disk took, from its record's mount_times, or None."""
    start, end = (((record or {}).get("mount_times") or {}).get(step) or (None, None))[
        :2
    ]
    return end - start if start is not None and end is not None else None
