"""Events the state machine consumes: small frozen values with a timestamp.

The service turns job-manager journal entries, pool notifications, timers and
user requests into these.  Events from the pool name the reservation
generation (``gen``) or stage sequence number (``seq``) they belong to, so a
late completion of an abandoned holder or stage is recognised and dropped.
"""

from dataclasses import dataclass
from typing import Optional

from flux_rsa.core.record import Env, Progress


@dataclass(frozen=True)
class Event:
    t: float


# --- the compute job -------------------------------------------------------


@dataclass(frozen=True)
class OnDeck(Event):
    """The job is expected to start soon (on-deck policy)."""


@dataclass(frozen=True)
class Demoted(Event):
    """The job left the on-deck set (priority change, newer urgent job)."""


@dataclass(frozen=True)
class Revoke(Event):
    """A demoted job's capacity is wanted back (on-deck policy)."""


@dataclass(frozen=True)
class Starting(Event):
    """job-manager is about to start the job and asks what to give it."""

    ranks: tuple = ()  # its compute nodes (broker ranks)


@dataclass(frozen=True)
class Finished(Event):
    """The job ran and ended; its compute nodes are already released."""


@dataclass(frozen=True)
class Canceled(Event):
    """The job ended without running (cancel or exception while pending)."""


# --- the pool --------------------------------------------------------------


@dataclass(frozen=True)
class HolderAllocated(Event):
    gen: int
    nodes: tuple
    granted: int


@dataclass(frozen=True)
class HolderStarted(Event):
    gen: int


@dataclass(frozen=True)
class RamdiskBuilt(Event):
    gen: int
    path: str
    volume: Optional[
        dict
    ] = None  # what compute nodes need to attach it (None: simulated)


@dataclass(frozen=True)
class Attached(Event):
    """The RAM disk was attached on every compute node of the job (or not:
    ``error`` names the node and why; nothing stays attached then)."""

    ok: bool
    error: Optional[str] = None


@dataclass(frozen=True)
class Detached(Event):
    """The RAM disk was detached from the job's compute nodes (``error``: a
    node where it could not be; ``lost``: those of them that are lost, whose
    hold on an image only a stage may break; ``left``: those that let go,
    whose hold a stage may break if it is still written there: the store
    could not be reached to remove it)."""

    ok: bool
    error: Optional[str] = None
    lost: tuple = ()
    left: tuple = ()


@dataclass(frozen=True)
class HolderEnded(Event):
    """The holder job is gone: its RAM disk is destroyed, capacity free."""

    gen: int
    error: Optional[str] = None


@dataclass(frozen=True)
class StageProgress(Event):
    seq: int
    progress: Progress


@dataclass(frozen=True)
class StageEnded(Event):
    seq: int
    ok: bool
    error: Optional[str] = None
    reused: Optional[str] = None  # stage-in copied from this staged replica


@dataclass(frozen=True)
class Measured(Event):
    """data_in was measured (as the job owner) for sizing the reservation."""

    ok: bool
    nbytes: int = 0
    error: Optional[str] = None


@dataclass(frozen=True)
class Withdrawn(Event):
    """job-manager took the start offer back: the job never used it."""


@dataclass(frozen=True)
class OfferTaken(Event):
    """job-manager's answer to Withdraw: too late, the job started with the
    offer (its rsa-ready and start may reach us later)."""


# --- timers and people -----------------------------------------------------


@dataclass(frozen=True)
class InputReleased(Event):
    """Inputs may go: rsa.delay elapsed, or `flux rsa release-input`."""

    why: str = "delay"


@dataclass(frozen=True)
class LateTimeout(Event):
    """A job held for its stage-in (on_late=wait) has waited long enough."""


@dataclass(frozen=True)
class RetryStage(Event):
    """The back-off after a failed stage is over: try it again."""


@dataclass(frozen=True)
class Timeout(Event):
    """The job has been in ``state`` (entered at ``since``) too long."""

    state: str
    since: float


@dataclass(frozen=True)
class TooBig(Event):
    """The job needs more RAM disk than the whole pool can ever hold."""

    largest: int  # bytes the pool can ever give one job


@dataclass(frozen=True)
class Retry(Event):
    """`flux rsa retry`: stage out a HELD job again."""


@dataclass(frozen=True)
class Release(Event):
    """`flux rsa release`: give up a HELD job's RAM disk explicitly."""


@dataclass(frozen=True)
class Started(Event):
    """The job was released to run; ``env`` is what its ``rsa-ready`` event
    says it was given (None: the eventlog has no rsa-ready, keep ours).

    Normally what ReplyStart offered; different when job-manager could not
    reach the service in time and started the job on persistent storage.
    """

    env: Optional[Env] = None


# --- the workflow hand-off (handoff.py) ------------------------------------


@dataclass(frozen=True)
class Handoff(Event):
    """This job's inputs are the outputs of job ``producer``, final on its
    RAM disk at ``area`` on RSA node ``node``: its wait is over; or, while
    ``writing``, to be final there once that job has ended and let go of it."""

    producer: int
    name: str  # the producer's jobid as people write it (f58)
    area: str
    node: str
    remote: bool = False  # its RAM disk is a volume other RSA nodes can mount
    writing: bool = False  # the producer's outputs are not final there yet


@dataclass(frozen=True)
class ProducerChanged(Event):
    """What is known of this job's producer changed (``handoff.view``)."""

    on_ramdisk: bool
    verdict: object  # after_staged(producer): None, True or why never
    writing: bool = False  # its outputs are still being written there


@dataclass(frozen=True)
class ConsumerAdded(Event):
    """Job ``consumer`` will read this job's outputs from its RAM disk."""

    consumer: int


@dataclass(frozen=True)
class ConsumerGone(Event):
    """Job ``consumer`` no longer needs this job's RAM disk."""

    consumer: int
