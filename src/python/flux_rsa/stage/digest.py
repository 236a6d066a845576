"""Content hashes, as verification compares them: of a file's bytes,
of a range of them, or of an archive member's logical content (a sparse
member's holes read as zeros), so that a file and the same bytes inside an
archive hash alike (verify.py compares them).
"""

import functools
import os

from . import fsutil

CHUNK = 32 << 20  # bytes read at a time (and verify.py's ranges of a big file)
READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


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


def open_in(root_fd, rel, name):
    """Open file NAME of directory REL under ROOT_FD for reading, no link
    followed, no FIFO waited on."""
    dfd = fsutil.open_dir(root_fd, rel)
    try:
        return os.open(name, READ_FLAGS, dir_fd=dfd)
    finally:
        os.close(dfd)


def digest_member(fd, src, off, n):
    """digest() of [off, off+n) of the content of an archive member whose
    File.src is SRC, the archive open as FD."""
    _, aoff, segments = src
    if segments is None:
        return digest(fd, aoff + off, n)
    return digest_sparse(fd, aoff, segments, off, n)


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
