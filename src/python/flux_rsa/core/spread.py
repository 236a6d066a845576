"""How a reservation spreads over RSA nodes (pure: arithmetic only).

A reservation that fits one RSA node is held there whole.  A bigger one
spans the fewest nodes that hold it, an equal share on each.  An engine
that places a spanning RAM disk's files on the nodes' bricks by hash, in
pieces of at most ``piece`` bytes (GlusterFS: shard pieces of 4 MiB
placed by the distribute layer), does not fill its bricks evenly: one
brick is full while the others still have room, and the job gets ENOSPC
before it wrote what it reserved.  Each brick then gets ``headroom``
beyond the node's share, and the node is charged for it (what the pool
charges a node is what its brick may hold), so that a job that reserved
N x S can write ``fill`` of it (``[rsa] span-fill``, FILL by default), in
any mix of file sizes, but in FAILURE of the reservations.

The count: a volume holding fill x N x S in pieces of ``piece`` bytes,
each on one of N bricks with probability 1/N, puts X ~ Binomial(n, 1/N)
pieces on a brick.  Files smaller than a piece, and a file's last piece,
only make the load less uneven, so whole pieces are the worst case.  A
brick of S + h bytes holds every k with k x piece <= S + h; the headroom
is the least h with N x P(X > k) <= FAILURE (a bound on P(some brick
fills first)).  It shrinks, relative to the share, as the share grows
(the spread of the load grows as its square root): measured and counted
in doc/pool.md.
"""

import functools
import math

#: a job that reserved N x S may write this fraction of it ...
FILL = 0.95
#: ... and a brick fills before that in at most this fraction of reservations
FAILURE = 1e-4


def _tail(n, p, k):
    """P(X >= k) for X ~ Binomial(n, p)."""
    if k <= 0:
        return 1.0
    if k > n:
        return 0.0
    log = (
        math.lgamma(n + 1)
        - math.lgamma(k + 1)
        - math.lgamma(n - k + 1)
        + k * math.log(p)
        + (n - k) * math.log1p(-p)
    )
    term = math.exp(log)
    total = 0.0
    ratio = p / (1 - p)
    for j in range(k, n + 1):
        total += term
        term *= (n - j) / (j + 1) * ratio
        if term < total * 1e-17:
            break
    return min(total, 1.0)


@functools.lru_cache(maxsize=4096)
def headroom(share, nodes, by):
    """Bytes each of ``nodes`` bricks gets beyond ``share`` so that FILL
    (or ``by``'s fill) of them holds, when files go to bricks by hash in
    pieces of at most ``by``'s piece bytes; ``by`` is (piece, fill), or
    None for an engine that needs none."""
    if nodes < 2 or by is None or share <= 0:
        return 0
    piece, fill = by
    n = math.ceil(fill * nodes * share / piece)
    k = share // piece
    while nodes * _tail(n, 1 / nodes, k + 1) > FAILURE:
        k += 1
    return max(0, k * piece - share)


def per_node(granules, nodes, granule, by):
    """Granules charged on each of ``nodes`` nodes for a reservation of
    ``granules``: its equal share (rounded up) and that share's headroom."""
    share = math.ceil(granules / nodes)
    if nodes < 2:
        return share
    return share + math.ceil(headroom(share * granule, nodes, by) / granule)


@functools.lru_cache(maxsize=4096)
def layout(need, granule, node_granules, by, most):
    """(nodes, granules on each node) of a reservation of ``need`` bytes,
    over at most ``most`` nodes of ``node_granules`` granules: one node
    when it fits one, else the fewest nodes on which ``per_node`` fits.
    None when it fits no number of them."""
    granules = max(1, math.ceil(need / granule))
    if granules <= node_granules:
        return 1, granules
    for nodes in range(max(2, math.ceil(granules / node_granules)), most + 1):
        charge = per_node(granules, nodes, granule, by)
        if charge <= node_granules:
            return nodes, charge
    return None


@functools.lru_cache(maxsize=256)
def largest(granule, node_granules, by, most):
    """The most bytes one reservation can be over at most ``most`` nodes
    of ``node_granules`` granules (whole nodes, less their headroom)."""
    best = node_granules
    for nodes in range(2, most + 1):
        for share in range(node_granules, best // nodes, -1):
            if per_node(share * nodes, nodes, granule, by) <= node_granules:
                best = share * nodes
                break
    return best * granule
