"""Jobspecs and command lines of the pool's subjobs, as plain values.

Holders ask Fluxion for RAM-disk capacity as memory granules; stage, purge
and sweep jobs run a command on given nodes.  Every slot has a core (a
memory-only slot is matched but never runs, and leaks its memory) and every
job runs with cpu-affinity off (the pool's cores are virtual).
The subjobs' output stays in the KVS, where the agent follows it.
"""

import math

from flux.job import JobspecV1

#: the stager and RAM-disk commands, after the Python interpreter
STAGER = ("-m", "flux_rsa.stage")
RAMDISK = ("-m", "flux_rsa.ramdisk")
OUTPUT_BATCH = 0.05


class Unfit(ValueError):
    """A request the pool can never satisfy."""


# --- names -------------------------------------------------------------------


def holder_name(jobid, gen):
    return f"rsa-hold-{jobid}-{gen}"


def stage_name(jobid, seq):
    return f"rsa-stage-{jobid}-{seq}"


def purge_name(jobid):
    return f"rsa-purge-{jobid}"


def ramdisk_name(jobid, gen):
    """The RAM disk's directory name under the root: JOBID.GEN."""
    return f"{jobid}.{gen}"


# --- holders -----------------------------------------------------------------


def layout(need, policy, nnodes):
    """(nodes, granules per node) for ``need`` bytes: one node when it fits
    one, else the fewest nodes, each holding an equal share (rounded up)."""
    granules = max(1, math.ceil(need / policy.granule))
    per_node = policy.node_granules
    nodes = math.ceil(granules / per_node)
    if nodes > nnodes:
        raise Unfit(
            f"need {need} bytes ({granules} granules of {policy.granule}) is more than the "
            f"pool holds: {nnodes} node(s) x {per_node * policy.granule} bytes "
            "(lower rsa.capacity, or raise [rsa] node-capacity or add RSA nodes)"
        )
    return nodes, math.ceil(granules / nodes)


def holder_command(python, policy, jobid, gen, size, userid):
    return [python, *RAMDISK, "hold", "--provider", policy.provider,
            "--root", policy.ramdisk_root, "--name", ramdisk_name(jobid, gen),
            "--size", str(size), "--owner", str(userid)]


def holder(python, policy, jobid, gen, need, userid, nnodes, environment):
    """Jobspec of holder ``gen`` for job ``jobid``; one task per node (the
    first node's builds the RAM disk, the others only hold capacity)."""
    nodes, granules = layout(need, policy, nnodes)
    command = holder_command(python, policy, jobid, gen, granules * policy.granule, userid)
    jobspec = _jobspec(command, holder_name(jobid, gen), environment, nodes=nodes,
                       memory=granules)
    # a RAM disk that cannot be built ends the holder at once
    jobspec.setattr_shell_option("exit-on-error", 1)
    return jobspec


# --- stage, purge, sweep -----------------------------------------------------


def stage_command(python, request, workers=0):
    """The stager's command line for a ``stage`` request (see protocol).

    The script always gets the RAM-disk directory first and the data
    directory second (thesis Appendix U), whichever way the data goes.
    """
    direction, method = request["direction"], request["method"]
    src, dst = request["src"], request["dst"]
    if method is None:
        args = ["copy", src, dst]
    elif method == "tar":
        args = ["untar", src, dst] if direction == "in" else ["tar", src, dst]
    else:
        ramdisk, data = (dst, src) if direction == "in" else (src, dst)
        args = ["script", method, ramdisk, data]
    options = ["--as-user", str(request["userid"]), "--progress-json",
               "--verify", request["verify"]]
    if workers:
        options += ["--workers", str(workers)]
    return [python, *STAGER, *args, *options]


def stage(python, request, rank, environment, workers=0):
    """Stage subjob on pool rank ``rank`` (the holder's first node)."""
    return _jobspec(stage_command(python, request, workers),
                    stage_name(request["jobid"], request["seq"]), environment, rank=rank)


def purge_command(python, path, data_in):
    link = [] if data_in is None else ["--link", data_in]
    return [python, *RAMDISK, "purge", path, *link]


def purge(python, request, rank, environment):
    return _jobspec(purge_command(python, request["path"], request["data_in"]),
                    purge_name(request["jobid"]), environment, rank=rank)


def sweep(python, policy, environment, nodes=1, rank=None):
    """Remove leftover RAM disks: one task on each of ``nodes`` nodes, or on
    pool rank ``rank``."""
    return _jobspec([python, *RAMDISK, "sweep", policy.ramdisk_root], "rsa-sweep",
                    environment, nodes=nodes, rank=rank)


# --- common shape --------------------------------------------------------------


def _jobspec(command, name, environment, nodes=1, memory=None, rank=None):
    slot = [{"type": "core", "count": 1}]
    if memory:
        slot.append({"type": "memory", "count": memory})
    resources = [{"type": "node", "count": nodes,
                  "with": [{"type": "slot", "count": 1, "label": "task", "with": slot}]}]
    tasks = [{"command": list(command), "slot": "task", "count": {"per_slot": 1}}]
    jobspec = JobspecV1(resources, tasks, {"system": {"duration": 0}})
    jobspec.setattr("job.name", name)
    jobspec.setattr_shell_option("cpu-affinity", "off")
    # the agent reads the output as it comes (built line, progress): commit
    # it to the KVS within 50 ms instead of the shell's default 0.5 s
    jobspec.setattr_shell_option("output", {"batch-timeout": OUTPUT_BATCH})
    if rank is not None:
        # by rank, not host name: the pool's R names its nodes as the parent
        # does, which need not be what its brokers call themselves (job
        # ingest checks host names against the brokers' hostlist)
        jobspec.setattr("system.constraints", {"ranks": [str(rank)]})
    jobspec.environment = dict(environment)
    jobspec.cwd = "/"
    return jobspec
