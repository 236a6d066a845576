"""The copy engine: create the tree under DST from a Plan, in parallel.

This module runs a copy: it makes the directories, hands the files to
workers and counts what they report, then makes the other entries and
finishes the directories.  Where the C loop is built (native) the source
is walked while the workers copy (_Stream): each directory is made, and
compared with what DST holds, as soon as it is scanned, and its files are
sent to the workers packed for the C loop.  Small files go to workers in batches (source
reads announced with posix_fadvise(WILLNEED) first, so one worker keeps
many reads in flight), the workers starting in different parts of the tree;
each is written whole under its final name by filewrite, or by the same
steps in C (native) where that loop is built.  Big files are
split into ranges copied by several workers into one pre-sized temporary
file (bigfile).  Links and special files are made by entries.

A directory the copy makes in one that was there already (with HIDE: an
unsharded copy walked while it runs) is made under a hidden name
(fsutil.hidden_dir_name), and everything in it under final names: files
are written in place, without an unnamed file to link (O_TMPFILE and
linkat took 12% of a copy of many small files onto ext4).  When all is
in, it is renamed to its name (publish), so a final name still never
holds a partial file.  After a failure it is named too if every worker
ended cleanly (every file in it is then whole); else it stays hidden, and
the run started again takes it up as it would a directory there already:
its complete files are skipped, the others written again.
"""

import os
import stat

from . import bigfile, fsutil, native, workers
from . import plan as planmod
from . import tasks as tk
from .entries import EntryMaker
from .errors import DESTINATION_ERRNOS, EXIT_FAILED, StageError, from_oserror
from .filewrite import FileWriter

class Tally:
    """Counters the parent keeps while workers report."""

    def __init__(self):
        self.walked = False  # the totals are final
        self.files_total = 0
        self.bytes_total = 0
        self.files_done = 0
        self.bytes_done = 0
        self.files_copied = 0
        self.bytes_copied = 0


class _DirCache(fsutil.DirCache):
    """fsutil.DirCache by the plan's directory index; REL(d) is directory
    d's path (default: its path in the plan)."""

    def __init__(self, root_fd, plan, rel=None):
        super().__init__(root_fd)
        self.plan = plan
        self.rel = rel or (lambda d: plan.dirs[d].rel)

    def get(self, d):
        return super().get(self.rel(d))


class Copier:
    """Copies one Plan into DST.  Call run(); it raises StageError."""

    def __init__(self, plan, dst, workers=2, tag=b"0", progress=None,
                 chown=None, direct=None, writeback=False, tmpfile=True, hide=False):
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
        self.hide = hide  # new directories are made hidden, then named
        self.hidden = []  # directories made under their hidden names, by index
        self.moved = {}  # directory index -> its path under DST while hidden
        self.deaths = []  # signals that killed workers
        self.big = bigfile.BigFiles(plan, dst, self.names, self.files, self.dst_rel)
        self.ranges = None  # a bigfile.RangeCopier, made by prepare()
        self.src_in_memory = False
        self.tally = Tally()
        self.lib = native.load()  # the C copy loop, if built
        self.native = None  # its native.BatchCopier, in a worker
        self.told = False  # a worker of a streamed run: creating is known
        self.packed = []  # a streamed run's native.Packed, made by the parent
        self.unpacked = []  # and the files it copied (or kept) otherwise
        self.src_root = -1
        self.dst_root = -1
        self.archives = {}

    @property
    def chown(self):
        return self.files.chown

    def _hidden_name(self, di):
        """The hidden name directory DI is made under (hide)."""
        return fsutil.hidden_dir_name(self.names.tag, self.plan.dirs[di].name)

    def dst_rel(self, d):
        """Directory D's path under DST now (hidden, or in a hidden one)."""
        return self.moved.get(d, self.plan.dirs[d].rel)

    @property
    def tmpfile(self):
        """Whether files are written as unnamed files (O_TMPFILE)."""
        return self.files.tmpfile

    # ---- parent side -------------------------------------------------
    def prepare(self):
        """Create directories, remove stale temporary files, size big files."""
        write_direct = self._open_roots()
        if self.files.tmpfile:
            self.files.tmpfile = (any(not f.skip for f in self.plan.files)
                                  and self.files.probe_tmpfile(self.dst_root))
        dcache = _DirCache(self.dst_root, self.plan, self.dst_rel)
        try:
            for di in range(1, len(self.plan.dirs)):
                self._mkdir(di)
            taken_up = {(self.plan.dirs[di].d, self._hidden_name(di)) for di in self.hidden}
            for di, name in self.plan.stale:
                if (di, name) not in taken_up:
                    fsutil.remove_stale(name, dcache.get(di))
            for i, f in enumerate(self.plan.files):
                if f.size >= bigfile.BIG and not f.skip:
                    self.big.create(i, f, dcache, allocate=write_direct)
        except OSError as exc:
            raise from_oserror(exc, self.dst) from None
        finally:
            dcache.close()

    def _open_roots(self):
        """Open source and destination, and choose how to copy between them.
        Returns whether big files are written with O_DIRECT."""
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
                                          self.src_in_memory, self.writeback,
                                          dst_in_memory)
        self.files.writeback = self.writeback
        return write_direct

    def _whole(self, f):
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

    def _mkdir(self, di):
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
            hidden = self._hidden_name(di) if self.hide and not inside else None
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
        copy what was found so far (_Stream)."""
        if walker is None:
            self.prepare()
            self.tasks = tk.interleave(tk.make_tasks(self.plan.files, self._whole),
                                       self.workers)
            t = self.tally
            t.walked = True
            for f in self.plan.files:
                t.files_total += 1
                t.bytes_total += f.size
                t.files_done += f.skip
                t.bytes_done += f.size if f.skip else 0

            def run_workers(poll):
                workers.run(len(self.tasks), self.workers, self._handle, self._message,
                            setup=self._setup, poll=poll, deaths=self.deaths)
        else:
            stream = _Stream(self, walker)

            def run_workers(poll):
                workers.run_stream(stream.produce, self.workers, self._handle_streamed,
                                   self._message, setup=self._setup, poll=poll,
                                   deaths=self.deaths)
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
            dcache = _DirCache(self.dst_root, self.plan, self.dst_rel)
            try:
                EntryMaker(self.plan, self.dst, self.chown, self.names.new).make_all(dcache)
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

    def publish(self, quiet=False):
        """Give each hidden new directory its name (all is in it).  QUIET:
        after a failure, leave one that cannot be named (the next run
        takes it up)."""
        for di in list(self.hidden):
            d = self.plan.dirs[di]
            try:
                parent = fsutil.open_dir(self.dst_root, self.plan.dirs[d.d].rel)
                try:
                    os.rename(self._hidden_name(di), d.name, src_dir_fd=parent,
                              dst_dir_fd=parent)
                finally:
                    os.close(parent)
            except OSError as exc:
                if quiet:
                    continue
                e = from_oserror(exc, fsutil.full(self.dst, d.rel))
                raise StageError(e.code, e.path, f"could not be given its name: {e.cause}",
                                 "something else made it while the stage ran; remove "
                                 "it, then run the stage again") from None
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

    def verify_packed(self, verifier, sync=False):
        """--verify size of the files a streamed run packed for the C loop,
        by the C loop in the workers; a file that differs is checked again
        by VERIFIER (a verify.Verifier), which raises the verify error
        naming it.  With SYNC the parent makes the destination durable
        (sync()) meanwhile: the checks read what the kernel flushes, and the
        two took 0.13 s and 0.10 s one after the other on a copy of 100,000
        small files.  Returns the files and bytes checked; self.unpacked
        are left to VERIFIER."""
        rels = [d.rel for d in self.plan.dirs]
        root = os.open(self.dst, fsutil.DIR_FLAGS)
        flush = [self.sync] if sync else []

        def check(i, send):
            native.verify(self.lib, root, rels, [self.packed[i]],
                          lambda packed, k: verifier.check_file(
                              planmod.new_file(packed.d, *packed.fields(k), False)))

        def poll():  # in the parent, once the workers are forked
            while flush:
                flush.pop()()

        try:
            workers.run(len(self.packed), self.workers, check, lambda result: None,
                        poll=poll)
        finally:
            os.close(root)
            poll()  # a write-back error outranks a file found to differ
        return sum(p.n for p in self.packed), sum(p.nbytes for p in self.packed)

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
        dcache = _DirCache(self.dst_root, self.plan, self.dst_rel)
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
        self.ddirs = _DirCache(self.dst_root, self.plan, self.dst_rel)
        self.send = send
        if self.lib is not None and self.sdirs is not None:
            self.native = native.BatchCopier(self.lib, self.files, self.src_in_memory)

    def _handle(self, idx, send):
        task = self.tasks[idx]
        if isinstance(task, tk.Batch):
            return self._batch(task.start, task.end)
        return self._range(task.index, self.plan.files[task.index],
                           self.big.tmp[task.index], task.off, task.length)

    def _handle_streamed(self, task, send):
        """A task of _Stream: tasks.Packed, tasks.One or tasks.StreamedRange."""
        d, rel, moved = task.where
        dirs = self.plan.dirs  # this worker's: directories as tasks name them
        if d >= len(dirs):
            dirs.extend([None] * (d + 1 - len(dirs)))
        if dirs[d] is None:
            dirs[d] = planmod.Dir()
            dirs[d].rel = rel
        if moved is not None:
            self.moved[d] = moved
        if isinstance(task, tk.StreamedRange):
            return self._range(task.index, task.file, task.name, task.off, task.length)
        if not self.told:
            # how files are created, found by the parent after the fork
            self.files.tmpfile, self.files.link = task.creating
            self.told = True
        if isinstance(task, tk.Packed):
            packed = task.packed
            self.native.copy_packed(
                packed, self.sdirs.get(d), self.ddirs.get(d),
                lambda k: self._copy_one(planmod.new_file(d, *packed.fields(k), False)),
                d in self.moved)
            return tk.Done(packed.n, packed.nbytes)
        self._copy_one(task.file)
        return tk.Done(1, task.file.size)

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
        if self.native is not None and all(native.eligible(f) for f in files):
            self.native.copy(files, self.sdirs, self.ddirs, self._copy_one,
                             self.moved.__contains__)
            return tk.Done(len(files), sum(f.size for f in files))
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
                self.files.write(f, fd, self.ddirs.get(f.d), f.d in self.moved)
                nbytes += f.size
        finally:
            for f, fd in zip(files, opened):
                if f.src is None:
                    os.close(fd)
        return tk.Done(len(files), nbytes)

    def _copy_one(self, f):
        """Copy file F by itself (FileWriter)."""
        try:
            fd = self._open_src(f)
        except OSError as exc:
            raise from_oserror(exc, self._src_path(f)) from None
        try:
            self.files.write(f, fd, self.ddirs.get(f.d), f.d in self.moved)
        finally:
            if f.src is None:
                os.close(fd)

    def _range(self, i, f, name, off, length):
        """Copy [off, off+length) of big file F (plan index I) into its
        temporary file NAME, a CHUNK at a time; each but the last is
        reported as it is done, the last is the result."""
        ddir = self.ddirs.get(f.d)
        dpath = fsutil.full(self.dst, self.plan.rel(f))
        try:
            sfd = self._open_src(f)
        except OSError as exc:
            raise from_oserror(exc, self._src_path(f)) from None
        try:
            dfd = os.open(name, os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=ddir)
            try:
                sdir = self.sdirs.get(f.d) if f.src is None else None
                for o, n in bigfile.pieces(off, length, False):
                    done = self.ranges.copy(f, sfd, sdir, dfd, name, ddir, o, n)
                    if done != n and not f.sparse:
                        raise StageError(EXIT_FAILED, self._src_path(f),
                                         f"changed while being copied (short read at "
                                         f"{o + done})", "run the stage again")
                    if o + n < off + length:
                        self.send(tk.RangeDone(i, n))
            finally:
                os.close(dfd)
        except OSError as exc:
            if exc.errno in DESTINATION_ERRNOS:
                raise from_oserror(exc, dpath) from None
            raise from_oserror(exc, self._src_path(f)) from None
        finally:
            if f.src is None:
                os.close(sfd)
        return tk.RangeDone(i, n)


class _Stream:
    """The parent's side of a copy made while the source is walked (Copier.
    run with a walker).  Each step scans the next directories; each one is
    made under DST (or, there already, compared with the plan: a resumed
    run) and its files become tasks, small ones packed for the C loop.  The
    tasks of two directories alternate, so that two workers mostly create
    files in different directories."""

    def __init__(self, copier, walker):
        self.c = copier
        self.walker = walker
        self.write_direct = copier._open_roots()
        self.stale = 0  # plan.stale entries removed so far
        self.creating = None  # (tmpfile, link) of FileWriter, once probed

    def produce(self):
        """The tasks of the next two directories; None when all are sent."""
        lanes = []
        for _ in range(2):
            di = self.walker.step()
            if di is None:
                break
            lanes.append(self._directory(di, self.walker.span()[0]))
        if not lanes:
            self.c.tally.walked = True
            return None
        return tk.alternate(lanes)

    def _directory(self, di, files):
        """Make directory DI, just scanned, under DST; the tasks of its FILES."""
        c = self.c
        plan = c.plan
        d = plan.dirs[di]
        try:
            made = di != 0 and c._mkdir(di)
            ddir = fsutil.open_dir(c.dst_root, c.dst_rel(di))
            try:
                if not made:
                    planmod.compare_dir(plan, di, ddir, files, c.names.tag)
                    if len(plan.stale) > self.stale:
                        keep = self._hidden_kids(di) if c.hide else ()
                        for _, name in plan.stale[self.stale:]:
                            if name not in keep:
                                fsutil.remove_stale(name, ddir)
                    self.stale = len(plan.stale)
                return self._tasks(di, tk.Where(di, d.rel, c.moved.get(di)),
                                   len(plan.files) - len(files), files, ddir)
            finally:
                os.close(ddir)
        except OSError as exc:
            raise from_oserror(exc, fsutil.full(c.dst, d.rel)) from None

    def _hidden_kids(self, di):
        """The hidden names of the directories in directory DI, just scanned
        (the last ones the walk found): a killed run's, to be taken up."""
        dirs = self.c.plan.dirs
        kids = set()
        for k in range(len(dirs) - 1, di, -1):
            if dirs[k].d != di:
                break
            kids.add(self.c._hidden_name(k))
        return kids

    def _creating(self):
        """(tmpfile, link) of the parent's FileWriter, for the workers'.
        Whether DST takes unnamed files is probed when the first file is to
        be copied, so that a run with nothing to copy changes nothing in
        DST; the workers, forked before, learn it from their first task."""
        if self.creating is None:
            c = self.c
            w = c.files
            w.tmpfile = w.tmpfile and w.probe_tmpfile(c.dst_root)
            self.creating = (w.tmpfile, w.link)
        return self.creating

    def _tasks(self, di, where, first, files, ddir):
        c = self.c
        t = c.tally
        owner = c.files.owner_of_new(di, ddir) if c.chown else None
        tasks = []
        batch = []
        nbytes = 0

        def pack():
            packed = native.Packed(di, batch, c.chown, owner)
            c.packed.append(packed)
            return tk.Packed(where, packed, self._creating())

        for i, f in enumerate(files, first):
            t.files_total += 1
            t.bytes_total += f.size
            if f.skip:
                t.files_done += 1
                t.bytes_done += f.size
            elif f.size >= bigfile.BIG:
                c.big.create(i, f, _OneDir(ddir), allocate=self.write_direct)
                for off, n in bigfile.pieces(0, f.size, c._whole(f)):
                    tasks.append(tk.StreamedRange(where, i, f, c.big.tmp[i], off, n))
            elif native.eligible(f):
                batch.append(f)
                nbytes += f.size
                if tk.full(len(batch), nbytes):
                    tasks.append(pack())
                    batch, nbytes = [], 0
                continue
            else:
                tasks.append(tk.One(where, f, self._creating()))
            c.unpacked.append(f)  # not in a Packed
        if batch:
            tasks.append(pack())
        return tasks


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
        raise StageError(EXIT_FAILED, path, "exists and is not a directory",
                         "remove it or choose another destination")
    if st.st_mode & 0o700 != 0o700:
        os.chmod(name, (st.st_mode & 0o7777) | 0o700, dir_fd=parent,
                 follow_symlinks=False)
    return False


def _exists(name, dir_fd):
    """Whether DIR_FD holds an entry NAME (of any type)."""
    try:
        os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return True


class _OneDir:
    """The DirCache of one directory, open as FD, for BigFiles.create."""

    def __init__(self, fd):
        self.fd = fd

    def get(self, d):
        return self.fd
