"""`flux rsa release-input`, `retry` and `release`: a job's staged inputs
given up early, a HELD job's stage-out run again, or its RAM disk given
up without one."""

import logging
import os

import flux
from flux.job import JobID

from flux_rsa.cli import paths
from flux_rsa.cli.ask import records, rpc

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
        shown = bool(before) and paths.shows_inputs(
            before[0], os.environ["RSA_DATA_IN"]
        )
    rec = rpc(h, "rsa.release-input", {"id": int(JobID(jobid))})
    if shown:
        data_in = before[0]["request"]["data_in"]
        if not paths.wait_inputs_gone(data_in, os.environ["RSA_DATA_IN"]):
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
