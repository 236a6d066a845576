"""What the service learns of jobs that mention rsa (their events come from
the jobtap plugin, and from the journal's replay when the service starts:
any may come twice), how a job ended, and the queue job-list lists."""

import pytest
import test_pool_helpers  # noqa: F401  (puts Flux's Python bindings on the path)

from flux_rsa.core import events as E

flux_constants = pytest.importorskip(
    "flux.constants", reason="Flux's Python bindings are missing: no service tests"
)
from flux_rsa.service.jobs import Fed, Tracker  # noqa: E402
from flux_rsa.service.queue import Queue  # noqa: E402

SCHED, RUN, DEPEND = (
    flux_constants.FLUX_JOB_STATE_SCHED,
    flux_constants.FLUX_JOB_STATE_RUN,
    flux_constants.FLUX_JOB_STATE_DEPEND,
)

JOBSPEC = {
    "resources": [{"type": "node", "count": 2, "with": [{"type": "slot", "count": 1}]}],
    "attributes": {"system": {"rsa": {"data_in": "/in", "data_out": "/out"}}},
}
PLAIN = {"resources": [{"type": "slot", "count": 1}], "attributes": {"system": {}}}


def submitted(tracker, jobid, jobspec=JOBSPEC, t=1.0):
    fed = tracker.feed(jobid, "submit", t, {"userid": 1000}, jobspec)
    assert fed.new and fed.events == () and not fed.unsure
    return fed.facts


def queued(tracker, jobid, priority=16):
    """Submitted, then given its priority: pending, as the plugin tells."""
    submitted(tracker, jobid)
    tracker.feed(jobid, "priority", 2.0, {"priority": priority})


def listed(jobid, state=SCHED, priority=16, t_submit=1.0, estimate=None):
    job = {"id": jobid, "state": state, "priority": priority, "t_submit": t_submit}
    if estimate is not None:
        job["annotations"] = {"sched": {"t_estimate": estimate}}
    return job


def test_the_queue_is_the_last_read_with_our_jobs_as_told():
    tr = Tracker()
    queued(tr, 1)
    queue = Queue(tr, head=100)
    queue.read(
        [
            listed(1, priority=16, estimate=99.0),
            listed(5, priority=20, t_submit=0.5, estimate=50.0),
            listed(4, state=RUN),
            listed(3, state=DEPEND),
        ]
    )  # RUN and DEPEND are not pending
    assert sorted((p.jobid, p.priority, p.t_estimate) for p in queue.pending()) == [
        (1, 16, 99.0),
        (5, 20, 50.0),
    ]
    # ours moves at once (a new priority, its alloc); the others only at the next read
    tr.feed(1, "priority", 2.5, {"priority": 30})
    assert sorted((p.jobid, p.priority) for p in queue.pending()) == [(1, 30), (5, 20)]
    tr.feed(1, "alloc", 3.0, {})
    assert [p.jobid for p in queue.pending()] == [5]
    queue.read([])
    assert queue.pending() == []


def test_a_job_joins_the_queue_once_a_read_placed_it():
    tr = Tracker()
    queue = Queue(tr, head=100)
    queue.read([listed(7, priority=16, t_submit=0.5)])
    queued(tr, 1)
    assert [p.jobid for p in queue.pending()] == [7]  # 1 is not placed yet
    queue.read([listed(7, priority=16, t_submit=0.5), listed(1)])
    assert sorted(p.jobid for p in queue.pending()) == [1, 7]


def test_a_job_read_before_the_plugin_told_of_it_counts_once():
    tr = Tracker()
    queue = Queue(tr, head=100)
    queue.read([listed(1, priority=16, t_submit=1.0)])
    queued(tr, 1)
    assert [p.jobid for p in queue.pending()] == [1]


def test_every_event_heard_twice_changes_nothing_the_second_time():
    tr = Tracker()
    submitted(tr, 1)
    assert tr.feed(1, "submit", 1.0, {"userid": 1000}, JOBSPEC) == Fed(tr.jobs[1])
    for name in ("priority", "alloc"):
        tr.feed(1, name, 2.0, {"priority": 16})
        tr.feed(1, name, 2.0, {"priority": 16})
    assert tr.active(1) and tr.jobs[1].allocated and not tr.jobs[1].pending


def test_start_and_finish_heard_twice_count_once():
    tr = Tracker()
    submitted(tr, 1)
    tr.feed(1, "alloc", 3.0, {})
    starts = tr.feed(1, "start", 4.0, {}).events + tr.feed(1, "start", 4.0, {}).events
    finishes = (
        tr.feed(1, "finish", 5.0, {"status": 0}).events
        + tr.feed(1, "finish", 5.0, {"status": 0}).events
    )
    assert [type(e) for e in starts] == [E.Started]
    assert [type(e) for e in finishes] == [E.Finished]
    ended = tr.feed(1, "clean", 6.0, {})
    assert ended.events == () and not ended.unsure  # ended as it finished
    assert not tr.active(1)


def test_a_job_that_never_got_resources_was_canceled():
    tr = Tracker()
    queued(tr, 1)
    tr.feed(1, "exception", 3.0, {"severity": 0, "type": "cancel"})
    events = tr.feed(1, "clean", 4.0, {}).events
    assert [type(e) for e in events] == [E.Canceled]


def test_an_allocated_job_ending_without_its_finish_heard_is_unsure():
    # e.g. the finish was sent while the service was away, or the job was
    # canceled in its prolog: only the eventlog can tell
    tr = Tracker()
    submitted(tr, 1)
    tr.feed(1, "alloc", 3.0, {})
    ended = tr.feed(1, "clean", 4.0, {})
    assert ended.unsure and ended.events == ()


def test_events_of_a_job_never_submitted_here_are_ignored():
    tr = Tracker()
    assert tr.feed(7, "finish", 1.0, {}) == Fed(None)
    assert not tr.active(7)


def test_a_job_without_rsa_is_not_followed():
    tr = Tracker()
    assert tr.feed(2, "submit", 1.0, {"userid": 1000}, PLAIN) == Fed(None)
    assert tr.feed(2, "alloc", 2.0, {}) == Fed(None)
    assert not tr.active(2)


def test_afterstaged_waiters_are_answered_once_when_the_outputs_settle():
    import errno
    import logging

    from flux_rsa.core import Policy, admit, parse_request, process
    from flux_rsa.service.workflow import Waiters

    policy = Policy.from_config(
        {"proportion": 1, "node-capacity": "64M", "granule": "4M"}
    )
    rec = admit(5, 1000, 1, parse_request({"data_out": "/out"}), policy, 0.0)
    answers = []
    waiters = Waiters(logging.getLogger("test"))
    waiters.add(5, rec, answers.append, replayed=True)
    waiters.add(5, rec, answers.append, replayed=True)
    assert answers == []  # pending: nothing to say yet
    rec, _ = process(rec, E.Starting(1.0))
    waiters.check(rec)
    assert answers == []  # running
    rec, _ = process(rec, E.Finished(2.0))
    waiters.check(rec)
    waiters.check(rec)
    assert answers == [{"ok": True}, {"ok": True}]  # it wrote data_out directly
    waiters.add(
        6, None, answers.append, replayed=False
    )  # no record yet: wait for the replay
    assert len(answers) == 2
    waiters.replayed({5: rec})
    assert isinstance(answers[2], OSError) and answers[2].errno == errno.ENOENT


def test_a_consumer_of_a_running_producer_is_linked_at_once_and_answered_at_its_end():
    import logging

    from test_core_handoff import consumer, running_producer

    from flux_rsa.core import process
    from flux_rsa.service.workflow import Handoffs, Waiters

    records = {7: running_producer()}

    def apply(jobid, ev):
        old = records[jobid]
        records[jobid] = new = process(old, ev)[0]
        if new != old:
            waiters.check(new)
            handoffs.check(new, ev.t)

    handoffs = Handoffs(records, apply)
    waiters = Waiters(
        logging.getLogger("test"), lambda rec, w: handoffs.link(rec, w, 10.0)
    )
    answers = []
    waiters.add(7, records[7], answers.append, replayed=True, waiter=9)
    assert answers == [] and waiters.waited_by(9) == [7]  # asked before 9 came
    records[9] = consumer()
    waiters.check(records[7])  # (what the service does once 9 came)
    assert answers == []  # the producer runs: its outputs are not final
    assert records[9].handoff.writing and records[7].consumers == (9,)
    assert [c.jobid for c in handoffs.linked()] == [9]  # for the on-deck pass
    apply(7, E.Finished(20.0))
    assert answers == [{"ok": True, "handoff": True}]
    h = records[9].handoff
    assert h.on_ramdisk and not h.writing and h.area == "/rd/7.1/out"


def test_the_jobs_a_job_waits_for_are_known_and_only_them():
    tracker = Tracker()

    def after(*deps):
        spec = {
            **JOBSPEC,
            "attributes": {"system": {"rsa": {}, "dependencies": list(deps)}},
        }
        return submitted(Tracker(), 1, spec).after

    assert submitted(tracker, 1).after == frozenset()
    assert after({"scheme": "afterok", "value": "ƒ2LosJpf"}) == {51069845504}
    assert after(
        {"scheme": "afterok", "value": "51069845504"},
        {"scheme": "afterany", "value": "ƒ2"},
    ) == {51069845504, 1}
    # waiting also for a time, or a name it cannot read: not only for jobs
    assert (
        after(
            {"scheme": "afterok", "value": "ƒ2"}, {"scheme": "begin-time", "value": 9.0}
        )
        is None
    )
    assert after({"scheme": "afterok", "value": "not a job"}) is None
