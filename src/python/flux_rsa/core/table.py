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
is a named function of ``guards.py`` whose name reads as the condition it
checks.
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
from flux_rsa.core import guards as g
from flux_rsa.core import handoffsteps as hand
from flux_rsa.core import offersteps as off
from flux_rsa.core import steps as do
from flux_rsa.core.states import (
    ENDED,
    HOLDER_IN_FLIGHT,
    HOLDING,
    PRE_RUN,
    JobState,
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
    E.OnDeck: [Row(ANY, g.always, SAME, (do.unrevoke,))],
    E.Demoted: [Row(ANY, g.always, SAME, ())],
    E.Revoke: [Row(ANY, g.always, SAME, (do.revoke,))],
    E.Starting: [Row(ANY, g.always, SAME, (do.starting,))],
    E.Started: [Row(ANY, g.always, SAME, (do.take_env,))],
    E.Finished: [Row(ANY, g.always, SAME, (do.ended,))],
    E.Canceled: [Row(ANY, g.always, SAME, (do.ended,))],
    # the holder: alloc -> start -> RAM disk built -> ... -> ended
    E.HolderAllocated: [
        Row(states(S.REQUESTED), g.always, S.ASSIGNED, (do.take_holder,)),
        Row(states(S.TEARDOWN), g.always, SAME, (do.take_holder,)),
        # a new pool adopting this RAM disk after a restart
        Row(LIVE_RAMDISK, g.always, SAME, (do.take_holder,)),
        # the pool reported this holder gone too early: it is not, cancel it again
        Row(GONE, g.always, SAME, (do.cancel_holder,)),
    ],
    E.HolderStarted: [
        Row(states(S.ASSIGNED), g.always, S.BOOTING, ()),
        Row(states(S.TEARDOWN), g.always, SAME, ()),
        Row(LIVE_RAMDISK, g.always, SAME, ()),
        Row(GONE, g.always, SAME, (do.cancel_holder,)),
    ],
    E.RamdiskBuilt: [
        Row(states(S.ASSIGNED, S.BOOTING), g.always, S.BOOTED, (do.take_ramdisk,)),
        Row(states(S.TEARDOWN), g.always, SAME, (do.take_ramdisk,)),
        Row(LIVE_RAMDISK, g.always, SAME, (do.take_ramdisk,)),
        Row(GONE, g.always, SAME, (do.cancel_holder,)),
    ],
    E.HolderEnded: [
        Row(states(S.TEARDOWN), g.always, S.DESTROYED, (do.forget_holder,)),
        # a RAM disk kept for its readers, outputs home: nothing lost
        Row(states(S.KEPT), g.always, S.DESTROYED, (do.forget_holder,)),
        Row(GONE, g.always, SAME, ()),
        # not asked for: the reservation failed or the RAM disk was lost
        Row(HOLDER_IN_FLIGHT, g.always, S.DESTROYED, (do.lost, do.forget_holder)),
        Row(
            LIVE_RAMDISK,
            g.always,
            S.DESTROYED,
            (off.drop_offer, do.lost, do.forget_holder),
        ),
    ],
    # stage jobs
    E.StageProgress: [
        Row(
            states(S.STAGING_IN, S.STAGING_OUT, S.STOPPING),
            g.always,
            SAME,
            (do.progress,),
        ),
        Row(ANY, g.always, SAME, ()),
    ],
    E.StageEnded: [
        Row(states(S.STAGING_IN), g.ok, S.READY, (do.stage_over, do.staged_in)),
        # from a producer's RAM disk: read data_in instead, once it is whole
        Row(
            states(S.STAGING_IN),
            g.from_producer,
            S.ABORTED,
            (do.stage_over, do.note_error, hand.drop_source),
        ),
        Row(
            states(S.STAGING_IN),
            g.not_ok,
            S.ABORTED,
            (do.stage_over, do.note_error, do.retry_or_give_up),
        ),
        Row(states(S.STOPPING), g.always, S.ABORTED, (do.stage_over,)),
        # home, and jobs still to read the outputs from the RAM disk: keep it
        Row(states(S.STAGING_OUT), g.with_consumers, S.KEPT, (do.stage_over, do.home)),
        Row(
            states(S.STAGING_OUT),
            g.ok,
            S.TEARDOWN,
            (do.stage_over, do.home, do.cancel_holder),
        ),
        Row(
            states(S.STAGING_OUT),
            g.not_ok,
            S.HELD,
            (do.stage_over, do.note_error, do.retry_or_hold),
        ),
        # the RAM disk went away under the stage: nothing left to do
        Row(states(S.DESTROYED), g.always, SAME, (do.stage_over,)),
    ],
    # timers and people
    E.InputReleased: [
        Row(
            states(S.INUSE_IN),
            g.always,
            S.INUSE_OUT,
            (do.purge_input, do.input_released),
        ),
        Row(ANY, g.always, SAME, ()),
    ],
    E.LateTimeout: [
        Row(ANY, g.still_waiting, SAME, (do.late,)),
        Row(ANY, g.always, SAME, ()),
    ],
    E.Retry: [
        Row(states(S.HELD), g.always, S.STAGING_OUT, (do.manual_retry, do.stage_out))
    ],
    # more than the whole pool: a default shrinks to fit, a size asked for fails
    E.TooBig: [
        Row(ANY, g.default_size, SAME, (do.clamp,)),
        Row(ANY, g.always, SAME, (do.too_big,)),
    ],
    E.Withdrawn: [
        Row(ANY, g.withdrawing, SAME, (off.withdrawn,)),
        Row(ANY, g.always, SAME, ()),
    ],
    E.OfferTaken: [Row(ANY, g.always, SAME, (off.offer_taken,))],
    E.Measured: [
        Row(ANY, g.measure_asked, SAME, (do.sized,)),
        Row(ANY, g.always, SAME, ()),
    ],
    E.RetryStage: [Row(ANY, g.always, SAME, (do.retry_now,))],
    # a deadline (machine.py ignores one for a state the job has left)
    E.Timeout: [
        Row(HOLDER_IN_FLIGHT, g.always, S.TEARDOWN, (do.timed_out, do.cancel_holder)),
        Row(states(S.STAGING_IN), g.always, S.STOPPING, (do.timed_out, do.stop_stage)),
        Row(
            states(S.STAGING_OUT),
            g.always,
            S.HELD,
            (do.timed_out, do.abandon_stage, do.held),
        ),
        Row(states(S.STOPPING), g.always, SAME, (do.stop_stage, do.rearm)),
        Row(states(S.TEARDOWN), g.always, SAME, (do.cancel_holder, do.rearm)),
        Row(states(S.KEPT), g.always, S.TEARDOWN, (hand.expired, do.cancel_holder)),
    ],
    E.Release: [
        Row(states(S.HELD), g.always, S.TEARDOWN, (do.released, do.cancel_holder))
    ],
    # the RAM disk on the compute nodes (the mount sub-machine)
    E.Attached: [
        Row(ANY, g.attaching, SAME, (do.attached,)),
        Row(ANY, g.always, SAME, ()),
    ],
    E.Detached: [
        Row(ANY, g.detaching, SAME, (do.detached,)),
        Row(ANY, g.always, SAME, ()),
    ],
    # the workflow hand-off (handoff.py): a consumer, then its producer
    E.Handoff: [Row(ANY, g.always, SAME, (hand.take_handoff,))],
    E.ProducerChanged: [Row(ANY, g.always, SAME, (hand.producer_changed,))],
    E.ConsumerAdded: [Row(ANY, g.always, SAME, (hand.add_consumer,))],
    E.ConsumerGone: [Row(ANY, g.always, SAME, (hand.drop_consumer,))],
}

# --- PASS_ROWS: the scheduler pass (thesis Appendix A, Figures 3.2-3.5) ------

RUN = frozenset({J.RUNNING})
ONDECK_OR_RUN = frozenset({J.ONDECK, J.RUNNING})
DEMOTED = frozenset({J.DEMOTED})
GIVE_BACK = states(S.REQUESTED, S.ASSIGNED, S.BOOTING, S.BOOTED, S.READY, S.ABORTED)

PASS_ROWS = [
    # -- its inputs are another job's outputs that will never be whole --
    PassRow(PRE_RUN | RUN, ANY, g.never_whole, SAME, (hand.never_whole,)),
    # -- a starting job gets its g.answer (thesis job-start.sh) --
    PassRow(RUN, states(S.INELIGIBLE), g.pending, SAME, (do.reply,)),
    # ... on a RAM disk its compute nodes attach: attach first
    PassRow(RUN, ANY, g.attach_now, SAME, (do.attach,)),
    PassRow(
        RUN, states(S.STAGING_IN), g.stage_before_attach, S.STOPPING, (do.stop_stage,)
    ),
    PassRow(RUN, states(S.READY), g.ready_answer, SAME, (do.reply,)),
    PassRow(RUN, ANY, g.answer, SAME, (do.reply,)),
    # -- a running job uses what it was g.given (Figure 3.4) --
    PassRow(RUN, states(S.READY), g.staged_in, S.INUSE_IN, (do.delay_timer,)),
    PassRow(RUN, states(S.READY, S.BOOTED), g.out_only, S.INUSE_OUT, ()),
    PassRow(RUN, states(S.STAGING_IN), g.out_only, S.STOPPING, (do.stop_stage,)),
    PassRow(RUN, states(S.ABORTED), g.out_only, S.INUSE_OUT, (do.purge_input,)),
    PassRow(RUN, states(S.STAGING_IN), g.given, S.STOPPING, (do.stop_stage,)),
    PassRow(
        RUN,
        GIVE_BACK | {S.INUSE_IN, S.INUSE_OUT},
        g.given_unmounted,
        S.TEARDOWN,
        (do.cancel_holder,),
    ),
    # -- sizing from data_in (headroom): measure it first --
    PassRow(PRE_RUN | RUN, states(S.INITIAL), g.measure_wanted, SAME, (do.measure,)),
    # -- a default the pool can never hold: the most it can --
    PassRow(
        PRE_RUN | RUN,
        states(S.INITIAL),
        g.more_than_the_pool,
        SAME,
        (do.clamp_to_pool,),
    ),
    # -- on deck, or held at start for inputs: build and stage (Figure 3.2) --
    PassRow(
        ONDECK_OR_RUN, states(S.INITIAL), g.advancing_sized, S.REQUESTED, (do.request,)
    ),
    PassRow(
        ONDECK_OR_RUN,
        states(S.BOOTED),
        g.advancing_with_input,
        S.STAGING_IN,
        (do.stage_in,),
    ),
    PassRow(
        ONDECK_OR_RUN,
        states(S.BOOTED),
        g.advancing_without_input,
        S.READY,
        (do.staged_in,),
    ),
    PassRow(
        ONDECK_OR_RUN,
        states(S.ABORTED),
        g.advancing_retry_due,
        S.STAGING_IN,
        (do.stage_in,),
    ),
    PassRow(
        ONDECK_OR_RUN,
        states(S.DESTROYED),
        g.advancing_can_stage,
        S.INITIAL,
        (do.reset,),
    ),
    # -- staged while g.pending: offer the start, so it needs no round trip --
    PassRow(PRE_RUN, states(S.READY), g.offerable, SAME, (off.offer,)),
    # -- demoted and g.revoked: give the capacity back (Figure 3.3) --
    PassRow(DEMOTED, states(S.STAGING_IN), g.revoked, S.STOPPING, (do.stop_stage,)),
    # ... not g.revoked (yet): keep staging, the job may be on deck again soon
    PassRow(DEMOTED, states(S.STAGING_IN), g.not_revoked, SAME, ()),
    PassRow(DEMOTED, states(S.READY), g.offered, SAME, (off.withdraw,)),
    PassRow(DEMOTED, GIVE_BACK, g.give_back, S.TEARDOWN, (do.cancel_holder,)),
    PassRow(DEMOTED, states(S.DESTROYED), g.can_stage, S.INITIAL, (do.reset,)),
    # -- the job is over (Figure 3.5, thesis job-finish.sh) --
    # its compute nodes let go of the RAM disk before anything reads or ends it
    PassRow(frozenset(J), ANY, g.needless_mount, SAME, (do.detach,)),
    PassRow(
        frozenset({J.FINISHED}),
        states(S.INUSE_IN, S.INUSE_OUT, S.ABORTED),
        g.output_to_stage_out,
        S.STAGING_OUT,
        (do.stage_out,),
    ),
    PassRow(
        frozenset({J.FINISHED}),
        states(S.HELD),
        g.auto_retry,
        S.STAGING_OUT,
        (do.auto_retry_out, do.stage_out),
    ),
    PassRow(ENDED, states(S.STAGING_IN), g.always, S.STOPPING, (do.stop_stage,)),
    # ... outputs home, kept for jobs reading them: until the last has them
    PassRow(ENDED, states(S.KEPT), g.no_consumers, S.TEARDOWN, (do.cancel_holder,)),
    PassRow(
        ENDED,
        GIVE_BACK | {S.INUSE_IN, S.INUSE_OUT},
        g.unmounted,
        S.TEARDOWN,
        (do.cancel_holder,),
    ),
]
