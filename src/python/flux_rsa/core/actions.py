"""Actions the state machine asks for: values the service carries out.

Every action is idempotent on the service side (asking twice for the same
holder generation or stage sequence number does the work once), and every
one that starts something in the pool is answered later by an event.
"""

from dataclasses import dataclass
from typing import Optional

from flux_rsa.core.record import Env


@dataclass(frozen=True)
class Action:
    jobid: int


@dataclass(frozen=True)
class RequestCapacity(Action):
    """Submit holder generation ``gen`` asking for ``need`` bytes."""

    gen: int
    need: int
    userid: int
    prefer: tuple = ()  # hosts holding a staged copy of data_in (set by the service: core.reuse)
    images: int = 0  # file-system images, one per compute node (0: none)


@dataclass(frozen=True)
class CancelHolder(Action):
    """Cancel holder generation ``gen``: its RAM disk is destroyed."""

    gen: int


@dataclass(frozen=True)
class StartStage(Action):
    """Run stage ``seq`` as the job owner on the holder's nodes."""

    seq: int
    direction: str  # "in" | "out"
    src: str
    dst: str
    method: Optional[str]  # None (copy), "tar", or a user script path
    userid: int
    verify: str
    nodes: tuple
    size: int = 0  # bytes expected (the reservation), for estimates and simulation
    replica: Optional[
        str
    ] = None  # a staged copy of src on the node (set by the service: core.reuse)
    #: src is a producer's RAM disk on another RSA node: the volume to mount
    #: there (set by the service, from the producer's record)
    producer: Optional[dict] = None
    #: the compute node lost with the RAM disk's image mounted (its hold is
    #: broken and the image checked before it is read)
    reclaim: Optional[str] = None


@dataclass(frozen=True)
class Measure(Action):
    """Measure ``path`` (data_in) as the job owner; answered by Measured."""

    path: str
    userid: int
    seq: int = 1


@dataclass(frozen=True)
class Attach(Action):
    """Attach the RAM disk ``volume`` at ``root``/``name`` on each of the
    job's compute nodes ``ranks``; answered by Attached."""

    ranks: tuple
    root: str
    name: str
    volume: dict


@dataclass(frozen=True)
class Detach(Action):
    """Detach ``root``/``name`` from each of ``ranks``; answered by Detached."""

    ranks: tuple
    root: str
    name: str


@dataclass(frozen=True)
class StopStage(Action):
    seq: int


@dataclass(frozen=True)
class PurgeInput(Action):
    """Drop the staged inputs; leave a link to data_in in their place."""

    path: str
    data_in: Optional[str]
    userid: int
    nodes: tuple
    #: where the job's compute node holds the RAM disk's image: the purge
    #: runs there (``path`` as that node sees it), else on ``nodes[0]``
    ranks: tuple = ()


@dataclass(frozen=True)
class ReplyStart(Action):
    """Answer job-manager's start request; env None: not an RSA job."""

    env: Optional[Env]


@dataclass(frozen=True)
class Offer(Action):
    """Staged while pending: if the job reaches RUN while this stands,
    job-manager starts it at once with ``env`` (no start round trip)."""

    env: Env


@dataclass(frozen=True)
class Withdraw(Action):
    """Take the offer back; answered by Withdrawn (false: the job already
    started with it)."""


@dataclass(frozen=True)
class StartTimer(Action):
    """After ``seconds`` deliver the timer's event: "delay" InputReleased,
    "late" LateTimeout, "retry" RetryStage, "timeout" Timeout(state, since).
    A new timer of the same name replaces the job's old one."""

    name: str
    seconds: float
    state: Optional[str] = None  # "timeout": the rsa-state it bounds
    since: float = 0.0  # "timeout": when that state was entered


@dataclass(frozen=True)
class LockIn(Action):
    """Protect a staged job from being pushed back (raise its urgency)."""


@dataclass(frozen=True)
class PostEvent(Action):
    """Post ``rsa-<name>`` to the job's eventlog."""

    name: str
    context: dict


@dataclass(frozen=True)
class RaiseException(Action):
    """A fatal exception of ``type`` on the job, saying ``note``."""

    type: str
    note: str
