"""Jobspecs of the pool's subjobs, as plain values.

Holders ask Fluxion for RAM-disk capacity as memory granules; stage, purge
and sweep jobs run a command on given nodes.  Every task runs one
operation of the privileged entry point (``flux_rsa.privileged``): its
``RSA_*`` variables are in the job's environment, and ``via`` says whether
the task runs it itself or through ``flux-imp run rsa``.  Every slot has a core (a
memory-only slot is matched but never runs, and leaks its memory) and every
job runs with cpu-affinity off (the pool's cores are virtual).
The subjobs' output stays in the KVS, where the agent follows it.

In simulation (``Policy.simulate_rate > 0``) holders are Flux
test-execution jobs (``attributes.system.exec.test``): Fluxion allocates
them as usual but job-exec starts no process, and they run until killed.
(Simulated stages and purges are not jobs: the agent times them.)
"""

import math

from flux.job import JobspecV1

from flux_rsa.core import providercaps, spread
from flux_rsa.privileged.caller import subjob_environment
from flux_rsa.privileged.variables import stage_mode
from flux_rsa.ramdisk import image

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


def measure_name(jobid, seq):
    return f"rsa-measure-{jobid}-{seq}"


def discard_name(path):
    return f"rsa-discard-{path.rstrip('/').rsplit('/', 1)[-1]}"


def store_name(host):
    return f"rsa-store-{host}"


def ramdisk_name(jobid, gen):
    """The RAM disk's directory name under the root: JOBID.GEN."""
    return f"{jobid}.{gen}"


# --- holders -----------------------------------------------------------------


def layout(need, policy, nnodes):
    """(nodes, granules per node) for ``need`` bytes: one node when it fits
    one, else the fewest nodes, each holding an equal share (rounded up)
    and the headroom the provider's placement needs (``Policy.layout``)."""
    shape = policy.layout(need, nnodes)
    if shape is not None:
        return shape
    granules = max(1, math.ceil(need / policy.granule))
    per_node = policy.node_granules
    if not policy.spans:
        spanning = [c.name for c in providercaps.PROVIDERS.values() if c.spans is True]
        fix = (
            f"[rsa] {policy.caps.spans} = true"
            if isinstance(policy.caps.spans, str)
            else f'[rsa] provider = "{spanning[0]}"'
        )
        raise Unfit(
            f"need {need} bytes is more than one RSA node holds ({per_node * policy.granule} "
            f"bytes) and provider {policy.provider} cannot span nodes (lower rsa.capacity, or "
            f"set {fix})"
        )
    less = (
        ", less the headroom of a RAM disk over several nodes"
        if policy.spread_by
        else ""
    )
    raise Unfit(
        f"need {need} bytes ({granules} granules of {policy.granule}) is more than the "
        f"pool holds: {nnodes} node(s) x {per_node * policy.granule} bytes{less} (at most "
        f"{policy.largest(nnodes)} bytes: lower rsa.capacity, or raise [rsa] node-capacity "
        "or add RSA nodes)"
    )


def adopt_granules(need, kept_bytes, policy, nodes=1):
    """Granules on each of its ``nodes`` nodes for adopting a kept RAM disk
    of ``kept_bytes`` for a reservation of ``need`` bytes: the larger of
    the two, shared equally (``need``'s share with its headroom)."""
    wanted = spread.per_node(
        policy.granules(need), nodes, policy.granule, policy.spread_by
    )
    granules = max(1, wanted, math.ceil(kept_bytes / nodes / policy.granule))
    if granules > policy.node_granules:
        raise Unfit(
            f"adopting a kept RAM disk of {kept_bytes} bytes for need {need} bytes takes "
            f"{granules} granules of {policy.granule} on each of its {nodes} node(s), more "
            f"than a node holds ({policy.node_granules}); ask for at most "
            f"{policy.largest(nodes)} bytes"
        )
    return granules


def holder_provider(policy, nodes):
    """The provider a holder over ``nodes`` RSA nodes runs: a spanning
    provider may leave one-node RAM disks to another (providercaps: one_node)."""
    caps = policy.caps
    return caps.one_node if nodes == 1 and caps.one_node else policy.provider


def ports_needed(policy, nodes):
    """TCP ports a new holder over ``nodes`` RSA nodes gets from ``[rsa]
    fs-ports`` (its servers', or a block for the site's scripts)."""
    return providercaps.caps(holder_provider(policy, nodes)).ports_for(nodes, policy)


def needs_secret(policy, nodes):
    """Does a holder over ``nodes`` get a volume secret (with its ports)?"""
    return providercaps.caps(holder_provider(policy, nodes)).secret


def holder_task(
    via,
    policy,
    jobid,
    gen,
    size,
    userid,
    nodes=1,
    adopt=None,
    port=None,
    secret=None,
    images=0,
):
    """``size``: bytes on each node.  A RAM disk served to compute nodes
    (a ``port`` given) also gets its volume's secret and address; one of
    ``images`` (one per compute node) lives in its node's store (served
    by the store)."""
    serving = {"port": port}
    if secret is not None:
        serving.update(secret=secret, fs_host=policy.fs_host)
    return via.command(
        "hold",
        root=policy.ramdisk_root,
        name=ramdisk_name(jobid, gen),
        size=size,
        owner=userid,
        provider=holder_provider(policy, nodes),
        jobid=jobid,
        gen=gen,
        adopt=adopt,
        image=images or None,
        # (an adopted kept image too: its compute node is told again)
        writeback=policy.image_writeback if nodes == 1 and policy.images else None,
        **serving,
    )


def holder(
    via,
    policy,
    jobid,
    gen,
    need,
    userid,
    nnodes,
    environment,
    adopt=None,
    adopt_ranks=(),
    adopt_bytes=0,
    rank=None,
    port=None,
    secret=None,
    images=0,
):
    """Jobspec of holder ``gen`` for job ``jobid``; one task per node (the
    first node's builds the RAM disk; the others hold capacity, or their
    share).  Adopting the kept RAM disk ``adopt`` (``adopt_bytes`` big)
    places the holder on the pool ranks ``adopt_ranks`` holding it (its
    node, or the nodes of its parts, in order); ``rank`` places a new
    one-node holder on that pool rank (next to a staged copy of its data)."""
    if adopt is None:
        nodes, granules = layout(need, policy, nnodes)
    else:
        nodes = len(adopt_ranks)
        granules = adopt_granules(need, adopt_bytes, policy, nodes)
        rank = ",".join(str(r) for r in adopt_ranks)
    task = holder_task(
        via,
        policy,
        jobid,
        gen,
        granules * policy.granule,
        userid,
        nodes,
        adopt,
        port,
        secret,
        images if nodes == 1 else 0,
    )
    jobspec = _jobspec(
        task,
        holder_name(jobid, gen),
        environment,
        nodes=nodes,
        memory=granules,
        rank=rank,
    )
    if policy.simulate_rate > 0:
        _simulate(jobspec)
    else:
        # a RAM disk that cannot be built ends the holder at once
        jobspec.setattr_shell_option("exit-on-error", 1)
    return jobspec


# --- stage, purge, sweep -----------------------------------------------------


def stage_task(via, policy, request, workers=0):
    """The stage operation for a ``stage`` request (see protocol).  A user
    script always gets the RAM-disk directory first and the data directory
    second (thesis Appendix U), whichever way the data goes."""
    direction, method = request["direction"], request["method"]
    mode = stage_mode(direction, method)
    producer = request.get("producer") or {}
    return via.command(
        "stage",
        root=policy.ramdisk_root,
        direction=direction,
        mode=mode,
        src=request["src"],
        dst=request["dst"],
        owner=request["userid"],
        script=method if mode == "script" else None,
        jobid=request["jobid"] if mode == "script" else None,
        verify=request["verify"],
        workers=workers or None,
        replica=request.get("replica")
        if mode == "copy" and direction == "in"
        else None,
        producer_servers=",".join(producer["servers"]) if producer else None,
        producer_user=producer.get("user"),
        producer_secret=producer.get("secret"),
        producer_image=producer.get("image"),
        j=request.get("j"),
        reclaim=request.get("reclaim"),
    )


def stage(via, policy, request, rank, environment, workers=0):
    """Stage subjob on pool rank ``rank`` (the holder's first node)."""
    return _jobspec(
        stage_task(via, policy, request, workers),
        stage_name(request["jobid"], request["seq"]),
        environment,
        rank=rank,
    )


def purge_task(via, policy, path, data_in):
    return via.command("purge", root=policy.ramdisk_root, path=path, link=data_in)


def purge(via, policy, request, rank, environment):
    return _jobspec(
        purge_task(via, policy, request["path"], request["data_in"]),
        purge_name(request["jobid"]),
        environment,
        rank=rank,
    )


def sweep(via, policy, environment, nodes=1, ranks=None, report_kept=False, gone=None):
    """Remove leftover RAM disks: one task on each of ``nodes`` nodes, or on
    each of the pool ranks ``ranks``.  ``report_kept``: print the kept ones
    as JSON.  ``gone``: the RAM disk of a holder job that ended."""
    task = via.command(
        "sweep", root=policy.ramdisk_root, report_kept=report_kept or None, gone=gone
    )
    if ranks is not None:
        nodes, ranks = len(ranks), ",".join(str(r) for r in sorted(ranks))
    return _jobspec(task, "rsa-sweep", environment, nodes=nodes, rank=ranks)


#: beside the images (at most node-capacity bytes of files in all: Fluxion
#: charges them, ``image.store_bytes`` with ext4's own), this much more
STORE_SLACK = 16 << 20


def store(via, policy, host, rank, port, secret, environment):
    """The image store of RSA node ``host`` (pool rank ``rank``): served on
    ``port`` with ``secret`` until canceled."""
    task = via.command(
        "store",
        root=policy.ramdisk_root,
        size=image.store_bytes(policy.node_bytes, policy.granule) + STORE_SLACK,
        port=port,
        secret=secret,
        provider=policy.caps.one_node or policy.provider,
        host=host,
        fs_host=policy.fs_host,
    )
    return _jobspec(task, store_name(host), environment, rank=rank)


def measure(via, request, environment):
    """Measure subjob, on any pool node (they all see persistent storage)."""
    task = via.command(
        "measure", path=request["path"], owner=request["userid"], j=request.get("j")
    )
    return _jobspec(task, measure_name(request["jobid"], request["seq"]), environment)


def discard(via, policy, path, ranks, environment):
    """Remove the kept RAM disk ``path`` (and its parts) on the pool
    ``ranks`` holding them, one task each."""
    task = via.command("discard", root=policy.ramdisk_root, path=path)
    return _jobspec(
        task,
        discard_name(path),
        environment,
        nodes=len(ranks),
        rank=",".join(str(r) for r in ranks),
    )


# --- common shape --------------------------------------------------------------


def _simulate(jobspec):
    """Make ``jobspec`` a test-execution job that runs until it is killed
    (testexec's run_duration 0).  No shell, no process: no output to follow."""
    jobspec.setattr("system.exec.test", {})


def simulated(jobspec):
    """True when ``jobspec`` is a test-execution job."""
    return "test" in jobspec.jobspec["attributes"]["system"].get("exec", {})


def _jobspec(task, name, environment, nodes=1, memory=None, rank=None):
    """``rank``: the pool rank (or an idset of ranks, one per node) to run on."""
    command, variables = task
    slot = [{"type": "core", "count": 1}]
    if memory:
        slot.append({"type": "memory", "count": memory})
    resources = [
        {
            "type": "node",
            "count": nodes,
            "with": [{"type": "slot", "count": 1, "label": "task", "with": slot}],
        }
    ]
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
    jobspec.environment = {**subjob_environment(environment), **variables}
    jobspec.cwd = "/"
    return jobspec
