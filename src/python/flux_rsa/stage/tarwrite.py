"""Aggregation: a tree into ONE archive (tar).

The writer walks the tree depth first, one directory at a time, and lays
each directory's members out (their offsets in the archive) as soon as it
has scanned it (tarlayout.py).  Batches of laid-out members go to the
workers while the walk goes on; each worker assembles a batch in one
buffer and writes it with one pwrite, in parallel, into a temporary file
that is renamed to its final name when complete.  (untar.py reads
archives back.)
"""

import os

from . import copyio, fsutil
from . import plan as planmod
from . import tarformat as tf
from . import workers
from .errors import DESTINATION_ERRNOS, EXIT_FAILED, StageError, from_oserror
from .tarlayout import (
    DIRREL,
    DLEN,
    GID,
    HEAD,
    HLEN,
    KIND,
    MODE,
    MTIME,
    NAME,
    OFFSET,
    PATH,
    REALSIZE,
    SEGMENTS,
    UID,
    Header,
    Layout,
    Members,
    header,
    member_path,
)
from .tasks import Done

DEFAULT_NAME = b"rsa-output.tar"


class TarWriter:
    """Write the tree SRC as DSTDIR/NAME.  After run(), .plan is the tree
    as walked."""

    def __init__(
        self, src, dstdir, name=DEFAULT_NAME, workers=2, progress=None, tag=b"0"
    ):
        self.src = src
        self.dstdir = dstdir
        self.name = name
        self.workers = workers
        self.progress = progress or (lambda done, nbytes: None)
        self.tag = tag
        self.plan = None
        self.laid = None  # the Layout, once run() starts
        self.files_done = 0
        self.bytes_done = 0

    # what the layout knows (api.py's progress, verify.check_layout)
    @property
    def files_total(self):
        """Files of the walk so far."""
        return self.laid.files_total if self.laid else 0

    @property
    def bytes_total(self):
        return self.laid.bytes_total if self.laid else 0

    @property
    def layout(self):
        """Every member laid out, in archive order."""
        return self.laid.members

    @property
    def size(self):
        """The archive's size, once the walk is over."""
        return self.laid.size

    # ---- parent side: the walk, laid out ---------------------------------
    def run(self, sync=True):
        """Write the archive; return its final path."""
        final = fsutil.full(self.dstdir, self.name)
        self.walker = planmod.Walker(self.src)
        self.plan = self.walker.plan
        self.src_root = self.walker.root_fd
        try:
            self.src_in_memory = fsutil.in_memory(self.src_root)
            dir_fd = fsutil.open_or_make_root(self.dstdir)
            try:
                self._write_archive(dir_fd, final, sync)
            finally:
                os.close(dir_fd)
        finally:
            self.walker.close()
        self.final = final
        return final

    def _write_archive(self, dir_fd, final, sync):
        # start writing each part to the device as soon as it is in the
        # file, so the final fsync has little left to wait for
        self.writeback = sync and not fsutil.in_memory(dir_fd)
        self._remove_stale(dir_fd)
        self.tmp = fsutil.tmp_name(self.tag, 0)
        try:
            fd = os.open(self.tmp, fsutil.CREATE_FLAGS, 0o644, dir_fd=dir_fd)
            try:
                self.ino = os.fstat(fd).st_ino
            finally:
                os.close(fd)
            self.dir_fd = dir_fd
            self.laid = Layout(self.walker)
            workers.run_stream(
                self.laid.step,
                self.workers,
                self._handle,
                self._message,
                setup=self._setup,
                poll=lambda: self.progress(self.files_done, self.bytes_done),
            )
            fd = os.open(self.tmp, os.O_WRONLY | os.O_NOFOLLOW, dir_fd=dir_fd)
            try:
                os.ftruncate(fd, self.size)  # the end blocks: zeros
                if sync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            os.rename(self.tmp, self.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            if sync:
                os.fsync(dir_fd)
        except OSError as exc:
            fsutil.unlink_quiet(self.tmp, dir_fd)
            raise from_oserror(exc, final) from None
        except BaseException:
            fsutil.unlink_quiet(self.tmp, dir_fd)
            raise

    def spans(self):
        """(offset, length) of each member of the layout, in archive order
        (verify.check_layout)."""
        return self.laid.spans()

    def member_path(self, k):
        """The path of member K of the layout."""
        return member_path(self.layout[k])

    def _remove_stale(self, dir_fd):
        for name in os.listdir(dir_fd):
            name = os.fsencode(name)
            if fsutil.is_tmp_of(name, self.tag):
                fsutil.unlink_quiet(name, dir_fd)

    def _message(self, done):
        self.files_done += done.files
        self.bytes_done += done.nbytes
        self.progress(self.files_done, self.bytes_done)

    # ---- worker side -------------------------------------------------
    def _setup(self, send):
        # by relative path: a worker's copy of the plan does not hold the
        # directories found after it started
        self.sdirs = fsutil.DirCache(self.src_root)
        self.out = os.open(self.tmp, os.O_WRONLY | os.O_NOFOLLOW, dir_fd=self.dir_fd)

    def _src_path(self, m):
        return fsutil.full(self.src, member_path(m))

    def _open(self, m):
        try:
            return os.open(m[NAME], fsutil.OPEN_FLAGS, dir_fd=self.sdirs.get(m[DIRREL]))
        except OSError as exc:
            raise from_oserror(exc, self._src_path(m)) from None

    def _write(self, data, off):
        try:
            view = memoryview(data)
            done = 0
            while done < len(view):
                done += os.pwrite(self.out, view[done:], off + done)
            if self.writeback:
                fsutil.start_writeback(self.out, off, done)
        except OSError as exc:
            raise from_oserror(exc, fsutil.full(self.dstdir, self.name)) from None

    def _handle(self, task, send):
        if isinstance(task, Members):
            return self._batch(task.members)
        m = task.member
        if isinstance(task, Header):
            self._write(m[HEAD] or header(m), m[OFFSET])
            if m[SEGMENTS] is not None:
                return self._sparse(m)
            return Done(0, 0)
        off, n = task.off, task.length
        at = m[OFFSET] + m[HLEN] + off
        fd = self._open(m)
        try:
            done = copyio.kernel_copy(fd, off, self.out, at, n)
        except OSError as exc:
            if exc.errno in DESTINATION_ERRNOS:
                raise from_oserror(exc, fsutil.full(self.dstdir, self.name)) from None
            raise from_oserror(exc, self._src_path(m)) from None
        finally:
            os.close(fd)
        if done != n:
            raise _changed(self._src_path(m))
        if self.writeback:
            fsutil.start_writeback(self.out, at, n)
        return Done(1 if off + n >= m[DLEN] else 0, n)

    def _batch(self, members):
        """MEMBERS (small ones, end to end) assembled in one buffer at their
        laid-out places, file data read straight into it, one pwrite."""
        base = members[0][OFFSET]
        last = members[-1]
        size = last[OFFSET] + last[HLEN] + tf.pad(last[DLEN]) - base
        out = bytearray(size + 1)  # zeros (the padding); +1, see _read
        view = memoryview(out)
        fds = {}
        header_into = tf.header_into
        try:
            if not self.src_in_memory:
                # open them all and announce the reads first, so that one
                # worker keeps many reads in flight; from a RAM disk each
                # file is opened, read and closed in turn
                for i, m in enumerate(members):
                    if m[KIND] == "file" and m[DLEN]:
                        fd = fds[i] = self._open(m)
                        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
            files = nbytes = 0
            for i, m in enumerate(members):
                pos = m[OFFSET] - base
                kind = m[KIND]
                hlen = m[HLEN]
                if kind == "file":
                    if m[HEAD] is not None or not header_into(
                        out,
                        pos,
                        member_path(m),
                        m[MODE],
                        m[UID],
                        m[GID],
                        m[DLEN],
                        m[MTIME],
                        tf.TYPE_FILE,
                    ):
                        self._put_header(out, pos, m)
                    files += 1
                    dlen = m[DLEN]
                    if not dlen:
                        continue
                    fd = fds.pop(i, None)
                    if fd is None:
                        fd = self._open(m)
                    try:
                        self._read(fd, view, pos + hlen, m)
                    finally:
                        os.close(fd)
                    nbytes += dlen
                elif (
                    kind != "dir"
                    or m[HEAD] is not None
                    or not header_into(
                        out,
                        pos,
                        m[PATH],
                        m[MODE],
                        m[UID],
                        m[GID],
                        0,
                        m[MTIME],
                        tf.TYPE_DIR,
                    )
                ):
                    self._put_header(out, pos, m)
        except OSError as exc:
            raise from_oserror(exc, self.src) from None
        finally:
            for fd in fds.values():
                os.close(fd)
        self._write(view[:size], base)
        return Done(files, nbytes)

    def _put_header(self, out, pos, m):
        """M's header blocks, built, into OUT at POS."""
        head = m[HEAD] or header(m)
        if len(head) != m[HLEN]:
            raise StageError(
                EXIT_FAILED,
                self._src_path(m),
                "internal error: header " f"of {len(head)} bytes laid out as {m[HLEN]}",
            )
        out[pos : pos + len(head)] = head

    def _read(self, fd, view, pos, m):
        """Read member M's data from FD into VIEW at POS.  One byte more than
        planned is asked for: a regular file returns less than asked only at
        its end, so one read shows a file that grew (the extra byte lands
        where the next header or the spare byte at the end of the buffer
        goes, and is then an error)."""
        dlen = m[DLEN]
        want = dlen + 1
        got = os.readv(fd, [view[pos : pos + want]])
        while 0 < got < dlen:
            more = os.readv(fd, [view[pos + got : pos + want]])
            if not more:
                break
            got += more
        if got != dlen:
            raise _changed(self._src_path(m))

    def _sparse(self, m):
        fd = self._open(m)
        try:
            pos = m[OFFSET] + m[HLEN]
            themap = tf.sparse_map(m[SEGMENTS])
            self._write(themap, pos)
            pos += len(themap)
            for off, n in m[SEGMENTS]:
                if n:
                    copyio.kernel_copy(fd, off, self.out, pos, n)
                pos += n
        finally:
            os.close(fd)
        return Done(1, m[REALSIZE])


def _changed(path):
    return StageError(
        EXIT_FAILED, path, "changed while being archived", "run the stage again"
    )
