"""How a reservation spreads over RSA nodes, and the headroom a RAM disk
over several nodes gets so that a job can fill 95% of what it reserved
(core.spread)."""

import math
import random

import pytest

from flux_rsa.core import spread

MiB = 1 << 20
PIECE = 4 * MiB
BY = (PIECE, 0.95)


def exact_tail(n, p, k):
    return sum(math.comb(n, j) * p**j * (1 - p) ** (n - j) for j in range(k, n + 1))


@pytest.mark.parametrize(
    "n, p, k", [(31, 0.5, 20), (31, 0.5, 0), (40, 0.25, 19), (9, 0.5, 10)]
)
def test_the_binomial_tail_is_the_sum_of_its_terms(n, p, k):
    assert spread._tail(n, p, k) == pytest.approx(
        exact_tail(n, p, k), rel=1e-9, abs=1e-300
    )


def test_one_node_or_an_engine_that_balances_itself_gets_no_headroom():
    assert spread.headroom(64 * MiB, 1, BY) == 0
    assert spread.headroom(64 * MiB, 2, None) == 0
    assert spread.headroom(64 * MiB, 2, (PIECE, 0)) == 0


def test_two_by_64M_gets_40M_a_node_and_large_shares_none():
    assert spread.headroom(64 * MiB, 2, BY) == 40 * MiB
    assert spread.headroom(16 << 30, 2, BY) == 0
    # relative to the share it shrinks as the share grows
    shares = [64 * MiB, 256 * MiB, 1 << 30, 4 << 30, 16 << 30]
    ratios = [spread.headroom(s, 2, BY) / s for s in shares]
    assert ratios == sorted(ratios, reverse=True)


def test_the_headroom_is_the_least_whole_piece_count_within_the_failure_bound():
    share, nodes = 64 * MiB, 2
    n = math.ceil(0.95 * nodes * share / PIECE)
    k = (share + spread.headroom(share, nodes, BY)) // PIECE
    assert nodes * exact_tail(n, 1 / nodes, k + 1) <= spread.FAILURE
    assert nodes * exact_tail(n, 1 / nodes, k) > spread.FAILURE


def test_the_item_4_mix_fits_in_all_but_the_failure_bound(monkeypatch):
    """Simulated placement by hash of the mix t5000 writes into 2 x 64M
    (a file larger than a node's share, files of an eighth of it, 1,024 of
    4 KiB: 121 MiB): with a bound loose enough to count, it holds."""
    monkeypatch.setattr(spread, "FAILURE", 0.05)
    spread.headroom.cache_clear()
    try:
        brick = 64 * MiB + spread.headroom(64 * MiB, 2, BY)
    finally:
        spread.headroom.cache_clear()
    pieces = [PIECE] * 17 + [MiB] + [PIECE] * 12 + [4096] * 1024
    rng = random.Random(33)
    trials = 4000
    full = 0
    for _ in range(trials):
        first = sum(p for p in pieces if rng.random() < 0.5)
        full += max(first, sum(pieces) - first) > brick
    assert full / trials <= 0.05
    assert sum(pieces) == 121 * MiB


@pytest.mark.parametrize(
    "need, node, most, expected",
    [
        (40 * MiB, 16, 2, (1, 10)),  # fits one node: whole, no headroom
        (64 * MiB, 16, 2, (1, 16)),
        (68 * MiB, 16, 2, None),  # 2 x 36M + headroom does not fit 64M nodes
        (68 * MiB, 16, 3, (3, 14)),  # three do: 24M + 32M each
        (128 * MiB, 28, 2, (2, 26)),
        (140 * MiB, 28, 2, None),
        (140 * MiB, 28, 4, (3, 23)),
    ],
)
def test_layout_takes_the_fewest_nodes_that_hold_share_and_headroom(
    need, node, most, expected
):
    assert spread.layout(need, 4 * MiB, node, BY, most) == expected


def test_without_headroom_the_layout_is_equal_shares_of_the_fewest_nodes():
    assert spread.layout(64 * MiB + 1, 4 * MiB, 16, None, 2) == (2, 9)
    assert spread.layout(128 * MiB, 4 * MiB, 16, None, 2) == (2, 16)
    assert spread.largest(4 * MiB, 16, None, 2) == 128 * MiB


def test_largest_is_what_the_layout_still_takes():
    for node, most in ((16, 2), (28, 2), (28, 4), (64, 8)):
        top = spread.largest(4 * MiB, node, BY, most)
        assert spread.layout(top, 4 * MiB, node, BY, most) is not None
        assert spread.layout(top + 1, 4 * MiB, node, BY, most) is None
