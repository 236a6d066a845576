"""User stage scripts: SCRIPT RAMDISK_DIR DATA_DIR, run as the job owner."""

import os
import signal
import subprocess
import sys
import threading

from .errors import EXIT_NOSOURCE, EXIT_PERMISSION, EXIT_SCRIPT, StageError


def run_script(script, ramdisk, data, env=None):
    """Run SCRIPT with $1=RAMDISK and $2=DATA.  Its stdout and stderr both go
    to our stderr (our stdout may carry progress JSON).  Raises StageError
    unless it exits 0."""
    try:
        st = os.stat(script)
    except FileNotFoundError:
        raise StageError(EXIT_NOSOURCE, script, "No such file",
                         "the stage script must exist on the RSA node") from None
    except PermissionError:
        raise StageError(EXIT_PERMISSION, script, "Permission denied",
                         "the job owner must be able to read the stage script") from None
    if not os.access(script, os.X_OK) or os.path.isdir(script):
        raise StageError(EXIT_PERMISSION, script, "is not executable",
                         "chmod +x it; it is run as SCRIPT RAMDISK_DIR DATA_DIR")
    del st
    for d in (ramdisk, data):
        if not os.path.isdir(d):
            raise StageError(EXIT_NOSOURCE, d, "No such directory",
                             "both directories must exist before the script runs")
    sys.stderr.flush()
    try:
        proc = subprocess.Popen(
            [script, ramdisk, data], stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            env=env, cwd=ramdisk,
        )
    except OSError as exc:
        raise StageError(EXIT_SCRIPT, script, f"could not be started: {exc.strerror}",
                         "check its #! line") from None
    last = _Relay(proc.stdout)
    try:
        rc = proc.wait()
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
    hint = f"its last message: {last.line}" if last.line else "its own messages, if any, are just above"
    raise StageError(EXIT_SCRIPT, script, cause, hint)


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
