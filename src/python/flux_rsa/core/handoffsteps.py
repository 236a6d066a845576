"""Steps of the workflow hand-off (``handoff.py``): what its events do to
a consumer's or a producer's record.  Like ``steps.py``: ``(record,
event) -> (record', actions)``, used only by ``table.py``'s rows."""

import dataclasses

from flux_rsa.core import actions as A
from flux_rsa.core.record import Handoff


def _set(rec, **changes):
    return dataclasses.replace(rec, **changes)


# --- the consumer ------------------------------------------------------------


def take_handoff(rec, ev):
    """Its inputs are on the producer's RAM disk: read them there."""
    handoff = Handoff(
        ev.producer,
        ev.name,
        ev.area,
        ev.node,
        ev.remote,
        on_ramdisk=not ev.writing,
        writing=ev.writing,
    )
    return _set(rec, handoff=handoff), [
        A.PostEvent(rec.jobid, "handoff", {"from": ev.name, "node": ev.node})
    ]


def producer_changed(rec, ev):
    h = dataclasses.replace(
        rec.handoff, on_ramdisk=ev.on_ramdisk, verdict=ev.verdict, writing=ev.writing
    )
    return _set(rec, handoff=h), []


def drop_source(rec, ev):
    """A stage-in from the producer's RAM disk failed: from now on its
    inputs come from data_in, once the producer's outputs are home."""
    h = dataclasses.replace(rec.handoff, failed=True)
    error = (
        f"inputs from job {h.name}'s RAM disk: {rec.error}; "
        "reading data_in once that job's outputs are home"
    )
    return _set(rec, handoff=h, error=error), []


def never_whole(rec, ev):
    """The producer's outputs will never be whole in data_in, and its RAM
    disk is gone: the job must not run on a part of them."""
    producer = rec.handoff.name
    error = (
        f"rsa.data_in {rec.request.data_in} is the data_out of job {producer}, "
        f"whose outputs will never be whole there ({rec.handoff.verdict}): "
        "not starting on a part of them"
    )
    return _set(rec, failed=True, error=error), [
        A.RaiseException(rec.jobid, type="dependency", note=error)
    ]


# --- the producer ------------------------------------------------------------


def add_consumer(rec, ev):
    if ev.consumer in rec.consumers:
        return rec, []
    return _set(rec, consumers=rec.consumers + (ev.consumer,)), []


def drop_consumer(rec, ev):
    return _set(rec, consumers=tuple(c for c in rec.consumers if c != ev.consumer)), []


def expired(rec, ev):
    """``[rsa] handoff-keep`` is over: the readers left use data_in (they
    learn it as the RAM disk goes, ``service.workflow``)."""
    n = len(rec.consumers)
    why = f"[rsa] handoff-keep is over; {n} job(s) not served read data_out"
    return rec, [
        A.PostEvent(
            rec.jobid, "handoff-expired", {"consumers": list(rec.consumers), "why": why}
        )
    ]
