"""Load the memory-aware resource graph into the pool's Fluxion.

Fluxion builds its graph once, when sched-fluxion-resource loads, from what
the core resource module holds.  So the agent, before any job runs:
removes the Fluxion modules, replaces the instance's R with one carrying
the JGF (``resource.reload``: refused while a scheduler holds resources),
loads the Fluxion modules again, and asks Fluxion (``find``) whether every
node has its memory.  Blocking calls: this runs before the agent serves.
"""

import json
import os

import flux.kvs

from flux_rsa.pool import jgf

RESOURCE = "sched-fluxion-resource"
#: in load order; removed in reverse
FLUXION = (RESOURCE, "sched-fluxion-feasibility", "sched-fluxion-qmanager")


class GraphError(RuntimeError):
    pass


def _loaded(h):
    return {m["name"] for m in h.rpc("module.list", nodeid=0).get()["mods"]}


def find(h, criteria):
    """{rank: granules} of memory vertices Fluxion matches to ``criteria``."""
    resp = h.rpc(
        f"{RESOURCE}.find", {"criteria": criteria, "format": "jgf"}, nodeid=0
    ).get()
    return jgf.granules_by_rank((resp.get("R") or {}).get("graph"))


def load(h, policy):
    """Give the pool's Fluxion the memory graph; return the new R."""
    R = flux.kvs.get(h, "resource.R")
    if isinstance(R, str):
        R = json.loads(R)
    newR = jgf.pool_R(R, policy)
    path = os.path.join(h.attr_get("rundir"), "rsa-pool-R.json")
    with open(path, "w") as f:
        json.dump(newR, f)
    before = _loaded(h)
    if RESOURCE not in before:
        raise GraphError(
            f"{RESOURCE} is not loaded in the pool instance: the pool needs Fluxion "
            "(install flux-sched where the RSA nodes run Flux)"
        )
    modules = [m for m in FLUXION if m in before]
    try:
        for name in reversed(modules):
            h.rpc("module.remove", {"name": name}, nodeid=0).get()
        h.rpc(
            "resource.reload", {"path": path, "xml": False, "force": False}, nodeid=0
        ).get()
        for name in modules:
            h.rpc("module.load", {"path": name, "args": []}, nodeid=0).get()
    except OSError as exc:
        raise GraphError(
            f"loading the memory graph from {path}: {exc.strerror or exc}"
        ) from None
    verify(h, newR, policy)
    return newR


def verify(h, R, policy):
    """Raise GraphError unless Fluxion sees every node's granules."""
    want = {rank: policy.node_granules for rank in jgf.hosts_by_rank(R)}
    got = find(h, "status=up or status=down")
    if got != want:
        raise GraphError(
            f"Fluxion sees memory granules {got} per rank after loading the pool's "
            f"graph, expected {want}; check `flux ion-resource find --format=jgf "
            "status=up` in the pool"
        )
