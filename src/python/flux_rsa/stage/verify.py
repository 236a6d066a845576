"""Verification: a finished copy or archive checked against its plan.

A copy: every file's size, mtime and mode, every link and hard link
(--verify size), and with --verify checksum every file's content read back
from both sides (Verifier).  The files the C loop copied are checked by the
C loop, in the workers, while the parent makes the destination durable
(Verifier.run_packed).  An archive (tar): what GNU tar wrote, and with
checksum every member read back and compared with the tree
(check_archive).

A difference says what differs; it asks to run the stage again only where
that can help (the source or the copy changed meanwhile).  The content
hashes compared are digest.py's.
"""

import os
import stat

from . import fsutil, native
from . import plan as planmod
from . import tasks as tk
from . import workers
from .digest import CHUNK, content_hash, digest, digest_member, open_in
from .errors import EXIT_VERIFY, StageError, from_oserror, show

BATCH = 512
# the hint of a difference the source or the copy changing meanwhile can make
AGAIN = "the copy differs from the source; run the stage again"
_BITS = ((stat.S_ISUID, "setuid"), (stat.S_ISGID, "setgid"), (stat.S_ISVTX, "sticky"))


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


def check_copy(
    plan,
    dst,
    mode,
    workers=2,
    progress=None,
    packed=(),
    lib=None,
    unpacked=None,
    flush=None,
):
    """Verify the copy of PLAN in DST (MODE: size or checksum), and run
    FLUSH (making DST durable), if given, first or meanwhile.  With size,
    the files the C loop LIB copied (PACKED, native.Packed) are checked by
    it in the workers while the parent flushes, then the others (UNPACKED)
    by Python; else every file after the flush.  PROGRESS(files, bytes)."""
    v = Verifier(plan, dst, mode, workers, progress)
    if mode == "size" and packed:
        v.run_packed(lib, packed, flush)
        v.run(unpacked)
        return
    if flush is not None:
        flush()
    v.run()


class Verifier:
    """Compare DST with the plan it was made from.  MODE is 'size' (size and
    mtime of every file, links and directories present) or 'checksum'
    (also the content of every regular file, read back from both sides)."""

    def __init__(self, plan, dst, mode="size", workers=2, progress=None):
        self.plan = plan
        self.files = plan.files  # the files run() checks
        self.dst = dst
        self.checksum = mode == "checksum"
        self.workers = workers
        self.progress = progress or (lambda done, nbytes: None)
        self.done = 0
        self.nbytes = 0

    def run(self, files=None):
        """Check FILES (default: all the plan's) and every link."""
        if files is not None:
            self.files = files
        self.tasks = _tasks(self.files, self.checksum)
        self.src_root = (
            os.open(self.plan.src, fsutil.DIR_FLAGS)
            if self.plan.src is not None
            else -1
        )
        self.dst_root = os.open(self.dst, fsutil.DIR_FLAGS)
        try:
            workers.run(
                len(self.tasks),
                self.workers,
                self._handle,
                self._message,
                poll=lambda: self.progress(self.done, self.nbytes),
            )
            self._links()
        finally:
            if self.src_root >= 0:
                os.close(self.src_root)
            os.close(self.dst_root)

    def run_packed(self, lib, packed, flush=None):
        """--verify size of the files the C loop copied (PACKED, a list of
        native.Packed), by the C loop LIB in the workers (native.verify);
        a file that differs is checked again by check_file, which raises
        the error naming it.  FLUSH, if given, runs in the parent meanwhile
        (the checks read what the kernel flushes: doc/stage.md says what
        that gained); a write-back error it raises outranks a file found to
        differ."""
        rels = [d.rel for d in self.plan.dirs]
        root = os.open(self.dst, fsutil.DIR_FLAGS)
        pending = [flush] if flush is not None else []

        def check(i, send):
            native.verify(
                lib,
                root,
                rels,
                [packed[i]],
                lambda p, k: self.check_file(
                    planmod.new_file(p.d, *p.fields(k), False)
                ),
            )
            return tk.Done(packed[i].n, packed[i].nbytes)

        def poll():  # in the parent, once the workers are forked
            while pending:
                pending.pop()()
            self.progress(self.done, self.nbytes)

        try:
            workers.run(len(packed), self.workers, check, self._message, poll=poll)
        finally:
            os.close(root)
            poll()

    def _message(self, done):
        self.done += done.files
        self.nbytes += done.nbytes
        self.progress(self.done, self.nbytes)

    def _mismatch(self, entry, why, hint=AGAIN):
        return StageError(
            EXIT_VERIFY,
            fsutil.full(self.dst, self.plan.rel(entry)),
            f"verification failed: {why}",
            hint,
        )

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
        files = self.files[task.start : task.end]
        nbytes = 0
        cache = {}
        try:
            for f in files:
                dfd = cache.get(f.d)
                if dfd is None:
                    dfd = cache[f.d] = fsutil.open_dir(
                        self.dst_root, self.plan.dirs[f.d].rel
                    )
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
            why += (
                " (the destination file system does not keep setgid and sticky "
                "together on a file: GlusterFS, the parallel RAM disk, cannot)"
            )
        else:
            lost = [name for bit, name in _BITS if want & bit and not got & bit]
            why += ": the destination file system did not keep " + (
                " and ".join(lost) if lost else "the mode set on it"
            )
        return self._mismatch(
            f,
            why,
            "running the stage again would not change it: "
            "stage to a file system that keeps these bits, or change "
            "the mode in the source",
        )

    def _compare(self, f, off, n):
        a = self._digest_src(f, off, n)
        b = self._digest_dst(f, off, n)
        if a != b:
            where = f" in bytes {off}-{off + n}" if n < f.size else ""
            raise self._mismatch(f, f"content differs{where} ({content_hash()[0]})")

    def _digest_src(self, f, off, n):
        if f.src is not None:  # a member of an archive: its logical content
            fd = os.open(self.plan.archives[f.src[0]], os.O_RDONLY)
            try:
                return digest_member(fd, f.src, off, n)
            finally:
                os.close(fd)
        try:
            fd = open_in(self.src_root, self.plan.dirs[f.d].rel, f.name)
        except OSError as exc:
            raise from_oserror(exc, self.plan.source_path(f)) from None
        try:
            return digest(fd, off, n)
        finally:
            os.close(fd)

    def _digest_dst(self, f, off, n):
        try:
            fd = open_in(self.dst_root, self.plan.dirs[f.d].rel, f.name)
            try:
                return digest(fd, off, n)
            finally:
                os.close(fd)
        except OSError as exc:
            raise from_oserror(exc, fsutil.full(self.dst, self.plan.rel(f))) from None

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
                raise self._mismatch(
                    h,
                    "not a hard link to "
                    + show(fsutil.full(self.dst, self.plan.rel(h.first))),
                )


def check_archive(writer, mode):
    """Verify the archive tarwrite.TarWriter WRITER has just written
    (check_written); with MODE checksum also the archive read back by GNU
    tar, each member compared with the tree (TarWriter.compare)."""
    check_written(writer)
    if mode == "checksum":
        writer.compare()


def check_written(w):
    """--verify size of an archive: the file under the final name is the
    one TarWriter W wrote (same inode), with the size GNU tar wrote; GNU
    tar archived as many entries as the walk found.  (GNU tar itself fails
    on a file that changed or could not be read while it wrote.)  Any
    difference is the tree or the archive changed meanwhile: running the
    stage again can mend it."""
    try:
        st = os.stat(w.final, follow_symlinks=False)
    except OSError as exc:
        raise from_oserror(exc, w.final) from None
    why = None
    if st.st_ino != w.ino:
        why = "the archive was replaced by another file"
    elif st.st_size != w.size:
        why = f"size {st.st_size}, written as {w.size}"
    elif w.members != w.entries():
        why = f"{w.members} entries archived, the walk found {w.entries()}"
    if why:
        raise StageError(
            EXIT_VERIFY, w.final, f"verification failed: {why}", "run the stage again"
        )
