"""The guards of ``table.py``'s rows: named questions about a record,
each a function whose name reads as the condition it checks.  Pure.
"""

from flux_rsa.core import handoff
from flux_rsa.core import steps as do
from flux_rsa.core.states import (
    ENDED,
    LET_GO,
    JobState,
    Measure,
    Mount,
    Offer,
    RsaState,
)

J = JobState
S = RsaState


def always(rec, ev=None):
    return True


def ok(rec, ev):
    return ev.ok


def not_ok(rec, ev):
    return not ev.ok


def pending(rec):
    return rec.start_pending


def waits(rec):
    """A starting job held until its inputs are staged (on_late=wait, or
    its inputs are another job's outputs not yet home: never a part)."""
    if not rec.start_pending or rec.failed:
        return False
    return rec.request.on_late == "wait" or consumer_waits(rec)


def consumer_waits(rec):
    """Its inputs are another job's outputs, not home yet (it may start
    only on them staged from that job's RAM disk), or home and on that RAM
    disk (a copy from memory is the point of the hand-off: wait for it)."""
    if rec.handoff is None:
        return False
    return rec.handoff.verdict is not True or handoff.may_read_ramdisk(rec)


def inputs_whole(rec):
    return handoff.inputs_whole(rec)


def from_producer(rec, ev):
    """The stage-in reads another job's RAM disk (the hand-off)."""
    return handoff.reads_ramdisk(rec) is not None


def default_size(rec, ev):
    """Its reservation is the site's default (no rsa.capacity): the site
    may make it smaller."""
    return rec.request.capacity is None


def more_than_the_pool(rec):
    """Its reservation is the site's default, sized, and more than the
    pool can ever hold (as known when the job came)."""
    return (
        rec.request.capacity is None
        and rec.measure is Measure.NONE
        and 0 < rec.limits.most < rec.need
    )


def never_whole(rec):
    """Its inputs will never be whole and it has not been told yet."""
    return not rec.failed and handoff.never_whole(rec) is not None


def with_consumers(rec, ev):
    return ev.ok and bool(rec.consumers)


def no_consumers(rec):
    return not rec.consumers


def answerable(rec):
    return rec.start_pending and not waits(rec)


def uses_ramdisk(rec):
    env = rec.env
    return env is not None and env.on_ramdisk


def given(rec):
    """The job has its answer and it does not involve the RAM disk."""
    return not rec.start_pending and not uses_ramdisk(rec)


def staged_in(rec):
    return not rec.start_pending and rec.env is not None and rec.env.staged_in


def out_only(rec):
    return not rec.start_pending and uses_ramdisk(rec) and not rec.env.staged_in


def out_on_ramdisk(rec):
    return rec.env is not None and rec.env.out_on_ramdisk


def has_input(rec):
    return rec.request.has_stage_in and not rec.failed


def no_input(rec):
    return not rec.request.has_stage_in


def can_stage(rec):
    return not rec.failed


def sized(rec):
    """The reservation's size is known (no data_in measurement outstanding)."""
    return rec.measure is Measure.NONE


def measure_wanted(rec):
    return rec.measure is Measure.WANTED


def measure_asked(rec, ev):
    return rec.measure is Measure.ASKED


def not_backing_off(rec):
    return not rec.retry_pending


def auto_retry(rec):
    """A failed stage-out whose back-off is over, with attempts left."""
    return not rec.retry_pending and 0 < rec.attempts <= rec.limits.stage_retries


def revoked(rec):
    return rec.revoked


def offerable(rec):
    """Staged and pending, nothing offered yet: offer the start env (not
    when the compute nodes must attach the RAM disk first)."""
    return (
        rec.offer is Offer.NONE
        and not rec.revoked
        and not rec.start_pending
        and not rec.failed
        and rec.volume is None
    )


def attached_here(rec):
    """The compute nodes have attached the RAM disk the job would be given
    (not the one of a reservation lost meanwhile)."""
    return rec.mount is Mount.ATTACHED and rec.mount_path == rec.job_ramdisk


def attach_first(rec):
    """The job is to start on a RAM disk its compute nodes must attach, and
    they have not yet."""
    if rec.volume is None or rec.mount is Mount.FAILED or attached_here(rec):
        return False
    return do.start_env(rec).on_ramdisk


def attach_now(rec):
    """Its answer is due and needs the RAM disk attached: attach it (an
    image only once no stage works on it: one writer at a time; a job that
    starts during its stage-in waits until the stage has stopped)."""
    due = (rec.rsa_state is S.READY and pending(rec)) or answerable(rec)
    return (
        due
        and rec.mount is Mount.NONE
        and attach_first(rec)
        and not stage_on_image(rec)
    )


def stage_before_attach(rec):
    """Its answer is due and needs the RAM disk attached, but it is an image
    a stage-in still writes: stop the stage first (one writer at a time;
    the job, started before its inputs were staged, reads data_in)."""
    return (
        answerable(rec)
        and rec.mount is Mount.NONE
        and attach_first(rec)
        and stage_on_image(rec)
    )


def stage_on_image(rec):
    """A stage still works on the RAM disk, and it is an image."""
    image = rec.volume is not None and rec.volume.get("image") is not None
    return image and rec.stage_dir is not None


def ready_answer(rec):
    return pending(rec) and not attach_first(rec)


def answer(rec):
    return answerable(rec) and not attach_first(rec)


def needless_mount(rec):
    """The RAM disk is attached on compute nodes that no longer need it:
    the job is over, it was given its directories after all, or it waits
    to start on a new RAM disk (the attached one was lost)."""
    if rec.mount is not Mount.ATTACHED:
        return False
    over = rec.job_state in ENDED
    unused = rec.env is not None and not uses_ramdisk(rec)
    stale = rec.start_pending and rec.mount_path != rec.job_ramdisk
    return over or unused or stale


def given_unmounted(rec):
    return given(rec) and unmounted(rec)


def unmounted(rec):
    """Nothing of the RAM disk is (being) attached on compute nodes."""
    return rec.mount in LET_GO


def give_back(rec):
    """Revoked, and no offer job-manager could still start the job with."""
    return rec.revoked and rec.offer is Offer.NONE


def offered(rec):
    return rec.revoked and rec.offer is Offer.MADE


def withdrawing(rec, ev):
    return rec.offer is Offer.WITHDRAWING


def attaching(rec, ev):
    return rec.mount is Mount.ATTACHING


def detaching(rec, ev):
    return rec.mount is Mount.DETACHING


def still_waiting(rec, ev):
    """The late timer fired while the job still waits for its inputs (a
    consumer waits on: data_in would hold a part of them)."""
    return waits(rec) and not consumer_waits(rec)


def not_revoked(rec):
    return not rec.revoked


def advancing(rec):
    """On deck, or held at start for its inputs: keep building and staging."""
    return rec.job_state is J.ONDECK or waits(rec)


def advancing_sized(rec):
    """Advancing, staging allowed and the reservation's size known: reserve."""
    return advancing(rec) and can_stage(rec) and sized(rec)


def advancing_with_input(rec):
    return advancing(rec) and has_input(rec) and inputs_whole(rec)


def advancing_without_input(rec):
    return advancing(rec) and no_input(rec)


def advancing_retry_due(rec):
    """Advancing after a failed stage-in whose back-off is over."""
    return (
        advancing(rec) and has_input(rec) and not_backing_off(rec) and inputs_whole(rec)
    )


def advancing_can_stage(rec):
    return advancing(rec) and can_stage(rec)


def output_to_stage_out(rec):
    """Outputs are on the RAM disk and no compute node holds it any more."""
    return out_on_ramdisk(rec) and unmounted(rec)
