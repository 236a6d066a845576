"""Job events in (service.intake): a job that ended without its finish
heard is settled from its eventlog, read as Flux writes it (RFC 18: one
JSON object a line); the replay's end settles jobs that ended while the
service was away."""

import json
import types

import pytest
import test_pool_helpers  # noqa: F401  (puts Flux's Python bindings on the path)

intake = pytest.importorskip(
    "flux_rsa.service.intake",
    reason="Flux's Python bindings are missing: no service tests",
)

from flux_rsa.core import events as E  # noqa: E402
from flux_rsa.service.jobs import Tracker, ended_from_eventlog  # noqa: E402

JOBSPEC = {
    "resources": [{"type": "node", "count": 1}],
    "attributes": {"system": {"rsa": {"data_out": "/out"}}},
}


def eventlog(*entries):
    return "".join(
        json.dumps({"timestamp": t, "name": name, "context": ctx}) + "\n"
        for t, name, ctx in entries
    )


RAN = eventlog(
    (1.0, "submit", {"userid": 1000}),
    (2.0, "alloc", {}),
    (3.0, "rsa-ready", {"ramdisk": "/r", "out_on_ramdisk": True}),
    (4.0, "start", {}),
    (5.0, "finish", {"status": 0}),
    (6.0, "clean", {}),
)
NEVER_STARTED = eventlog(
    (1.0, "submit", {"userid": 1000}),
    (2.0, "alloc", {}),
    (3.0, "exception", {"type": "cancel", "severity": 0}),
    (4.0, "clean", {}),
)


def test_a_job_that_ran_finished_with_its_ramdisk():
    events = ended_from_eventlog(intake.eventlog_entries(RAN))
    assert [type(e) for e in events] == [E.Started, E.Started, E.Finished]
    assert events[0].env.ramdisk == "/r" and events[0].env.out_on_ramdisk
    assert events[-1].t == 5.0


def test_a_job_canceled_before_it_started_was_canceled_at_its_last_event():
    events = ended_from_eventlog(intake.eventlog_entries(NEVER_STARTED.encode()))
    assert [(type(e), e.t) for e in events] == [(E.Canceled, 4.0)]


def test_a_one_line_eventlog_comes_back_decoded_and_still_reads():
    # flux.kvs.get decodes a value that is one JSON object
    entries = intake.eventlog_entries(
        {"timestamp": 1.0, "name": "submit", "context": {}}
    )
    assert [e.name for e in entries] == ["submit"]
    assert intake.eventlog_entries(None) == []


class Sink:
    """The service's side, recording what intake asks of it."""

    def __init__(self, records):
        self.records = records
        self.metrics = types.SimpleNamespace(arrived=lambda: 0.0)
        self.applied, self.admitted, self.resumed, self.plans, self.caught = (
            [],
            [],
            [],
            0,
            0,
        )
        self.behind_head = set()  # jobs behind the queue's head as last read

    def admit(self, facts, t):
        self.admitted.append(facts.jobid)

    def apply(self, jobid, ev):
        self.applied.append((jobid, type(ev)))

    def arm_plan(self):
        self.plans += 1

    def behind(self, facts):
        return facts.jobid in self.behind_head

    def resume(self, rec, now):
        self.resumed.append(rec.jobid)

    def caught_up(self):
        self.caught += 1

    def pool_entry(self, jobid, entry):
        return False


def rec(jobid, final=False):
    return types.SimpleNamespace(jobid=jobid, final=final)


def make(records, logs):
    tracker = Tracker()
    sink = Sink(records)
    it = intake.Intake(None, None, tracker, sink)
    it.eventlog = lambda jobid: intake.eventlog_entries(logs.get(jobid))
    return tracker, sink, it


def test_an_allocated_job_cleaned_without_its_finish_is_settled_from_its_eventlog():
    tracker, sink, it = make({1: rec(1)}, {1: RAN})
    it.feed(1, "submit", 1.0, {"userid": 1000}, JOBSPEC)
    it.feed(1, "alloc", 2.0, {})
    it.feed(1, "clean", 6.0, {})
    assert sink.admitted == [1]
    assert sink.applied == [(1, E.Started), (1, E.Started), (1, E.Finished)]
    assert sink.plans == 3  # submit, alloc and clean move the queue


def test_a_job_joining_behind_the_head_asks_for_no_pass_until_it_leaves_the_queue():
    tracker, sink, it = make({1: rec(1)}, {1: RAN})
    sink.behind_head.add(1)
    it.feed(1, "submit", 1.0, {"userid": 1000}, JOBSPEC)
    it.feed(1, "priority", 1.5, {"priority": 16})
    assert sink.admitted == [1] and sink.plans == 0
    it.feed(1, "alloc", 2.0, {})
    it.feed(1, "clean", 6.0, {})
    assert sink.plans == 2


def test_the_plugin_names_only_job_events():
    _, _, it = make({}, {})
    with pytest.raises(ValueError, match="expected one of"):
        it.on_job_event({"id": 1, "name": "memo", "timestamp": 1.0})


def test_the_replay_settles_jobs_that_ended_while_away_and_resumes_the_rest():
    records = {1: rec(1), 2: rec(2), 3: rec(3, final=True)}
    tracker, sink, it = make(records, {1: NEVER_STARTED})
    it.feed(2, "submit", 1.0, {"userid": 1000}, JOBSPEC)  # 2 is still active
    it.replay_done()
    assert sink.applied == [(1, E.Canceled)]
    assert sink.resumed == [1, 2] and sink.caught == 1
