"""The copy engine's parent side: create the tree under DST from a Plan,
in parallel.

A Copier makes the directories, hands the files to forked workers
(workers.py; what a worker does is copyworker.py) and counts what they
report, then makes the other entries (entries.py) and finishes the
directories.  Where the C loop is built (native) the source is walked
while the workers copy (stream.py).  Small files go to workers in
batches, the workers starting in different parts of the tree (tasks.py);
each is written whole under its final name (filewrite.py, or the same
steps in C).  Big files are split into ranges copied by several workers
into one pre-sized temporary file (bigfile.py).

A directory the copy makes in one that was there already (with HIDE: an
unsharded copy walked while it runs) is made under a hidden name
(fsutil.hidden_dir_name), and everything in it under final names: files
are written in place, without an unnamed file to link.  When all is in,
it is renamed to its name (publish), so a final name still never holds a
partial file.  After a failure it is named too if every worker ended
cleanly (every file in it is then whole); else it stays hidden, and the
run started again takes it up as it would a directory there already: its
complete files are skipped, the others written again.
"""

import os
import stat

from . import bigfile, fsutil, native
from . import tasks as tk
from . import workers
from .copyworker import CopyWorker
from .entries import EntryMaker
from .errors import EXIT_FAILED, StageError, from_oserror
from .filewrite import FileWriter
from .stream import Stream


class Tally:
    """Counters the parent keeps while workers report; WALKED: the totals
    are final."""

    __slots__ = (
        "walked",
        "files_total",
        "bytes_total",
        "files_done",
        "bytes_done",
        "files_copied",
        "bytes_copied",
    )

    def __init__(self):
        for name in self.__slots__:
            setattr(self, name, 0)
        self.walked = False

    def planned(self, files):
        """FILES are part of the copy (those skipped are done already)."""
        self.files_total += len(files)
        self.bytes_total += sum(f.size for f in files)
        skipped = [f for f in files if f.skip]
        if skipped:
            self.files_done += len(skipped)
            self.bytes_done += sum(f.size for f in skipped)


class Copier:
    """Copies one Plan into DST.  Call run(); it raises StageError."""

    def __init__(
        self,
        plan,
        dst,
        workers=2,
        tag=b"0",
        progress=None,
        chown=None,
        direct=None,
        writeback=False,
        tmpfile=True,
        hide=False,
    ):
        self.plan = plan
        self.dst = dst
        self.workers = workers
        self.progress = progress or (lambda tally: None)
        self.direct = direct  # O_DIRECT reads of big files (None: on RAM disks)
        self.writeback = writeback  # start writeback of big data early
        self.names = fsutil.TmpNames(tag)
        chown = (os.geteuid() == 0) if chown is None else chown
        self.writer = FileWriter(
            plan, dst, self.names, chown, tmpfile, src_path=plan.source_path
        )
        self.hide = hide  # new directories are made hidden, then named
        self.hidden = []  # directories made under their hidden names, by index
        self.moved = {}  # directory index -> its path under DST while hidden
        self.deaths = []  # signals that killed workers
        self.big = bigfile.BigFiles(plan, dst, self.names, self.writer, self.dst_rel)
        self.ranges = None  # a bigfile.RangeCopier, made by open()
        self.allocate = False  # big files are allocated whole (O_DIRECT writes)
        self.src_in_memory = False
        self.tally = Tally()
        self.lib = native.load()  # the C copy loop, if built
        self.tasks = []  # a numbered run's tasks
        self.worker = None  # in a worker: its CopyWorker
        self.packed = []  # a streamed run's native.Packed, copied by the C loop
        self.unpacked = []  # and the files it copied (or kept) otherwise
        self.probed = None  # (tmpfile, link) once found in DST (creating)
        self.src_root = -1
        self.dst_root = -1

    @property
    def chown(self):
        return self.writer.chown

    @property
    def tag(self):
        """The shard's tag in temporary names."""
        return self.names.tag

    @property
    def tmpfile(self):
        """Whether files are written as unnamed files (O_TMPFILE)."""
        return self.writer.tmpfile

    def hidden_name(self, di):
        """The hidden name directory DI is made under (hide)."""
        return fsutil.hidden_dir_name(self.tag, self.plan.dirs[di].name)

    def dst_rel(self, d):
        """Directory D's path under DST now (hidden, or in a hidden one)."""
        return self.moved.get(d, self.plan.dirs[d].rel)

    def dst_dir(self, d):
        """Directory D under DST, opened (the caller closes it)."""
        return fsutil.open_dir(self.dst_root, self.dst_rel(d))

    def where(self, d):
        """Directory D as a worker forked before it was found finds it."""
        return tk.Where(d, self.plan.dirs[d].rel, self.moved.get(d))

    def new_owner(self, d, dir_fd):
        """(uid, gid) a file made in directory D (open as DIR_FD) gets
        anyway, when owners are set; else None."""
        return self.writer.owner_of_new(d, dir_fd) if self.chown else None

    def creating(self):
        """(tmpfile, link) of the FileWriter, for the workers'.  Whether
        DST takes unnamed files is probed when the first file is to be
        copied, so that a run with nothing to copy changes nothing in DST;
        workers forked before learn it from their tasks."""
        if self.probed is None:
            w = self.writer
            w.tmpfile = w.tmpfile and w.probe_tmpfile(self.dst_root)
            self.probed = (w.tmpfile, w.link)
        return self.probed

    def open(self):
        """Open source and destination, and choose how to copy big files
        between them."""
        self.dst_root = fsutil.open_or_make_root(self.dst)
        self.names.forked()
        same_fs = False
        if self.plan.src is not None:
            self.src_root = os.open(self.plan.src, fsutil.DIR_FLAGS)
            self.src_in_memory = fsutil.in_memory(self.src_root)
            same_fs = os.fstat(self.src_root).st_dev == os.fstat(self.dst_root).st_dev
        dst_in_memory = fsutil.in_memory(self.dst_root)
        if self.writeback and dst_in_memory:
            self.writeback = False  # nothing to write back on a RAM disk
        read_direct, self.allocate = bigfile.direct_modes(
            self.src_in_memory, dst_in_memory, self.direct
        )
        self.ranges = bigfile.RangeCopier(
            read_direct,
            self.allocate,
            same_fs,
            self.src_in_memory,
            self.writeback,
            dst_in_memory,
        )
        self.writer.writeback = self.writeback

    def prepare(self):
        """Create directories, remove stale temporary files, size big files."""
        self.open()
        if self.writer.tmpfile and any(not f.skip for f in self.plan.files):
            self.creating()
        else:
            self.writer.tmpfile = False
        dcache = fsutil.DirsByIndex(self.dst_root, self.dst_rel)
        try:
            for di in range(1, len(self.plan.dirs)):
                self.make_dir(di)
            taken_up = {
                (self.plan.dirs[di].d, self.hidden_name(di)) for di in self.hidden
            }
            for di, name in self.plan.stale:
                if (di, name) not in taken_up:
                    fsutil.remove_stale(name, dcache.get(di))
            for i, f in enumerate(self.plan.files):
                if f.size >= bigfile.BIG and not f.skip:
                    self.big.create(i, f, dcache.get(f.d), allocate=self.allocate)
        except OSError as exc:
            raise from_oserror(exc, self.dst) from None
        finally:
            dcache.close()

    def add_big(self, i, f, dir_fd):
        """Make big file F's (plan index I) temporary file in DIR_FD, its
        directory; returns its name and its ranges [(offset, length)]."""
        self.big.create(i, f, dir_fd, allocate=self.allocate)
        return self.big.tmp[i], bigfile.pieces(0, f.size, self.whole(f))

    def whole(self, f):
        """Whether big file F is copied whole by one worker (bigfile.
        one_writer), asked in the parent before its tasks are made."""
        if f.src is not None or f.sparse:
            return False  # archive members and holes go by range
        r = self.ranges
        cached = r.dst_in_memory and r.read_direct and self._src_cached(f)
        return bigfile.one_writer(r.dst_in_memory, r.src_in_memory, cached)

    def _src_cached(self, f):
        """bigfile.file_cached of file F's source (False if it cannot be
        opened: the worker copying it says why)."""
        try:
            sdir = fsutil.open_dir(self.src_root, self.plan.dirs[f.d].rel)
            try:
                fd = os.open(f.name, fsutil.OPEN_FLAGS, dir_fd=sdir)
            finally:
                os.close(sdir)
        except OSError:
            return False
        try:
            return bigfile.file_cached(fd, f.size)
        finally:
            os.close(fd)

    def make_dir(self, di):
        """Make directory DI under DST; True if it was made now, False if it
        was there.  With hide, one not there in a directory that was is
        made under its hidden name (fsutil.hidden_dir_name), or, left there
        by a killed run, taken up again (False: it holds files already);
        publish names it."""
        d = self.plan.dirs[di]
        where = self.dst_rel(d.d)
        inside = d.d in self.moved  # made in a hidden directory
        path = fsutil.full(self.dst, d.rel)
        parent = fsutil.open_dir(self.dst_root, where)
        try:
            hidden = self.hidden_name(di) if self.hide and not inside else None
            if hidden is not None:
                if _exists(d.name, parent):  # there already: made in place
                    fsutil.remove_stale(hidden, parent)
                else:
                    made = _make_dir(hidden, d.mode, parent, path)
                    self.hidden.append(di)
                    self.moved[di] = fsutil.join(where, hidden)
                    return made
            made = _make_dir(d.name, d.mode, parent, path)
            if inside:
                self.moved[di] = fsutil.join(where, d.name)
            return made
        except OSError as exc:
            raise from_oserror(exc, path) from None
        finally:
            os.close(parent)

    def run(self, walker=None):
        """Copy all files; finish big files; then links and specials.
        With WALKER (a plan.Walker making this Copier's plan, not walked
        yet, and the C loop built), the source is walked while the workers
        copy what was found so far (stream.Stream)."""
        if walker is None:
            self.prepare()
            self.tasks = tk.interleave(
                tk.make_tasks(self.plan.files, self.whole), self.workers
            )
            self.tally.walked = True
            self.tally.planned(self.plan.files)

            def run_workers(poll):
                workers.run(
                    len(self.tasks),
                    self.workers,
                    lambda idx, send: self.worker.numbered(idx),
                    self._message,
                    setup=self._setup,
                    poll=poll,
                    deaths=self.deaths,
                )

        else:
            stream = Stream(self, walker)
            self.packed, self.unpacked = stream.packed, stream.unpacked

            def run_workers(poll):
                workers.run_stream(
                    stream.produce,
                    self.workers,
                    lambda task, send: self.worker.streamed(task),
                    self._message,
                    setup=self._setup,
                    poll=poll,
                    deaths=self.deaths,
                )

        flusher = []

        def poll():  # in the parent, once the workers are forked
            if self.writeback and not flusher:
                flusher.append(fsutil.Flusher(self.dst_root))
            self.progress(self.tally)

        flush_error = None
        try:
            try:
                run_workers(poll)
            finally:
                for f in flusher:
                    flush_error = f.stop()
                self._close_roots(keep_dst=True)
            if flush_error is not None:
                raise self._write_back_failed(flush_error)
            dcache = fsutil.DirsByIndex(self.dst_root, self.dst_rel)
            try:
                EntryMaker(self.plan, self.dst, self.chown, self.names.new).make_all(
                    dcache
                )
            finally:
                dcache.close()
            self.publish()
        except BaseException as exc:
            self.big.drop(self.dst_root)
            if isinstance(exc, StageError) and not self.deaths:
                self.publish(quiet=True)  # every file in them is whole
            # else a file in them may be partial: they stay hidden, and the
            # run started again takes them up
            raise
        return self.tally

    def _setup(self, send):
        """In each worker, once forked."""
        self.worker = CopyWorker(self, send)

    def publish(self, quiet=False):
        """Give each hidden new directory its name (all is in it).  QUIET:
        after a failure, leave one that cannot be named (the next run
        takes it up)."""
        for di in list(self.hidden):
            d = self.plan.dirs[di]
            try:
                parent = fsutil.open_dir(self.dst_root, self.plan.dirs[d.d].rel)
                try:
                    os.rename(
                        self.hidden_name(di),
                        d.name,
                        src_dir_fd=parent,
                        dst_dir_fd=parent,
                    )
                finally:
                    os.close(parent)
            except OSError as exc:
                if quiet:
                    continue
                e = from_oserror(exc, fsutil.full(self.dst, d.rel))
                raise StageError(
                    e.code,
                    e.path,
                    f"could not be given its name: {e.cause}",
                    "something else made it while the stage ran; remove "
                    "it, then run the stage again",
                ) from None
            self.hidden.remove(di)
        self.moved.clear()

    def _message(self, result):
        t = self.tally
        t.bytes_done += result.nbytes
        t.bytes_copied += result.nbytes
        if isinstance(result, tk.Done):
            t.files_done += result.files
            t.files_copied += result.files
        elif self.big.copied(result.index, result.nbytes, self.dst_root):
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
        return StageError(
            e.code,
            self.dst,
            f"writing to the device failed: {e.cause}",
            e.hint
            or "files copied there may be incomplete on the device; "
            "check its file system, then run the stage again",
        )

    def forget_copied(self):
        """After a write-back error: remove the names of the files this run
        copied (and their hard links), as far as the file system lets us.
        Their size and mtime are right but their data may not be on the
        device, so a run started again must copy them again rather than
        skip them."""
        dcache = fsutil.DirsByIndex(self.dst_root, self.dst_rel)
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


def _make_dir(name, mode, parent, path):
    """Make directory NAME in PARENT with permission bits MODE (owner rwx
    while it is filled: the final mode is set at the end); True if made
    now, False if a directory was there (made owner rwx too).  PATH names
    it in errors."""
    try:
        os.mkdir(name, (mode & 0o7777) | 0o700, dir_fd=parent)
        return True
    except FileExistsError:
        pass
    st = os.stat(name, dir_fd=parent, follow_symlinks=False)
    if not stat.S_ISDIR(st.st_mode):
        raise StageError(
            EXIT_FAILED,
            path,
            "exists and is not a directory",
            "remove it or choose another destination",
        )
    if st.st_mode & 0o700 != 0o700:
        os.chmod(
            name, (st.st_mode & 0o7777) | 0o700, dir_fd=parent, follow_symlinks=False
        )
    return False


def _exists(name, dir_fd):
    """Whether DIR_FD holds an entry NAME (of any type)."""
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True
