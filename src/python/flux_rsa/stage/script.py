"""User stage scripts: SCRIPT RAMDISK_DIR DATA_DIR, run as the job owner,
in the job's own environment (``environment``), watched for growth and
for silence (``Growth``)."""

import os
import signal
import stat
import subprocess
import sys
import threading
import time

from .errors import EXIT_NOSOURCE, EXIT_PERMISSION, EXIT_SCRIPT, StageError

#: seconds between calls of run_script's ``tick`` while the script runs
TICK = 0.5

#: what Flux's job shell sets for a job's tasks (flux-environment(7)) and
#: flux-rsa's shell plugin adds: a stage script is none of them
TASK_VARIABLES = frozenset(
    (
        "FLUX_JOB_ID",
        "FLUX_JOB_ID_PATH",
        "FLUX_ENCLOSING_ID",
        "FLUX_JOB_SIZE",
        "FLUX_JOB_NNODES",
        "FLUX_JOB_TMPDIR",
        "FLUX_TASK_RANK",
        "FLUX_TASK_LOCAL_ID",
        "FLUX_KVS_NAMESPACE",
        "FLUX_URI",
        "FLUX_PMI_LIBRARY_PATH",
        "PMI_RANK",
        "PMI_SIZE",
        "PMI_FD",
        "PMI_SPAWNED",
        "RSA_RAMDISK",
        "RSA_DATA_IN",
        "RSA_DATA_OUT",
    )
)


def environment(submitted, jobid, ramdisk, direction):
    """A stage script's environment: the job's own as it was submitted
    (``submitted``, its jobspec's), less what Flux sets for the job's tasks,
    plus ``FLUX_JOB_ID`` (the job's, as Flux writes it), ``RSA_RAMDISK``
    (the RAM disk, as the script sees it) and ``RSA_DIRECTION`` ("in" or
    "out")."""
    env = {k: v for k, v in submitted.items() if k not in TASK_VARIABLES}
    if jobid is not None:
        from flux.job import JobID

        env["FLUX_JOB_ID"] = JobID(jobid).f58
    env["RSA_RAMDISK"] = ramdisk
    env["RSA_DIRECTION"] = direction
    return env


def run_script(script, ramdisk, data, env=None, tick=None):
    """Run SCRIPT with $1=RAMDISK and $2=DATA, in ``env`` (None: ours).  Its
    stdout and stderr both go to our stderr (our stdout may carry progress
    JSON).  ``tick(silent)``, if given, is called every TICK seconds while
    it runs, with the seconds since the script last printed a line.
    Raises StageError unless it exits 0."""
    try:
        st = os.stat(script)
    except FileNotFoundError:
        raise StageError(
            EXIT_NOSOURCE,
            script,
            "No such file",
            "the stage script must exist on the RSA node",
        ) from None
    except PermissionError:
        raise StageError(
            EXIT_PERMISSION,
            script,
            "Permission denied",
            "the job owner must be able to read the stage script",
        ) from None
    if not os.access(script, os.X_OK) or os.path.isdir(script):
        raise StageError(
            EXIT_PERMISSION,
            script,
            "is not executable",
            "chmod +x it; it is run as SCRIPT RAMDISK_DIR DATA_DIR",
        )
    del st
    for d in (ramdisk, data):
        if not os.path.isdir(d):
            raise StageError(
                EXIT_NOSOURCE,
                d,
                "No such directory",
                "both directories must exist before the script runs",
            )
    sys.stderr.flush()
    try:
        proc = subprocess.Popen(
            [script, ramdisk, data],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=ramdisk,
        )
    except OSError as exc:
        raise StageError(
            EXIT_SCRIPT,
            script,
            f"could not be started: {exc.strerror}",
            "check its #! line",
        ) from None
    last = _Relay(proc.stdout)
    try:
        rc = _wait(proc, tick, last)
    except BaseException:
        proc.kill()
        raise
    last.join(timeout=1.0)  # a child the script left behind may hold the pipe
    if rc == 0:
        return
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = str(-rc)
        cause = f"stage script was killed by signal {name}"
    else:
        cause = f"stage script exited with status {rc}"
    hint = (
        f"its last message: {last.line}"
        if last.line
        else "its own messages, if any, are just above"
    )
    raise StageError(EXIT_SCRIPT, script, cause, hint)


def _wait(proc, tick, relay):
    while True:
        try:
            return proc.wait(timeout=None if tick is None else TICK)
        except subprocess.TimeoutExpired:
            tick(time.monotonic() - relay.at)


def tree_bytes(top):
    """Bytes in the regular files under directory ``top`` (0 if it is gone)."""
    total = 0
    for root, dirs, files in os.walk(top):
        for name in files:
            try:
                st = os.lstat(os.path.join(root, name))
            except OSError:
                continue  # removed while we looked
            if stat.S_ISREG(st.st_mode):
                total += st.st_size
    return total


class Growth:
    """Progress of a stage script, which reports none: how far DST has grown
    since the start, against the bytes in SRC (a stage-in script fills the
    RAM disk from data_in; a stage-out script fills data_out from the RAM
    disk).  An estimate (an unpacked archive is a little smaller than the
    archive), capped below 100% until the script ends.  Walking DST costs
    time on big trees: it is done at most every ``spacing`` times as long
    as the last walk took.  Each reading also says how long the script has
    been quiet: nothing printed and DST not grown (as last walked)."""

    def __init__(self, src, dst, meter, clock=time.monotonic, spacing=5.0):
        self.dst = dst
        self.meter = meter
        self.clock = clock
        self.spacing = spacing
        self.total = tree_bytes(src)
        self.base = tree_bytes(dst)
        self.next = 0.0
        self.grown = 0  # bytes DST had grown by at the last walk ...
        self.changed = clock()  # ... and when that last changed

    def __call__(self, silent=0.0):
        now = self.clock()
        if now >= self.next:
            grown = tree_bytes(self.dst) - self.base
            took = self.clock() - now
            self.next = now + max(TICK, took * self.spacing)
            if grown != self.grown:
                self.grown, self.changed = grown, now
        done = max(0, min(self.grown, self.total - 1 if self.total else 0))
        quiet = int(min(silent, now - self.changed))
        self.meter.update("copy", done, self.total, 0, 0, quiet=quiet)


class _Relay(threading.Thread):
    """Copies the script's output to our stderr and keeps its last line, so
    a failure names what the script itself said (e.g. the path it could
    not write)."""

    def __init__(self, pipe):
        super().__init__(daemon=True)
        self.pipe = pipe
        self.line = None
        self.at = time.monotonic()  # when the script last printed (or started)
        self.start()

    def run(self):
        out = sys.stderr.buffer
        for raw in self.pipe:
            self.at = time.monotonic()
            out.write(raw)
            out.flush()
            text = raw.decode("utf-8", "backslashreplace").strip()
            if text:
                self.line = text if len(text) <= 300 else text[:300] + "..."
