"""The two axes of an RSA record: where the job is, and where its RAM disk is.

job-state follows the compute job (thesis Figure 3.1); rsa-state follows the
RAM disk (thesis Figures 3.2-3.5).  States marked "in flight" wait for a
completion event from the pool; the others are decided by the table in
``table.py``.
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

#: rsa-states in which nothing is held and nothing is in flight
AT_REST = frozenset({S.INITIAL, S.INELIGIBLE, S.DESTROYED})
