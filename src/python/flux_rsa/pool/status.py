"""What the pool reports: the answers of ``list`` and ``status``.

Read only, from the agent's parts: its subjobs (``work.Work``), the kept
RAM disks (``kept.Kept``), its nodes and what Fluxion has allocated.
doc/pool.md describes both answers.
"""


def listing(work, kept):
    """`list`: what runs now (ended holders and stages are not listed),
    and the kept RAM disks nobody adopted yet."""
    holders = work.live_holders()
    adopting = {h.adopt: h.key for h in holders if h.adopt is not None}
    return {
        "holders": [h.describe() for h in holders],
        "stages": [s.describe() for s in work.stages.values() if not s.ended],
        "measures": [m.describe() for m in work.measures.values() if not m.ended],
        "kept": kept.listing(adopting),
    }


def capacity(used, policy, hosts, nodes, holders):
    """`status`'s nodes: each one's capacity, what Fluxion has allocated
    there (``used``: rank -> granules), the live ``holders`` on it and its
    state (up or down, drained)."""
    g = policy.granule
    out = []
    for rank in sorted(hosts):
        total = policy.node_granules * g
        reserved = used.get(rank, 0) * g
        on_node = [
            {"jobid": h.key[0], "gen": h.key[1], "bytes": n * g}
            for h in holders
            for r, n in h.granted_by_rank().items()
            if r == rank
        ]
        out.append(
            {
                "host": hosts[rank],
                "rank": rank,
                "total": total,
                "reserved": reserved,
                "free": total - reserved,
                "holders": on_node,
                **nodes.describe(rank),
            }
        )
    return out
