"""What a bench/scale run is made of: its modes, its workload (seeded,
the same for every mode) and the configuration of each mode's test
instance (the mock cluster; the RSA's simulation, or the prolog/epilog).
"""

import os
import random

from benchlib.figures import GiB

MODES = ("nostage", "perilog", "rsa")
TITLES = {"nostage": "no staging", "perilog": "prolog/epilog", "rsa": "RSA"}

CHUNK = 500  # jobs per submit chunk (--growth)


def parse_rate(text):
    units = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
    text = str(text).strip().upper().rstrip("B")
    if text and text[-1] in units:
        return int(float(text[:-1]) * units[text[-1]])
    return int(text)


# --- the workload ---------------------------------------------------------------


def workload(args):
    """The same list of jobs for every mode: kind, nodes, run seconds, size."""
    rng = random.Random(args.seed)
    jobs = []
    for _ in range(args.jobs):
        jobs.append(
            {
                "kind": "data",
                "nnodes": rng.choice([1, 1, 2, 2, 4]),
                "run": round(rng.uniform(3, 8), 3),
                "size": rng.randint(1, 4) * GiB,
            }
        )
    for _ in range(args.other):
        jobs.append(
            {
                "kind": "plain",
                "nnodes": rng.choice([1, 2]),
                "run": round(rng.uniform(3, 8), 3),
                "size": 0,
            }
        )
    rng.shuffle(jobs)
    return jobs


def write_config(workdir, args, mode):
    """--config DIR for t/rsa-instance: the mock cluster, and per mode the
    RSA simulation or the prolog/epilog."""
    conf = os.path.join(workdir, f"conf-{mode}")
    os.makedirs(conf, exist_ok=True)
    m, c = args.rsa_nodes, args.nodes
    # rank 0 is node0 (a real broker), ranks 1..m the RSA nodes (real
    # brokers), the other compute nodes are fake ranks m+1.. (test execution)
    with open(os.path.join(conf, "amend.py"), "w") as f:
        f.write(
            f"""def amend(R, hwloc_xml=None):
    ex = R["execution"]
    ex["nodelist"] = ["node0,rsa[0-{m - 1}],node[1-{c - 1}]"]
    ex["properties"] = {{"rsa": "1-{m}", "batch": "0,{m + 1}-{c + m - 1}"}}
    return R
"""
        )
    with open(os.path.join(conf, "resource.toml"), "w") as f:
        f.write(
            f"""[resource]
noverify = true

[fake-resources]
nnodes = {c + m}
cores-per-node = 2
amend-r = "{conf}/amend.py"
"""
        )
    if mode == "rsa":
        # enough capacity and pool cores that the mock cluster's queue head
        # can be staged; depth: jobs looked at ahead (Fluxion's default
        # policy gives no start estimates)
        with open(os.path.join(conf, "rsa.toml"), "w") as f:
            f.write(
                f"""[rsa]
simulate-rate = "{args.rate}"
node-capacity = "1024G"
granule = "1G"
pool-cores = 1024
on-late = "wait"
delay = "1h"
ondeck-depth = {args.ondeck_depth}
keep = {args.jobs + args.other + 100}
"""
            )
    if mode == "perilog":
        script = os.path.join(workdir, "perilog.sh")
        with open(script, "w") as f:
            # a data job has a file named after its id holding size/rate
            f.write(
                f"#!/bin/sh\nf={workdir}/stage-seconds/$FLUX_JOB_ID\n"
                '[ -e "$f" ] || exit 0\nread s <"$f"\nexec sleep "$s"\n'
            )
        os.chmod(script, 0o755)
        with open(os.path.join(conf, "job-manager.toml"), "w") as f:
            # keep the rsa jobtap plugin line out: this instance runs --no-rsa
            f.write(
                f"""[job-manager]
plugins = [ {{ load = "perilog.so" }} ]

[job-manager.prolog]
command = ["{script}"]

[job-manager.epilog]
command = ["{script}"]
"""
            )
    if mode == "nostage":
        with open(os.path.join(conf, "job-manager.toml"), "w") as f:
            f.write("[job-manager]\n")  # without the rsa jobtap plugin too
    return conf
