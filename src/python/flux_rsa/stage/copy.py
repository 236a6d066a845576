"""The copy engine: create the tree under DST from a Plan, in parallel.

Regular files are written as unnamed files (O_TMPFILE) in their final
directory and given their name (linkat) once complete, or, where the file
system cannot do that, written under a hidden temporary name and renamed
into place; either way a final name always holds a whole file.  Small
files go to workers in batches (source reads announced with
posix_fadvise(WILLNEED) first, so one worker keeps many reads in flight),
the workers starting in different parts of the tree; large files are split
into ranges copied by several workers into one pre-sized temporary file.
"""

import errno
import itertools
import mmap
import os
import stat
import threading

from . import copyio, fsutil, pool
from .errors import EXIT_FAILED, StageError, from_oserror

BIG = 64 << 20  # files at least this large are split into ranges
CHUNK = 32 << 20  # range size
PIECE = 8 << 20  # O_DIRECT read size inside a range
BATCH_FILES = 256
BATCH_BYTES = 32 << 20
OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
TMPFILE_FLAGS = os.O_WRONLY | os.O_TMPFILE | os.O_CLOEXEC
# open(O_TMPFILE) errors meaning "not here": fall back to named temporary files
_NO_TMPFILE = {errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL}
_DST_ERRNOS = {28, 122, 27, 30}  # ENOSPC, EDQUOT, EFBIG, EROFS


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
        if f.size >= BIG:
            if start is not None:
                tasks.append(("B", start, i))
                start = None
            for off in range(0, f.size, CHUNK):
                tasks.append(("R", i, off, min(CHUNK, f.size - off)))
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
        self.tag = tag
        self.progress = progress or (lambda tally: None)
        self.chown = (os.geteuid() == 0) if chown is None else chown
        self.direct = direct  # O_DIRECT reads of big files (None: on RAM disks)
        self.direct_out = None  # O_DIRECT writes of big files (None: from RAM disks)
        self.writeback = writeback  # start writeback of big data early
        self.tmpfile = tmpfile  # O_TMPFILE + linkat, if the destination can
        self.src_in_memory = False
        self.same_fs = False
        self.buf = None
        self.readers = None  # reading threads of a worker, made when needed
        self.pid = os.getpid()
        self._new_owner = {}
        self.tally = Tally()
        self.serial = 0
        self.big_tmp = {}  # file index -> temporary name
        self.big_left = {}  # file index -> bytes still to copy
        self.src_root = -1
        self.dst_root = -1
        self.archives = {}

    # ---- parent side -------------------------------------------------
    def prepare(self):
        """Create directories, remove stale temporary files, size big files."""
        self.dst_root = _open_or_make_root(self.dst)
        self.pid = os.getpid()
        if self.plan.src is not None:
            self.src_root = os.open(self.plan.src, fsutil.DIR_FLAGS)
            self.src_in_memory = fsutil.in_memory(self.src_root)
            self.same_fs = (os.fstat(self.src_root).st_dev
                            == os.fstat(self.dst_root).st_dev)
        dst_in_memory = fsutil.in_memory(self.dst_root)
        if self.writeback and dst_in_memory:
            self.writeback = False  # nothing to write back on a RAM disk
        if self.direct is None:
            # into a RAM disk, big files are read with O_DIRECT straight into
            # the destination's pages (see _read_into_map)
            self.direct = dst_in_memory and not self.src_in_memory
        # out of a RAM disk to a disk, big files are written with O_DIRECT
        # straight from the mapped source (see _write_from_map)
        self.direct_out = self.src_in_memory and not dst_in_memory
        if self.tmpfile:
            self.tmpfile = (any(not f.skip for f in self.plan.files)
                            and self._probe_tmpfile())
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
                if f.size >= BIG and not f.skip:
                    self._create_big(i, f, dcache)
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

    def _create_big(self, i, f, dcache):
        name = self._tmp()
        fd = os.open(name, CREATE_FLAGS, 0o600, dir_fd=dcache.get(f.d))
        try:
            if self.direct_out and not f.sparse and f.src is None:
                # allocated up front: direct writes into allocated space run
                # in parallel and leave the file in one piece on the device
                os.posix_fallocate(fd, 0, f.size)
            else:
                os.ftruncate(fd, f.size)
        except OSError as exc:
            os.close(fd)
            os.unlink(name, dir_fd=dcache.get(f.d))
            raise from_oserror(exc, fsutil.full(self.dst, self.plan.rel(f))) from None
        os.close(fd)
        self.big_tmp[i] = name
        self.big_left[i] = f.size

    def _tmp(self):
        self.serial += 1
        return fsutil.tmp_name(self.tag, self.serial, self.pid)

    def _probe_tmpfile(self):
        """Can the destination hold unnamed files (O_TMPFILE) that linkat
        through /proc/self/fd names later?  Tried once, in DST itself."""
        try:
            fd = os.open(b".", TMPFILE_FLAGS, 0o600, dir_fd=self.dst_root)
        except OSError:
            return False
        name = self._tmp()
        try:
            os.link(b"/proc/self/fd/%d" % fd, name, dst_dir_fd=self.dst_root,
                    follow_symlinks=True)
        except OSError:
            return False
        finally:
            os.close(fd)
        _unlink_quiet(name, self.dst_root)
        return True

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
                flusher.append(_Flusher(self.dst_root))
            self.progress(self.tally)

        try:
            pool.run(len(tasks), self.workers, self._handle, self._message,
                     setup=self._setup, poll=poll)
        except BaseException:
            self._drop_big()
            raise
        finally:
            for f in flusher:
                f.stop()
            self._close_roots(keep_dst=True)
        self._links_and_specials()
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
            self.big_left[i] -= nbytes
            if self.big_left[i] <= 0:
                self._finish_big(i)
                t.files_done += 1
                t.files_copied += 1
        self.progress(t)

    def _finish_big(self, i):
        f = self.plan.files[i]
        name = self.big_tmp.pop(i)
        path = fsutil.full(self.dst, self.plan.rel(f))
        try:
            dfd = fsutil.open_dir(self.dst_root, self.plan.dirs[f.d].rel)
            try:
                fd = os.open(name, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC,
                             dir_fd=dfd)
                try:
                    if not self.chown:
                        os.fchmod(fd, f.mode & 0o7777)  # made 0600 by _create_big
                    self._set_file_meta(fd, f, dfd)
                    if self.chown and not f.mode & 0o6000:
                        os.fchmod(fd, f.mode & 0o7777)
                    _check_size(fd, f, path)
                finally:
                    os.close(fd)
                os.rename(name, f.name, src_dir_fd=dfd, dst_dir_fd=dfd)
            finally:
                os.close(dfd)
        except OSError as exc:
            raise from_oserror(exc, path) from None

    def _drop_big(self):
        for i, name in self.big_tmp.items():
            try:
                dfd = fsutil.open_dir(self.dst_root, self.plan.dirs[self.plan.files[i].d].rel)
                try:
                    os.unlink(name, dir_fd=dfd)
                finally:
                    os.close(dfd)
            except OSError:
                pass
        self.big_tmp.clear()

    def _close_roots(self, keep_dst=False):
        if self.src_root >= 0:
            os.close(self.src_root)
            self.src_root = -1
        if self.dst_root >= 0 and not keep_dst:
            os.close(self.dst_root)
            self.dst_root = -1

    def _links_and_specials(self):
        dcache = _DirCache(self.dst_root, self.plan)
        try:
            for s in self.plan.symlinks:
                self._symlink(s, dcache)
            for s in self.plan.specials:
                self._special(s, dcache)
            for h in self.plan.hardlinks:
                self._hardlink(h, dcache)
        finally:
            dcache.close()

    def _symlink(self, s, dcache):
        path = fsutil.full(self.dst, self.plan.rel(s))
        try:
            dfd = dcache.get(s.d)
            try:
                if os.readlink(s.name, dir_fd=dfd) == s.target:
                    st = os.stat(s.name, dir_fd=dfd, follow_symlinks=False)
                    if st.st_mtime_ns == s.mtime:
                        return
            except OSError:
                pass
            name = self._tmp()
            os.symlink(s.target, name, dir_fd=dfd)
            try:
                if self.chown:
                    os.chown(name, s.uid, s.gid, dir_fd=dfd, follow_symlinks=False)
                os.utime(name, ns=(s.atime, s.mtime), dir_fd=dfd,
                         follow_symlinks=False)
                os.rename(name, s.name, src_dir_fd=dfd, dst_dir_fd=dfd)
            except BaseException:
                _unlink_quiet(name, dfd)
                raise
        except OSError as exc:
            raise from_oserror(exc, path) from None

    def _special(self, s, dcache):
        path = fsutil.full(self.dst, self.plan.rel(s))
        try:
            dfd = dcache.get(s.d)
            try:
                st = os.stat(s.name, dir_fd=dfd, follow_symlinks=False)
                if (st.st_mode == s.mode and st.st_rdev == s.rdev
                        and st.st_mtime_ns == s.mtime):
                    return
            except FileNotFoundError:
                pass
            name = self._tmp()
            if stat.S_ISFIFO(s.mode):
                os.mkfifo(name, s.mode & 0o7777, dir_fd=dfd)
            else:
                os.mknod(name, s.mode, s.rdev, dir_fd=dfd)
            try:
                if self.chown:
                    os.chown(name, s.uid, s.gid, dir_fd=dfd, follow_symlinks=False)
                os.chmod(name, s.mode & 0o7777, dir_fd=dfd)
                os.utime(name, ns=(s.atime, s.mtime), dir_fd=dfd,
                         follow_symlinks=False)
                os.rename(name, s.name, src_dir_fd=dfd, dst_dir_fd=dfd)
            except BaseException:
                _unlink_quiet(name, dfd)
                raise
        except OSError as exc:
            raise from_oserror(exc, path) from None

    def _hardlink(self, h, dcache):
        first = h.first
        path = fsutil.full(self.dst, self.plan.rel(h))
        try:
            ffd = dcache.get(first.d)
            fst = os.stat(first.name, dir_fd=ffd, follow_symlinks=False)
            dfd = dcache.get(h.d)
            try:
                st = os.stat(h.name, dir_fd=dfd, follow_symlinks=False)
                if (st.st_dev, st.st_ino) == (fst.st_dev, fst.st_ino):
                    return
            except FileNotFoundError:
                pass
            name = self._tmp()
            os.link(first.name, name, src_dir_fd=ffd, dst_dir_fd=dfd,
                    follow_symlinks=False)
            try:
                os.rename(name, h.name, src_dir_fd=dfd, dst_dir_fd=dfd)
            except BaseException:
                _unlink_quiet(name, dfd)
                raise
        except OSError as exc:
            raise from_oserror(exc, path) from None

    def finish_dirs(self):
        """Give every directory its final mode, owner and mtime, deepest
        first (a child's utime does not touch its parent's mtime).  Not
        DST itself: only its contents are copied, so data_out (or the RAM
        disk) keeps its own mode and owner, and its mtime is never set to
        the source's (creating entries in it updates it, as any write)."""
        if self.dst_root < 0:
            self.dst_root = _open_or_make_root(self.dst)
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
        """Make the destination durable (syncfs on its file system)."""
        fd = self.dst_root if self.dst_root >= 0 else os.open(self.dst, fsutil.DIR_FLAGS)
        fsutil.syncfs(fd)

    def close(self):
        self._close_roots()

    # ---- worker side --------------------------------------------------
    def _setup(self, send):
        os.umask(0)
        self.pid = os.getpid()
        self.sdirs = _DirCache(self.src_root, self.plan) if self.src_root >= 0 else None
        self.ddirs = _DirCache(self.dst_root, self.plan)
        self.send = send

    def _handle(self, idx, send):
        task = self.tasks[idx]
        if task[0] == "B":
            return self._batch(task[1], task[2])
        return self._range(task[1], task[2], task[3])

    def _open_src(self, f):
        """Open a file's source: its own file, or the archive holding it."""
        if f.src is None:
            return os.open(f.name, OPEN_FLAGS, dir_fd=self.sdirs.get(f.d))
        ai = f.src[0]
        fd = self.archives.get(ai)
        if fd is None:
            fd = os.open(self.plan.archives[ai], OPEN_FLAGS)
            self.archives[ai] = fd
        return fd

    def _src_path(self, f):
        if f.src is None:
            return fsutil.full(self.plan.src, self.plan.rel(f))
        return self.plan.archives[f.src[0]]

    def _batch(self, start, end):
        files = [f for f in self.plan.files[start:end] if not f.skip]
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
                self._copy_file(f, fd)
                nbytes += f.size
        finally:
            for f, fd in zip(files, opened):
                if f.src is None:
                    os.close(fd)
        return ("B", len(files), nbytes)

    def _copy_file(self, f, sfd):
        ddir = self.ddirs.get(f.d)
        name = None  # the temporary name, when O_TMPFILE is not used
        reading = True
        try:
            dfd, name = self._create(f, ddir)
        except OSError as exc:
            raise from_oserror(exc, fsutil.full(self.dst, self.plan.rel(f))) from None
        try:
            try:
                if f.src is not None:
                    done = self._from_archive(f, sfd, dfd)
                elif f.sparse:
                    os.ftruncate(dfd, f.size)
                    copyio.copy_range(sfd, dfd, 0, f.size, sparse=True)
                    done = f.size
                else:
                    done = copyio.copy_whole(sfd, dfd, f.size)
                reading = False
                if done != f.size:
                    raise StageError(
                        EXIT_FAILED, self._src_path(f),
                        f"changed while being copied (planned {f.size} bytes, "
                        f"read {done})", "run the stage again")
                self._set_file_meta(dfd, f, ddir)
                if self.writeback and f.size >= copyio.SMALL:
                    fsutil.start_writeback(dfd, 0, f.size)
                if name is None:
                    self._name_tmpfile(dfd, f, ddir)
            finally:
                os.close(dfd)
            if name is not None:
                os.rename(name, f.name, src_dir_fd=ddir, dst_dir_fd=ddir)
        except BaseException as exc:
            if name is not None:
                _unlink_quiet(name, ddir)
            if isinstance(exc, OSError):
                if reading and exc.errno not in _DST_ERRNOS:
                    raise from_oserror(exc, self._src_path(f)) from None
                raise from_oserror(
                    exc, fsutil.full(self.dst, self.plan.rel(f))) from None
            raise

    def _create(self, f, ddir):
        """The file to write F into: unnamed (O_TMPFILE) where the file
        system can, else a new temporary name.  Returns (fd, name or None)."""
        if self.tmpfile:
            try:
                return os.open(b".", TMPFILE_FLAGS, f.mode & 0o7777,
                               dir_fd=ddir), None
            except OSError as exc:
                if exc.errno not in _NO_TMPFILE:
                    raise
                self.tmpfile = False  # e.g. another file system under DST
        name = self._tmp()
        return os.open(name, CREATE_FLAGS, f.mode & 0o7777, dir_fd=ddir), name

    def _name_tmpfile(self, dfd, f, ddir):
        """Give the complete unnamed file DFD its final name.  A name
        already there (an older version of the file) is replaced
        atomically: link under a temporary name, then rename over it."""
        proc = b"/proc/self/fd/%d" % dfd
        try:
            os.link(proc, f.name, dst_dir_fd=ddir, follow_symlinks=True)
            return
        except FileExistsError:
            pass
        tmp = self._tmp()
        os.link(proc, tmp, dst_dir_fd=ddir, follow_symlinks=True)
        try:
            os.rename(tmp, f.name, src_dir_fd=ddir, dst_dir_fd=ddir)
        except BaseException:
            _unlink_quiet(tmp, ddir)
            raise

    def _from_archive(self, f, afd, dfd):
        _, off, segments = f.src
        if segments is None:
            return copyio.copy_range(afd, dfd, off, f.size, delta=-off)
        os.ftruncate(dfd, f.size)
        for where, n in segments:
            copyio.copy_range(afd, dfd, off, n, delta=where - off)
            off += n
        return f.size

    def _set_file_meta(self, fd, f, dir_fd):
        if self.chown:
            if (f.uid, f.gid) != self._owner_of_new(f.d, dir_fd):
                os.fchown(fd, f.uid, f.gid)
            if f.mode & 0o6000:
                os.fchmod(fd, f.mode & 0o7777)
        elif f.src is not None and f.mode & 0o6000:
            os.fchmod(fd, f.mode & 0o7777)
        os.utime(fd, ns=(f.atime, f.mtime))

    def _owner_of_new(self, d, dir_fd):
        """(uid, gid) a file created in directory D gets: ours, or the
        directory's group when it is set-group-ID.  A file that should have
        exactly these needs no fchown."""
        owner = self._new_owner.get(d)
        if owner is None:
            st = os.fstat(dir_fd)
            gid = st.st_gid if st.st_mode & stat.S_ISGID else os.getegid()
            owner = self._new_owner[d] = (os.geteuid(), gid)
        return owner

    def _range(self, i, off, length):
        f = self.plan.files[i]
        ddir = self.ddirs.get(f.d)
        dpath = fsutil.full(self.dst, self.plan.rel(f))
        try:
            sfd = self._open_src(f)
        except OSError as exc:
            raise from_oserror(exc, self._src_path(f)) from None
        direct = None
        try:
            dfd = os.open(self.big_tmp[i], os.O_RDWR | os.O_NOFOLLOW | os.O_CLOEXEC,
                          dir_fd=ddir)
            try:
                if f.src is None:
                    direct = self._open_direct(f)
                    buf = None
                    if direct is None and self.direct_out and not f.sparse:
                        done = self._write_from_map(self.big_tmp[i], sfd, ddir, dfd,
                                                    off, length)
                        if done is not None:
                            return self._range_done(f, i, off, length, done)
                    if direct is not None:
                        done = self._read_into_map(direct, sfd, dfd, off, length)
                    elif not f.sparse and not self.same_fs:
                        # across file systems: pread/pwrite through a big
                        # buffer, with read-ahead doubled; within one, the
                        # kernel copies (copy_file_range)
                        buf = self._buffer()
                        if direct is None and not self.src_in_memory:
                            os.posix_fadvise(sfd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
                    if direct is None:
                        done = copyio.copy_range(sfd, dfd, off, length,
                                                 sparse=f.sparse, buf=buf)
                else:
                    done = self._archive_range(f, sfd, dfd, off, length)
                if self.writeback:
                    fsutil.start_writeback(dfd, off, length)
            finally:
                os.close(dfd)
        except OSError as exc:
            if exc.errno in _DST_ERRNOS:
                raise from_oserror(exc, dpath) from None
            raise from_oserror(exc, self._src_path(f)) from None
        finally:
            if direct is not None:
                os.close(direct)
            if f.src is None:
                os.close(sfd)
        return self._range_done(f, i, off, length, done)

    def _range_done(self, f, i, off, length, done):
        if done != length and not f.sparse:
            raise StageError(EXIT_FAILED, self._src_path(f),
                             f"changed while being copied (short read at {off + done})",
                             "run the stage again")
        return ("R", i, length)

    def _write_from_map(self, name, sfd, ddir, dfd, off, length):
        """Copy [off, off+length) of a big file from a RAM disk to a disk:
        the source range is mapped (its pages are the RAM disk's, no copy)
        and written with O_DIRECT in one pwrite, so the device gets large
        sequential writes without the page cache of the destination (whose
        writeback is what made buffered writes several times slower than
        the device here).  A last part shorter than a block is written
        normally.  Returns the bytes copied, or None where O_DIRECT cannot
        be used (the caller then copies through the page cache)."""
        try:
            wfd = os.open(name, os.O_WRONLY | os.O_DIRECT | os.O_NOFOLLOW
                          | os.O_CLOEXEC, dir_fd=ddir)
        except OSError:
            self.direct_out = False
            return None
        try:
            have = os.fstat(sfd).st_size
            if have < off + length:
                return max(0, have - off)  # shrank: reported by the caller
            done = copyio.write_from_map(sfd, wfd, off, length)
            if done == length // copyio.BLOCK * copyio.BLOCK and done < length:
                tail = os.pread(sfd, length - done, off + done)
                copyio.write_all_at(dfd, tail, off + done)
                done += len(tail)
            return done
        finally:
            os.close(wfd)

    def _archive_range(self, f, afd, dfd, off, length):
        _, aoff, segments = f.src
        if segments is None:
            return copyio.copy_range(afd, dfd, aoff + off, length, delta=-aoff)
        # sparse member: copy the parts of the segments inside [off, off+length)
        pos = aoff
        for where, n in segments:
            lo, hi = max(where, off), min(where + n, off + length)
            if lo < hi:
                copyio.copy_range(afd, dfd, pos + (lo - where), hi - lo,
                                  delta=where - pos)
            pos += n
        return length

    def _open_direct(self, f):
        if not self.direct or f.sparse:
            return None
        try:
            return os.open(f.name, OPEN_FLAGS | os.O_DIRECT, dir_fd=self.sdirs.get(f.d))
        except OSError:
            self.direct = False
            return None

    def _read_into_map(self, direct, sfd, dfd, off, length):
        """Copy [off, off+length) of a big file to a RAM disk: the
        destination range is allocated and mapped, and read into with
        O_DIRECT, in pieces by two threads (more reads in flight), so the
        data lands in the RAM disk's pages without a copy through a buffer.
        A last part shorter than a block is read normally.  Returns the
        bytes read."""
        os.posix_fallocate(dfd, off, length)
        whole = length // copyio.BLOCK * copyio.BLOCK
        pieces = [(p, min(PIECE, whole - p)) for p in range(0, whole, PIECE)]
        m = mmap.mmap(dfd, length, mmap.MAP_SHARED,
                      mmap.PROT_READ | mmap.PROT_WRITE, offset=off)
        view = memoryview(m)
        try:
            def read(piece):
                p, n = piece
                return os.preadv(direct, [view[p:p + n]], off + p)

            # wait for every piece before looking at any, so that no thread
            # still reads into the mapping when it is closed
            futures = [self._threads().submit(read, piece) for piece in pieces]
            for fut in futures:
                fut.exception()  # waits for it, raises nothing
            done = 0
            for (p, n), fut in zip(pieces, futures):
                got = fut.result()
                done += got
                if got != n:
                    return done
            if whole < length:
                tail = os.pread(sfd, length - whole, off + whole)
                view[whole:whole + len(tail)] = tail
                done += len(tail)
            return done
        finally:
            view.release()
            m.close()

    def _threads(self):
        if self.readers is None:
            from concurrent.futures import ThreadPoolExecutor
            self.readers = ThreadPoolExecutor(2)
        return self.readers

    def _buffer(self):
        if self.buf is None:
            self.buf = copyio.buffer(CHUNK)
        return self.buf


class _Flusher:
    """A thread of the parent that flushes the destination file system
    (syncfs) over and over while the workers copy, so that the data and the
    metadata of the files written so far go to the device during the copy
    instead of all in the final flush, which then has little left to do.
    It does not replace that final flush."""

    def __init__(self, fd, interval=0.25):
        self.fd = os.dup(fd)
        self.interval = interval
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, name="rsa-flush", daemon=True)
        self.thread.start()

    def _run(self):
        while not self.done.wait(self.interval):
            fsutil.syncfs(self.fd)

    def stop(self):
        self.done.set()
        self.thread.join()
        os.close(self.fd)


def _open_or_make_root(dst):
    try:
        return os.open(dst, fsutil.DIR_FLAGS)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise from_oserror(exc, dst) from None
    try:
        os.makedirs(dst, exist_ok=True)
        return os.open(dst, fsutil.DIR_FLAGS)
    except OSError as exc:
        raise from_oserror(exc, dst) from None


def _check_size(fd, f, path):
    st = os.fstat(fd)
    if st.st_size != f.size:
        raise StageError(EXIT_FAILED, path,
                         f"has {st.st_size} bytes after the copy, expected {f.size}")


def _unlink_quiet(name, dir_fd):
    try:
        os.unlink(name, dir_fd=dir_fd)
    except OSError:
        pass
