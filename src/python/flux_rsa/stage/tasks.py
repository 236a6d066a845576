"""What the workers of a copy or a verification are given, and answer.

A run planned before it starts numbers its tasks (workers.run): the
plan's files cut into Batch and Range tasks by make_tasks, ordered for N
workers by interleave.  A copy made while the source is walked (stream.py)
sends the tasks themselves (workers.run_stream): Packed, One and
StreamedRange, each with the Where of its directory.  A worker answers each
task with Done, or RangeDone for a range of a big file (also sent while a
long range is copied, as progress).
"""

from __future__ import annotations

import itertools
from typing import NamedTuple

from . import bigfile

BATCH_FILES = 256
BATCH_BYTES = 32 << 20


class Batch(NamedTuple):
    """Files START to END (not included) of the plan: small ones."""

    start: int
    end: int


class Range(NamedTuple):
    """[off, off + length) of big file INDEX of the plan."""

    index: int
    off: int
    length: int


class Where(NamedTuple):
    """A directory of a streamed copy as a worker finds it: its index D,
    its path REL in the plan, and MOVED, its path under DST while it is
    hidden (None when it is REL)."""

    d: int
    rel: bytes
    moved: bytes | None


class Packed(NamedTuple):
    """Files of one directory for the C loop (a native.Packed); CREATING
    is how files are created (FileWriter.tmpfile, FileWriter.link)."""

    where: Where
    packed: object
    creating: tuple


class One(NamedTuple):
    """One file (a plan.File) copied by the Python loop; CREATING as for
    Packed."""

    where: Where
    file: object
    creating: tuple


class StreamedRange(NamedTuple):
    """A Range of big file FILE (plan index INDEX) copied into its
    temporary file NAME."""

    where: Where
    index: int
    file: object
    name: bytes
    off: int
    length: int


class Done(NamedTuple):
    """FILES files ended and NBYTES bytes copied (or checked) by a task."""

    files: int
    nbytes: int


class RangeDone(NamedTuple):
    """NBYTES more bytes of big file INDEX copied."""

    index: int
    nbytes: int


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
        if full(i + 1 - start, nbytes):
            tasks.append(Batch(start, i + 1))
            start = None
    if start is not None:
        tasks.append(Batch(start, len(files)))
    return tasks


def full(nfiles, nbytes):
    """Whether a batch of NFILES files of NBYTES bytes is complete."""
    return nfiles >= BATCH_FILES or nbytes >= BATCH_BYTES


def interleave(tasks, n):
    """TASKS reordered for N workers pulling from one queue: cut into N
    runs of consecutive tasks, then one task of each run in turn.  Workers
    thus start in N far-apart parts of the tree, mostly in different
    directories: two processes creating files in one directory queue for
    its lock (doc/stage.md says what that was worth)."""
    if n < 2 or not tasks:
        return tasks
    k = -(-len(tasks) // n)
    return alternate([tasks[i:i + k] for i in range(0, len(tasks), k)])


def alternate(runs):
    """One task of each of RUNS (lists) in turn, until all are taken."""
    return [t for turn in itertools.zip_longest(*runs) for t in turn if t is not None]
