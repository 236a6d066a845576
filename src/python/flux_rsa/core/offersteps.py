"""Steps of the start offer (``states.Offer``): a staged job that is still
pending is offered to job-manager, so it starts without a round trip.
Like ``steps.py``: ``(record, event) -> (record', actions)``, used only by
``table.py``'s rows (and ``inflight.py`` after a restart)."""

import dataclasses

from flux_rsa.core import actions as A
from flux_rsa.core.states import Offer
from flux_rsa.core.steps import start_env


def _set(rec, **changes):
    return dataclasses.replace(rec, **changes)


def offer(rec, ev):
    return _set(rec, offer=Offer.MADE), [A.Offer(rec.jobid, env=start_env(rec))]


def withdraw(rec, ev):
    """The RAM disk is wanted back: take the offer back first."""
    return _set(rec, offer=Offer.WITHDRAWING), [A.Withdraw(rec.jobid)]


def drop_offer(rec, ev):
    """The RAM disk is gone: take any offer back, without waiting."""
    if rec.offer is Offer.NONE:
        return rec, []
    return _set(rec, offer=Offer.NONE), [A.Withdraw(rec.jobid)]


def withdrawn(rec, ev):
    """The offer is back: the capacity may go."""
    return _set(rec, offer=Offer.NONE), []


def offer_taken(rec, ev):
    """The job started with the offer: it runs on this RAM disk whatever
    happened meanwhile (its own rsa-ready, if already seen, set the env)."""
    rec = _set(rec, offer=Offer.NONE, revoked=False)
    if rec.started:
        return rec, []
    return _set(rec, env=start_env(rec), started=True, start_pending=False), []
