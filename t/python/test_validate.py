"""The job-ingest validator's look-ups: a user's groups and the pool's
size are read at most once a second per worker, and a reading older than
that is never used; one user's same request, once accepted, is accepted
again for a second without a look, a refused one is judged every time."""

import pytest

pytest.importorskip(
    "flux",
    reason="no Flux (flux-core not installed): the validator plugin needs its bindings",
)

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


@pytest.fixture
def checked(looked_up, monkeypatch):
    """The validator with a count of the checks it really runs."""
    v, clock, _ = looked_up
    runs = []

    def check_request(attrs, userid, pool=None, who=None):
        runs.append((userid, attrs.get("data_in")))
        return (
            None
            if attrs.get("data_in") == "/ok"
            else f"rsa.data_in: {attrs.get('data_in')!r} is bad"
        )

    monkeypatch.setattr(validate, "check_request", check_request)
    return v, clock, runs


def test_one_users_burst_of_the_same_request_is_checked_once_a_second(checked):
    v, clock, runs = checked
    for _ in range(500):
        assert v.check({"data_in": "/ok", "data_out": "/o"}, 1000, None) is None
        clock.now += 0.001
    assert runs == [(1000, "/ok")]
    clock.now += validate.CHECK_TTL
    v.check({"data_in": "/ok", "data_out": "/o"}, 1000, None)
    assert len(runs) == 2


def test_a_refused_request_is_judged_afresh_every_time(checked):
    # its user may be fixing it: mkdir, then submit again at once
    v, _, runs = checked
    for _ in range(3):
        assert v.check({"data_in": "/bad"}, 1000, None) == "rsa.data_in: '/bad' is bad"
    assert len(runs) == 3


def test_another_user_or_another_request_or_pool_is_checked_for_itself(checked):
    v, _, runs = checked
    v.check({"data_in": "/ok", "data_out": "/o"}, 1000, None)
    v.check({"data_out": "/o", "data_in": "/ok"}, 1000, None)  # the same request
    v.check({"data_in": "/ok", "data_out": "/o"}, 1001, None)  # another user
    v.check({"data_in": "/ok", "data_out": "/p"}, 1000, None)  # another request
    v.check(
        {"data_in": "/ok", "data_out": "/o"}, 1000, "pool of 3 nodes"
    )  # the pool changed
    assert len(runs) == 4
