"""Where a job's outputs stand: the question `flux rsa wait` and the
``afterstaged`` dependency both ask of a record.  Pure, like the rest of
the core: it reads a record and decides nothing else.
"""

from flux_rsa.core.states import OUTPUT_KEPT, JobState, RsaState

#: the RSA may still move the outputs: wait
MOVING = "moving"
#: the stage-out failed; the RAM disk keeps them until retry or release
HELD = "held"
#: staged out to rsa.data_out, RAM disk gone
HOME = "home"
#: never staged out: released from HELD, or the RAM disk was lost
LOST = "lost"
#: the RSA had nothing to stage out
NONE = "none"


def not_home(rec):
    """The job was given an output area on its RAM disk and what it wrote
    there has not been staged out (yet, or ever)."""
    return (
        rec.env is not None and rec.env.out_on_ramdisk and rec.output_home is not True
    )


def at_risk(rec):
    """The RAM disk holds outputs not yet home: losing it loses them, and a
    pool restart must keep it (``OUTPUT_KEPT`` states only)."""
    return rec.rsa_state in OUTPUT_KEPT and not_home(rec)


def outputs(rec):
    """(word, why) for a Record: word is one of MOVING, HELD, HOME, LOST,
    NONE; why says it in words (None while MOVING)."""
    state = rec.rsa_state
    if state is RsaState.INELIGIBLE:
        return NONE, f"not staged by the RSA ({rec.reason})"
    if state is RsaState.HELD:
        return (MOVING, None) if rec.retry_pending else (HELD, rec.error)
    if not rec.final:
        return MOVING, None
    if rec.output_home is True:
        return HOME, f"outputs staged out to {rec.request.data_out}"
    if rec.output_home is False:
        return LOST, f"outputs not staged out: {rec.error}"
    if rec.job_state is JobState.CANCELED:
        return NONE, "the job never ran: it has no outputs"
    if rec.request.data_out is None:
        return NONE, "nothing to stage out (no rsa.data_out)"
    return NONE, "done (the job wrote to rsa.data_out directly)"


def after_staged(rec):
    """The ``afterstaged`` dependency on this job: None while dependents
    must wait (job not over, outputs moving or HELD), True when they may
    start, or the reason (a string) they never can (outputs lost or
    released without a stage-out, or the job never ran)."""
    if rec.job_state not in (JobState.FINISHED, JobState.CANCELED):
        return None
    word, why = outputs(rec)
    if word in (MOVING, HELD):
        return None
    if word == LOST:
        return f"its outputs were never staged out ({rec.error})"
    if rec.job_state is JobState.CANCELED:
        return "it never ran: it has no outputs"
    return True


def writing_into(rec):
    """The directory this job's stage-out may still write into: its
    ``data_out`` once the job has ended, while its outputs are not settled
    (moving or HELD); else None.  A job that would read that directory as
    its inputs must wait for them (the ``afterstaged`` wait): it would see
    a part of them."""
    if rec.job_state is not JobState.FINISHED or rec.request.data_out is None:
        return None
    return rec.request.data_out if after_staged(rec) is None else None
