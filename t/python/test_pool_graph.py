"""The pool's memory graph: the RSA nodes' granules and virtual cores in
Fluxion's JGF, the granules a job was granted, memory paths by rank."""

import pytest

flux = pytest.importorskip(
    "flux",
    reason="no Flux (flux-core and flux-sched not installed): the pool tests need a real instance",
)

from test_pool_units import POLICY  # noqa: E402

from flux_rsa.pool import jgf  # noqa: E402

# what a nested instance on two RSA nodes sees: its own ranks, parent's names
POOL_R = {
    "version": 1,
    "execution": {
        "R_lite": [{"rank": "0-1", "children": {"core": "0-1"}}],
        "nodelist": ["rsa[3,7]"],
        "properties": {"rsa": "0-1", "bigmem": "1"},
        "starttime": 0.0,
        "expiration": 0.0,
    },
}


def vertices(R, kind):
    return [
        v["metadata"]
        for v in R["scheduling"]["graph"]["nodes"]
        if v["metadata"]["type"] == kind
    ]


def test_graph_has_memory_granules_and_virtual_cores_per_node():
    R = jgf.pool_R(POOL_R, POLICY)
    nodes = vertices(R, "node")
    assert [(n["name"], n["rank"], n["properties"]) for n in nodes] == [
        ("rsa3", 0, {"rsa": ""}),
        ("rsa7", 1, {"rsa": "", "bigmem": ""}),
    ]
    assert len(vertices(R, "core")) == 2 * 8
    assert jgf.granules_by_rank(R["scheduling"]["graph"]) == {0: 16, 1: 16}
    assert R["execution"]["R_lite"] == [{"rank": "0-1", "children": {"core": "0-7"}}]
    assert R["execution"]["nodelist"] == ["rsa[3,7]"]
    # every vertex hangs off its node, and paths name the host
    graph = R["scheduling"]["graph"]
    assert len(graph["edges"]) == len(graph["nodes"]) - 1
    assert {
        v["metadata"]["paths"]["containment"].split("/")[2]
        for v in graph["nodes"]
        if v["metadata"]["type"] == "memory"
    } == {"rsa3", "rsa7"}


def test_graph_refuses_mismatched_nodelist():
    bad = {"execution": dict(POOL_R["execution"], nodelist=["rsa3"])}
    with pytest.raises(ValueError, match="R lists 2 ranks but 1 host names"):
        jgf.pool_R(bad, POLICY)


def test_granted_is_counted_from_a_jobs_R():
    R = {
        "execution": {},
        "scheduling": {
            "graph": {
                "nodes": [
                    {"id": "1", "metadata": {"type": "memory", "rank": 1}},
                    {"id": "2", "metadata": {"type": "memory", "rank": 1}},
                    {"id": "3", "metadata": {"type": "core", "rank": 1}},
                    {"id": "4", "metadata": {"type": "memory", "rank": 0}},
                ]
            }
        },
    }
    assert jgf.R_granules(R) == {1: 2, 0: 1}
    assert jgf.R_granules({"execution": {}}) == {}


def test_memory_paths_name_fluxions_vertices():
    R = jgf.pool_R(POOL_R, POLICY)
    paths = jgf.memory_paths_by_rank(R["scheduling"]["graph"])
    assert paths[1] == set(jgf.memory_paths("rsa7", 16))
    assert "/cluster0/rsa7/memory15" in paths[1]
