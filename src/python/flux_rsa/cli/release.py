"""`flux rsa release-input`, `retry` and `release`: a job's staged inputs
given up early, a HELD job's stage-out run again, or its RAM disk given
up without one; and what a job's own paths show, as `flux rsa` sees them
from inside the job (``shows_inputs``, ``wait_inputs_gone``).
"""


import logging
import os
import time

import flux
from flux.job import JobID

from flux_rsa.cli.ask import records, rpc

# --- The commands ------------------------------------------------------------
# `flux rsa release-input`, `retry` and `release`: a job's staged inputs
# given up early, a HELD job's stage-out run again, or its RAM disk given up
# without one.

LOGGER = logging.getLogger("flux-rsa")


def cmd_release_input(args):
    jobid = args.jobid or os.environ.get("FLUX_JOB_ID")
    if jobid is None:
        raise SystemExit(
            "flux-rsa: release-input: give a JOBID or run it inside the job (FLUX_JOB_ID is not set)"
        )
    h = flux.Flux()
    inside = JobID(jobid) == JobID(os.environ.get("FLUX_JOB_ID", 0)) and os.environ.get(
        "RSA_DATA_IN"
    )
    shown = False
    if inside:  # this job's own data_in may show the inputs (rsa.paths=bind)
        before = records(h, [JobID(jobid)])
        shown = bool(before) and shows_inputs(before[0], os.environ["RSA_DATA_IN"])
    rec = rpc(h, "rsa.release-input", {"id": int(JobID(jobid))})
    if shown:
        data_in = before[0]["request"]["data_in"]
        if not wait_inputs_gone(data_in, os.environ["RSA_DATA_IN"]):
            LOGGER.warning(
                f"{data_in} still shows the inputs on the RAM disk: the job shell did not "
                "remove its mount there (see the job's output)"
            )
    print(f"{JobID(jobid).f58}: inputs released ({rec['rsa_state']})")


def cmd_retry(args):
    rec = rpc(flux.Flux(), "rsa.retry", {"id": int(args.jobid)})
    print(
        f"{args.jobid.f58}: stage-out started again ({rec['rsa_state']}); `flux rsa wait {args.jobid.f58}` follows it"
    )


def cmd_release(args):
    rec = rpc(flux.Flux(), "rsa.release", {"id": int(args.jobid)})
    print(f"{args.jobid.f58}: RAM disk released without stage-out ({rec['rsa_state']})")


# --- Inside the job: what data_in shows --------------------------------------
# What a job's own paths show, as `flux rsa` sees them from inside the job.
#
# With ``rsa.paths=bind`` the job shell shows the staged inputs at
# ``data_in``'s own path (a mount in the job's namespace, src/shell/view.c)
# and removes that mount when the inputs are released. A `flux rsa release-
# input` run inside the job returns once the job's own ``data_in`` shows
# persistent storage again, so that the next command reads what is there.


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
