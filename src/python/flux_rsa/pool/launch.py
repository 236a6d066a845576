"""The service's side of the pool: start it, find it, wait until it serves.

``launch(h, policy)`` submits the pool to the instance ``h``: a nested Flux
instance with one broker on every RSA node (all nodes with the property,
exclusively) whose initial program is the agent.  The agent is
ready when it has written ``rsa.pool`` in this instance's KVS (and sent
``pool-ready``): only then does the pool's Fluxion know the RAM-disk
capacity.  ``flux uri --wait`` would return earlier, before the pool
accepts jobs.
"""

import dataclasses
import json
import os
import shutil
import sys
import time

import flux
import flux.job
import flux.kvs
import flux.resource

import flux_rsa
from flux_rsa.pool import protocol

#: the pool instance's broker configuration
POOL_CONF = {
    # backfill: a small request must not wait behind a big one that does not fit
    "sched-fluxion-qmanager": {"queue-policy": "easy"},
    # R lists the memory a job holds, so a scheduler reload keeps it taken
    "sched-fluxion-resource": {"match-format": "rv1"},
    # a request that can never fit is refused at submit
    "ingest": {"validator": {"plugins": ["jobspec", "feasibility"]}},
    # the pool's cores are virtual
    "resource": {"noverify": True},
}


class PoolError(RuntimeError):
    pass


def python_path(env=None):
    """PYTHONPATH with flux_rsa and Flux's bindings first."""
    env = os.environ if env is None else env
    ours = os.path.dirname(os.path.dirname(os.path.abspath(flux_rsa.__file__)))
    fluxs = os.path.dirname(os.path.dirname(os.path.abspath(flux.__file__)))
    parts = [ours, fluxs] + [p for p in env.get("PYTHONPATH", "").split(":") if p]
    return ":".join(dict.fromkeys(parts))


def rsa_nodes(h, policy, include_down=True):
    """Every node with the RSA property (a ResourceSet).  Down nodes count
    unless ``include_down`` is False: at start-up (when the service loads)
    the other brokers may not have joined yet, and the pool waits for them;
    after an RSA node was lost, a pool that waits for it never starts."""
    resources = flux.resource.resource_list(h).get()
    constraint = {"properties": [policy.node_property]}
    nodes = resources.all.copy_constraint(constraint)
    if nodes.nnodes == 0:
        raise PoolError(
            f"no nodes with property {policy.node_property!r} in this instance: give the RSA "
            f'nodes properties = ["{policy.node_property}"] in [[resource.config]] '
            "(or set [rsa] property to theirs) and check `flux resource list`"
        )
    if not include_down:
        up = resources.up.copy_constraint(constraint)
        if up.nnodes == 0:
            raise PoolError(
                f"every node with property {policy.node_property!r} "
                f"({nodes.nodelist}) is down: check `flux resource status`"
            )
        return up
    return nodes


def agent_command(policy, notify_topic, python=None):
    return [
        python or sys.executable or "python3",
        "-m",
        "flux_rsa.pool.agent",
        "--policy",
        json.dumps(dataclasses.asdict(policy)),
        "--notify",
        notify_topic,
    ]


def jobspec(
    policy,
    nnodes,
    notify_topic=protocol.NOTIFY_TOPIC,
    env=None,
    python=None,
    hosts=None,
):
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = python_path(env)
    if shutil.which("flux", path=env.get("PATH", "")) is None:
        # the pool's brokers are started as `flux broker ...` from PATH
        raise PoolError(
            f"no `flux` command on the pool's PATH ({env.get('PATH', '')!r}): add "
            "Flux's bin directory to PATH in the environment given to launch()"
        )
    js = flux.job.JobspecV1.from_nest_command(
        agent_command(policy, notify_topic, python),
        num_slots=nnodes,
        cores_per_slot=1,
        num_nodes=nnodes,
        exclusive=True,
        conf=POOL_CONF,
        name=protocol.JOB_NAME,
        environment=env,
        cwd="/",
    )
    # N.B. the key is "constraints": a misspelt key is silently ignored
    constraint = {"properties": [policy.node_property]}
    if hosts is not None:
        constraint = {"and": [constraint, {"hostlist": [str(hosts)]}]}
    js.setattr("system.constraints", constraint)
    if policy.queue:
        # a site keeps its RSA nodes in their own queue, out of everyone else's way
        js.setattr("system.queue", policy.queue)
    return js


def launch(
    h,
    policy,
    notify_topic=protocol.NOTIFY_TOPIC,
    env=None,
    python=None,
    include_down=True,
):
    """Submit the pool; return its jobid (int).  Wait with wait_ready().

    ``include_down=False`` starts it on the RSA nodes that are up now only
    (after one was lost: see doc/pool.md, "Losing an RSA node")."""
    nodes = rsa_nodes(h, policy, include_down)
    hosts = None if include_down else nodes.nodelist
    js = jobspec(policy, nodes.nnodes, notify_topic, env, python, hosts)
    return int(flux.job.submit(h, js))


def find(h):
    """The newest active pool job of this instance's owner, or None."""
    owner = h.attr_get("security.owner")
    jobs = flux.job.JobList(
        h,
        attrs=["name"],
        filters=["pending", "running"],
        user=owner,
        name=protocol.JOB_NAME,
    ).jobs()
    return max((int(job.id) for job in jobs), default=None)


def ready_info(h):
    """What the running agent recorded in the KVS, or None."""
    try:
        return flux.kvs.get(h, protocol.KVS_KEY)
    except FileNotFoundError:
        return None


def wait_ready(h, jobid, timeout=120.0, poll=0.2):
    """Block until pool ``jobid``'s agent serves; return its ``rsa.pool``
    record (rank, nodes, node_capacity, granule, ...).  Raises PoolError
    when the pool ended or ``timeout`` passed.  (A broker module should
    instead wait for the ``pool-ready`` notification.)"""
    deadline = time.monotonic() + timeout
    while True:
        info = ready_info(h)
        if isinstance(info, dict) and info.get("jobid") == int(jobid):
            return info
        job = flux.job.get_job(h, jobid)
        if job is None or job["state"] == "INACTIVE":
            raise PoolError(_ended_why(jobid, job))
        if time.monotonic() > deadline:
            raise PoolError(
                f"pool job {flux.job.JobID(jobid).f58} not ready after {timeout:.0f}s "
                f"(state {job['state']}); check flux job attach {flux.job.JobID(jobid).f58}"
            )
        time.sleep(poll)


def _ended_why(jobid, job):
    f58 = flux.job.JobID(jobid).f58
    note = (job or {}).get("exception", {}).get("note") or ""
    if "unsatisfiable" in note:
        return (
            f"pool job {f58} was refused: {note}.  Fluxion calls a request for nodes with a "
            "property unsatisfiable while those nodes are busy with jobs that have no time "
            "limit: launch the pool again once the RSA nodes are free (flux resource list)"
        )
    why = note or f"returncode {(job or {}).get('returncode')}"
    return (
        f"pool job {f58} ended before it was ready ({why}); its agent's messages: "
        f"flux job attach {f58}"
    )


def shutdown_async(h, jobid, keep=()):
    """Stop pool ``jobid`` in order; return a future fulfilled with its
    result (``.get_info()``) when it has ended.

    The agent is asked (``rsa-pool.shutdown``) to release every holder and
    stage (RAM disks destroyed, ``holder-end`` and ``stage-end`` sent) and
    end its instance; the holders in ``keep`` ([{jobid, gen}]) end keeping
    their RAM disks for a later pool to adopt.  Keep answering
    notifications meanwhile.  When the agent cannot be asked, the job is
    canceled instead (nothing is kept then): that reaches every
    pool broker at once, so holders on other nodes may be killed without
    destroying their RAM disks (the next pool's sweep removes them).
    """
    info = ready_info(h)
    try:
        if not (isinstance(info, dict) and info.get("jobid") == int(jobid)):
            raise OSError("the agent is not ready")
        h.rpc(
            protocol.topic(protocol.SHUTDOWN), {"keep": list(keep)}, nodeid=info["rank"]
        ).get()
    except OSError:
        _cancel(h, jobid, "flux-rsa: pool stopped")
    return flux.job.result_async(h, jobid)


def shutdown(h, jobid, timeout=90.0, keep=()):
    """shutdown_async(), waited for; cancels the job after ``timeout``.
    Only for a process that does not itself take the notifications."""
    try:
        return shutdown_async(h, jobid, keep).wait_for(timeout).get_info()
    except OSError:
        _cancel(h, jobid, "flux-rsa: pool did not stop in time")
        return flux.job.result(h, jobid)


def _cancel(h, jobid, reason):
    try:
        flux.job.cancel(h, jobid, reason)
    except OSError:
        pass  # already inactive
