"""Apply an event to a record: ``process(record, event) -> (record', actions)``.

Pure and deterministic.  The rows live in ``table.py``; this file only
looks them up and applies them, with the policy ``table.py``'s opening
comment states: a stale event is dropped, an event with no row raises
``IllegalEvent``.
"""

import dataclasses

from flux_rsa.core import events as E
from flux_rsa.core.actions import CancelHolder
from flux_rsa.core.record import Record, Transition
from flux_rsa.core.states import Measure, RsaState
from flux_rsa.core.steps import deadline_timer
from flux_rsa.core.table import EVENT_ROWS, JOB_ROWS, PASS_ROWS

#: a pass longer than this is a bug in the table (a row that never settles)
MAX_PASS = 32


class IllegalEvent(Exception):
    """The event has no row for the record's state (an illegal move)."""

    def __init__(self, rec, ev):
        self.record = rec
        self.event = ev
        super().__init__(
            f"job {rec.jobid}: {type(ev).__name__} is not allowed in "
            f"{rec.job_state}/{rec.rsa_state}"
        )


def _stale(rec, ev):
    """True for a pool event about a holder or stage we no longer follow,
    or a deadline for a state the job has left."""
    if isinstance(ev, E.Timeout):
        return ev.state != rec.rsa_state.value or ev.since != rec.state_since
    gen = getattr(ev, "gen", None)
    if gen is not None and gen != rec.gen:
        return True
    seq = getattr(ev, "seq", None)
    return seq is not None and seq != rec.stage_seq


def _apply(rec, ev, to, steps, actions):
    for step in steps:
        rec, acts = step(rec, ev)
        actions.extend(acts)
    if to is not None and to is not rec.rsa_state:
        rec = dataclasses.replace(rec, rsa_state=to, state_since=ev.t)
        actions.extend(deadline_timer(rec, ev.t))
    return rec


def _note(rec, before, t):
    if (rec.job_state, rec.rsa_state) == before:
        return rec
    return dataclasses.replace(
        rec, history=rec.history + (Transition(t, rec.job_state, rec.rsa_state),)
    )


def _event_row(rec, ev):
    """The first EVENT_ROWS row for ``ev`` that matches ``rec`` (None: none)."""
    for row in EVENT_ROWS.get(type(ev), ()):
        if rec.rsa_state in row.states and row.guard(rec, ev):
            return row
    return None


def accepts(rec, ev):
    """Would ``process`` take this event (rather than raise or ignore it)?"""
    if _stale(rec, ev):
        return False
    job = JOB_ROWS.get(type(ev))
    if job is not None and rec.job_state not in job.moves:
        return False
    return _event_row(rec, ev) is not None


#: pool events saying an (old) holder is alive: it must not be left running
ALIVE = (E.HolderAllocated, E.HolderStarted, E.RamdiskBuilt)


def process(rec: Record, ev: E.Event):
    """Return the record after ``ev`` and the actions it asks for."""
    if _stale(rec, ev):
        if isinstance(ev, ALIVE) and ev.gen < rec.gen:
            # a holder of an earlier reservation is still around: end it
            return rec, [CancelHolder(rec.jobid, gen=ev.gen)]
        return rec, []
    job = JOB_ROWS.get(type(ev))
    if job is not None and rec.job_state not in job.moves:
        if rec.job_state in job.ignored:
            return rec, []  # e.g. OnDeck for a job that already started
        raise IllegalEvent(rec, ev)
    actions = []
    before = (rec.job_state, rec.rsa_state)
    if job is not None:
        rec = dataclasses.replace(rec, job_state=job.to)
    row = _event_row(rec, ev)
    if row is None:
        raise IllegalEvent(rec, ev)
    rec = _apply(rec, ev, row.to, row.steps, actions)
    rec = _note(rec, before, ev.t)
    return settle(rec, ev, actions)


def settle(rec, ev, actions=None):
    """Run the scheduler pass to a fixed point: until no row matches, or
    the row that matches stays (SAME, no steps)."""
    actions = [] if actions is None else actions
    for _ in range(MAX_PASS):
        for row in PASS_ROWS:
            if (
                rec.job_state in row.jobs
                and rec.rsa_state in row.states
                and row.guard(rec)
            ):
                if row.to is None and not row.steps:
                    return rec, actions
                before = (rec.job_state, rec.rsa_state)
                rec = _note(_apply(rec, ev, row.to, row.steps, actions), before, ev.t)
                break
        else:
            return rec, actions
    raise RuntimeError(
        f"job {rec.jobid}: the pass does not settle in {rec.job_state}/{rec.rsa_state}"
    )


def admit(jobid, userid, nnodes, request, policy, t, one_node=False):
    """A new job: its record (INITIAL or INELIGIBLE, with the reason);
    ``one_node``: the job surely runs on one compute node."""
    reason = policy.ineligible(nnodes, request)
    rec = Record(
        jobid=jobid,
        userid=userid,
        nnodes=nnodes,
        request=policy.resolve(request),
        need=0 if reason else policy.need(nnodes, request),
        measure=Measure.WANTED
        if not reason and policy.sizes_from_input(request)
        else Measure.NONE,
        rsa_state=RsaState.INELIGIBLE if reason else RsaState.INITIAL,
        reason=reason,
        limits=policy.limits(),
        state_since=t,
        image=not reason and policy.image_for(request, one_node),
    )
    return dataclasses.replace(
        rec, history=(Transition(t, rec.job_state, rec.rsa_state),)
    )
