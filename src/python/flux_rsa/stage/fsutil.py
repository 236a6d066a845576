"""Small file-system helpers: bytes paths, no-follow directory opens."""

import ctypes
import ctypes.util
import os

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
TMP_PREFIX = b".rsa-stage."
TMP_SUFFIX = b".tmp"


def join(a, b):
    """Join two relative bytes paths; b'' is the tree's root."""
    if not a:
        return b
    if not b:
        return a
    return a + b"/" + b


def full(root, rel):
    """ROOT/REL as bytes for messages and path-based calls."""
    return root if not rel else root.rstrip(b"/") + b"/" + rel


def open_dir(root_fd, rel):
    """Open ROOT_FD/REL as a directory without following any symbolic link."""
    fd = os.dup(root_fd)
    if not rel:
        return fd
    try:
        for part in rel.split(b"/"):
            nfd = os.open(part, DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nfd
    except BaseException:
        os.close(fd)
        raise
    return fd


def tmp_name(tag, serial):
    """A hidden temporary name; TAG says which shard made it."""
    return b"%s%s.%d.%d%s" % (TMP_PREFIX, tag, os.getpid(), serial, TMP_SUFFIX)


def is_tmp_of(name, tag):
    """True if NAME is a temporary file written by shard TAG."""
    return (
        name.startswith(TMP_PREFIX + tag + b".")
        and name.endswith(TMP_SUFFIX)
    )


_libc = None


def syncfs(fd):
    """Flush the file system holding FD (syncfs(2)); fall back to sync(2)."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    try:
        if _libc.syncfs(fd) == 0:
            return
    except AttributeError:
        pass
    os.sync()
