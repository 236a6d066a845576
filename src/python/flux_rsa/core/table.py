"""The RSA state machine as data.

Three tables, read like the thesis's rsa-scheduler.sh.  ``machine.py`` only
looks their rows up and applies them; every rule about states is here (the
states themselves, and every flag a guard reads, are listed in ``states.py``):

* JOB_ROWS: what a job event does to the job-state axis: the job-states it
  moves the job from, the one it moves it to, and those in which the event
  is ignored (late or repeated, e.g. replayed from the journal).
* EVENT_ROWS: what an event does to the record, by rsa-state, first
  matching row wins: the side effects of job events; pool events completing
  what an in-flight rsa-state waits for; timers; people.
* PASS_ROWS: the scheduler pass.  After every event they are applied, first
  matching row wins, until no row matches or the row that matches stays
  (``SAME`` and no steps): (job-state, rsa-state, guard) -> (rsa-state',
  steps).  This is where "what happens to a STAGING_IN job that is
  demoted?" is answered, by one row.

A row's steps run in order; each is a function from ``steps.py``.  A guard
is a named function below whose name reads as the condition it checks.
``SAME`` keeps the rsa-state.  Rows that deliberately do nothing say so with
no steps.

An event with no row is an illegal move, always: ``machine.process`` raises
``machine.IllegalEvent`` when the event's JOB_ROWS entry neither moves nor
ignores the job-state, or when no EVENT_ROWS row matches the rsa-state;
``machine.accepts`` answers the same question without raising (the service
refuses a person's request with it, and logs any other illegal event as a
bug).  Nothing is dropped silently for want of a row.  Only a stale event is
dropped before the rows are read: a pool event of another reservation
(``gen``) or stage (``seq``), or a deadline for an rsa-state the job has
left; an earlier reservation's holder that reports itself alive is
cancelled.
"""

from collections import namedtuple

from flux_rsa.core import events as E
from flux_rsa.core import handoff
from flux_rsa.core import handoffsteps as hand
from flux_rsa.core import steps as do
from flux_rsa.core.states import (
    ENDED,
    HOLDER_IN_FLIGHT,
    HOLDING,
    PRE_RUN,
    JobState,
    Measure,
    Mount,
    Offer,
    RsaState,
)

J = JobState
S = RsaState
SAME = None
ANY = frozenset(S)

Row = namedtuple("Row", "states guard to steps")
JobRow = namedtuple("JobRow", "moves to ignored")
PassRow = namedtuple("PassRow", "jobs states guard to steps")


def states(*names):
    return frozenset(names)


# --- guards: named questions about a record --------------------------------


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
    """Its answer is due and needs the RAM disk attached: attach it."""
    due = (rec.rsa_state is S.READY and pending(rec)) or answerable(rec)
    return due and rec.mount is Mount.NONE and attach_first(rec)


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
    return rec.mount in (Mount.NONE, Mount.FAILED)


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


# --- job-state axis: (from job-states) -> job-state, per event --------------


ALL_JOBS = frozenset(J)
BEFORE_END = PRE_RUN | {J.RUNNING}


def job_row(moves, to):
    """The event moves the job from ``moves`` to ``to`` and is ignored in
    every other job-state (it came late, or again)."""
    return JobRow(moves, to, ALL_JOBS - moves)


JOB_ROWS = {
    E.OnDeck: job_row(frozenset({J.PENDING, J.DEMOTED}), J.ONDECK),
    E.Demoted: job_row(frozenset({J.ONDECK}), J.DEMOTED),
    E.Revoke: job_row(frozenset({J.DEMOTED}), J.DEMOTED),
    E.Starting: job_row(BEFORE_END, J.RUNNING),
    E.Started: job_row(BEFORE_END, J.RUNNING),
    E.OfferTaken: job_row(BEFORE_END, J.RUNNING),
    E.Finished: job_row(BEFORE_END, J.FINISHED),
    E.Canceled: job_row(BEFORE_END, J.CANCELED),
}

# --- EVENT_ROWS: completions and requests, by rsa-state --------------------

#: states in which the current holder generation is believed gone
GONE = states(S.INITIAL, S.DESTROYED)
LIVE_RAMDISK = HOLDING - HOLDER_IN_FLIGHT - {S.TEARDOWN}

EVENT_ROWS = {
    # job events: the job-state change is in JOB_ROWS; rsa side effects here
    E.OnDeck: [Row(ANY, always, SAME, (do.unrevoke,))],
    E.Demoted: [Row(ANY, always, SAME, ())],
    E.Revoke: [Row(ANY, always, SAME, (do.revoke,))],
    E.Starting: [Row(ANY, always, SAME, (do.starting,))],
    E.Started: [Row(ANY, always, SAME, (do.take_env,))],
    E.Finished: [Row(ANY, always, SAME, (do.ended,))],
    E.Canceled: [Row(ANY, always, SAME, (do.ended,))],
    # the holder: alloc -> start -> RAM disk built -> ... -> ended
    E.HolderAllocated: [
        Row(states(S.REQUESTED), always, S.ASSIGNED, (do.take_holder,)),
        Row(states(S.TEARDOWN), always, SAME, (do.take_holder,)),
        # a new pool adopting this RAM disk after a restart
        Row(LIVE_RAMDISK, always, SAME, (do.take_holder,)),
        # the pool reported this holder gone too early: it is not, cancel it again
        Row(GONE, always, SAME, (do.cancel_holder,)),
    ],
    E.HolderStarted: [
        Row(states(S.ASSIGNED), always, S.BOOTING, ()),
        Row(states(S.TEARDOWN), always, SAME, ()),
        Row(LIVE_RAMDISK, always, SAME, ()),
        Row(GONE, always, SAME, (do.cancel_holder,)),
    ],
    E.RamdiskBuilt: [
        Row(states(S.ASSIGNED, S.BOOTING), always, S.BOOTED, (do.take_ramdisk,)),
        Row(states(S.TEARDOWN), always, SAME, (do.take_ramdisk,)),
        Row(LIVE_RAMDISK, always, SAME, (do.take_ramdisk,)),
        Row(GONE, always, SAME, (do.cancel_holder,)),
    ],
    E.HolderEnded: [
        Row(states(S.TEARDOWN), always, S.DESTROYED, (do.forget_holder,)),
        # a RAM disk kept for its readers, outputs home: nothing lost
        Row(states(S.KEPT), always, S.DESTROYED, (do.forget_holder,)),
        Row(GONE, always, SAME, ()),
        # not asked for: the reservation failed or the RAM disk was lost
        Row(HOLDER_IN_FLIGHT, always, S.DESTROYED, (do.lost, do.forget_holder)),
        Row(
            LIVE_RAMDISK,
            always,
            S.DESTROYED,
            (do.drop_offer, do.lost, do.forget_holder),
        ),
    ],
    # stage jobs
    E.StageProgress: [
        Row(
            states(S.STAGING_IN, S.STAGING_OUT, S.STOPPING),
            always,
            SAME,
            (do.progress,),
        ),
        Row(ANY, always, SAME, ()),
    ],
    E.StageEnded: [
        Row(states(S.STAGING_IN), ok, S.READY, (do.stage_over, do.staged_in)),
        # from a producer's RAM disk: read data_in instead, once it is whole
        Row(
            states(S.STAGING_IN),
            from_producer,
            S.ABORTED,
            (do.stage_over, do.note_error, hand.drop_source),
        ),
        Row(
            states(S.STAGING_IN),
            not_ok,
            S.ABORTED,
            (do.stage_over, do.note_error, do.retry_or_give_up),
        ),
        Row(states(S.STOPPING), always, S.ABORTED, (do.stage_over,)),
        # home, and jobs still to read the outputs from the RAM disk: keep it
        Row(states(S.STAGING_OUT), with_consumers, S.KEPT, (do.stage_over, do.home)),
        Row(
            states(S.STAGING_OUT),
            ok,
            S.TEARDOWN,
            (do.stage_over, do.home, do.cancel_holder),
        ),
        Row(
            states(S.STAGING_OUT),
            not_ok,
            S.HELD,
            (do.stage_over, do.note_error, do.retry_or_hold),
        ),
        # the RAM disk went away under the stage: nothing left to do
        Row(states(S.DESTROYED), always, SAME, (do.stage_over,)),
    ],
    # timers and people
    E.InputReleased: [
        Row(
            states(S.INUSE_IN), always, S.INUSE_OUT, (do.purge_input, do.input_released)
        ),
        Row(ANY, always, SAME, ()),
    ],
    E.LateTimeout: [
        Row(ANY, still_waiting, SAME, (do.late,)),
        Row(ANY, always, SAME, ()),
    ],
    E.Retry: [
        Row(states(S.HELD), always, S.STAGING_OUT, (do.manual_retry, do.stage_out))
    ],
    E.TooBig: [Row(ANY, always, SAME, (do.too_big,))],
    E.Withdrawn: [
        Row(ANY, withdrawing, SAME, (do.withdrawn,)),
        Row(ANY, always, SAME, ()),
    ],
    E.OfferTaken: [Row(ANY, always, SAME, (do.offer_taken,))],
    E.Measured: [
        Row(ANY, measure_asked, SAME, (do.sized,)),
        Row(ANY, always, SAME, ()),
    ],
    E.RetryStage: [Row(ANY, always, SAME, (do.retry_now,))],
    # a deadline (machine.py ignores one for a state the job has left)
    E.Timeout: [
        Row(HOLDER_IN_FLIGHT, always, S.TEARDOWN, (do.timed_out, do.cancel_holder)),
        Row(states(S.STAGING_IN), always, S.STOPPING, (do.timed_out, do.stop_stage)),
        Row(
            states(S.STAGING_OUT),
            always,
            S.HELD,
            (do.timed_out, do.abandon_stage, do.held),
        ),
        Row(states(S.STOPPING), always, SAME, (do.stop_stage, do.rearm)),
        Row(states(S.TEARDOWN), always, SAME, (do.cancel_holder, do.rearm)),
        Row(states(S.KEPT), always, S.TEARDOWN, (hand.expired, do.cancel_holder)),
    ],
    E.Release: [
        Row(states(S.HELD), always, S.TEARDOWN, (do.released, do.cancel_holder))
    ],
    # the RAM disk on the compute nodes (the mount sub-machine)
    E.Attached: [Row(ANY, attaching, SAME, (do.attached,)), Row(ANY, always, SAME, ())],
    E.Detached: [Row(ANY, detaching, SAME, (do.detached,)), Row(ANY, always, SAME, ())],
    # the workflow hand-off (handoff.py): a consumer, then its producer
    E.Handoff: [Row(ANY, always, SAME, (hand.take_handoff,))],
    E.ProducerChanged: [Row(ANY, always, SAME, (hand.producer_changed,))],
    E.ConsumerAdded: [Row(ANY, always, SAME, (hand.add_consumer,))],
    E.ConsumerGone: [Row(ANY, always, SAME, (hand.drop_consumer,))],
}

# --- PASS_ROWS: the scheduler pass (thesis Appendix A, Figures 3.2-3.5) ------

RUN = frozenset({J.RUNNING})
ONDECK_OR_RUN = frozenset({J.ONDECK, J.RUNNING})
DEMOTED = frozenset({J.DEMOTED})
GIVE_BACK = states(S.REQUESTED, S.ASSIGNED, S.BOOTING, S.BOOTED, S.READY, S.ABORTED)

PASS_ROWS = [
    # -- its inputs are another job's outputs that will never be whole --
    PassRow(PRE_RUN | RUN, ANY, never_whole, SAME, (hand.never_whole,)),
    # -- a starting job gets its answer (thesis job-start.sh) --
    PassRow(RUN, states(S.INELIGIBLE), pending, SAME, (do.reply,)),
    # ... on a RAM disk its compute nodes attach: attach first
    PassRow(RUN, ANY, attach_now, SAME, (do.attach,)),
    PassRow(RUN, states(S.READY), ready_answer, SAME, (do.reply,)),
    PassRow(RUN, ANY, answer, SAME, (do.reply,)),
    # -- a running job uses what it was given (Figure 3.4) --
    PassRow(RUN, states(S.READY), staged_in, S.INUSE_IN, (do.delay_timer,)),
    PassRow(RUN, states(S.READY, S.BOOTED), out_only, S.INUSE_OUT, ()),
    PassRow(RUN, states(S.STAGING_IN), out_only, S.STOPPING, (do.stop_stage,)),
    PassRow(RUN, states(S.ABORTED), out_only, S.INUSE_OUT, (do.purge_input,)),
    PassRow(RUN, states(S.STAGING_IN), given, S.STOPPING, (do.stop_stage,)),
    PassRow(
        RUN,
        GIVE_BACK | {S.INUSE_IN, S.INUSE_OUT},
        given_unmounted,
        S.TEARDOWN,
        (do.cancel_holder,),
    ),
    # -- sizing from data_in (headroom): measure it first --
    PassRow(PRE_RUN | RUN, states(S.INITIAL), measure_wanted, SAME, (do.measure,)),
    # -- on deck, or held at start for inputs: build and stage (Figure 3.2) --
    PassRow(
        ONDECK_OR_RUN, states(S.INITIAL), advancing_sized, S.REQUESTED, (do.request,)
    ),
    PassRow(
        ONDECK_OR_RUN,
        states(S.BOOTED),
        advancing_with_input,
        S.STAGING_IN,
        (do.stage_in,),
    ),
    PassRow(
        ONDECK_OR_RUN,
        states(S.BOOTED),
        advancing_without_input,
        S.READY,
        (do.staged_in,),
    ),
    PassRow(
        ONDECK_OR_RUN,
        states(S.ABORTED),
        advancing_retry_due,
        S.STAGING_IN,
        (do.stage_in,),
    ),
    PassRow(
        ONDECK_OR_RUN, states(S.DESTROYED), advancing_can_stage, S.INITIAL, (do.reset,)
    ),
    # -- staged while pending: offer the start, so it needs no round trip --
    PassRow(PRE_RUN, states(S.READY), offerable, SAME, (do.offer,)),
    # -- demoted and revoked: give the capacity back (Figure 3.3) --
    PassRow(DEMOTED, states(S.STAGING_IN), revoked, S.STOPPING, (do.stop_stage,)),
    # ... not revoked (yet): keep staging, the job may be on deck again soon
    PassRow(DEMOTED, states(S.STAGING_IN), not_revoked, SAME, ()),
    PassRow(DEMOTED, states(S.READY), offered, SAME, (do.withdraw,)),
    PassRow(DEMOTED, GIVE_BACK, give_back, S.TEARDOWN, (do.cancel_holder,)),
    PassRow(DEMOTED, states(S.DESTROYED), can_stage, S.INITIAL, (do.reset,)),
    # -- the job is over (Figure 3.5, thesis job-finish.sh) --
    # its compute nodes let go of the RAM disk before anything reads or ends it
    PassRow(frozenset(J), ANY, needless_mount, SAME, (do.detach,)),
    PassRow(
        frozenset({J.FINISHED}),
        states(S.INUSE_IN, S.INUSE_OUT, S.ABORTED),
        output_to_stage_out,
        S.STAGING_OUT,
        (do.stage_out,),
    ),
    PassRow(
        frozenset({J.FINISHED}),
        states(S.HELD),
        auto_retry,
        S.STAGING_OUT,
        (do.auto_retry_out, do.stage_out),
    ),
    PassRow(ENDED, states(S.STAGING_IN), always, S.STOPPING, (do.stop_stage,)),
    # ... outputs home, kept for jobs reading them: until the last has them
    PassRow(ENDED, states(S.KEPT), no_consumers, S.TEARDOWN, (do.cancel_holder,)),
    PassRow(
        ENDED,
        GIVE_BACK | {S.INUSE_IN, S.INUSE_OUT},
        unmounted,
        S.TEARDOWN,
        (do.cancel_holder,),
    ),
]
