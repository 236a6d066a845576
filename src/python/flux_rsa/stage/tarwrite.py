"""Aggregation: a tree into ONE archive (tar).

The writer walks the tree depth first, one directory at a time, and lays
each directory's members out (their offsets in the archive) as soon as it
has scanned it: a member's size is known from its metadata.  Batches of
laid-out members go to the workers while the walk goes on; each worker
assembles a batch in one buffer and writes it with one pwrite, in
parallel, into a temporary file that is renamed to its final name when
complete.  (untar.py reads archives back.)
"""

import os
from collections import namedtuple

from . import bigfile, copyio, fsutil
from . import plan as planmod
from . import tarformat as tf
from . import workers
from .errors import DESTINATION_ERRNOS, EXIT_FAILED, StageError, from_oserror
from .plan import File, HardLink
from .tasks import Done

DEFAULT_NAME = b"rsa-output.tar"
BATCH_BYTES = 8 << 20
BATCH_MEMBERS = 512
BATCH_NAMES = 48 << 10  # bytes of names in one batch (a task message's size)


# A member of the archive is a tuple (cheap to make and to send to a
# worker): what it is, where it goes, and its header's fields.  PATH is
# None for a plain file (DIRREL/NAME make it); HEAD is the header when the
# parent had to build it to know its length.
(
    KIND,
    PATH,
    DIRREL,
    NAME,
    MODE,
    UID,
    GID,
    MTIME,
    OFFSET,
    HLEN,
    DLEN,
    LINK,
    RDEV,
    SEGMENTS,
    REALSIZE,
    HEAD,
) = range(16)


class Members(namedtuple("Members", "members")):
    """A worker's task: small MEMBERS, end to end, written in one piece."""

    __slots__ = ()


class Header(namedtuple("Header", "member")):
    """A worker's task: the header of a big or sparse MEMBER (and the data
    of a sparse one)."""

    __slots__ = ()


class MemberRange(namedtuple("MemberRange", "member off length")):
    """A worker's task: [off, off + length) of the data of big MEMBER."""

    __slots__ = ()


def _path(m):
    if m[PATH] is not None:
        return m[PATH]
    return fsutil.join(m[DIRREL], m[NAME])


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
        self.files_total = 0  # of the walk so far
        self.bytes_total = 0
        self.files_done = 0
        self.bytes_done = 0

    # ---- parent side: the walk and the layout ----------------------------
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
            self._start_layout()
            workers.run_stream(
                self._produce,
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

    def _start_layout(self):
        self.layout = []  # every member, in archive order
        self.offset = 0
        self.data_at = {}  # id(File) -> path of the member holding its data
        self.batch = []
        self.batch_bytes = self.batch_names = 0
        self.walk_done = False
        self.size = None

    def _produce(self):
        """Scan the next directory and lay out its members: its own, then
        its files and hard links, symbolic links and specials, each in name
        order (then its subdirectories follow, one whole subtree after the
        other: GNU tar sets a directory's times when it meets the first
        member outside it, so an entry archived after that would leave the
        directory with the time of the extraction).  Returns the tasks now
        complete, or None when the walk is over."""
        if self.walk_done:
            return None
        tasks = []
        plan = self.plan
        di = self.walker.step()
        if di is None:
            self.walk_done = True
            self._flush(tasks)
            end = self.offset + 2 * tf.BLOCK
            self.size = (end + tf.RECORD - 1) // tf.RECORD * tf.RECORD
            return tasks
        d = plan.dirs[di]
        files, hardlinks, symlinks, specials = self.walker.span()
        self.files_total += len(files)
        self.bytes_total += sum(f.size for f in files)
        rel = d.rel
        add = self._add
        add(tasks, "dir", (rel or b".") + b"/", None, None, d)
        names = files
        if hardlinks:
            names = sorted(files + hardlinks, key=lambda e: e.name)
        for e in names:
            if e.__class__ is File and e.key is None and not e.sparse:
                add(tasks, "file", None, rel, e.name, e, e.size)
            else:
                self._regular(tasks, e, rel)
        for s in symlinks:
            add(tasks, "symlink", fsutil.join(rel, s.name), None, None, s, 0, s.target)
        for s in specials:
            add(tasks, "special", fsutil.join(rel, s.name), None, None, s)
        return tasks

    def _regular(self, tasks, e, rel):
        """A name of a file: its data the first time, later a hard link."""
        f = e.first if isinstance(e, HardLink) else e
        first = self.data_at.get(id(f))
        if first is not None:
            self._add(
                tasks, "hardlink", fsutil.join(rel, e.name), None, None, f, 0, first
            )
            return
        if f.key is not None:
            self.data_at[id(f)] = fsutil.join(rel, e.name)
        if not f.sparse:
            self._add(tasks, "file", None, rel, e.name, f, f.size)
            return
        segments = self._sparse_layout(rel, e.name, f.size)
        dlen = len(tf.sparse_map(segments)) + sum(n for _, n in segments)
        self._add(tasks, "file", None, rel, e.name, f, dlen, b"", segments)

    def _add(self, tasks, kind, path, dirrel, name, e, dlen=0, link=b"", segments=None):
        """Lay member KIND out after the members before it, and give it to
        a task.  E is its entry in the plan."""
        if path is not None:
            plen = len(path)
        else:
            plen = len(dirrel) + 1 + len(name) if dirrel else len(name)
        offset = self.offset
        head = None
        if plen + len(link) < tf.SHORT_PATHS:
            hlen = 3 * tf.BLOCK
        else:
            m = (
                kind,
                path,
                dirrel,
                name,
                e.mode,
                e.uid,
                e.gid,
                e.mtime,
                offset,
                0,
                dlen,
                link,
                getattr(e, "rdev", 0),
                segments,
                getattr(e, "size", 0),
                None,
            )
            head = _header(m)
            hlen = len(head)
        m = (
            kind,
            path,
            dirrel,
            name,
            e.mode,
            e.uid,
            e.gid,
            e.mtime,
            offset,
            hlen,
            dlen,
            link,
            e.rdev if kind == "special" else 0,
            segments,
            e.size if kind == "file" else 0,
            head,
        )
        self.offset = offset + hlen + (dlen + tf.BLOCK - 1) // tf.BLOCK * tf.BLOCK
        self.layout.append(m)
        if kind == "file" and (dlen >= bigfile.BIG or segments is not None):
            # a batch is written in one piece: it ends before this member
            self._flush(tasks)
            tasks.append(Header(m))
            if segments is None:
                for off in range(0, dlen, bigfile.CHUNK):
                    tasks.append(MemberRange(m, off, min(bigfile.CHUNK, dlen - off)))
            return
        batch = self.batch
        batch.append(m)
        self.batch_bytes += hlen + dlen
        self.batch_names += plen + len(link) + len(dirrel or b"")
        if (
            len(batch) >= BATCH_MEMBERS
            or self.batch_bytes >= BATCH_BYTES
            or self.batch_names >= BATCH_NAMES
        ):
            self._flush(tasks)

    def _flush(self, tasks):
        if self.batch:
            tasks.append(Members(self.batch))
            self.batch = []
            self.batch_bytes = self.batch_names = 0

    def _sparse_layout(self, rel, name, size):
        """The data segments of a sparse file, ending with its real end."""
        dfd = fsutil.open_dir(self.src_root, rel)
        try:
            fd = os.open(name, fsutil.OPEN_FLAGS, dir_fd=dfd)
        finally:
            os.close(dfd)
        try:
            segs = list(copyio.data_segments(fd, 0, size))
        finally:
            os.close(fd)
        if not segs or segs[-1][0] + segs[-1][1] < size:
            segs.append((size, 0))  # marks the real end, as GNU tar does
        return segs

    def spans(self):
        """(offset, length) of each member of the layout, in archive order
        (verify.check_layout)."""
        pad = tf.pad
        return ((m[OFFSET], m[HLEN] + pad(m[DLEN])) for m in self.layout)

    def member_path(self, k):
        """The path of member K of the layout."""
        return _path(self.layout[k])

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
        return fsutil.full(self.src, _path(m))

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
            self._write(m[HEAD] or _header(m), m[OFFSET])
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
                        _path(m),
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
        head = m[HEAD] or _header(m)
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


def _header(m):
    """All header blocks of member M, built."""
    kind = m[KIND]
    path = _path(m)
    if kind == "dir":
        return tf.header(path, m[MODE], m[UID], m[GID], 0, m[MTIME], tf.TYPE_DIR)
    if kind == "file":
        sparse = (m[REALSIZE],) if m[SEGMENTS] is not None else None
        return tf.header(
            path,
            m[MODE],
            m[UID],
            m[GID],
            m[DLEN],
            m[MTIME],
            tf.TYPE_FILE,
            sparse=sparse,
        )
    if kind == "symlink":
        return tf.header(
            path, m[MODE], m[UID], m[GID], 0, m[MTIME], tf.TYPE_SYMLINK, m[LINK]
        )
    if kind == "special":
        return tf.header(
            path,
            m[MODE],
            m[UID],
            m[GID],
            0,
            m[MTIME],
            tf.typeflag_of(m[MODE]),
            rdev=m[RDEV],
        )
    return tf.header(
        path, m[MODE], m[UID], m[GID], 0, m[MTIME], tf.TYPE_HARDLINK, m[LINK]
    )


def _changed(path):
    return StageError(
        EXIT_FAILED, path, "changed while being archived", "run the stage again"
    )
