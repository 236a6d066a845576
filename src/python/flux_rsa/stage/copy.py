"""The copy engine: create the tree under DST from a Plan, in parallel.

This module runs a copy: it makes the directories, hands the files to
workers and counts what they report, then makes the other entries and
finishes the directories.  Small files go to workers in batches (source
reads announced with posix_fadvise(WILLNEED) first, so one worker keeps
many reads in flight), the workers starting in different parts of the tree;
each is written whole under its final name by filewrite, or by the same
steps in C (native) where that loop is built.  Big files are
split into ranges copied by several workers into one pre-sized temporary
file (bigfile).  Links and special files are made by entries.
"""

import itertools
import os
import stat

from . import bigfile, fsutil, native, pool
from .entries import EntryMaker
from .errors import DESTINATION_ERRNOS, EXIT_FAILED, StageError, from_oserror
from .filewrite import FileWriter

BATCH_FILES = 256
BATCH_BYTES = 32 << 20


def make_tasks(files):
    """Split FILES (plan order) into batch and range tasks."""
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
                tasks.append(("B", start, i))
                start = None
            for off in range(0, f.size, bigfile.CHUNK):
                tasks.append(("R", i, off, min(bigfile.CHUNK, f.size - off)))
            continue
        if start is None:
            start, nbytes = i, 0
        nbytes += f.size
        if i + 1 - start >= BATCH_FILES or nbytes >= BATCH_BYTES:
            tasks.append(("B", start, i + 1))
            start = None
    if start is not None:
        tasks.append(("B", start, len(files)))
    return tasks


def interleave(tasks, n):
    """TASKS reordered for N workers pulling from one queue: cut into N
    runs of consecutive tasks, then one task of each run in turn.  Workers
    thus start in N far-apart parts of the tree, mostly in different
    directories: two processes creating files in one directory queue for its
    lock (on bench/stage's dataset c out, interleaving took about 10% off
    the copy's time and 8% off its CPU time)."""
    if n < 2 or not tasks:
        return tasks
    k = -(-len(tasks) // n)
    runs = [tasks[i:i + k] for i in range(0, len(tasks), k)]
    return [t for turn in itertools.zip_longest(*runs) for t in turn if t is not None]


class Tally:
    """Counters the parent keeps while workers report."""

    def __init__(self):
        self.files_done = 0
        self.bytes_done = 0
        self.files_copied = 0
        self.bytes_copied = 0


class _DirCache(fsutil.DirCache):
    """fsutil.DirCache by the plan's directory index."""

    def __init__(self, root_fd, plan):
        super().__init__(root_fd)
        self.plan = plan

    def get(self, d):
        return super().get(self.plan.dirs[d].rel)


class Copier:
    """Copies one Plan into DST.  Call run(); it raises StageError."""

    def __init__(self, plan, dst, workers=2, tag=b"0", progress=None,
                 chown=None, direct=None, writeback=False, tmpfile=True):
        self.plan = plan
        self.dst = dst
        self.workers = workers
        self.progress = progress or (lambda tally: None)
        self.direct = direct  # O_DIRECT reads of big files (None: on RAM disks)
        self.writeback = writeback  # start writeback of big data early
        self.names = fsutil.TmpNames(tag)
        chown = (os.geteuid() == 0) if chown is None else chown
        self.files = FileWriter(plan, dst, self.names, chown, tmpfile,
                                src_path=self._src_path)
        self.big = bigfile.BigFiles(plan, dst, self.names, self.files)
        self.ranges = None  # a bigfile.RangeCopier, made by prepare()
        self.src_in_memory = False
        self.tally = Tally()
        self.lib = native.load()  # the C copy loop, if built
        self.native = None  # its native.BatchCopier, in a worker
        self.src_root = -1
        self.dst_root = -1
        self.archives = {}

    @property
    def chown(self):
        return self.files.chown

    @property
    def tmpfile(self):
        """Whether files are written as unnamed files (O_TMPFILE)."""
        return self.files.tmpfile

    # ---- parent side -------------------------------------------------
    def prepare(self):
        """Create directories, remove stale temporary files, size big files."""
        self.dst_root = fsutil.open_or_make_root(self.dst)
        self.names.forked()
        same_fs = False
        if self.plan.src is not None:
            self.src_root = os.open(self.plan.src, fsutil.DIR_FLAGS)
            self.src_in_memory = fsutil.in_memory(self.src_root)
            same_fs = (os.fstat(self.src_root).st_dev
                       == os.fstat(self.dst_root).st_dev)
        dst_in_memory = fsutil.in_memory(self.dst_root)
        if self.writeback and dst_in_memory:
            self.writeback = False  # nothing to write back on a RAM disk
        read_direct, write_direct = bigfile.direct_modes(
            self.src_in_memory, dst_in_memory, self.direct)
        self.ranges = bigfile.RangeCopier(read_direct, write_direct, same_fs,
                                          self.src_in_memory, self.writeback)
        self.files.writeback = self.writeback
        if self.files.tmpfile:
            self.files.tmpfile = (any(not f.skip for f in self.plan.files)
                                  and self.files.probe_tmpfile(self.dst_root))
        dcache = _DirCache(self.dst_root, self.plan)
        try:
            for d in self.plan.dirs[1:]:
                self._mkdir(d)
            for di, name in self.plan.stale:
                try:
                    os.unlink(name, dir_fd=dcache.get(di))
                except FileNotFoundError:
                    pass
            for i, f in enumerate(self.plan.files):
                if f.size >= bigfile.BIG and not f.skip:
                    self.big.create(i, f, dcache, allocate=write_direct)
        except OSError as exc:
            raise from_oserror(exc, self.dst) from None
        finally:
            dcache.close()

    def _mkdir(self, d):
        parent = fsutil.open_dir(self.dst_root, self.plan.dirs[d.d].rel)
        try:
            # owner rwx while we fill it; the final mode is set at the end
            os.mkdir(d.name, (d.mode & 0o7777) | 0o700, dir_fd=parent)
        except FileExistsError:
            st = os.stat(d.name, dir_fd=parent, follow_symlinks=False)
            if not stat.S_ISDIR(st.st_mode):
                raise StageError(
                    EXIT_FAILED, fsutil.full(self.dst, d.rel),
                    "exists and is not a directory",
                    "remove it or choose another destination") from None
            if st.st_mode & 0o700 != 0o700:
                os.chmod(d.name, (st.st_mode & 0o7777) | 0o700, dir_fd=parent,
                         follow_symlinks=False)
        except OSError as exc:
            raise from_oserror(exc, fsutil.full(self.dst, d.rel)) from None
        finally:
            os.close(parent)

    def run(self):
        """Copy all files; finish big files; then links and specials."""
        self.prepare()
        tasks = interleave(make_tasks(self.plan.files), self.workers)
        for f in self.plan.files:
            self.tally.files_done += f.skip
            self.tally.bytes_done += f.size if f.skip else 0
        self.tasks = tasks
        flusher = []

        def poll():  # in the parent, once the workers are forked
            if self.writeback and not flusher:
                flusher.append(fsutil.Flusher(self.dst_root))
            self.progress(self.tally)

        flush_error = None
        try:
            pool.run(len(tasks), self.workers, self._handle, self._message,
                     setup=self._setup, poll=poll)
        except BaseException:
            self.big.drop(self.dst_root)
            raise
        finally:
            for f in flusher:
                flush_error = f.stop()
            self._close_roots(keep_dst=True)
        if flush_error is not None:
            raise self._write_back_failed(flush_error)
        dcache = _DirCache(self.dst_root, self.plan)
        try:
            EntryMaker(self.plan, self.dst, self.chown, self.names.new).make_all(dcache)
        finally:
            dcache.close()
        return self.tally

    def _message(self, msg):
        _, idx, result = msg
        t = self.tally
        if result[0] == "B":
            _, files, nbytes = result
            t.files_done += files
            t.bytes_done += nbytes
            t.files_copied += files
            t.bytes_copied += nbytes
        else:
            _, i, nbytes = result
            t.bytes_done += nbytes
            t.bytes_copied += nbytes
            if self.big.copied(i, nbytes, self.dst_root):
                t.files_done += 1
                t.files_copied += 1
        self.progress(t)

    def _close_roots(self, keep_dst=False):
        if self.src_root >= 0:
            os.close(self.src_root)
            self.src_root = -1
        if self.dst_root >= 0 and not keep_dst:
            os.close(self.dst_root)
            self.dst_root = -1

    def finish_dirs(self):
        """Give every directory its final mode, owner and mtime, deepest
        first (a child's utime does not touch its parent's mtime).  Not
        DST itself: only its contents are copied, so data_out (or the RAM
        disk) keeps its own mode and owner, and its mtime is never set to
        the source's (creating entries in it updates it, as any write)."""
        if self.dst_root < 0:
            self.dst_root = fsutil.open_or_make_root(self.dst)
        for d in reversed(self.plan.dirs[1:]):
            path = fsutil.full(self.dst, d.rel)
            try:
                fd = fsutil.open_dir(self.dst_root, d.rel)
                try:
                    if self.chown:
                        os.fchown(fd, d.uid, d.gid)
                    os.fchmod(fd, d.mode & 0o7777)
                    os.utime(fd, ns=(d.atime, d.mtime))
                finally:
                    os.close(fd)
            except OSError as exc:
                raise from_oserror(exc, path) from None

    def sync(self):
        """Make the destination durable (syncfs on its file system); raise
        StageError if the kernel reports that data did not reach the device."""
        if self.dst_root < 0:
            self.dst_root = fsutil.open_or_make_root(self.dst)
        try:
            fsutil.syncfs(self.dst_root)
        except OSError as exc:
            raise self._write_back_failed(exc) from None

    def _write_back_failed(self, exc):
        """After write-back error EXC on the destination's file system:
        forget the files copied, and return the StageError to raise (the
        copy is not known to be on the device)."""
        self.forget_copied()
        e = from_oserror(exc, self.dst)
        return StageError(e.code, self.dst, f"writing to the device failed: {e.cause}",
                          e.hint or "files copied there may be incomplete on the device; "
                          "check its file system, then run the stage again")

    def forget_copied(self):
        """After a write-back error: remove the names of the files this run
        copied (and their hard links), as far as the file system lets us.
        Their size and mtime are right but their data may not be on the
        device, so a run started again must copy them again rather than
        skip them."""
        dcache = _DirCache(self.dst_root, self.plan)
        try:
            names = [(f.d, f.name) for f in self.plan.files if not f.skip]
            names += [(h.d, h.name) for h in self.plan.hardlinks]
            for d, name in names:
                try:
                    os.unlink(name, dir_fd=dcache.get(d))
                except OSError:
                    pass  # gone already, or the file system refuses: best effort
        finally:
            dcache.close()

    def close(self):
        self._close_roots()

    # ---- worker side --------------------------------------------------
    def _setup(self, send):
        os.umask(0)
        self.names.forked()
        self.sdirs = _DirCache(self.src_root, self.plan) if self.src_root >= 0 else None
        self.ddirs = _DirCache(self.dst_root, self.plan)
        self.send = send
        if self.lib is not None and self.sdirs is not None:
            self.native = native.BatchCopier(self.lib, self.files, self.src_in_memory)

    def _handle(self, idx, send):
        task = self.tasks[idx]
        if task[0] == "B":
            return self._batch(task[1], task[2])
        return self._range(task[1], task[2], task[3])

    def _open_src(self, f):
        """Open a file's source: its own file, or the archive holding it."""
        if f.src is None:
            return os.open(f.name, fsutil.OPEN_FLAGS, dir_fd=self.sdirs.get(f.d))
        ai = f.src[0]
        fd = self.archives.get(ai)
        if fd is None:
            fd = os.open(self.plan.archives[ai], fsutil.OPEN_FLAGS)
            self.archives[ai] = fd
        return fd

    def _src_path(self, f):
        if f.src is None:
            return fsutil.full(self.plan.src, self.plan.rel(f))
        return self.plan.archives[f.src[0]]

    def _batch(self, start, end):
        files = [f for f in self.plan.files[start:end] if not f.skip]
        if self.native is not None and native.eligible(files):
            self.native.copy(files, self.sdirs, self.ddirs, self._copy_one)
            return ("B", len(files), sum(f.size for f in files))
        opened = []
        try:
            for f in files:
                try:
                    fd = self._open_src(f)
                except OSError as exc:
                    raise from_oserror(exc, self._src_path(f)) from None
                opened.append(fd)
                if f.src is None and f.size and not self.src_in_memory:
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
            nbytes = 0
            for f, fd in zip(files, opened):
                self.files.write(f, fd, self.ddirs.get(f.d))
                nbytes += f.size
        finally:
            for f, fd in zip(files, opened):
                if f.src is None:
                    os.close(fd)
        return ("B", len(files), nbytes)

    def _copy_one(self, f):
        """Copy file F by itself (FileWriter)."""
        try:
            fd = self._open_src(f)
        except OSError as exc:
            raise from_oserror(exc, self._src_path(f)) from None
        try:
            self.files.write(f, fd, self.ddirs.get(f.d))
        finally:
            if f.src is None:
                os.close(fd)

    def _range(self, i, off, length):
        f = self.plan.files[i]
        ddir = self.ddirs.get(f.d)
        dpath = fsutil.full(self.dst, self.plan.rel(f))
        try:
            sfd = self._open_src(f)
        except OSError as exc:
            raise from_oserror(exc, self._src_path(f)) from None
        try:
            name = self.big.tmp[i]
            dfd = os.open(name, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=ddir)
            try:
                sdir = self.sdirs.get(f.d) if f.src is None else None
                done = self.ranges.copy(f, sfd, sdir, dfd, name, ddir, off, length)
            finally:
                os.close(dfd)
        except OSError as exc:
            if exc.errno in DESTINATION_ERRNOS:
                raise from_oserror(exc, dpath) from None
            raise from_oserror(exc, self._src_path(f)) from None
        finally:
            if f.src is None:
                os.close(sfd)
        if done != length and not f.sparse:
            raise StageError(EXIT_FAILED, self._src_path(f),
                             f"changed while being copied (short read at {off + done})",
                             "run the stage again")
        return ("R", i, length)
