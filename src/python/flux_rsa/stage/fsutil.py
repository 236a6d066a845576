"""Small file-system helpers: bytes paths, no-follow directory opens."""

import ctypes
import errno
import mmap
import os
import stat
import threading

from .errors import from_oserror

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# a source file, read without following a link or blocking on a FIFO
OPEN_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
# a new file under a name that must not exist yet
CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
# an unnamed file in a directory, named later with linkat
TMPFILE_FLAGS = os.O_WRONLY | os.O_TMPFILE | os.O_CLOEXEC
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


def open_or_make_root(path):
    """Open directory PATH, creating it (and its parents) if missing.
    Raises StageError."""
    try:
        return os.open(path, DIR_FLAGS)
    except FileNotFoundError:
        pass
    except OSError as exc:
        raise from_oserror(exc, path) from None
    try:
        os.makedirs(path, exist_ok=True)
        return os.open(path, DIR_FLAGS)
    except OSError as exc:
        raise from_oserror(exc, path) from None


def has_mode(st, mode):
    """Whether the copy ST (an lstat) has the permission bits of MODE as
    this process can set them: all, except that chmod(2) by a process
    without CAP_FSETID (the job owner) drops set-group-ID, and says
    nothing, when the file's group is not one of its groups.  rsync -a run
    as the owner ends the same way."""
    got, want = stat.S_IMODE(st.st_mode), mode & 0o7777
    if got == want:
        return True
    if os.geteuid() == 0 or st.st_gid == os.getegid() or st.st_gid in os.getgroups():
        return False
    return got == want & ~stat.S_ISGID


def unlink_quiet(name, dir_fd):
    """Remove NAME in DIR_FD if it can be; errors are ignored (clean-up)."""
    try:
        os.unlink(name, dir_fd=dir_fd)
    except OSError:
        pass


def remove_stale(name, dir_fd):
    """Remove NAME in DIR_FD, a temporary entry an earlier run left: a file,
    or a new directory it had not given its name yet, with what is in it
    (no link followed).  Gone already is fine."""
    try:
        os.unlink(name, dir_fd=dir_fd)
    except FileNotFoundError:
        pass
    except IsADirectoryError:
        import shutil

        shutil.rmtree(name, dir_fd=dir_fd)


class DirCache:
    """Directory descriptors under one root by relative path, opened without
    following any symbolic link; at most 64 kept open."""

    def __init__(self, root_fd):
        self.root_fd = root_fd
        self.fds = {}

    def get(self, rel):
        fd = self.fds.get(rel)
        if fd is None:
            if len(self.fds) >= 64:
                self.close()
            fd = self.fds[rel] = open_dir(self.root_fd, rel)
        return fd

    def close(self):
        for fd in self.fds.values():
            os.close(fd)
        self.fds.clear()


class DirsByIndex(DirCache):
    """A DirCache by directory index: REL(d) is directory d's path."""

    def __init__(self, root_fd, rel):
        super().__init__(root_fd)
        self.rel = rel

    def get(self, d):
        return super().get(self.rel(d))


def tmp_name(tag, serial, pid=None):
    """A hidden temporary name; TAG says which shard made it."""
    return b"%s%d%s" % (tmp_prefix(tag, pid), serial, TMP_SUFFIX)


def tmp_prefix(tag, pid=None):
    """What temporary names of shard TAG made by process PID start with."""
    return b"%s%s.%d." % (TMP_PREFIX, tag, os.getpid() if pid is None else pid)


def hidden_dir_name(tag, name):
    """The hidden name shard TAG makes a new directory NAME under, and
    finds it under after a killed run (copy.py); None if NAME is too long
    to be part of a name."""
    if len(name) > 200:
        return None
    return b"%s%s.d.%s%s" % (TMP_PREFIX, tag, name, TMP_SUFFIX)


def is_tmp_of(name, tag):
    """True if NAME is a temporary file written by shard TAG."""
    return name.startswith(TMP_PREFIX + tag + b".") and name.endswith(TMP_SUFFIX)


_libc = None
# statfs(2) f_type of file systems whose files live in memory already
MEMORY_FS = {0x01021994, 0x858458F6}  # TMPFS_MAGIC, RAMFS_MAGIC
SYNC_FILE_RANGE_WRITE = 2


def libc():
    global _libc
    if _libc is None:
        # the C library the interpreter already has loaded: find_library
        # would run /sbin/ldconfig -p at every start
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def syncfs(fd):
    """Flush the file system holding FD (syncfs(2)); sync(2) where there is
    no syncfs.  Raises OSError when the kernel reports a write-back error on
    that file system since FD's open file was opened or last flushed: data
    written there may not be on the device.  (Each error is reported once
    per open file: duplicates of FD share what was reported.)"""
    try:
        call = libc().syncfs
    except AttributeError:
        os.sync()
        return
    if call(fd) != 0:
        err = ctypes.get_errno()
        if err != errno.ENOSYS:
            raise OSError(err, os.strerror(err))
        os.sync()


def fs_type(fd):
    """The f_type of fstatfs(2) on FD, or None if it cannot be had."""
    buf = ctypes.create_string_buffer(256)  # struct statfs is 120 bytes
    try:
        if libc().fstatfs(fd, buf) != 0:
            return None
    except AttributeError:
        return None
    return ctypes.c_long.from_buffer(buf).value & 0xFFFFFFFF


def in_memory(fd):
    """True when FD lies on tmpfs or ramfs (reads need no read-ahead)."""
    return fs_type(fd) in MEMORY_FS


def start_writeback(fd, offset, nbytes):
    """Start writing [offset, offset+nbytes) of FD to its device without
    waiting (sync_file_range(SYNC_FILE_RANGE_WRITE)), so that the final
    flush has less left to do.  Best effort: errors are ignored here and
    surface in the flush that follows."""
    try:
        libc().sync_file_range(
            fd, ctypes.c_int64(offset), ctypes.c_int64(nbytes), SYNC_FILE_RANGE_WRITE
        )
    except AttributeError:
        pass


class Flusher:
    """A thread that flushes the file system of FD (syncfs) over and over
    while others write, so that the data and the metadata written so far
    go to the device during the copy instead of all in the final flush,
    which then has little left to do.  It does not replace that flush."""

    def __init__(self, fd, interval=0.25):
        self.fd = os.dup(fd)
        self.interval = interval
        self.error = None
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, name="rsa-flush", daemon=True)
        self.thread.start()

    def _run(self):
        while not self.done.wait(self.interval):
            try:
                syncfs(self.fd)
            except OSError as exc:
                # reported to this open file once: the final flush, through
                # the same open file, would not see it again
                self.error = exc
                return

    def stop(self):
        """Stop flushing; returns the write-back error a flush reported (an
        OSError), or None."""
        self.done.set()
        self.thread.join()
        os.close(self.fd)
        return self.error


class TmpNames:
    """Fresh temporary names (tmp_name) of shard TAG for one process; call
    forked() in a child so that its names carry its own pid."""

    def __init__(self, tag):
        self.tag = tag
        self.serial = 0
        self.pid = os.getpid()

    def forked(self):
        self.pid = os.getpid()

    def new(self):
        self.serial += 1
        return tmp_name(self.tag, self.serial, self.pid)


PAGE = mmap.PAGESIZE
_PROT_READ, _MAP_SHARED = 1, 1


def cached_pages(fd, offset, length):
    """(pages of [offset, offset+length) of FD in the page cache, pages in
    all), by mincore(2) on a mapping of the range; OFFSET must be a multiple
    of the page size.  None if it cannot be told."""
    if length <= 0 or offset % PAGE:
        return None
    lib = libc()
    try:
        mmap_, mincore, munmap = lib.mmap, lib.mincore, lib.munmap
    except AttributeError:
        return None
    mmap_.restype = ctypes.c_void_p
    mmap_.argtypes = [
        ctypes.c_void_p,
        ctypes.c_size_t,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int,
        ctypes.c_int64,
    ]
    mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    addr = mmap_(None, length, _PROT_READ, _MAP_SHARED, fd, offset)
    if addr is None or addr == ctypes.c_void_p(-1).value:
        return None
    pages = (length + PAGE - 1) // PAGE
    vec = ctypes.create_string_buffer(pages)
    try:
        if mincore(addr, length, vec) != 0:
            return None
    finally:
        munmap(addr, length)
    # the low bit of each byte says "resident"; the others are always 0
    return pages - vec.raw.count(0), pages


AT_EMPTY_PATH = 0x1000
_linkat = None


def link_fd(fd, dir_fd, name):
    """Give the open unnamed file FD (O_TMPFILE) the name NAME in DIR_FD:
    linkat(2) with AT_EMPTY_PATH, which kernels since 6.10 allow the
    process that opened it (before, only with CAP_DAC_READ_SEARCH): no
    /proc lookup.  Raises OSError."""
    global _linkat
    if _linkat is None:
        f = libc().linkat
        f.argtypes = [
            ctypes.c_int,
            ctypes.c_char_p,
            ctypes.c_int,
            ctypes.c_char_p,
            ctypes.c_int,
        ]
        _linkat = f
    if _linkat(fd, b"", dir_fd, name, AT_EMPTY_PATH) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err), name)


def link_proc(fd, dir_fd, name):
    """link_fd() through /proc/self/fd, for any kernel."""
    os.link(b"/proc/self/fd/%d" % fd, name, dst_dir_fd=dir_fd, follow_symlinks=True)
