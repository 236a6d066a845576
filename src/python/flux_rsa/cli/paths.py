"""What a job's own paths show, as `flux rsa` sees them from inside the job.

With ``rsa.paths=bind`` the job shell shows the staged inputs at
``data_in``'s own path (a mount in the job's namespace, src/shell/view.c)
and removes that mount when the inputs are released.  A `flux rsa
release-input` run inside the job returns once the job's own ``data_in``
shows persistent storage again, so that the next command reads what is
there.
"""

import os
import time


def same_dir(a, b):
    """Do paths ``a`` and ``b`` show the same directory here?"""
    try:
        sa, sb = os.stat(a), os.stat(b)
    except OSError:
        return False
    return (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino)


def shows_inputs(rec, here):
    """Does ``data_in`` show the staged inputs to this process?  ``rec`` is
    the job's record, ``here`` this process's RSA_DATA_IN."""
    env = rec.get("env") or {}
    data_in = (rec.get("request") or {}).get("data_in")
    if (
        env.get("paths") != "bind"
        or not env.get("staged_in")
        or not data_in
        or not here
    ):
        return False
    return same_dir(data_in, here)


def wait_inputs_gone(data_in, here, timeout=30.0):
    """Wait until ``data_in`` no longer shows the staged inputs at ``here``
    (the job shell removes the mount when it sees the switch); False when
    it still does after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    delay = 0.01
    while same_dir(data_in, here):
        if time.monotonic() > deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.2)
    return True
