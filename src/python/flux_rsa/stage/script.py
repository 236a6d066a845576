"""User stage scripts: SCRIPT RAMDISK_DIR DATA_DIR, run as the job owner."""

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


def run_script(script, ramdisk, data, env=None, tick=None):
    """Run SCRIPT with $1=RAMDISK and $2=DATA.  Its stdout and stderr both go
    to our stderr (our stdout may carry progress JSON).  ``tick()``, if
    given, is called every TICK seconds while it runs.  Raises StageError
    unless it exits 0."""
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
        rc = _wait(proc, tick)
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


def _wait(proc, tick):
    while True:
        try:
            return proc.wait(timeout=None if tick is None else TICK)
        except subprocess.TimeoutExpired:
            tick()


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
    as the last walk took."""

    def __init__(self, src, dst, meter, clock=time.monotonic, spacing=5.0):
        self.dst = dst
        self.meter = meter
        self.clock = clock
        self.spacing = spacing
        self.total = tree_bytes(src)
        self.base = tree_bytes(dst)
        self.next = 0.0

    def __call__(self):
        now = self.clock()
        if now < self.next:
            return
        grown = tree_bytes(self.dst) - self.base
        took = self.clock() - now
        self.next = now + max(TICK, took * self.spacing)
        done = max(0, min(grown, self.total - 1 if self.total else 0))
        self.meter.update("copy", done, self.total, 0, 0)


class _Relay(threading.Thread):
    """Copies the script's output to our stderr and keeps its last line, so
    a failure names what the script itself said (e.g. the path it could
    not write)."""

    def __init__(self, pipe):
        super().__init__(daemon=True)
        self.pipe = pipe
        self.line = None
        self.start()

    def run(self):
        out = sys.stderr.buffer
        for raw in self.pipe:
            out.write(raw)
            out.flush()
            text = raw.decode("utf-8", "backslashreplace").strip()
            if text:
                self.line = text if len(text) <= 300 else text[:300] + "..."
