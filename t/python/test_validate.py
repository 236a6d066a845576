"""The job-ingest validator's look-ups: a user's groups and the pool's
size are read at most once a second per worker, and a reading older than
that is never used."""

import pytest

pytest.importorskip("flux", reason="no Flux (flux-core not installed): the validator plugin needs its bindings")

from flux_rsa import validate  # noqa: E402


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


@pytest.fixture
def looked_up(monkeypatch):
    """The validator, with a clock of our own and a count of user look-ups."""
    clock = Clock()
    monkeypatch.setattr(validate.time, "monotonic", clock)
    counts = {}

    class CountedWho:
        def __init__(self, uid):
            counts[uid] = counts.get(uid, 0) + 1
            self.uid = uid

    monkeypatch.setattr(validate, "Who", CountedWho)
    return validate.Validator.__new__(validate.Validator), clock, counts


def test_a_burst_of_one_users_jobs_looks_the_user_up_once(looked_up):
    v, clock, counts = looked_up
    for _ in range(500):
        assert v.who(1000).uid == 1000
        clock.now += 0.001
    assert counts == {1000: 1}


def test_a_lookup_older_than_a_second_is_done_again(looked_up):
    v, clock, counts = looked_up
    v.who(1000)
    clock.now += validate.WHO_TTL - 0.01
    v.who(1000)
    assert counts[1000] == 1
    clock.now += 0.01
    v.who(1000)
    assert counts[1000] == 2


def test_each_user_is_looked_up_for_itself(looked_up):
    v, _, counts = looked_up
    assert [v.who(uid).uid for uid in (1000, 1001, 1000)] == [1000, 1001, 1000]
    assert counts == {1000: 1, 1001: 1}


def test_many_users_do_not_grow_the_memory_without_bound(looked_up):
    v, _, _ = looked_up
    for uid in range(10 * validate.WHO_KEEP):
        v.who(uid)
    assert len(v._who) <= validate.WHO_KEEP + 1


def test_the_pool_size_is_read_once_a_second(looked_up, monkeypatch):
    v, clock, _ = looked_up
    reads = []
    monkeypatch.setattr(v, "read_pool", lambda: reads.append(clock.now) or len(reads))
    assert [v.pool() for _ in range(100)] == [1] * 100
    clock.now += validate.POOL_TTL
    assert v.pool() == 2 and len(reads) == 2
