"""The pool's resource graph: RAM-disk capacity as Fluxion memory vertices.

``pool_R(R, policy)`` takes the R the pool instance was given (its ranks and
host names as the pool sees them) and returns an R whose ``scheduling`` key
holds a JGF graph Fluxion loads: per node ``policy.pool_cores`` virtual cores
and ``policy.node_granules`` memory vertices of one granule each (a vertex is
allocated whole, so a request counts granules).  ``R_lite`` lists the same
virtual cores so the core resource module and Fluxion agree.

``granules_by_rank(graph)`` counts memory vertices per rank in any JGF graph:
a job's R (what a holder was granted) or a Fluxion ``find`` result.
Pure: no Flux calls beyond the idset/hostlist value types.
"""

from collections import Counter

from flux.hostlist import Hostlist
from flux.idset import IDset


def _node_ranks(R):
    """[(rank, hostname)] in rank order, as R's nodelist pairs them."""
    ranks = IDset()
    for entry in R["execution"]["R_lite"]:
        ranks.add(entry["rank"])
    hosts = Hostlist(R["execution"].get("nodelist", []))
    ranks = list(ranks)
    if len(hosts) != len(ranks):
        raise ValueError(
            f"R lists {len(ranks)} ranks but {len(hosts)} host names "
            f"(nodelist {R['execution'].get('nodelist')!r}); cannot name the pool's nodes"
        )
    return list(zip(ranks, hosts))


def _properties(R, rank):
    props = R["execution"].get("properties", {})
    return {name: "" for name, idset in props.items() if rank in IDset(idset)}


class _Graph:
    def __init__(self):
        self.nodes = []
        self.edges = []

    def add(self, parent, **metadata):
        vid = str(len(self.nodes))
        self.nodes.append({"id": vid, "metadata": metadata})
        if parent is not None:
            self.edges.append(
                {
                    "source": parent,
                    "target": vid,
                    "metadata": {"subsystem": "containment"},
                }
            )
        return vid


def pool_R(R, policy):
    """R for the pool with the memory-aware JGF in ``scheduling``."""
    if policy.pool_cores < 2:
        raise ValueError(
            f"[rsa] pool-cores: {policy.pool_cores} must be at least 2 "
            "(one for a holder, one for a stage)"
        )
    granules = policy.node_granules
    nodes = _node_ranks(R)
    g = _Graph()
    cluster = g.add(
        None,
        type="cluster",
        basename="cluster",
        name="cluster0",
        id=0,
        paths={"containment": "/cluster0"},
    )
    for rank, host in nodes:
        where = f"/cluster0/{host}"
        node = g.add(
            cluster,
            type="node",
            basename=host,
            name=host,
            id=rank,
            rank=rank,
            properties=_properties(R, rank),
            paths={"containment": where},
        )
        for i in range(policy.pool_cores):
            g.add(
                node,
                type="core",
                basename="core",
                name=f"core{i}",
                id=i,
                rank=rank,
                paths={"containment": f"{where}/core{i}"},
            )
        for i in range(granules):
            g.add(
                node,
                type="memory",
                basename="memory",
                name=f"memory{i}",
                id=i,
                rank=rank,
                size=1,
                paths={"containment": f"{where}/memory{i}"},
            )
    ranks = str(IDset(",".join(str(r) for r, _ in nodes)))
    execution = dict(R["execution"])
    execution["R_lite"] = [
        {"rank": ranks, "children": {"core": f"0-{policy.pool_cores - 1}"}}
    ]
    return {
        "version": 1,
        "execution": execution,
        "scheduling": {"graph": {"nodes": g.nodes, "edges": g.edges}},
    }


def memory_paths(host, granules):
    """Fluxion's containment paths of a node's memory granules."""
    return [f"/cluster0/{host}/memory{i}" for i in range(granules)]


def memory_paths_by_rank(graph):
    """{rank: {path}} of the memory vertices in a JGF graph."""
    paths = {}
    for vertex in (graph or {}).get("nodes", []):
        meta = vertex.get("metadata", {})
        if meta.get("type") == "memory":
            path = meta.get("paths", {}).get("containment")
            if path:
                paths.setdefault(meta.get("rank", -1), set()).add(path)
    return paths


def hosts_by_rank(R):
    return dict(_node_ranks(R))


def granules_by_rank(graph):
    """{rank: memory vertices} in a JGF graph (``{"nodes": [...], ...}``)."""
    if not graph:
        return {}
    count = Counter()
    for vertex in graph.get("nodes", []):
        meta = vertex.get("metadata", {})
        if meta.get("type") == "memory":
            count[meta.get("rank", -1)] += meta.get("size", 1)
    return dict(count)


def R_granules(R):
    """{rank: granules} a job's R holds (R with a ``scheduling`` key)."""
    return granules_by_rank((R or {}).get("scheduling", {}).get("graph"))
