"""Check a finished copy against its plan: sizes and mtimes, or content."""

import functools
import os
import stat

from . import fsutil, workers
from . import tasks as tk
from .errors import EXIT_VERIFY, StageError, from_oserror, show

CHUNK = 32 << 20
BATCH = 512
# the hint of a difference the source or the copy changing meanwhile can make
AGAIN = "the copy differs from the source; run the stage again"
_BITS = ((stat.S_ISUID, "setuid"), (stat.S_ISGID, "setgid"), (stat.S_ISVTX, "sticky"))


@functools.cache
def content_hash():
    """(name, constructor) of the 128-bit content hash: xxh3, or blake2b
    without python3-xxhash.  Imported when content is first hashed:
    --verify size needs neither."""
    try:
        import xxhash
    except ImportError:
        import hashlib
        return "blake2b-128", functools.partial(hashlib.blake2b, digest_size=16)
    return "xxh3-128", xxhash.xxh3_128


def new_hash():
    return content_hash()[1]()


def _tasks(files, checksum):
    """Batch tasks of FILES; with CHECKSUM a big file's content is hashed
    in Range tasks."""
    tasks = []
    start = 0
    for i, f in enumerate(files):
        if checksum and f.size >= 2 * CHUNK:
            if start < i:
                tasks.append(tk.Batch(start, i))
            for off in range(0, f.size, CHUNK):
                tasks.append(tk.Range(i, off, min(CHUNK, f.size - off)))
            start = i + 1
        elif i + 1 - start >= BATCH:
            tasks.append(tk.Batch(start, i + 1))
            start = i + 1
    if start < len(files):
        tasks.append(tk.Batch(start, len(files)))
    return tasks


class Verifier:
    """Compare DST with the plan it was made from.  MODE is 'size' (size and
    mtime of every file, links and directories present) or 'checksum'
    (also the content of every regular file, read back from both sides)."""

    def __init__(self, plan, dst, mode="size", workers=2, progress=None, files=None):
        self.plan = plan
        self.files = plan.files if files is None else files  # the files to check
        self.dst = dst
        self.checksum = mode == "checksum"
        self.workers = workers
        self.progress = progress or (lambda done, nbytes: None)
        self.done = 0
        self.nbytes = 0

    def run(self):
        self.tasks = _tasks(self.files, self.checksum)
        self.src_root = (os.open(self.plan.src, fsutil.DIR_FLAGS)
                         if self.plan.src is not None else -1)
        self.dst_root = os.open(self.dst, fsutil.DIR_FLAGS)
        try:
            workers.run(len(self.tasks), self.workers, self._handle, self._message,
                        poll=lambda: self.progress(self.done, self.nbytes))
            self._links()
        finally:
            if self.src_root >= 0:
                os.close(self.src_root)
            os.close(self.dst_root)

    def _message(self, done):
        self.done += done.files
        self.nbytes += done.nbytes
        self.progress(self.done, self.nbytes)

    def _mismatch(self, entry, why, hint=AGAIN):
        return StageError(EXIT_VERIFY, fsutil.full(self.dst, self.plan.rel(entry)),
                          f"verification failed: {why}", hint)

    def _dst_stat(self, entry):
        path = fsutil.full(self.dst, self.plan.rel(entry))
        try:
            dfd = fsutil.open_dir(self.dst_root, self.plan.dirs[entry.d].rel)
            try:
                return os.stat(entry.name, dir_fd=dfd, follow_symlinks=False)
            finally:
                os.close(dfd)
        except FileNotFoundError:
            raise self._mismatch(entry, "missing") from None
        except OSError as exc:
            raise from_oserror(exc, path) from None

    def _handle(self, idx, send):
        task = self.tasks[idx]
        if isinstance(task, tk.Range):
            f = self.files[task.index]
            if task.off == 0:
                self._check_meta(f, self._dst_stat(f))
            self._compare(f, task.off, task.length)
            return tk.Done(1 if task.off + task.length >= f.size else 0, task.length)
        files = self.files[task.start:task.end]
        nbytes = 0
        cache = {}
        try:
            for f in files:
                dfd = cache.get(f.d)
                if dfd is None:
                    dfd = cache[f.d] = fsutil.open_dir(
                        self.dst_root, self.plan.dirs[f.d].rel)
                try:
                    st = os.stat(f.name, dir_fd=dfd, follow_symlinks=False)
                except FileNotFoundError:
                    raise self._mismatch(f, "missing") from None
                self._check_meta(f, st)
                if self.checksum:
                    self._compare(f, 0, f.size)
                nbytes += f.size
        except OSError as exc:
            raise from_oserror(exc, self.dst) from None
        finally:
            for fd in cache.values():
                os.close(fd)
        return tk.Done(len(files), nbytes)

    def check_file(self, f):
        """Check the copy of file F's size, mtime and mode (raise StageError
        if it differs), by itself."""
        self.dst_root = os.open(self.dst, fsutil.DIR_FLAGS)
        try:
            self._check_meta(f, self._dst_stat(f))
        finally:
            os.close(self.dst_root)

    def _check_meta(self, f, st):
        if not stat.S_ISREG(st.st_mode):
            raise self._mismatch(f, "not a regular file")
        if st.st_size != f.size:
            raise self._mismatch(f, f"size {st.st_size}, expected {f.size}")
        if st.st_mtime_ns != f.mtime:
            raise self._mismatch(f, "modification time differs from the source")
        if not fsutil.has_mode(st, f.mode):
            raise self._mode_not_kept(f, stat.S_IMODE(st.st_mode), f.mode & 0o7777)

    def _mode_not_kept(self, f, got, want):
        """The error for a copy whose mode is not the one the copy set on
        it: the destination file system keeps other bits, and running the
        stage again would set them again, to the same end."""
        why = f"mode {got:04o}, expected {want:04o}"
        if want & stat.S_ISGID and want & stat.S_ISVTX:
            why += (" (the destination file system does not keep setgid and sticky "
                    "together on a file: GlusterFS, the parallel RAM disk, cannot)")
        else:
            lost = [name for bit, name in _BITS if want & bit and not got & bit]
            why += (": the destination file system did not keep "
                    + (" and ".join(lost) if lost else "the mode set on it"))
        return self._mismatch(f, why, "running the stage again would not change it: "
                              "stage to a file system that keeps these bits, or change "
                              "the mode in the source")

    def _compare(self, f, off, n):
        a = self._digest_src(f, off, n)
        b = self._digest_dst(f, off, n)
        if a != b:
            where = f" in bytes {off}-{off + n}" if n < f.size else ""
            raise self._mismatch(f, f"content differs{where} ({content_hash()[0]})")

    def _digest_src(self, f, off, n):
        if f.src is None:
            try:
                sdir = fsutil.open_dir(self.src_root, self.plan.dirs[f.d].rel)
                try:
                    fd = os.open(f.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK,
                                 dir_fd=sdir)
                finally:
                    os.close(sdir)
            except OSError as exc:
                raise from_oserror(exc, fsutil.full(self.plan.src, self.plan.rel(f))) from None
            try:
                return digest(fd, off, n)
            finally:
                os.close(fd)
        # member of an archive: hash its logical content
        ai, aoff, segments = f.src
        fd = os.open(self.plan.archives[ai], os.O_RDONLY)
        try:
            if segments is None:
                return digest(fd, aoff + off, n)
            return digest_sparse(fd, aoff, segments, off, n)
        finally:
            os.close(fd)

    def _digest_dst(self, f, off, n):
        path = fsutil.full(self.dst, self.plan.rel(f))
        try:
            dfd = fsutil.open_dir(self.dst_root, self.plan.dirs[f.d].rel)
            try:
                fd = os.open(f.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK,
                             dir_fd=dfd)
            finally:
                os.close(dfd)
            try:
                return digest(fd, off, n)
            finally:
                os.close(fd)
        except OSError as exc:
            raise from_oserror(exc, path) from None

    def _links(self):
        for s in self.plan.symlinks:
            st = self._dst_stat(s)
            if not stat.S_ISLNK(st.st_mode):
                raise self._mismatch(s, "not a symbolic link")
            dfd = fsutil.open_dir(self.dst_root, self.plan.dirs[s.d].rel)
            try:
                target = os.readlink(s.name, dir_fd=dfd)
            finally:
                os.close(dfd)
            if target != s.target:
                raise self._mismatch(s, "symbolic link target differs")
        for h in self.plan.hardlinks:
            a = self._dst_stat(h)
            b = self._dst_stat(h.first)
            if (a.st_dev, a.st_ino) != (b.st_dev, b.st_ino):
                raise self._mismatch(h, "not a hard link to "
                                     + show(fsutil.full(self.dst, self.plan.rel(h.first))))


def digest(fd, off, n):
    """Digest of up to N bytes at OFF in FD and of how many there were (so a
    short file differs), whatever OFF is: a file and the same bytes inside
    an archive hash alike."""
    h = new_hash()
    start = off
    end = off + n
    while off < end:
        data = os.pread(fd, min(CHUNK, end - off), off)
        if not data:
            break
        h.update(data)
        off += len(data)
    h.update(b"%d" % (off - start))
    return h.digest()


def digest_sparse(fd, aoff, segments, off, n):
    """Digest of [off, off+n) of a file stored as data SEGMENTS (holes are
    zeros) starting at AOFF in an archive."""
    h = new_hash()
    pos = off
    end = off + n
    for where, length in segments:
        seg_end = where + length
        if seg_end <= pos:
            aoff += length
            continue
        if where >= end:
            break
        if where > pos:
            _zeros(h, where - pos)
            pos = where
        take = min(seg_end, end) - pos
        data = os.pread(fd, take, aoff + (pos - where))
        h.update(data)
        pos += len(data)
        aoff += length
    if pos < end:
        _zeros(h, end - pos)
        pos = end
    h.update(b"%d" % (pos - off))
    return h.digest()


def _zeros(h, n):
    block = bytes(min(n, CHUNK))
    while n > 0:
        k = min(n, len(block))
        h.update(block[:k])
        n -= k
