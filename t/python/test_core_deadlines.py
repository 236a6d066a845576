"""The table's deadlines: every in-flight state has one, and what each does
when it passes (test_core_machine.py has the helpers)."""

from test_core_machine import booted, job, kinds, run

from flux_rsa.core import actions as A
from flux_rsa.core import events as E
from flux_rsa.core.states import RsaState as S


def test_every_in_flight_state_has_a_deadline():
    rec, acts = run(job(), E.OnDeck(1.0), deadlines=True)
    timer = [a for a in acts if isinstance(a, A.StartTimer)][0]
    assert (timer.name, timer.state, timer.since, timer.seconds) == (
        "timeout",
        "REQUESTED",
        1.0,
        600.0,
    )


def test_no_capacity_in_time_gives_the_reservation_up():
    rec, _ = run(job(), E.OnDeck(1.0))
    rec, acts = run(rec, E.Timeout(700.0, "REQUESTED", 1.0))
    assert (
        rec.rsa_state is S.TEARDOWN and rec.failed and kinds(acts) == ["CancelHolder"]
    )
    assert rec.error == "no RAM-disk capacity within 600s ([rsa] holder-timeout)"


def test_a_stage_out_that_takes_too_long_is_held_not_destroyed():
    rec, _ = booted(job())
    rec, _ = run(rec, E.StageEnded(5, 1, True), E.Starting(6), E.Finished(7))
    seq, since = rec.stage_seq, rec.state_since
    rec, acts = run(rec, E.Timeout(9999.0, "STAGING_OUT", since))
    assert rec.rsa_state is S.HELD and "CancelHolder" not in kinds(acts)
    assert [a.seq for a in acts if isinstance(a, A.StopStage)] == [seq]
    rec, acts = run(
        rec, E.StageEnded(10000.0, seq, True)
    )  # the old stage, late: ignored
    assert rec.rsa_state is S.HELD and acts == []


def test_a_deadline_for_a_state_already_left_is_ignored():
    rec, _ = booted(job())
    before = rec
    rec, acts = run(rec, E.Timeout(5000.0, "REQUESTED", 1.0))
    assert rec == before and acts == []
