"""What runs inside bench/campaign's instances: a job's task (read its
share of the inputs, compute, write its share of the outputs), and the
job-manager prolog and epilog of the perilog mode (copy the inputs to
the job's scratch directory, the outputs home).
"""

import json
import os
import subprocess
import sys
import time

from benchlib.figures import MiB
from benchlib.system import write_data


def task_job(args):
    """One task of a campaign job: read its share of the inputs, compute,
    write its share of the outputs; print what the reads and writes took."""
    rank = int(os.environ.get("FLUX_TASK_RANK", "0"))
    size = int(os.environ.get("FLUX_JOB_SIZE", "1"))
    read_s = write_s = 0.0
    nread = 0
    if args.input:
        src = os.path.expandvars(args.input)
        t0 = time.monotonic()
        for name in sorted(os.listdir(src))[rank::size]:
            with open(os.path.join(src, name), "rb", buffering=0) as f:
                while True:
                    chunk = f.read(MiB)
                    if not chunk:
                        break
                    nread += len(chunk)
        read_s = time.monotonic() - t0
    time.sleep(args.compute)
    if args.output:
        dst = os.path.expandvars(args.output)
        block = os.urandom(MiB)
        per_file = args.out_bytes // args.out_files
        t0 = time.monotonic()
        for k in range(rank, args.out_files, size):
            write_data(os.path.join(dst, f"out.{k}"), per_file, block)
        write_s = time.monotonic() - t0
    print(
        json.dumps({"rank": rank, "read_s": read_s, "write_s": write_s, "read": nread}),
        flush=True,
    )


def perilog(args):
    """The job-manager prolog or epilog of the perilog mode: copy the
    job's inputs to its scratch directory, or its outputs home, as named in
    its jobspec (attributes.system.campaign).  Jobs without it: nothing."""
    jobid = os.environ["FLUX_JOB_ID"]
    r = subprocess.run(
        ["flux", "job", "info", jobid, "jobspec"], capture_output=True, text=True
    )
    if r.returncode != 0:
        sys.exit(f"campaign {args.perilog}: flux job info {jobid}: {r.stderr.strip()}")
    spec = json.loads(r.stdout).get("attributes", {}).get("system", {}).get("campaign")
    if not spec:
        return 0
    scratch = spec["scratch"]
    if args.perilog == "prolog":
        os.makedirs(os.path.join(scratch, "out"), exist_ok=True)
        os.makedirs(os.path.join(scratch, "in"), exist_ok=True)
        if spec.get("in"):
            subprocess.run(
                ["cp", "-a", spec["in"] + "/.", os.path.join(scratch, "in")], check=True
            )
    else:
        try:
            if spec.get("out"):
                subprocess.run(
                    ["cp", "-a", os.path.join(scratch, "out") + "/.", spec["out"]],
                    check=True,
                )
        finally:
            subprocess.run(["rm", "-rf", "--one-file-system", scratch], check=False)
    return 0
