"""What the service learns of jobs from the journal and the jobtap plugin:
the queue the on-deck rule sees, and how a job ended.  The journal brings
every job's submit, priority, alloc and clean; start and finish come for RSA
jobs only (from the plugin, or from the eventlog after a restart), and may
come twice."""

from flux_rsa.core import events as E
from flux_rsa.service.jobs import UNSURE, Tracker

JOBSPEC = {"resources": [{"type": "node", "count": 2, "with": [{"type": "slot", "count": 1}]}],
           "attributes": {"system": {"rsa": {"data_in": "/in", "data_out": "/out"}}}}
PLAIN = {"resources": [{"type": "slot", "count": 1}], "attributes": {"system": {}}}


def submitted(tracker, jobid, jobspec=JOBSPEC, t=1.0):
    facts, new, events = tracker.feed(jobid, "submit", t, {"userid": 1000}, jobspec)
    assert new and events == []
    return facts


def test_a_job_is_pending_from_its_priority_until_its_alloc():
    tr = Tracker()
    facts = submitted(tr, 1)
    assert (facts.nnodes, facts.rsa) == (2, {"data_in": "/in", "data_out": "/out"})
    assert tr.pending() == []  # no priority yet (dependencies, validation)
    tr.feed(1, "priority", 2.0, {"priority": 16})
    assert [p.jobid for p in tr.pending()] == [1]
    tr.feed(1, "annotations", 2.5, {"annotations": {"sched": {"t_estimate": 99.0}}})
    assert tr.pending()[0].t_estimate == 99.0
    tr.feed(1, "alloc", 3.0, {})
    assert tr.pending() == [] and tr.allocated(1)


def test_a_job_requeued_by_a_restart_is_pending_again_after_its_priority():
    tr = Tracker()
    submitted(tr, 1)
    tr.feed(1, "priority", 2.0, {"priority": 16})
    tr.feed(1, "flux-restart", 3.0, {})
    assert tr.pending() == []
    tr.feed(1, "priority", 4.0, {"priority": 20})
    assert [(p.jobid, p.priority) for p in tr.pending()] == [(1, 20)]


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
    assert not tr.active(7) and not tr.allocated(7)


def test_a_job_without_rsa_is_tracked_for_the_queue_only():
    tr = Tracker()
    facts = submitted(tr, 2, PLAIN)
    assert facts.rsa is None and facts.nnodes == 1
    tr.feed(2, "priority", 2.0, {"priority": 16})
    assert [p.jobid for p in tr.pending()] == [2]
