"""Moving bytes between file descriptors, holes kept as holes."""

import errno
import fcntl
import mmap
import os

SMALL = 1 << 20  # read()/write() below this, the kernel's copy above it
BLOCK = 4096
# copy_file_range errors meaning "not between these two files": use sendfile
NO_KERNEL_COPY = frozenset(
    {errno.EXDEV, errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ETXTBSY}
)
# errors of splice and of a read that does not wait meaning "not done this
# way on these files" (kernel or file system)
UNSUPPORTED = frozenset({errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP})


def copy_whole(sfd, dfd, size):
    """Copy a file of (planned) SIZE bytes from offset 0 of SFD to offset 0
    of DFD.  Returns the bytes copied, which differs from SIZE when the
    source changed size meanwhile."""
    if size >= SMALL:
        done = kernel_copy(sfd, 0, dfd, 0, size)
        if done == size and os.pread(sfd, 1, size):
            return done + 1  # grew: report a mismatch
        return done
    data = os.read(sfd, size + 1)  # one read; the extra byte detects growth
    done = 0
    while True:
        if data:
            _write_all(dfd, data)
        done += len(data)
        if done == size or not data:
            return done
        data = os.read(sfd, SMALL)


def _write_all(fd, data):
    n = os.write(fd, data)
    if n < len(data):
        view = memoryview(data)
        while n < len(view):
            n += os.write(fd, view[n:])


def write_from_map(sfd, wfd, start, length):
    """Write the whole blocks of [start, start+length) of SFD (a file on a
    RAM disk, START a multiple of the page size) to the same place of WFD,
    an O_DIRECT descriptor: the source range is mapped and handed to the
    device with no copy.  Returns the bytes written (fewer if the source
    was truncated meanwhile: the kernel then reports EFAULT)."""
    whole = length // BLOCK * BLOCK
    if not whole:
        return 0
    m = mmap.mmap(sfd, whole, mmap.MAP_SHARED, mmap.PROT_READ, offset=start)
    view = memoryview(m)
    done = 0
    try:
        while done < whole:
            try:
                n = os.pwrite(wfd, view[done:whole], start + done)
            except OSError as exc:
                if exc.errno == errno.EFAULT:
                    return done
                raise
            if n <= 0:
                return done
            done += n
        return done
    finally:
        view.release()
        m.close()


def read_nowait(fd, buf, offset, n):
    """Read up to N bytes at OFFSET of FD into BUF from the page cache only
    (preadv2 with RWF_NOWAIT): the bytes read, up to the first page not in
    the cache or a lock or read-ahead the read would wait for (0 if that
    comes first), or None where the kernel or the file system does not
    read this way."""
    flag = getattr(os, "RWF_NOWAIT", None)
    if flag is None:
        return None
    try:
        return os.preadv(fd, [memoryview(buf)[:n]], offset, flag)
    except BlockingIOError:
        return 0
    except OSError as exc:
        if exc.errno in UNSUPPORTED:
            return None
        raise


def pipe(size):
    """A pipe (read end, write end) holding SIZE bytes if the system lets it,
    for splice_range."""
    r, w = os.pipe2(os.O_CLOEXEC)
    try:
        fcntl.fcntl(w, fcntl.F_SETPIPE_SZ, size)
    except OSError:
        pass  # a smaller pipe moves the same bytes in more steps
    return r, w


def splice_range(sfd, dfd, start, length, pipe_fds):
    """Copy [start, start+length) of SFD to the same place of DFD through
    the pipe PIPE_FDS (from pipe(), empty): the source's pages go into the
    pipe by reference and are copied once, into the destination.  Returns
    the bytes copied (fewer at the end of the source), or None where the two
    files cannot be spliced (nothing was copied then)."""
    r, w = pipe_fds
    done = 0
    while done < length:
        try:
            n = os.splice(sfd, w, length - done, offset_src=start + done)
        except OSError as exc:
            if done == 0 and exc.errno in UNSUPPORTED:
                return None
            raise
        if n == 0:
            break
        left = n
        while left:
            try:
                left -= os.splice(r, dfd, left, offset_dst=start + done + n - left)
            except OSError as exc:
                if done == 0 and left == n and exc.errno in UNSUPPORTED:
                    _drain(r, n)
                    return None
                raise
        done += n
    return done


def _drain(r, n):
    while n:
        n -= len(os.read(r, n))


def write_all_at(fd, data, offset):
    """pwrite all of DATA at OFFSET."""
    view = memoryview(data)
    done = 0
    while done < len(view):
        done += os.pwrite(fd, view[done:], offset + done)


def kernel_copy(sfd, soff, dfd, doff, length):
    """Copy LENGTH bytes at SOFF in SFD to DOFF in DFD inside the kernel.
    copy_file_range works within one file system; across file systems
    sendfile does the same page-cache to page-cache copy."""
    done = 0
    try:
        while done < length:
            n = os.copy_file_range(sfd, dfd, length - done, soff + done, doff + done)
            if n == 0:
                return done
            done += n
        return done
    except OSError as exc:
        if exc.errno not in NO_KERNEL_COPY:
            raise
    os.lseek(dfd, doff + done, os.SEEK_SET)
    while done < length:
        n = os.sendfile(dfd, sfd, soff + done, length - done)
        if n == 0:
            break
        done += n
    return done


def data_segments(fd, start, end):
    """Yield (offset, length) of the data (non-hole) parts of [start, end);
    all of it where the file system cannot tell (a sharded GlusterFS
    volume answers SEEK_DATA with EOPNOTSUPP): its holes are copied as
    zeros."""
    pos = start
    while pos < end:
        try:
            data = os.lseek(fd, pos, os.SEEK_DATA)
        except OSError as exc:
            if exc.errno == errno.ENXIO:  # only a hole up to EOF
                return
            if exc.errno in (errno.EOPNOTSUPP, errno.EINVAL):
                yield pos, end - pos
                return
            raise
        if data >= end:
            return
        hole = min(os.lseek(fd, data, os.SEEK_HOLE), end)
        yield data, hole - data
        pos = hole


def copy_range(sfd, dfd, start, length, delta=0, sparse=False, direct=None, buf=None):
    """Copy [start, start+length) of SFD to DFD at offset start+delta.

    With SPARSE only the data parts are copied (DFD must already have its
    final size, so the skipped parts stay holes).  With BUF (a page-aligned
    buffer, see buffer()) the bytes go through it with pread/pwrite, which
    reads ahead better across file systems than sendfile's small pipe
    steps; DIRECT, if given, is an O_DIRECT descriptor of the same source to
    read with instead.  Without BUF the kernel copies (copy_file_range,
    else sendfile).  Returns the number of bytes read from the source.
    """
    end = start + length
    if sparse:
        done = 0
        for off, n in data_segments(sfd, start, end):
            done += kernel_copy(sfd, off, dfd, off + delta, n)
        return done
    if buf is not None:
        rfd = direct if direct is not None and start % BLOCK == 0 else sfd
        return _buffer_copy(rfd, dfd, start, end, delta, buf)
    return kernel_copy(sfd, start, dfd, start + delta, length)


def _buffer_copy(sfd, dfd, start, end, delta, buf):
    view = memoryview(buf)
    size = len(buf)
    pos = start
    while pos < end:
        want = min(size, end - pos)
        aligned = (want + BLOCK - 1) // BLOCK * BLOCK
        n = os.preadv(sfd, [view[:aligned]], pos)
        if n <= 0:
            break
        n = min(n, want)
        w = 0
        while w < n:
            w += os.pwrite(dfd, view[w:n], pos + delta + w)
        pos += n
    return pos - start


def buffer(size):
    """A page-aligned buffer (usable with O_DIRECT too)."""
    return mmap.mmap(-1, size)
