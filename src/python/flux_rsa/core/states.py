"""Every state machine and flag of an RSA record, in one place.

A record (``record.Record``) is two main axes and a few smaller machines
and flags beside them.  Only the core changes any of them: ``machine.py``
moves the two axes as ``table.py``'s rows say, and the rows' steps
(``steps.py``) change everything else; ``machine.admit`` sets the first
values.  Nothing outside the core writes a record.

The two axes (the thesis's figures):

* ``job_state`` (``JobState``): where the compute job is (Figure 3.1).
  Changed by ``machine.py`` from ``table.JOB_ROWS``.
* ``rsa_state`` (``RsaState``): where its RAM disk is (Figures 3.2-3.5).
  Changed by ``machine.py`` from ``table.EVENT_ROWS`` and
  ``table.PASS_ROWS``; ``state_since`` and ``history`` follow it.

Three sub-machines, each with one in-flight value waiting for an answer:

* ``mount`` (``Mount``): the RAM disk attached on the job's compute nodes
  (a provider whose RAM disk spans RSA nodes).  ``steps.attach``,
  ``attached``, ``detach``, ``detached``; ``mount_path`` with it.
* ``offer`` (``Offer``): a start offered to job-manager before the job
  asks, so a staged job starts without a round trip.  ``offersteps.offer``,
  ``withdraw``, ``withdrawn``, ``drop_offer``, ``offer_taken``,
  ``take_env``, ``starting``.
* ``measure`` (``Measure``): sizing the reservation from data_in.
  ``machine.admit`` (WANTED), ``steps.measure`` (ASKED), ``steps.sized``.

Flags and counters (all changed by ``steps.py`` only):

* ``revoked``: demoted and its capacity wanted back (``revoke``,
  ``unrevoke``; cleared by ``starting``, ``take_env``, ``offer_taken``).
* ``start_pending``: job-manager waits for our start answer (``starting``
  sets it; ``reply``, ``take_env``, ``offer_taken``, ``ended`` clear it).
* ``started``: the job's eventlog says it was released to run
  (``take_env``, ``offer_taken``); ``env``: what it was given (``reply``,
  ``take_env``, ``offer_taken``); ``ranks``: its compute nodes (``starting``).
* ``failed``: no more staging, the job uses its directories (``lost``,
  ``retry_or_give_up``, ``too_big``, ``timed_out``, ``late``).
* ``attempts``, ``retry_pending``: failed tries of the current stage and
  its back-off (``retry_or_give_up``, ``retry_or_hold``, ``retry_now``,
  ``staged_in``, ``home``, ``manual_retry``, ``lost``, ``timed_out``).
* ``output_home``: True once staged out (``home``), False when held or lost
  (``held``, ``retry_or_hold``, ``lost``), None again on a retry
  (``manual_retry``, ``auto_retry_out``).
* ``handoff`` (a consumer: the job whose RAM disk holds its inputs, and
  what is known of it; ``take_handoff``, ``producer_changed``,
  ``drop_source``) and ``consumers`` (a producer: the jobs still to read
  its outputs from its RAM disk; ``add_consumer``, ``drop_consumer``):
  the workflow hand-off (``handoff.py``).
* ``gen`` (``request``) names the current reservation, with ``nodes``,
  ``granted``, ``ramdisk``, ``volume`` (``take_holder``, ``take_ramdisk``,
  ``forget_holder``, ``reset``); ``stage_seq`` names the current stage, with
  ``stage_dir``, ``progress`` (``stage_in``, ``stage_out``, ``stage_over``,
  ``abandon_stage``, ``progress``, ``reset``); pool events of another gen or
  seq are stale and dropped by ``machine.py``.
* ``need``, ``input_bytes`` (``admit``, ``sized``, ``clamp``,
  ``clamp_to_pool``), ``clamped`` (the same), ``restages``
  (``stage_in``), ``reused`` (``staged_in``), ``error`` (many: the last thing
  that went wrong, for the user) only inform.

States marked "in flight" below wait for an answer from the pool or Flux;
after a restart ``inflight.reissue`` asks for it again.
"""

import enum


class JobState(enum.Enum):
    PENDING = "PENDING"  # known, not (yet) expected to start soon
    ONDECK = "ONDECK"  # expected to start soon: build and stage
    DEMOTED = "DEMOTED"  # was on deck, pushed back (or cancelled as pending)
    RUNNING = "RUNNING"  # start requested by job-manager
    FINISHED = "FINISHED"  # ran and ended (any exit status)
    CANCELED = "CANCELED"  # ended without ever running

    def __str__(self):
        return self.value


class RsaState(enum.Enum):
    INITIAL = "INITIAL"  # eligible, nothing held
    INELIGIBLE = "INELIGIBLE"  # not an RSA job (no attributes, too small)
    REQUESTED = "REQUESTED"  # in flight: holder submitted, waiting for capacity
    ASSIGNED = "ASSIGNED"  # in flight: capacity granted, holder starting
    BOOTING = "BOOTING"  # in flight: holder building the RAM disk
    BOOTED = "BOOTED"  # RAM disk exists, empty
    STAGING_IN = "STAGING_IN"  # in flight: data_in -> RAM disk
    STOPPING = "STOPPING"  # in flight: stage-in asked to stop
    ABORTED = "ABORTED"  # stage-in stopped or failed; RAM disk still exists
    READY = "READY"  # inputs staged, waiting for the job to start
    INUSE_IN = "INUSE_IN"  # job running with staged inputs and output area
    INUSE_OUT = "INUSE_OUT"  # job running, RAM disk holds only output
    STAGING_OUT = "STAGING_OUT"  # in flight: RAM disk -> data_out
    HELD = "HELD"  # stage-out failed: RAM disk kept until retry or release
    KEPT = "KEPT"  # outputs home, RAM disk kept for the jobs reading them (hand-off)
    TEARDOWN = "TEARDOWN"  # in flight: holder cancelled, RAM disk going away
    DESTROYED = "DESTROYED"  # RAM disk gone, capacity released

    def __str__(self):
        return self.value


class Mount(enum.Enum):
    """The RAM disk on the job's compute nodes, for a provider whose RAM
    disk they attach (a parallel file system mounted where the job runs)."""

    NONE = ""  # not attached (or no need)
    ATTACHING = "attaching"  # in flight: attach on every compute node
    ATTACHED = "attached"  # mounted on every compute node
    DETACHING = "detaching"  # in flight: detach on every compute node
    FAILED = "failed"  # attach failed: the job uses its directories

    def __str__(self):
        return self.value


class Offer(enum.Enum):
    """A start offered to job-manager while the job is pending and staged
    (stored in the KVS record as its value: "", "made", "withdrawing")."""

    NONE = ""  # nothing offered
    MADE = "made"  # job-manager may start the job with it at once
    WITHDRAWING = "withdrawing"  # in flight: taking it back

    def __str__(self):
        return self.value


class Measure(enum.Enum):
    """Sizing the reservation from data_in's size (``[rsa] headroom``)
    (stored as its value: "", "wanted", "asked")."""

    NONE = ""  # sized: nothing to measure (or measured)
    WANTED = "wanted"  # data_in is to be measured before a reservation
    ASKED = "asked"  # in flight: the pool measures it

    def __str__(self):
        return self.value


J = JobState
S = RsaState

#: states in which the job holds a pool reservation (a holder job exists or
#: is being asked for); leaving them always goes through TEARDOWN
HOLDING = frozenset(
    {
        S.REQUESTED,
        S.ASSIGNED,
        S.BOOTING,
        S.BOOTED,
        S.STAGING_IN,
        S.STOPPING,
        S.ABORTED,
        S.READY,
        S.INUSE_IN,
        S.INUSE_OUT,
        S.STAGING_OUT,
        S.HELD,
        S.KEPT,
        S.TEARDOWN,
    }
)

#: states in which a RAM disk exists and can be handed to a job
RAMDISK_UP = frozenset(
    {S.BOOTED, S.STAGING_IN, S.STOPPING, S.ABORTED, S.READY, S.INUSE_IN, S.INUSE_OUT}
)

#: job-states before the compute job runs
PRE_RUN = frozenset({J.PENDING, J.ONDECK, J.DEMOTED})

#: job-states after which the compute job can never run again
ENDED = frozenset({J.FINISHED, J.CANCELED})

#: mounts in which no compute node holds the RAM disk, nor is being asked to
#: (an image's last writes are in it)
LET_GO = frozenset({Mount.NONE, Mount.FAILED})

#: rsa-states in which nothing is held and nothing is in flight
AT_REST = frozenset({S.INITIAL, S.INELIGIBLE, S.DESTROYED})

#: rsa-states waiting for an answer from the pool (the "in flight" ones
#: above): each is bounded by a deadline and asked again after a restart
IN_FLIGHT = frozenset(
    {
        S.REQUESTED,
        S.ASSIGNED,
        S.BOOTING,
        S.STAGING_IN,
        S.STOPPING,
        S.STAGING_OUT,
        S.TEARDOWN,
    }
)

#: rsa-states bounded by a deadline: the in-flight ones, and a RAM disk
#: kept for its readers (``[rsa] handoff-keep``)
BOUNDED = IN_FLIGHT | {S.KEPT}

#: rsa-states in which a holder is asked for but has no RAM disk yet
HOLDER_IN_FLIGHT = frozenset({S.REQUESTED, S.ASSIGNED, S.BOOTING})

#: rsa-states in which a stage job runs (or is being stopped)
STAGE_RUNS = frozenset({S.STAGING_IN, S.STAGING_OUT, S.STOPPING})

#: rsa-states whose RAM disk may hold outputs the job wrote and that are not
#: yet home: losing it loses them (``outputs.at_risk``); a pool restart keeps it
OUTPUT_KEPT = frozenset(
    {S.INUSE_IN, S.INUSE_OUT, S.STAGING_OUT, S.HELD, S.STOPPING, S.ABORTED}
)
