"""User stage scripts: SCRIPT RAMDISK_DIR DATA_DIR, run as the job owner."""

import os
import signal
import subprocess
import sys

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
        proc = subprocess.run(
            [script, ramdisk, data], stdin=subprocess.DEVNULL,
            stdout=sys.stderr.fileno(), stderr=sys.stderr.fileno(),
            env=env, cwd=ramdisk, check=False,
        )
    except OSError as exc:
        raise StageError(EXIT_SCRIPT, script, f"could not be started: {exc.strerror}",
                         "check its #! line") from None
    rc = proc.returncode
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
    raise StageError(EXIT_SCRIPT, script, cause,
                     "its own messages, if any, are just above")
