"""Aggregation: a tree into ONE archive (tar), archives back into a tree
(untar).

The writer knows every member's size from the plan, so it lays the whole
archive out first (each member's offset) and lets the workers write their
batches with one pwrite each, in parallel, into a temporary file that is
renamed to its final name when complete.  The reader turns archives into a
Plan whose files point into the archive, and the copy engine does the rest.
"""

import mmap
import os

from . import copy as copymod
from . import copyio, fsutil, pool
from . import tarformat as tf
from .errors import EXIT_FAILED, EXIT_VERIFY, StageError, from_oserror
from .plan import Dir, File, HardLink, Special, Symlink

DEFAULT_NAME = b"rsa-output.tar"
BATCH_BYTES = 8 << 20
BATCH_MEMBERS = 512


class _Member:
    """An entry of the plan as an archive member, with its layout."""

    __slots__ = ("entry", "path", "kind", "offset", "hlen", "dlen", "segments",
                 "link")


class TarWriter:
    """Write PLAN (a walked tree) as DSTDIR/NAME."""

    def __init__(self, plan, dstdir, name=DEFAULT_NAME, workers=2, progress=None,
                 tag=b"0"):
        self.plan = plan
        self.dstdir = dstdir
        self.name = name
        self.workers = workers
        self.progress = progress or (lambda done, nbytes: None)
        self.tag = tag
        self.files_done = 0
        self.bytes_done = 0

    def _layout(self, src_root):
        plan = self.plan
        members = []

        def add(entry, path, kind, dlen=0, link=b""):
            m = _Member()
            m.entry, m.path, m.kind, m.dlen, m.segments = entry, path, kind, dlen, None
            m.link = link
            m.hlen = tf.header_size(path, link)
            members.append(m)
            return m

        data_at = {}  # id(File) -> path of the member holding its data

        def regular(f, path):
            """A name of file F: its data the first time, later a hard link."""
            first = data_at.get(id(f))
            if first is not None:
                add(f, path, "hardlink", 0, first)
                return
            if f.key is not None:
                data_at[id(f)] = path
            m = add(f, path, "file", f.size)
            if f.sparse:
                self._sparse_layout(m, src_root)

        for di, names, links, specials in self._depth_first():
            d = plan.dirs[di]
            add(d, (d.rel or b".") + b"/", "dir")
            for e in names:
                if isinstance(e, HardLink):
                    regular(e.first, plan.rel(e))
                else:
                    regular(e, plan.rel(e))
            for s in links:
                add(s, plan.rel(s), "symlink", 0, s.target)
            for s in specials:
                add(s, plan.rel(s), "special")
        off = 0
        for m in members:
            if m.hlen is None:
                m.hlen = len(self._header(m))
            m.offset = off
            off += m.hlen + tf.pad(m.dlen)
        end = off + 2 * tf.BLOCK
        self.size = (end + tf.RECORD - 1) // tf.RECORD * tf.RECORD
        self.members = members

    def _depth_first(self):
        """(dir index, regular names, symlinks, specials) per directory, in
        depth-first order: each directory's whole subtree follows it.  GNU
        tar sets a directory's times when it meets the first member outside
        it, so an entry archived after that would leave the directory with
        the time of the extraction."""
        plan = self.plan
        n = len(plan.dirs)
        subdirs = [[] for _ in range(n)]
        names = [[] for _ in range(n)]
        links = [[] for _ in range(n)]
        specials = [[] for _ in range(n)]
        for i, d in enumerate(plan.dirs[1:], 1):
            subdirs[d.d].append(i)
        for e in plan.files:
            names[e.d].append(e)
        for e in plan.hardlinks:
            names[e.d].append(e)
        for e in plan.symlinks:
            links[e.d].append(e)
        for e in plan.specials:
            specials[e.d].append(e)
        stack = [0]
        while stack:
            di = stack.pop()
            mine = names[di]
            if plan.hardlinks:
                mine.sort(key=lambda e: e.name)
            yield di, mine, links[di], specials[di]
            stack.extend(reversed(subdirs[di]))

    def _sparse_layout(self, m, src_root):
        f = m.entry
        dfd = fsutil.open_dir(src_root, self.plan.dirs[f.d].rel)
        try:
            fd = os.open(f.name, copymod.OPEN_FLAGS, dir_fd=dfd)
        finally:
            os.close(dfd)
        try:
            segs = list(copyio.data_segments(fd, 0, f.size))
        finally:
            os.close(fd)
        if not segs or segs[-1][0] + segs[-1][1] < f.size:
            segs.append((f.size, 0))  # marks the real end, as GNU tar does
        m.segments = segs
        m.dlen = len(tf.sparse_map(segs)) + sum(n for _, n in segs)

    def _header(self, m):
        e = m.entry
        if m.kind == "dir":
            return tf.header(m.path, e.mode, e.uid, e.gid, 0, e.mtime, tf.TYPE_DIR)
        if m.kind == "file":
            sparse = (e.size,) if m.segments is not None else None
            return tf.header(m.path, e.mode, e.uid, e.gid, m.dlen, e.mtime,
                             tf.TYPE_FILE, sparse=sparse)
        if m.kind == "symlink":
            return tf.header(m.path, e.mode, e.uid, e.gid, 0, e.mtime,
                             tf.TYPE_SYMLINK, e.target)
        if m.kind == "special":
            return tf.header(m.path, e.mode, e.uid, e.gid, 0, e.mtime,
                             tf.typeflag_of(e.mode), rdev=e.rdev)
        return tf.header(m.path, e.mode, e.uid, e.gid, 0, e.mtime, tf.TYPE_HARDLINK,
                         m.link)

    def _tasks(self):
        tasks = []
        start = None
        nbytes = 0
        for i, m in enumerate(self.members):
            big = m.kind == "file" and (m.dlen >= copymod.BIG or m.segments is not None)
            if big:
                if start is not None:
                    tasks.append(("B", start, i))
                    start = None
                tasks.append(("H", i))
                if m.segments is None:
                    for off in range(0, m.dlen, copymod.CHUNK):
                        tasks.append(("R", i, off, min(copymod.CHUNK, m.dlen - off)))
                continue
            if start is None:
                start, nbytes = i, 0
            nbytes += m.hlen + m.dlen
            if i + 1 - start >= BATCH_MEMBERS or nbytes >= BATCH_BYTES:
                tasks.append(("B", start, i + 1))
                start = None
        if start is not None:
            tasks.append(("B", start, len(self.members)))
        return tasks

    def run(self, sync=True):
        """Write the archive; return its final path."""
        try:
            self.src_root = os.open(self.plan.src, fsutil.DIR_FLAGS)
        except OSError as exc:
            raise from_oserror(exc, self.plan.src, missing_is_source=True) from None
        final = fsutil.full(self.dstdir, self.name)
        self.src_in_memory = fsutil.in_memory(self.src_root)
        try:
            dir_fd = copymod._open_or_make_root(self.dstdir)
            # start writing each part to the device as soon as it is in the
            # file, so the final fsync has little left to wait for
            self.writeback = sync and not fsutil.in_memory(dir_fd)
            self._layout(self.src_root)
            self.tasks = self._tasks()
            self._remove_stale(dir_fd)
            self.tmp = fsutil.tmp_name(self.tag, 0)
            try:
                fd = os.open(self.tmp, copymod.CREATE_FLAGS, 0o644, dir_fd=dir_fd)
                try:
                    os.ftruncate(fd, self.size)
                    self.ino = os.fstat(fd).st_ino
                finally:
                    os.close(fd)
                self.dir_fd = dir_fd
                pool.run(len(self.tasks), self.workers, self._handle, self._message,
                         setup=self._setup,
                         poll=lambda: self.progress(self.files_done, self.bytes_done))
                if sync:
                    fd = os.open(self.tmp, os.O_WRONLY | os.O_NOFOLLOW, dir_fd=dir_fd)
                    try:
                        os.fsync(fd)
                    finally:
                        os.close(fd)
                os.rename(self.tmp, self.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
                if sync:
                    os.fsync(dir_fd)
            except OSError as exc:
                copymod._unlink_quiet(self.tmp, dir_fd)
                raise from_oserror(exc, final) from None
            except BaseException:
                copymod._unlink_quiet(self.tmp, dir_fd)
                raise
            finally:
                os.close(dir_fd)
        finally:
            os.close(self.src_root)
        self.final = final
        return final

    def verify_layout(self):
        """--verify size for an archive just written: the file under the
        final name is the one written, with the size of its layout; the
        layout holds every entry of the tree once, members end to end; the
        workers wrote every byte they read and read every file's planned
        size.  (Checked against the layout instead of reading the archive
        back: what re-reading would find is what the layout put there.)"""
        plan = self.plan
        try:
            st = os.stat(self.final, follow_symlinks=False)
        except OSError as exc:
            raise from_oserror(exc, self.final) from None
        why = None
        if st.st_ino != self.ino:
            why = "the archive was replaced by another file"
        elif st.st_size != self.size:
            why = f"size {st.st_size}, laid out as {self.size}"
        elif (self.files_done, self.bytes_done) != (len(plan.files), plan.bytes_total):
            why = (f"{self.files_done} files of {self.bytes_done} bytes written, "
                   f"{len(plan.files)} of {plan.bytes_total} planned")
        elif len(self.members) != (len(plan.dirs) + len(plan.files) + len(plan.hardlinks)
                                   + len(plan.symlinks) + len(plan.specials)):
            why = "the layout does not hold every entry of the tree"
        else:
            off = 0
            for m in self.members:
                if m.offset != off:
                    why = f"member {tf_show(m.path)} is not where the layout put it"
                    break
                off += m.hlen + tf.pad(m.dlen)
        if why:
            raise StageError(EXIT_VERIFY, self.final, f"verification failed: {why}",
                             "run the stage again")

    def _remove_stale(self, dir_fd):
        for name in os.listdir(dir_fd):
            name = os.fsencode(name)
            if fsutil.is_tmp_of(name, self.tag):
                copymod._unlink_quiet(name, dir_fd)

    def _message(self, msg):
        files, nbytes = msg[2]
        self.files_done += files
        self.bytes_done += nbytes
        self.progress(self.files_done, self.bytes_done)

    # ---- worker side
    def _setup(self, send):
        self.sdirs = copymod._DirCache(self.src_root, self.plan)
        self.out = os.open(self.tmp, os.O_WRONLY | os.O_NOFOLLOW, dir_fd=self.dir_fd)
        self.buf = None

    def _src_path(self, e):
        return fsutil.full(self.plan.src, self.plan.rel(e))

    def _open(self, f):
        try:
            return os.open(f.name, copymod.OPEN_FLAGS, dir_fd=self.sdirs.get(f.d))
        except OSError as exc:
            raise from_oserror(exc, self._src_path(f)) from None

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

    def _handle(self, idx, send):
        task = self.tasks[idx]
        kind = task[0]
        if kind == "B":
            return self._batch(task[1], task[2])
        m = self.members[task[1]]
        if kind == "H":
            self._write(self._header(m), m.offset)
            if m.segments is not None:
                return self._sparse(m)
            return (0, 0)
        _, i, off, n = task
        f = m.entry
        fd = self._open(f)
        try:
            done = copyio._kernel_copy(fd, off, self.out, m.offset + m.hlen + off, n)
        except OSError as exc:
            if exc.errno in copymod._DST_ERRNOS:
                raise from_oserror(exc, fsutil.full(self.dstdir, self.name)) from None
            raise from_oserror(exc, self._src_path(f)) from None
        finally:
            os.close(fd)
        if done != n:
            raise _changed(self._src_path(f))
        if self.writeback:
            fsutil.start_writeback(self.out, m.offset + m.hlen + off, n)
        return (1 if off + n >= m.dlen else 0, n)

    def _batch(self, start, end):
        """Members START..END-1 (small ones) assembled in one buffer at their
        laid-out places, file data read straight into it, one pwrite."""
        members = self.members[start:end]
        base = members[0].offset
        last = members[-1]
        size = last.offset + last.hlen + tf.pad(last.dlen) - base
        out = bytearray(size + 1)  # zeros (the padding); +1, see _read
        view = memoryview(out)
        fds = {}
        try:
            if not self.src_in_memory:
                # open them all and announce the reads first, so that one
                # worker keeps many reads in flight; from a RAM disk each
                # file is opened, read and closed in turn
                for i, m in enumerate(members):
                    if m.kind == "file" and m.dlen:
                        fd = fds[i] = self._open(m.entry)
                        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_WILLNEED)
            files = nbytes = 0
            for i, m in enumerate(members):
                pos = m.offset - base
                self._put_header(out, pos, m)
                if m.kind != "file":
                    continue
                files += 1
                if not m.dlen:
                    continue
                fd = fds.pop(i, None)
                if fd is None:
                    fd = self._open(m.entry)
                try:
                    self._read(fd, view, pos + m.hlen, m)
                finally:
                    os.close(fd)
                nbytes += m.dlen
        except OSError as exc:
            raise from_oserror(exc, self.plan.src) from None
        finally:
            for fd in fds.values():
                os.close(fd)
        self._write(view[:size], base)
        return (files, nbytes)

    def _put_header(self, out, pos, m):
        """M's header blocks into OUT at POS: written in place for plain
        files and directories, else built and copied."""
        n = 0
        if m.kind == "file" or m.kind == "dir":
            e = m.entry
            n = tf.header_into(out, pos, m.path, e.mode, e.uid, e.gid, m.dlen,
                               e.mtime, tf.TYPE_FILE if m.kind == "file" else tf.TYPE_DIR)
        if not n:
            head = self._header(m)
            n = len(head)
            if n == m.hlen:
                out[pos:pos + n] = head
        if n != m.hlen:
            raise StageError(EXIT_FAILED, self._src_path(m.entry),
                             f"internal error: header of {n} bytes laid out as {m.hlen}")

    def _read(self, fd, view, pos, m):
        """Read member M's data from FD into VIEW at POS.  One byte more than
        planned is asked for: a regular file returns less than asked only at
        its end, so one read shows a file that grew (the extra byte lands
        where the next header or the spare byte at the end of the buffer
        goes, and is then an error)."""
        want = m.dlen + 1
        got = os.readv(fd, [view[pos:pos + want]])
        while 0 < got < m.dlen:
            more = os.readv(fd, [view[pos + got:pos + want]])
            if not more:
                break
            got += more
        if got != m.dlen:
            raise _changed(self._src_path(m.entry))

    def _sparse(self, m):
        f = m.entry
        fd = self._open(f)
        try:
            pos = m.offset + m.hlen
            themap = tf.sparse_map(m.segments)
            self._write(themap, pos)
            pos += len(themap)
            for off, n in m.segments:
                if n:
                    copyio._kernel_copy(fd, off, self.out, pos, n)
                pos += n
        finally:
            os.close(fd)
        return (1, f.size)


def _changed(path):
    return StageError(EXIT_FAILED, path, "changed while being archived",
                      "run the stage again")


# ---- reading: archives into a plan -------------------------------------------

def _clean(path, archive):
    parts = []
    for p in path.split(b"/"):
        if p in (b"", b"."):
            continue
        if p == b"..":
            raise StageError(EXIT_FAILED, archive,
                             f"member {fsutil_show(path)} leaves the destination "
                             "(contains '..')", "refusing to unpack it")
        parts.append(p)
    return b"/".join(parts)


def tf_show(path):
    return path.decode("utf-8", "backslashreplace")


def fsutil_show(path):
    return path.decode("utf-8", "backslashreplace")


class _Merger:
    """Adds archive members to a Plan, later entries replacing earlier ones."""

    def __init__(self, plan):
        self.plan = plan
        self.dir_index = {d.rel: i for i, d in enumerate(plan.dirs)}
        self.others = {}
        for lst in (plan.files, plan.symlinks, plan.specials):
            for e in lst:
                self.others[plan.rel(e)] = e

    def parent(self, rel, archive):
        head, _, name = rel.rpartition(b"/")
        di = self.dir_index.get(head)
        if di is None:
            if head in self.others:
                raise StageError(EXIT_FAILED, archive,
                                 f"member {fsutil_show(rel)} lies under "
                                 f"{fsutil_show(head)}, which is not a directory",
                                 "refusing to unpack it")
            d = Dir()
            d.rel = head
            d.d = self.parent(head, archive)[0]
            d.name = head.rpartition(b"/")[2]
            d.mode = 0o40755
            d.uid, d.gid = os.getuid(), os.getgid()
            d.atime = d.mtime = self.plan.dirs[0].mtime
            di = len(self.plan.dirs)
            self.plan.dirs.append(d)
            self.dir_index[head] = di
        return di, name

    def add(self, m, ai, archive):
        rel = _clean(m.path, archive)
        if m.typeflag == tf.TYPE_DIR:
            if rel in self.dir_index:
                e = self.plan.dirs[self.dir_index[rel]]
            else:
                e = Dir()
                e.rel = rel
                if rel:
                    e.d, e.name = self.parent(rel, archive)
                self.dir_index[rel] = len(self.plan.dirs)
                self.plan.dirs.append(e)
            _meta(e, m, 0o040000)
            return
        d, name = self.parent(rel, archive)
        if m.typeflag == tf.TYPE_HARDLINK:
            first = self.others.get(_clean(m.linkname, archive))
            if not isinstance(first, File):
                raise StageError(EXIT_FAILED, archive,
                                 f"hard link {fsutil_show(rel)} points at "
                                 f"{fsutil_show(m.linkname)}, not an earlier file",
                                 "the archive is damaged")
            self.plan.hardlinks.append(HardLink(d, name, first))
            return
        if m.typeflag == tf.TYPE_FILE:
            e = File()
            e.size = m.realsize
            e.sparse = m.segments is not None
            e.key = None
            e.skip = False
            e.src = (ai, m.data_off, m.segments)
            kind = 0o100000
        elif m.typeflag == tf.TYPE_SYMLINK:
            e = Symlink()
            e.target = m.linkname
            kind = 0o120000
        elif m.typeflag in (tf.TYPE_CHAR, tf.TYPE_BLOCK, tf.TYPE_FIFO):
            e = Special()
            e.rdev = m.rdev
            kind = {tf.TYPE_CHAR: 0o020000, tf.TYPE_BLOCK: 0o060000,
                    tf.TYPE_FIFO: 0o010000}[m.typeflag]
        else:
            return  # unknown member types are skipped
        e.d, e.name = d, name
        _meta(e, m, kind)
        self.others[rel] = e

    def finish(self):
        plan = self.plan
        plan.files = [e for e in self.others.values() if isinstance(e, File)]
        plan.symlinks = [e for e in self.others.values() if isinstance(e, Symlink)]
        plan.specials = [e for e in self.others.values() if isinstance(e, Special)]
        plan.files.sort(key=lambda f: f.d)


def _meta(e, m, kind):
    e.mode = kind | (m.mode & 0o7777)
    e.uid, e.gid = m.uid, m.gid
    e.mtime = m.mtime
    e.atime = m.atime


def add_archive(plan, path):
    """Add the members of the archive at PATH to PLAN."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise from_oserror(exc, path, missing_is_source=True) from None
    try:
        size = os.fstat(fd).st_size
        ai = len(plan.archives)
        plan.archives.append(path)
        merger = _Merger(plan)
        if size == 0:
            return
        with mmap.mmap(fd, size, prot=mmap.PROT_READ) as buf:
            try:
                for m in tf.members(buf):
                    merger.add(m, ai, path)
            except (tf.FormatError, ValueError, IndexError) as exc:
                raise StageError(EXIT_FAILED, path, f"not a readable tar archive: {exc}",
                                 "check the file, or stage it with 'copy'") from None
        merger.finish()
    finally:
        os.close(fd)


def untar_plan(src, shard=(0, 1)):
    """A plan for 'untar': SRC's top-level *.tar files unpacked (in name
    order), everything else in SRC copied as by 'copy'."""
    from . import plan as planmod
    import stat

    base = planmod.walk(src, shard)
    archives = []
    keep = []
    for f in base.files:
        if f.d == 0 and f.name.endswith(b".tar") and stat.S_ISREG(f.mode):
            archives.append(f.name)
        else:
            keep.append(f)
    base.files = keep
    for name in sorted(archives):
        add_archive(base, fsutil.full(src, name))
    return base
