"""A job staged while pending is offered its start; an offer withdrawn, or
taken before the withdrawal (test_core_machine.py has the helpers)."""

from test_core_machine import booted, job, kinds, run

from flux_rsa.core import actions as A
from flux_rsa.core import events as E
from flux_rsa.core.states import JobState as J
from flux_rsa.core.states import Offer
from flux_rsa.core.states import RsaState as S


def staged_pending():
    rec, _ = booted(job())
    return run(rec, E.StageEnded(5, 1, True))


def test_a_job_staged_while_pending_is_offered_its_start():
    rec, acts = staged_pending()
    assert rec.rsa_state is S.READY and rec.offer is Offer.MADE
    offer = [a for a in acts if isinstance(a, A.Offer)]
    assert offer and offer[0].env.staged_in and offer[0].env.data_in == "/rd/7/in"
    # the job starts with it: job-manager's rsa-ready says so, no Starting
    rec, acts = run(rec, E.Started(6, offer[0].env))
    assert (rec.job_state, rec.rsa_state, rec.offer) == (
        J.RUNNING,
        S.INUSE_IN,
        Offer.NONE,
    )


def test_a_revoked_offer_is_withdrawn_before_the_ramdisk_goes():
    rec, _ = staged_pending()
    rec, acts = run(rec, E.Demoted(6), E.Revoke(7))
    assert rec.rsa_state is S.READY and kinds(acts) == ["Withdraw"]
    rec, acts = run(rec, E.Withdrawn(8))
    assert rec.rsa_state is S.TEARDOWN and kinds(acts) == ["CancelHolder"]


def test_an_offer_taken_before_the_withdrawal_keeps_its_ramdisk():
    rec, _ = staged_pending()
    rec, _ = run(rec, E.Demoted(6), E.Revoke(7))
    rec, acts = run(rec, E.OfferTaken(8))
    assert (rec.job_state, rec.rsa_state) == (J.RUNNING, S.INUSE_IN)
    assert "CancelHolder" not in kinds(acts) and rec.env.staged_in
    rec, acts = run(rec, E.Started(9, rec.env))  # its start reaches us afterwards
    assert rec.rsa_state is S.INUSE_IN and "CancelHolder" not in kinds(acts)
