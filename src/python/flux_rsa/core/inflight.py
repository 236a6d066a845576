"""After a restart: what to ask again, and how the records square with what
a restarted pool reports.  Every in-flight value of a record (``states.py``
lists them) waits for the answer to one action, and every action is
idempotent, so asking again is always safe and never does the work twice."""

import dataclasses
from collections import namedtuple

from flux_rsa.core import actions as A
from flux_rsa.core import events as E
from flux_rsa.core import offersteps, steps
from flux_rsa.core.states import (
    HOLDING,
    OUTPUT_KEPT,
    PRE_RUN,
    STAGE_RUNS,
    JobState,
    Measure,
    Mount,
    Offer,
    RsaState,
)

S = RsaState


def same_stage(rec, ev):
    """The running stage asked for again with the same seq: the stager
    resumes and the pool runs one stage per seq."""
    before = dataclasses.replace(rec, stage_seq=rec.stage_seq - 1)
    step = steps.stage_in if rec.rsa_state is S.STAGING_IN else steps.stage_out
    return rec, step(before, ev)[1]


#: the step whose action each in-flight rsa-state (``states.IN_FLIGHT``)
#: waits for the answer to
AWAITS = {
    S.REQUESTED: steps.ask_capacity,
    S.ASSIGNED: steps.ask_capacity,
    S.BOOTING: steps.ask_capacity,
    S.STAGING_IN: same_stage,
    S.STAGING_OUT: same_stage,
    S.STOPPING: steps.stop_stage,
    S.TEARDOWN: steps.cancel_holder,
}


def reissue(rec):
    """The actions whose answers ``rec`` is still waiting for: the in-flight
    value of a sub-machine first (offer, measure, mount), else the rsa-state's."""
    if rec.offer is Offer.WITHDRAWING:
        return offersteps.withdraw(rec, None)[1]
    if (
        rec.offer is Offer.MADE
        and rec.rsa_state is S.READY
        and rec.job_state in PRE_RUN
    ):
        return offersteps.offer(rec, None)[1]
    if rec.measure is Measure.ASKED:
        return steps.measure(rec, None)[1]
    if rec.mount is Mount.ATTACHING:
        return steps.attach(rec, None)[1]
    if rec.mount is Mount.DETACHING:
        return steps.detach(rec, None)[1]
    step = AWAITS.get(rec.rsa_state)
    return [] if step is None else step(rec, None)[1]


def unanswered(rec):
    """A start answer job-manager may not have received (lost in a restart)."""
    if rec.job_state is JobState.RUNNING and not rec.started and not rec.start_pending:
        return [A.ReplyStart(rec.jobid, env=rec.env)]
    return []


def timers(rec, now):
    """Timers a restarted service must arm again, with the time left."""
    out = []
    for deadline in steps.deadline_timer(rec, rec.state_since):
        left = deadline.seconds - (now - rec.state_since)
        out.append(dataclasses.replace(deadline, seconds=max(0.0, left)))
    if rec.retry_pending:
        out.append(
            A.StartTimer(rec.jobid, name="retry", seconds=rec.limits.retry_backoff)
        )
    entered = {}
    for tr in rec.history:
        entered[tr.rsa_state] = tr.t
    if (
        rec.rsa_state is S.INUSE_IN
        and rec.request.delay is not None
        and rec.request.has_stage_out
    ):
        left = rec.request.delay - (now - entered.get(S.INUSE_IN, now))
        out.append(A.StartTimer(rec.jobid, name="delay", seconds=max(0.0, left)))
    if rec.start_pending and rec.request.on_late == "wait":
        since = next(
            (tr.t for tr in rec.history if tr.job_state is JobState.RUNNING), now
        )
        out.append(
            A.StartTimer(
                rec.jobid,
                name="late",
                seconds=max(0.0, rec.limits.late_timeout - (now - since)),
            )
        )
    return out


#: what the service does with a (re)started pool's listing: ``kept``:
#: [(kept entry, record to adopt it or None to discard it)], in listing
#: order; ``cancel``: orphan holders [(jobid, gen)]; ``stop``: orphan
#: stages [(jobid, seq)]; ``lost``: [(jobid, HolderEnded)] for records
#: whose holder the pool no longer runs
Reconciled = namedtuple("Reconciled", "kept cancel stop lost")


def adopts(rec, kept):
    """A RAM disk kept through a pool restart is ``rec``'s to adopt: same
    reservation, and it may hold outputs not yet home."""
    return rec is not None and rec.gen == kept["gen"] and rec.rsa_state in OUTPUT_KEPT


def reconcile(records, listing, t):
    """Square ``records`` ({jobid: Record}) with the pool's ``listing``
    (its holders, stages and kept RAM disks) at time ``t``."""
    holders = {(h["jobid"], h["gen"]) for h in listing.get("holders", [])}
    kept_out = []
    for kept in listing.get("kept", []):
        if kept.get("adopting"):
            holders.add((kept["jobid"], kept["gen"]))
            continue
        rec = records.get(kept["jobid"])
        if adopts(rec, kept):
            kept_out.append((kept, rec))
            holders.add((rec.jobid, rec.gen))
        else:
            kept_out.append((kept, None))
    stages = {(s["jobid"], s["seq"]) for s in listing.get("stages", [])}
    wanted_holders = {
        (r.jobid, r.gen) for r in records.values() if r.rsa_state in HOLDING
    }
    wanted_stages = {
        (r.jobid, r.stage_seq) for r in records.values() if r.rsa_state in STAGE_RUNS
    }
    lost = []
    for rec in records.values():
        if rec.rsa_state not in HOLDING or (rec.jobid, rec.gen) in holders:
            continue
        if rec.rsa_state is S.REQUESTED:
            continue  # its hold was (re)sent: the pool makes it
        why = (
            None
            if rec.rsa_state is S.TEARDOWN
            else "the RSA pool restarted without this RAM disk"
        )
        lost.append((rec.jobid, E.HolderEnded(t, rec.gen, why)))
    return Reconciled(
        kept_out, sorted(holders - wanted_holders), sorted(stages - wanted_stages), lost
    )
