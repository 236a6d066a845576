"""What to ask again after a restart: every in-flight rsa-state is waiting
for an answer to one action, and every action is idempotent, so asking
again is always safe and never does the work twice."""

import dataclasses

from flux_rsa.core import actions as A
from flux_rsa.core import steps
from flux_rsa.core.states import PRE_RUN, JobState, Mount, RsaState

S = RsaState


def reissue(rec):
    """The actions whose answers ``rec`` is still waiting for."""
    state = rec.rsa_state
    if rec.offer == "withdrawing":
        return [A.Withdraw(rec.jobid)]
    if rec.offer == "made" and rec.rsa_state is S.READY and rec.job_state in PRE_RUN:
        return [A.Offer(rec.jobid, env=steps.start_env(rec))]
    if rec.measure == "asked":
        return [A.Measure(rec.jobid, path=rec.request.data_in, userid=rec.userid)]
    if rec.mount is Mount.ATTACHING:
        return steps.attach(rec, None)[1]
    if rec.mount is Mount.DETACHING:
        return steps.detach(rec, None)[1]
    if state in (S.REQUESTED, S.ASSIGNED, S.BOOTING):
        return [A.RequestCapacity(rec.jobid, gen=rec.gen, need=rec.need, userid=rec.userid)]
    if state is S.TEARDOWN:
        return [A.CancelHolder(rec.jobid, gen=rec.gen)]
    if state is S.STOPPING:
        return [A.StopStage(rec.jobid, seq=rec.stage_seq)]
    if state in (S.STAGING_IN, S.STAGING_OUT):
        # same seq: the stager resumes and the pool runs one stage per seq
        before = dataclasses.replace(rec, stage_seq=rec.stage_seq - 1)
        step = steps.stage_in if state is S.STAGING_IN else steps.stage_out
        return step(before, None)[1]
    return []


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
        out.append(A.StartTimer(rec.jobid, name="retry", seconds=rec.limits.retry_backoff))
    entered = {}
    for tr in rec.history:
        entered[tr.rsa_state] = tr.t
    if rec.rsa_state is S.INUSE_IN and rec.request.delay is not None and rec.request.has_stage_out:
        left = rec.request.delay - (now - entered.get(S.INUSE_IN, now))
        out.append(A.StartTimer(rec.jobid, name="delay", seconds=max(0.0, left)))
    if rec.start_pending and rec.request.on_late == "wait":
        since = next((tr.t for tr in rec.history if tr.job_state is JobState.RUNNING), now)
        out.append(A.StartTimer(rec.jobid, name="late", seconds=max(0.0, rec.limits.late_timeout - (now - since))))
    return out
