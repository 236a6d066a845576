"""`flux rsa demo`: sample jobs through stage-in and stage-out, in the
instance this runs in (e.g. one started by t/rsa-instance)."""

import json
import os
import subprocess
import sys
import tempfile
import time

import flux
from flux.job import JobID

JOB_SCRIPT = """#!/bin/sh
# a sample RSA job: read every input, write one result per input
set -e
echo "job $FLUX_JOB_ID: RSA_RAMDISK=$RSA_RAMDISK"
echo "job $FLUX_JOB_ID: RSA_DATA_IN=$RSA_DATA_IN RSA_DATA_OUT=$RSA_DATA_OUT"
for f in "$RSA_DATA_IN"/*; do
    sha256sum "$f" | cut -d' ' -f1 > "$RSA_DATA_OUT/$(basename "$f").sum"
done
"""


def make_inputs(root, i):
    inp = os.path.join(root, f"job{i}", "in")
    out = os.path.join(root, f"job{i}", "out")
    os.makedirs(inp, exist_ok=True)
    os.makedirs(out, exist_ok=True)
    for k in range(4):
        with open(os.path.join(inp, f"part{k}.dat"), "wb") as fp:
            fp.write(os.urandom(256 * 1024))
    return inp, out


def flux_cmd(*args):
    return subprocess.run(
        ["flux", *args], check=True, capture_output=True, text=True
    ).stdout.rstrip()


def states(jobs):
    out = json.loads(
        flux_cmd("rsa", "status", "-a", "-o", "json", *[j.f58 for j, _, _ in jobs])
    )
    return {r["jobid"]: r["rsa_state"] for r in out}


def wait_staged(jobs, timeout=120):
    """Until every job's inputs are on its RAM disk (or the timeout)."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        if all(s == "READY" for s in states(jobs).values()):
            return True
        time.sleep(0.5)
    return False


def run(h, args):
    root = args.dir or tempfile.mkdtemp(prefix="flux-rsa-demo.")
    os.makedirs(root, exist_ok=True)
    os.chmod(root, 0o755)
    script = os.path.join(root, "job.sh")
    with open(script, "w") as fp:
        fp.write(JOB_SCRIPT)
    os.chmod(script, 0o755)
    print(f"flux-rsa demo: sample data under {root}")
    print(flux_cmd("rsa", "pool", "--wait=120"))
    jobs = []
    # a job holding the compute nodes first, so the RSA jobs queue behind it
    blocker = flux_cmd("submit", "-N2", "--job-name=compute-busy", "sleep", "inf")
    flux_cmd("job", "wait-event", "-t", "60", blocker, "start")
    print(f"\n  {JobID(blocker).f58}: keeps the compute nodes busy")
    for i in range(args.jobs):
        inp, out = make_inputs(root, i)
        jobid = flux_cmd(
            "submit",
            "-N1",
            f"--output={root}/job{i}.log",
            "--setattr=rsa.capacity=16M",
            f"--setattr=rsa.data_in={inp}",
            f"--setattr=rsa.data_out={out}",
            script,
        )
        jobs.append((JobID(jobid), inp, out))
        print(f"  {JobID(jobid).f58}: data_in={inp} data_out={out}")
    staged = wait_staged(jobs)
    print(
        f"\nflux rsa status ({'all staged in while pending' if staged else 'not all staged after 120s'}):"
    )
    print(flux_cmd("rsa", "status", "-a"))
    flux_cmd("cancel", blocker)
    print(
        f"\n  {JobID(blocker).f58}: cancelled; the RSA jobs run on their staged inputs"
    )
    failures = 0
    for jobid, inp, out in jobs:
        rc = subprocess.run(["flux", "rsa", "wait", "-t", "120", jobid.f58]).returncode
        sums = sorted(os.listdir(out))
        expected = sorted(f"{n}.sum" for n in os.listdir(inp))
        ok = rc == 0 and sums == expected
        failures += not ok
        print(f"  {jobid.f58}: outputs {'complete' if ok else 'MISSING'} in {out}")
    print("\nflux rsa status -a -o times:")
    print(flux_cmd("rsa", "status", "-a", "-o", "times"))
    print("\nflux rsa status -a:")
    print(flux_cmd("rsa", "status", "-a"))
    picture = os.path.join(root, "timeline.png")
    drawn = subprocess.run(
        ["flux", "rsa", "timeline", "-o", picture, *[j.f58 for j, _, _ in jobs]],
        capture_output=True,
        text=True,
    )
    if drawn.returncode == 0:
        print(f"\nflux rsa timeline: what happened, as a picture: {picture}")
    else:
        print(f"\nflux rsa timeline: no picture: {drawn.stderr.strip()}")
    print(
        f"\nflux-rsa demo: {len(jobs) - failures} of {len(jobs)} jobs staged in and out"
    )
    return 1 if failures else 0


def cmd_demo(args):
    sys.exit(run(flux.Flux(), args))
