"""Big files: split into ranges that several workers copy into one
pre-sized temporary file, renamed into place when its last range is in;
or, copied from memory into a RAM disk, copied whole by one worker
(one_writer).

How a range is copied is chosen by one function, range_strategy(), from
where the data is (RAM disk or device, one file system or two) and what
was found to work; RangeCopier carries each strategy out.
"""

import collections
import mmap
import os

from . import copyio, fsutil
from .errors import from_oserror
from .filewrite import check_size

BIG = 64 << 20  # files at least this large are split into ranges
CHUNK = 32 << 20  # range size
PIECE = 8 << 20  # O_DIRECT read size inside a range
# a range read from memory (the page cache, or a RAM disk) into a RAM disk
# is spliced through a pipe this size: the source's pages go into the pipe
# by reference and are copied once (faster than a buffer or sendfile, whose
# pipe moves 64 KiB a step: doc/stage.md)
CACHED_PIECE = 1 << 20
# whether a range is cached is first asked of a read this size at its start
PROBE = 64 << 10

# the ways to copy a range of a big file
SPARSE = "sparse"  # only the data parts, by the kernel: holes stay holes
DIRECT_READ = "direct-read"  # O_DIRECT reads into the mapped destination
CACHED_READ = "cached-read"  # from memory, spliced through a pipe
DIRECT_WRITE = "direct-write"  # O_DIRECT writes from the mapped source
BUFFERED = "buffered"  # pread/pwrite through one big buffer
KERNEL = "kernel"  # copy_file_range (or sendfile) in the kernel


def direct_modes(src_in_memory, dst_in_memory, direct=None):
    """(read_direct, write_direct) for a copy between these file systems.
    Into a RAM disk from a device, big files are read with O_DIRECT straight
    into the destination's pages; out of a RAM disk to a device, they are
    written with O_DIRECT straight from the mapped source.  DIRECT, if not
    None, is the caller's choice for the reads."""
    if direct is None:
        direct = dst_in_memory and not src_in_memory
    return bool(direct), src_in_memory and not dst_in_memory


def source_cached(pages):
    """Whether a range whose PAGES are (in the page cache, in all), or None
    if unknown, is read faster through the cache than around it: when at
    least half of it is there (what is not is then read with read-ahead,
    about as fast as O_DIRECT from the device)."""
    if pages is None:
        return False
    resident, total = pages
    return total > 0 and 2 * resident >= total


def one_writer(dst_in_memory, src_in_memory, src_cached):
    """Whether a big file is copied whole by one worker instead of in ranges
    by all.  Into a RAM disk from memory (a RAM disk, or a source whose
    pages are cached: SRC_CACHED) the copy is all CPU, and two workers
    writing one file queue for its lock (doc/stage.md has the figures).
    Different files still go to different workers."""
    return dst_in_memory and (src_in_memory or src_cached)


def file_cached(fd, size):
    """Whether the first, middle and last pages of a file of SIZE bytes,
    open as FD, are in the page cache (mincore)."""
    page = fsutil.PAGE
    last = (size - 1) // page * page
    return all(
        source_cached(fsutil.cached_pages(fd, off, page))
        for off in (0, last // 2 // page * page, last)
    )


def pieces(off, length, whole):
    """The ranges [(offset, length), ...] of the task [off, off+length) of
    a big file: CHUNKs, or with WHOLE the task as one range."""
    if whole:
        return [(off, length)]
    return [(o, min(CHUNK, off + length - o)) for o in range(off, off + length, CHUNK)]


def range_strategy(sparse, read_direct, write_direct, same_fs, src_cached=False):
    """How to copy a range of a big file (one of the names above).
    READ_DIRECT / WRITE_DIRECT: O_DIRECT reads / writes are wanted and not
    yet found impossible; SAME_FS: source and destination share a file
    system (where copy_file_range copies without moving data through user
    space); SRC_CACHED: the range is in the page cache already
    (source_cached), where O_DIRECT would read it again from the device,
    or, copied to a RAM disk, is on one."""
    if sparse:
        return SPARSE
    if read_direct:
        return CACHED_READ if src_cached else DIRECT_READ
    if write_direct:
        return DIRECT_WRITE
    if not same_fs:
        if src_cached:  # RAM disk to RAM disk
            return CACHED_READ
        # across file systems pread/pwrite through a big buffer with
        # read-ahead doubled beats sendfile's small steps
        return BUFFERED
    return KERNEL


class BigFiles:
    """The parent's side: each big file's temporary file, created full
    size before the copy, and the bytes still to come into it."""

    def __init__(self, plan, dst, names, writer, dst_rel=None):
        self.plan = plan
        # directory index -> its path under DST now (Copier.dst_rel)
        self.dst_rel = dst_rel or (lambda d: plan.dirs[d].rel)
        self.dst = dst
        self.names = names
        self.writer = writer
        self.tmp = {}  # file index -> temporary name
        self.left = {}  # file index -> bytes still to copy

    def create(self, i, f, dir_fd, allocate):
        """Make file I's temporary file in DIR_FD, its directory; ALLOCATE:
        reserve its blocks."""
        name = self.names.new()
        fd = os.open(name, fsutil.CREATE_FLAGS, 0o600, dir_fd=dir_fd)
        try:
            if allocate and not f.sparse and f.src is None:
                # allocated up front: direct writes into allocated space run
                # in parallel and leave the file in one piece on the device
                os.posix_fallocate(fd, 0, f.size)
            else:
                os.ftruncate(fd, f.size)
        except OSError as exc:
            os.close(fd)
            os.unlink(name, dir_fd=dir_fd)
            raise from_oserror(exc, fsutil.full(self.dst, self.plan.rel(f))) from None
        os.close(fd)
        self.tmp[i] = name
        self.left[i] = f.size

    def copied(self, i, nbytes, dst_root):
        """NBYTES more of file I are in; True when it was the last of it
        (the file then has its final name)."""
        self.left[i] -= nbytes
        if self.left[i] > 0:
            return False
        self._finish(i, dst_root)
        return True

    def _finish(self, i, dst_root):
        f = self.plan.files[i]
        name = self.tmp.pop(i)
        path = fsutil.full(self.dst, self.plan.rel(f))
        try:
            dfd = fsutil.open_dir(dst_root, self.dst_rel(f.d))
            try:
                fd = os.open(
                    name, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=dfd
                )
                try:
                    self.writer.set_meta(fd, f, dfd, mode=True)  # made 0600
                    check_size(fd, f, path)
                finally:
                    os.close(fd)
                os.rename(name, f.name, src_dir_fd=dfd, dst_dir_fd=dfd)
            finally:
                os.close(dfd)
        except OSError as exc:
            raise from_oserror(exc, path) from None

    def drop(self, dst_root):
        """Remove the temporary files of big files not finished."""
        for i, name in self.tmp.items():
            try:
                dfd = fsutil.open_dir(dst_root, self.dst_rel(self.plan.files[i].d))
                try:
                    os.unlink(name, dir_fd=dfd)
                finally:
                    os.close(dfd)
            except OSError:
                pass
        self.tmp.clear()


class RangeCopier:
    """A worker's side: copies ranges of big files.  Remembers, for the
    rest of its run, that O_DIRECT could not be used."""

    def __init__(
        self,
        read_direct,
        write_direct,
        same_fs,
        src_in_memory,
        writeback,
        dst_in_memory=False,
    ):
        self.read_direct = read_direct
        self.write_direct = write_direct
        self.same_fs = same_fs
        self.src_in_memory = src_in_memory
        self.dst_in_memory = dst_in_memory
        self.writeback = writeback
        self.buf = None
        self.small = None  # the CACHED_PIECE buffer
        self.pipe = None  # for splice_range, made when needed; False: no splice
        self.readers = None  # reading threads, made when needed
        self.used = collections.Counter()  # strategy -> ranges it copied

    def copy(self, f, sfd, sdir, dfd, dname, ddir, off, length):
        """Copy [off, off+length) of file F from SFD (F's source, in
        directory SDIR, or the archive holding it) to DFD (its temporary
        file DNAME in DDIR), at most a CHUNK.  Returns the bytes copied."""
        if f.src is not None:
            done = _archive_range(f, sfd, dfd, off, length)
        else:
            done, how = self._file_range(f, sfd, sdir, dfd, dname, ddir, off, length)
            if how == DIRECT_WRITE:  # not through the page cache: no writeback
                return done
        if self.writeback:
            fsutil.start_writeback(dfd, off, length)
        return done

    def _file_range(self, f, sfd, sdir, dfd, dname, ddir, off, length):
        """Returns (bytes copied, the strategy that copied them)."""
        cached = False
        if self.read_direct and not f.sparse:
            cached = self._cached(sfd, off, length)
        elif self.src_in_memory and self.dst_in_memory:
            cached = True
        while True:
            how = range_strategy(
                f.sparse, self.read_direct, self.write_direct, self.same_fs, cached
            )
            self.used[how] += 1
            if how == CACHED_READ:
                done = None
                if self._pipe():
                    done = copyio.splice_range(sfd, dfd, off, length, self.pipe)
                    if done is None:
                        self._no_splice()
                if done is None:
                    done = copyio.copy_range(sfd, dfd, off, length, buf=self._small())
                return done, how
            if how == DIRECT_READ:
                try:
                    direct = os.open(
                        f.name, fsutil.OPEN_FLAGS | os.O_DIRECT, dir_fd=sdir
                    )
                except OSError:
                    self.read_direct = False
                    continue
                try:
                    return self._read_into_map(direct, sfd, dfd, off, length), how
                finally:
                    os.close(direct)
            if how == DIRECT_WRITE:
                done = self._write_from_map(dname, sfd, ddir, dfd, off, length)
                if done is None:
                    continue
                return done, how
            if how == BUFFERED:
                if not self.src_in_memory:
                    os.posix_fadvise(sfd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
                return copyio.copy_range(sfd, dfd, off, length, buf=self._buffer()), how
            return copyio.copy_range(sfd, dfd, off, length, sparse=how == SPARSE), how

    def _cached(self, sfd, off, length):
        """Whether [off, off+length) of SFD is read through the page cache:
        yes when a read of its start that does not wait gets all it asked
        for; else (part of it, or nothing: EAGAIN also stands for a lock or
        a read-ahead the read would have waited for) the range's pages in
        the cache decide (mincore, source_cached)."""
        want = min(length, PROBE)
        if copyio.read_nowait(sfd, self._small(), off, want) == want:
            return True
        return source_cached(fsutil.cached_pages(sfd, off, length))

    def _write_from_map(self, name, sfd, ddir, dfd, off, length):
        """Copy [off, off+length) of a big file from a RAM disk to a disk:
        the source range is mapped (its pages are the RAM disk's, no copy)
        and written with O_DIRECT in one pwrite, so the device gets large
        sequential writes without the page cache of the destination (whose
        writeback made buffered writes slower than the device: doc/stage.md).
        A last part shorter than a block is written normally.  Returns the
        bytes copied, or None where O_DIRECT cannot be used (the caller then
        copies through the page cache)."""
        try:
            wfd = os.open(
                name,
                os.O_WRONLY | os.O_DIRECT | os.O_NOFOLLOW | os.O_CLOEXEC,
                dir_fd=ddir,
            )
        except OSError:
            self.write_direct = False
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
        m = mmap.mmap(
            dfd, length, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE, offset=off
        )
        view = memoryview(m)
        try:

            def read(piece):
                p, n = piece
                return os.preadv(direct, [view[p : p + n]], off + p)

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
                view[whole : whole + len(tail)] = tail
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

    def _pipe(self):
        if self.pipe is None:
            self.pipe = copyio.pipe(CACHED_PIECE)
        return self.pipe

    def _no_splice(self):
        """These files cannot be spliced: copy through the buffer from now."""
        for fd in self.pipe:
            os.close(fd)
        self.pipe = False

    def _small(self):
        if self.small is None:
            self.small = copyio.buffer(CACHED_PIECE)
        return self.small

    def _buffer(self):
        if self.buf is None:
            self.buf = copyio.buffer(CHUNK)
        return self.buf


def _archive_range(f, afd, dfd, off, length):
    """[off, off+length) of file F, a member of the archive AFD."""
    _, aoff, segments = f.src
    if segments is None:
        return copyio.copy_range(afd, dfd, aoff + off, length, delta=-aoff)
    # sparse member: copy the parts of the segments inside [off, off+length)
    pos = aoff
    for where, n in segments:
        lo, hi = max(where, off), min(where + n, off + length)
        if lo < hi:
            copyio.copy_range(afd, dfd, pos + (lo - where), hi - lo, delta=where - pos)
        pos += n
    return length
