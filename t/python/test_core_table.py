"""The table itself: what its opening comment claims is true."""

import dataclasses
import inspect

import pytest

from flux_rsa.core import IllegalEvent, Policy, accepts
from flux_rsa.core import actions as A
from flux_rsa.core import admit
from flux_rsa.core import events as E
from flux_rsa.core import (
    guards,
    handoffsteps,
    offersteps,
    parse_request,
    process,
    steps,
    table,
)
from flux_rsa.core.machine import settle
from flux_rsa.core.states import IN_FLIGHT
from flux_rsa.core.states import JobState as J
from flux_rsa.core.states import RsaState as S

POLICY = Policy.from_config({"proportion": 1, "node-capacity": "64M", "granule": "4M"})


def job():
    return admit(
        7,
        1000,
        1,
        parse_request({"data_in": "/p/in", "data_out": "/p/out"}),
        POLICY,
        0.0,
    )


def run(rec, *events):
    out = []
    for ev in events:
        rec, acts = process(rec, ev)
        out.extend(acts)
    return rec, out


def staging_in():
    return run(
        job(),
        E.OnDeck(1),
        E.HolderAllocated(2, 1, ("rsa0",), 4 << 20),
        E.HolderStarted(3, 1),
        E.RamdiskBuilt(4, 1, "/rd/7"),
    )[0]


def all_guards():
    for rows in table.EVENT_ROWS.values():
        yield from (row.guard for row in rows)
    yield from (row.guard for row in table.PASS_ROWS)


def test_every_guard_is_a_named_function_of_the_table():
    for guard in all_guards():
        assert guard.__name__ != "<lambda>", inspect.getsource(guard)
        assert getattr(guards, guard.__name__) is guard


def test_every_step_is_a_function_of_steps():
    rows = [r for rs in table.EVENT_ROWS.values() for r in rs] + list(table.PASS_ROWS)
    for row in rows:
        for step in row.steps:
            module = {m.__name__: m for m in (steps, handoffsteps, offersteps)}
            assert getattr(module[step.__module__], step.__name__) is step


def test_each_job_event_moves_or_ignores_every_job_state_exactly_once():
    for event, row in table.JOB_ROWS.items():
        assert row.moves | row.ignored == frozenset(J), event.__name__
        assert not row.moves & row.ignored, event.__name__


def test_a_job_event_in_a_job_state_it_ignores_changes_nothing():
    rec = staging_in()
    rec, _ = run(rec, E.Starting(5, ranks=(0,)))
    assert J.RUNNING in table.JOB_ROWS[E.OnDeck].ignored
    assert not accepts(rec, E.OnDeck(6))
    assert process(rec, E.OnDeck(6)) == (rec, [])


def test_an_event_without_a_row_is_illegal_wherever_it_is_missing(monkeypatch):
    rec = staging_in()
    # no EVENT_ROWS row for the rsa-state
    assert not accepts(rec, E.Release(5))
    with pytest.raises(
        IllegalEvent, match="Release is not allowed in ONDECK/STAGING_IN"
    ):
        process(rec, E.Release(5))
    # a job-state the JOB_ROWS entry neither moves nor ignores
    row = table.JOB_ROWS[E.Finished]
    monkeypatch.setitem(
        table.JOB_ROWS, E.Finished, row._replace(moves=row.moves - {J.ONDECK})
    )
    assert not accepts(rec, E.Finished(5))
    with pytest.raises(
        IllegalEvent, match="Finished is not allowed in ONDECK/STAGING_IN"
    ):
        process(rec, E.Finished(5))
    # an event the table does not know at all
    with pytest.raises(IllegalEvent):
        process(rec, E.Event(5))


def test_a_stale_event_is_dropped_before_the_rows_are_read():
    rec = staging_in()
    assert not accepts(rec, E.StageEnded(5, 99, True))
    assert process(rec, E.StageEnded(5, 99, True)) == (rec, [])
    assert process(rec, E.Timeout(5, "BOOTING", 3.0)) == (rec, [])
    # an earlier reservation's holder saying it lives is cancelled
    rec2 = dataclasses.replace(rec, gen=2)
    assert process(rec2, E.HolderStarted(5, 1)) == (rec2, [A.CancelHolder(7, gen=1)])


def test_a_demoted_job_keeps_staging_in_until_it_is_revoked():
    rec = staging_in()
    rec, acts = run(rec, E.Demoted(5))
    assert (rec.job_state, rec.rsa_state) == (J.DEMOTED, S.STAGING_IN) and acts == []
    assert rec.stage_dir == "in"  # the stage job goes on
    # one explicit row says so, and it is the one that answers
    [row] = [
        r
        for r in table.PASS_ROWS
        if J.DEMOTED in r.jobs and S.STAGING_IN in r.states and r.guard(rec)
    ]
    assert row.guard is guards.not_revoked and row.to is table.SAME and row.steps == ()
    rec, acts = run(rec, E.StageEnded(6, 1, True))
    assert (
        rec.rsa_state is S.READY
    )  # staged while demoted: the inputs are there when it is on deck again
    rec = staging_in()
    rec, acts = run(rec, E.Demoted(5), E.Revoke(6))
    assert rec.rsa_state is S.STOPPING and acts[0] == A.StopStage(7, seq=1)


def test_a_row_that_stays_ends_the_pass_without_changing_anything():
    rec = run(staging_in(), E.Demoted(5))[0]
    assert settle(rec, E.Event(6)) == (rec, [])


def test_the_in_flight_states_and_a_kept_ramdisk_are_exactly_those_with_a_deadline():
    base = staging_in()
    for state in S:
        rec = dataclasses.replace(base, rsa_state=state)
        timers = steps.deadline_timer(rec, 0.0)
        assert bool(timers) == (state in IN_FLIGHT or state is S.KEPT), state
