"""The worker's side of a copy: what one forked worker does with the tasks
it is handed (tasks.py).

Small files go in batches: by the C loop (native.BatchCopier) where it is
built, else by filewrite.FileWriter, the source reads of the batch
announced first (posix_fadvise(WILLNEED)) so that one worker keeps many
reads in flight.  A range of a big file is copied by bigfile.RangeCopier
into the file's temporary file, which the parent names when its last
range is in.
"""

import os

from . import bigfile, fsutil, native
from . import plan as planmod
from . import tasks as tk
from .errors import DESTINATION_ERRNOS, EXIT_FAILED, StageError, from_oserror


class CopyWorker:
    """Copies tasks of COPIER (a copy.Copier, as it was when this worker
    was forked); SEND(msg) reports to the parent while a task runs."""

    def __init__(self, copier, send):
        os.umask(0)
        copier.names.forked()
        self.plan = plan = copier.plan
        self.dst = copier.dst
        self.tasks = copier.tasks
        self.writer = copier.writer
        self.ranges = copier.ranges
        self.temporary = copier.big.tmp  # big file index -> its temporary name
        self.moved = copier.moved  # directory index -> its path while hidden
        self.src_in_memory = copier.src_in_memory
        self.send = send
        self.sdirs = (
            fsutil.DirsByIndex(copier.src_root, plan.dir_rel)
            if copier.src_root >= 0
            else None
        )
        self.ddirs = fsutil.DirsByIndex(copier.dst_root, copier.dst_rel)
        self.native = None  # the C loop's native.BatchCopier, if built
        if copier.lib is not None and self.sdirs is not None:
            self.native = native.BatchCopier(
                copier.lib, self.writer, self.src_in_memory
            )
        self.archives = {}  # archive index -> its open descriptor
        self.told = False  # a streamed run: how files are created is known

    def close(self):
        """Close the directories this worker keeps open."""
        for cache in (self.sdirs, self.ddirs):
            if cache is not None:
                cache.close()

    def numbered(self, idx):
        """Task IDX of the copier's list (a Batch or a Range)."""
        task = self.tasks[idx]
        if isinstance(task, tk.Batch):
            return self.batch(task.start, task.end)
        return self.range(
            task.index,
            self.plan.files[task.index],
            self.temporary[task.index],
            task.off,
            task.length,
        )

    def streamed(self, task):
        """A task of stream.Stream: Packed, One or StreamedRange."""
        where = task.where
        self._learn(where)
        if isinstance(task, tk.StreamedRange):
            return self.range(task.index, task.file, task.name, task.off, task.length)
        if not self.told:
            # how files are created, found by the parent after the fork
            self.writer.tmpfile, self.writer.link = task.creating
            self.told = True
        if isinstance(task, tk.Packed):
            packed = task.packed
            self.native.copy_packed(
                packed,
                self.sdirs.get(where.d),
                self.ddirs.get(where.d),
                lambda k: self.copy_one(
                    planmod.new_file(where.d, *packed.fields(k), False)
                ),
                where.d in self.moved,
            )
            return tk.Done(packed.n, packed.nbytes)
        self.copy_one(task.file)
        return tk.Done(1, task.file.size)

    def _learn(self, where):
        """Directory WHERE, found by the walk after this worker was forked:
        its path in this worker's plan, and under DST while hidden."""
        dirs = self.plan.dirs
        if where.d >= len(dirs):
            dirs.extend([None] * (where.d + 1 - len(dirs)))
        if dirs[where.d] is None:
            dirs[where.d] = planmod.Dir()
            dirs[where.d].rel = where.rel
        if where.moved is not None:
            self.moved[where.d] = where.moved

    def _open_src(self, f):
        """Open a file's source: its own file, or the archive holding it."""
        try:
            if f.src is None:
                return os.open(f.name, fsutil.OPEN_FLAGS, dir_fd=self.sdirs.get(f.d))
            ai = f.src[0]
            fd = self.archives.get(ai)
            if fd is None:
                fd = self.archives[ai] = os.open(
                    self.plan.archives[ai], fsutil.OPEN_FLAGS
                )
            return fd
        except OSError as exc:
            raise from_oserror(exc, self.plan.source_path(f)) from None

    def _close_src(self, f, fd):
        if f.src is None:  # archives stay open for the next member
            os.close(fd)

    def batch(self, start, end):
        """Copy the small files START to END of the plan (those not skipped)."""
        files = [f for f in self.plan.files[start:end] if not f.skip]
        if self.native is not None and all(native.eligible(f) for f in files):
            self.native.copy(
                files, self.sdirs, self.ddirs, self.copy_one, self.moved.__contains__
            )
            return tk.Done(len(files), sum(f.size for f in files))
        opened = []
        try:
            for f in files:
                fd = self._open_src(f)
                opened.append(fd)
                if f.src is None and f.size and not self.src_in_memory:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
            for f, fd in zip(files, opened):
                self.writer.write(f, fd, self.ddirs.get(f.d), f.d in self.moved)
        finally:
            for f, fd in zip(files, opened):
                self._close_src(f, fd)
        return tk.Done(len(files), sum(f.size for f in files))

    def copy_one(self, f):
        """Copy file F by itself (FileWriter)."""
        fd = self._open_src(f)
        try:
            self.writer.write(f, fd, self.ddirs.get(f.d), f.d in self.moved)
        finally:
            self._close_src(f, fd)

    def range(self, i, f, name, off, length):
        """Copy [off, off+length) of big file F (plan index I) into its
        temporary file NAME, a CHUNK at a time; each but the last is
        reported as it is done, the last is the result."""
        ddir = self.ddirs.get(f.d)
        sfd = self._open_src(f)
        try:
            dfd = os.open(name, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=ddir)
            try:
                sdir = self.sdirs.get(f.d) if f.src is None else None
                for o, n in bigfile.pieces(off, length, False):
                    done = self.ranges.copy(f, sfd, sdir, dfd, name, ddir, o, n)
                    if done != n and not f.sparse:
                        raise StageError(
                            EXIT_FAILED,
                            self.plan.source_path(f),
                            f"changed while being copied (short read at "
                            f"{o + done})",
                            "run the stage again",
                        )
                    if o + n < off + length:
                        self.send(tk.RangeDone(i, n))
            finally:
                os.close(dfd)
        except OSError as exc:
            if exc.errno in DESTINATION_ERRNOS:
                raise from_oserror(
                    exc, fsutil.full(self.dst, self.plan.rel(f))
                ) from None
            raise from_oserror(exc, self.plan.source_path(f)) from None
        finally:
            self._close_src(f, sfd)
        return tk.RangeDone(i, n)
