"""The service's one timer helper (service.reactor): a call asked for many
times while pending happens once; a restart moves it; a failing call is
logged and the timer keeps working; the core's per-job timers replace each
other."""

import types

import pytest
import test_pool_helpers  # noqa: F401  (puts Flux's Python bindings on the path)
from fake_reactor import FakeReactor, Log

timers = pytest.importorskip(
    "flux_rsa.service.reactor",
    reason="Flux's Python bindings are missing: no service tests",
)


def make(after=0.5, every=0.0, fn=None):
    reactor, log, calls = FakeReactor(), Log(), []
    timer = timers.Timer(
        reactor,
        log,
        "the test",
        fn or (lambda: calls.append(reactor.now)),
        after=after,
        every=every,
    )
    return reactor, log, calls, timer


def test_arming_while_armed_calls_once_at_the_first_deadline():
    reactor, _, calls, timer = make()
    timer.arm()
    reactor.advance(0.3)
    timer.arm()
    timer.arm()
    reactor.advance(1.0)
    assert calls == [0.5]
    assert not timer.armed


def test_once_it_went_off_arming_again_calls_again():
    reactor, _, calls, timer = make()
    timer.arm()
    reactor.advance(1.0)
    timer.arm()
    reactor.advance(1.0)
    assert calls == [0.5, 1.5]


def test_an_explicit_delay_and_a_restart():
    reactor, _, calls, timer = make()
    timer.arm(0.1)
    reactor.advance(0.05)
    timer.restart(2.0)  # the pending call moves
    reactor.advance(1.0)
    assert calls == []
    reactor.advance(2.0)
    assert calls == [2.05]


def test_a_negative_delay_means_now():
    reactor, _, calls, timer = make()
    timer.arm(-3.0)
    reactor.advance(0.0)
    assert calls == [0.0]


def test_stop_drops_the_pending_call():
    reactor, _, calls, timer = make()
    timer.arm()
    timer.stop()
    reactor.advance(5.0)
    assert calls == []
    timer.arm()
    reactor.advance(5.0)
    assert calls == [5.5]


def test_a_repeating_timer_goes_on_until_stopped():
    reactor, _, calls, timer = make(after=2.0, every=2.0)
    timer.arm()
    reactor.advance(7.0)
    assert calls == [2.0, 4.0, 6.0]
    assert timer.armed
    timer.stop()
    reactor.advance(7.0)
    assert calls == [2.0, 4.0, 6.0]


def test_a_failing_call_is_logged_and_the_timer_still_works():
    runs = []

    def fails():
        runs.append(1)
        raise RuntimeError("boom")

    reactor, log, _, timer = make(fn=fails)
    timer.arm()
    reactor.advance(1.0)
    assert log.lines == [("error", "rsa: the test: RuntimeError('boom')")]
    timer.arm()
    reactor.advance(1.0)
    assert len(runs) == 2


def start_timer(jobid, name, seconds):
    return types.SimpleNamespace(jobid=jobid, name=name, seconds=seconds)


def test_job_timers_one_per_job_and_name_the_newest_wins():
    reactor, fired = FakeReactor(), []
    jt = timers.JobTimers(
        reactor, Log(), lambda a: fired.append((a.jobid, a.name, reactor.now))
    )
    jt.set(start_timer(1, "late", 5.0))
    jt.set(start_timer(1, "delay", 1.0))
    jt.set(start_timer(2, "late", 2.0))
    reactor.advance(0.5)
    jt.set(start_timer(1, "late", 3.0))  # replaces the one due at 5.0
    reactor.advance(10.0)
    assert fired == [(1, "delay", 1.0), (2, "late", 2.0), (1, "late", 3.5)]
    assert jt.timers == {}


def test_job_timers_stop():
    reactor, fired = FakeReactor(), []
    jt = timers.JobTimers(reactor, Log(), fired.append)
    jt.set(start_timer(1, "late", 1.0))
    jt.stop()
    reactor.advance(5.0)
    assert fired == []
