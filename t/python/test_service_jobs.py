"""What the service learns of jobs that mention rsa (their events come from
the jobtap plugin, and from the journal's replay when the service starts:
any may come twice), how a job ended, and the queue as job-list lists it."""

from flux_rsa.core import events as E
from flux_rsa.service.jobs import UNSURE, Tracker, pending_from_list

JOBSPEC = {"resources": [{"type": "node", "count": 2, "with": [{"type": "slot", "count": 1}]}],
           "attributes": {"system": {"rsa": {"data_in": "/in", "data_out": "/out"}}}}
PLAIN = {"resources": [{"type": "slot", "count": 1}], "attributes": {"system": {}}}


def submitted(tracker, jobid, jobspec=JOBSPEC, t=1.0):
    facts, new, events = tracker.feed(jobid, "submit", t, {"userid": 1000}, jobspec)
    assert new and events == []
    return facts


def test_the_queue_comes_from_job_list_with_estimates():
    jobs = [{"id": 7, "priority": 20, "t_submit": 2.0, "annotations": {"sched": {"t_estimate": 99.0}}},
            {"id": 5, "priority": 16, "t_submit": 1.0},
            {"id": 9, "priority": 16, "t_submit": 3.0, "annotations": {}}]
    pending = pending_from_list(jobs)
    assert [(p.jobid, p.priority, p.t_submit, p.t_estimate) for p in pending] == [
        (7, 20, 2.0, 99.0), (5, 16, 1.0, None), (9, 16, 3.0, None)]


def test_every_event_heard_twice_changes_nothing_the_second_time():
    tr = Tracker()
    submitted(tr, 1)
    assert tr.feed(1, "submit", 1.0, {"userid": 1000}, JOBSPEC) == (tr.jobs[1], False, [])
    for name in ("priority", "alloc"):
        tr.feed(1, name, 2.0, {"priority": 16})
        tr.feed(1, name, 2.0, {"priority": 16})
    assert tr.active(1) and not tr.waiting(1)  # allocated


def test_start_and_finish_heard_twice_count_once():
    tr = Tracker()
    submitted(tr, 1)
    tr.feed(1, "alloc", 3.0, {})
    starts = tr.feed(1, "start", 4.0, {})[2] + tr.feed(1, "start", 4.0, {})[2]
    finishes = tr.feed(1, "finish", 5.0, {"status": 0})[2] + tr.feed(1, "finish", 5.0, {"status": 0})[2]
    assert [type(e) for e in starts] == [E.Started]
    assert [type(e) for e in finishes] == [E.Finished]
    assert tr.feed(1, "clean", 6.0, {})[2] == []  # ended as it finished
    assert not tr.active(1)


def test_a_job_that_never_got_resources_was_canceled():
    tr = Tracker()
    submitted(tr, 1)
    tr.feed(1, "priority", 2.0, {"priority": 16})
    tr.feed(1, "exception", 3.0, {"severity": 0, "type": "cancel"})
    events = tr.feed(1, "clean", 4.0, {})[2]
    assert [type(e) for e in events] == [E.Canceled]


def test_an_allocated_job_ending_without_its_finish_heard_is_unsure():
    # e.g. the finish was sent while the service was away, or the job was
    # canceled in its prolog: only the eventlog can tell
    tr = Tracker()
    submitted(tr, 1)
    tr.feed(1, "alloc", 3.0, {})
    assert tr.feed(1, "clean", 4.0, {})[2] == [UNSURE]


def test_events_of_a_job_never_submitted_here_are_ignored():
    tr = Tracker()
    assert tr.feed(7, "finish", 1.0, {}) == (None, False, [])
    assert not tr.active(7) and not tr.waiting(7)


def test_a_job_without_rsa_is_not_followed():
    tr = Tracker()
    facts, new, events = tr.feed(2, "submit", 1.0, {"userid": 1000}, PLAIN)
    assert (facts, new, events) == (None, False, [])
    assert tr.feed(2, "alloc", 2.0, {}) == (None, False, [])
    assert not tr.active(2)
