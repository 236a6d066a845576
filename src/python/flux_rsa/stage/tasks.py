"""What the workers of a copy or a verification are given, and answer.

A run planned before it starts numbers its tasks (workers.run): the
plan's files cut into Batch and Range tasks by make_tasks, ordered for N
workers by interleave.  A copy made while the source is walked (stream.py)
sends the tasks themselves (workers.run_stream): Packed, One and
StreamedRange, each with the Where of its directory.  A worker answers each
task with Done, or RangeDone for a range of a big file (also sent while a
long range is copied, as progress).
"""

import itertools
from collections import namedtuple

from . import bigfile

BATCH_FILES = 256
BATCH_BYTES = 32 << 20


class Batch(namedtuple("Batch", "start end")):
    """Files START to END (not included) of the plan: small ones."""

    __slots__ = ()


class Range(namedtuple("Range", "index off length")):
    """[off, off + length) of big file INDEX of the plan."""

    __slots__ = ()


class Where(namedtuple("Where", "d rel moved")):
    """A directory of a streamed copy as a worker finds it: its index D,
    its path REL in the plan, and MOVED, its path under DST while it is
    hidden (None when it is REL)."""

    __slots__ = ()


class Packed(namedtuple("Packed", "where packed creating")):
    """Files of one directory for the C loop (a native.Packed); CREATING
    is how files are created (FileWriter.tmpfile, FileWriter.link)."""

    __slots__ = ()


class One(namedtuple("One", "where file creating")):
    """One file (a plan.File) copied by the Python loop; CREATING as for
    Packed."""

    __slots__ = ()


class StreamedRange(namedtuple("StreamedRange", "where index file name off length")):
    """A Range of big file FILE (plan index INDEX) copied into its
    temporary file NAME."""

    __slots__ = ()


class Done(namedtuple("Done", "files nbytes")):
    """FILES files ended and NBYTES bytes copied (or checked) by a task."""

    __slots__ = ()


class RangeDone(namedtuple("RangeDone", "index nbytes")):
    """NBYTES more bytes of big file INDEX copied."""

    __slots__ = ()


def make_tasks(files, whole=lambda f: False):
    """Split FILES (plan order) into Batch and Range tasks; a big file for
    which WHOLE(file) is true is one Range."""
    tasks = []
    start = None
    nbytes = 0
    for i, f in enumerate(files):
        if f.skip:
            if start is None:
                start = i
            continue
        if f.size >= bigfile.BIG:
            if start is not None:
                tasks.append(Batch(start, i))
                start = None
            for off, n in bigfile.pieces(0, f.size, whole(f)):
                tasks.append(Range(i, off, n))
            continue
        if start is None:
            start, nbytes = i, 0
        nbytes += f.size
        if i + 1 - start >= BATCH_FILES or nbytes >= BATCH_BYTES:
            tasks.append(Batch(start, i + 1))
            start = None
    if start is not None:
        tasks.append(Batch(start, len(files)))
    return tasks


def interleave(tasks, n):
    """TASKS reordered for N workers pulling from one queue: cut into N
    runs of consecutive tasks, then one task of each run in turn.  Workers
    thus start in N far-apart parts of the tree, mostly in different
    directories: two processes creating files in one directory queue for
    its lock (doc/stage.md says what that was worth)."""
    if n < 2 or not tasks:
        return tasks
    k = -(-len(tasks) // n)
    return alternate([tasks[i : i + k] for i in range(0, len(tasks), k)])


def alternate(runs):
    """One task of each of RUNS (lists) in turn, until all are taken."""
    return [t for turn in itertools.zip_longest(*runs) for t in turn if t is not None]
