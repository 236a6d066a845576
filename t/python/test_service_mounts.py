"""The service's attach and detach over a job's ranks (service.compute_nodes),
with its rank operations and timer replaced: what is undone when."""

import types

import pytest
import test_pool_helpers  # noqa: F401  (puts Flux's Python bindings on the path)

mounts = pytest.importorskip(
    "flux_rsa.service.compute_nodes",
    reason="Flux's Python bindings are missing: no service tests",
)


class Timer:
    def __init__(self, cb):
        self.cb = cb

    def start(self):
        pass

    def stop(self):
        pass


class Handle:
    def timer_watcher_create(self, after, cb):
        self.timer = Timer(cb)
        return self.timer

    def attr_get(self, name):
        assert name == "hostlist"
        return "node[0-3]"


def make():
    h = Handle()
    m = mounts.Mounts(h, print, lambda: None, lambda jobid, ev: delivered.append(ev))
    started = []
    m._start = lambda op, rank, values, ended: started.append((op, rank, ended))
    return h, m, started


delivered = []


def job(ranks):
    return types.SimpleNamespace(
        jobid=7,
        root="/rsa",
        name="7.1",
        ranks=ranks,
        volume={"user": "rsa-7-1", "servers": ["n0:24000"], "secret": "x" * 16},
    )


def test_a_rank_that_attaches_after_it_was_given_up_is_detached():
    delivered.clear()
    h, m, started = make()
    m.attach(job([0, 1]))
    ended = {rank: cb for op, rank, cb in started if op == "attach"}
    ended[0](0, None)  # rank 0 attached; rank 1 says nothing
    h.timer.cb()  # TIMEOUT
    assert [ev.ok for ev in delivered] == [False]
    assert "node1 (rank 1): no answer within 60s" in delivered[0].error
    assert [(op, rank) for op, rank, _ in started if op == "detach"] == [("detach", 0)]
    ended[1](1, None)  # rank 1 attached at last
    assert [(op, rank) for op, rank, _ in started if op == "detach"] == [
        ("detach", 0),
        ("detach", 1),
    ]


def test_a_rank_that_fails_after_it_was_given_up_is_left_alone():
    delivered.clear()
    h, m, started = make()
    m.attach(job([0]))
    h.timer.cb()
    started[0][2](0, "attach: mount failed")
    assert [op for op, _, _ in started] == ["attach"]
