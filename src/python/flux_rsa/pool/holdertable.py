"""A holder's life as a table: what the service has been told of it.

A holder (``holders.py``) is the pool subjob whose life is a RAM disk's
life.  It gathers facts about its job (its R, that it started, the
``built`` line of its RAM-disk command, that the job ended, the sweep
after it) and after every new fact calls ``advance``, which applies the
rows below, first matching row wins, until none matches (as the core's
PASS_ROWS are applied).  A state says what the service has been told:

    PENDING    submitted, waiting for capacity: nothing told yet
    ALLOCATED  holder-alloc told: Fluxion gave it memory (its R is known)
    STARTED    holder-start told: its RAM-disk command runs
    BUILT      ramdisk-built told: the RAM disk exists
    SWEEPING   the job ended and may have left (part of) its RAM disk
               behind: a sweep removes it on its nodes that are up
    ENDED      holder-end told: nothing more happens

States only go forward, and a notification is a step of the rows that
enter one state, so each goes out once, in this order: holder-alloc,
holder-start, ramdisk-built, holder-end.  A fact that comes early waits for
the state before it (a ``start`` event that comes before the R is told
after holder-alloc).  A holder may end in any live state: one canceled
while pending tells holder-end alone.

Guards are named questions about the holder's facts; steps call the
holder.  No Flux here: a test drives the table with a plain object.
"""

import enum
from collections import namedtuple

from flux_rsa.pool import protocol


class State(enum.Enum):
    PENDING = "pending"
    ALLOCATED = "allocated"
    STARTED = "started"
    BUILT = "built"
    SWEEPING = "sweeping"
    ENDED = "ended"


S = State
LIVE = frozenset({S.PENDING, S.ALLOCATED, S.STARTED, S.BUILT})

Row = namedtuple("Row", "states guard to steps")


def states(*names):
    return frozenset(names)


# --- guards: named questions about the holder's facts ----------------------


def allocated(h):
    """Fluxion gave it capacity: its R is known."""
    return h.R is not None


def started(h):
    return h.started


def built(h):
    """Its RAM disk exists (a simulated holder's as soon as it started)."""
    return h.path is not None


def ended_clean(h):
    """The job ended and left nothing behind (or kept its RAM disk)."""
    return h.ended and not h.leftovers()


def ended_leaving_reachable(h):
    """The job ended and may have left part of a RAM disk behind, and a
    sweep can reach one of its nodes at least."""
    return h.ended and h.leftovers() and bool(h.reachable())


def ended_leaving_unreachable(h):
    """The job ended and may have left part of a RAM disk behind, only on
    nodes that are down: nothing can run there."""
    return h.ended and h.leftovers() and not h.reachable()


def swept(h):
    return h.sweeper.ended


# --- steps: what a transition does, in order --------------------------------


def tell_alloc(h):
    h.tell(protocol.HOLDER_ALLOC, nodes=h.nodes, granted=h.granted)


def tell_start(h):
    h.tell(protocol.HOLDER_START)


def take_over_kept(h):
    """An adopting holder now holds its kept RAM disk: no longer kept."""
    h.take_over_kept()


def tell_built(h):
    h.tell(protocol.RAMDISK_BUILT, path=h.path, volume=h.volume())


def note_unreachable(h):
    """Remember, for holder-end's error, the nodes no sweep can reach."""
    h.note_unreachable()


def sweep(h):
    """Run a sweep on the nodes that are up; its end is the holder's."""
    h.sweep()


def give_up_kept(h):
    """An adopting holder that ended before it took its kept RAM disk over
    (and was not kept itself): nobody holds that RAM disk, discard it."""
    h.give_up_kept()


def tell_end(h):
    h.tell(protocol.HOLDER_END, error=h.error(), kept=h.kept_path())


def forget(h):
    """The agent keeps it a while for `list` and repeated requests."""
    h.forget()


END = (give_up_kept, tell_end, forget)

# --- the table: (states, guard) -> (state', steps), first matching row wins --

ROWS = [
    Row(states(S.PENDING), allocated, S.ALLOCATED, (tell_alloc,)),
    Row(states(S.ALLOCATED), started, S.STARTED, (tell_start,)),
    Row(states(S.STARTED), built, S.BUILT, (take_over_kept, tell_built)),
    Row(LIVE, ended_clean, S.ENDED, END),
    Row(LIVE, ended_leaving_reachable, S.SWEEPING, (note_unreachable, sweep)),
    Row(LIVE, ended_leaving_unreachable, S.ENDED, (note_unreachable, *END)),
    Row(states(S.SWEEPING), swept, S.ENDED, END),
]


def advance(h):
    """Apply the first matching row until none matches; returns the rows
    applied, in order.  ``h.state`` moves before the row's steps run (a
    step may ask whether the holder is done)."""
    applied = []
    while True:
        row = next((r for r in ROWS if h.state in r.states and r.guard(h)), None)
        if row is None:
            return applied
        h.state = row.to
        for step in row.steps:
            step(h)
        applied.append(row)
