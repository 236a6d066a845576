"""The service's pool requests through the IMP: a stage or a measure goes
with the job's signed request (J) looked up from job-info, and a job's
requests keep their order while it is looked up (a stop never overtakes
its stage)."""

import errno

import pytest

pytest.importorskip(
    "flux.constants", reason="Flux's Python bindings are missing: no service tests"
)

from fake_reactor import Log  # noqa: E402

from flux_rsa.core import actions as A  # noqa: E402
from flux_rsa.service.execute import Executor  # noqa: E402


class Future:
    def __init__(self, topic, payload):
        self.topic, self.payload, self.callback = topic, payload, None
        self.answer = None

    def then(self, callback):
        self.callback = callback

    def get(self):
        if isinstance(self.answer, OSError):
            raise self.answer
        return self.answer

    def respond(self, answer):
        self.answer = answer
        self.callback(self)


class Handle:
    def __init__(self):
        self.sent = []

    def rpc(self, topic, payload):
        f = Future(topic, payload)
        self.sent.append(f)
        return f


class Pool:
    def __init__(self):
        self.calls = []

    def call(self, method, payload):
        self.calls.append((method, payload))


def stage(jobid, seq=1, method=None):
    return A.StartStage(
        jobid,
        seq=seq,
        direction="in",
        src="/home/a/in",
        dst="/r/1.1/in",
        method=method,
        userid=1001,
        verify="size",
        nodes=("n1",),
    )


def executor(signed):
    h, pool, log = Handle(), Pool(), Log()
    return (
        Executor(h, log, pool, None, lambda jobid: True, signed=lambda: signed),
        h,
        pool,
        log,
    )


def test_through_the_imp_a_stage_carries_the_jobs_j_and_a_stop_waits_behind_it():
    ex, h, pool, _ = executor(signed=True)
    ex.run(stage(7))
    ex.run(A.StopStage(7, seq=1))
    ex.run(A.CancelHolder(8, gen=1))  # another job is not held up
    assert [m for m, _ in pool.calls] == ["cancel"]
    (lookup,) = h.sent
    assert (lookup.topic, lookup.payload) == (
        "job-info.lookup",
        {"id": 7, "keys": ["J"], "flags": 0},
    )
    lookup.respond({"id": 7, "J": "hdr.payload.munge"})
    assert [(m, p["jobid"]) for m, p in pool.calls] == [
        ("cancel", 8),
        ("stage", 7),
        ("stop", 7),
    ]
    assert pool.calls[1][1]["j"] == "hdr.payload.munge"
    assert ex.waiting == {}


def test_a_measure_carries_it_too_and_requests_after_it_keep_their_order():
    ex, h, pool, _ = executor(signed=True)
    ex.run(A.Measure(5, path="/home/a/in", userid=1001))
    ex.run(stage(5))
    h.sent[0].respond({"id": 5, "J": "m.j.none"})
    assert [m for m, _ in pool.calls] == ["measure"]  # the stage waits for its own J
    h.sent[1].respond({"id": 5, "J": "m.j.none"})
    assert [(m, p.get("j")) for m, p in pool.calls] == [
        ("measure", "m.j.none"),
        ("stage", "m.j.none"),
    ]


def test_a_j_that_cannot_be_read_is_logged_and_the_stage_sent_without_it():
    ex, h, pool, log = executor(signed=True)
    ex.run(stage(9))
    h.sent[0].respond(OSError(errno.ENOENT, "No such file or directory"))
    assert (
        pool.calls == [("stage", pool.calls[0][1])]
        and pool.calls[0][1].get("j") is None
    )
    assert any("job 9: reading its signed request (J)" in text for _, text in log.lines)


def test_a_pool_run_directly_gets_no_j_and_no_lookup():
    ex, h, pool, _ = executor(signed=False)
    ex.run(stage(3))
    assert h.sent == [] and [m for m, _ in pool.calls] == ["stage"]
    assert "j" not in pool.calls[0][1]


def test_a_stage_script_carries_the_j_in_a_pool_run_directly_too():
    """Its environment is the job's own, which Flux keeps in J alone."""
    ex, h, pool, _ = executor(signed=False)
    ex.run(stage(4, method="/home/a/stage-in.sh"))
    ex.run(stage(4, seq=2, method="tar"))
    assert pool.calls == [] and h.sent[0].payload["keys"] == ["J"]
    h.sent[0].respond({"id": 4, "J": "h.p.none"})
    assert [(m, p["seq"], p.get("j")) for m, p in pool.calls] == [
        ("stage", 1, "h.p.none"),
        ("stage", 2, None),
    ]
