"""Mounts, as root: tmpfs, bind and unmount through libc, and what the
mount table says.  Written once; every provider uses these."""

import ctypes
import errno
import functools
import os

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2
CLONE_NEWNS = 0x00020000


class MountError(OSError):
    """A mount or unmount failed; str() names the call, the path and why."""

    def __str__(self):
        return self.strerror


@functools.cache
def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _check(rc, what, path):
    if rc != 0:
        err = ctypes.get_errno()
        raise MountError(err, f"{what} {path}: {os.strerror(err)}")


def _mount(source, path, fstype, flags, options):
    return _libc().mount(
        source.encode(),
        os.fsencode(path),
        fstype.encode() if fstype else None,
        flags,
        options.encode() if options else None,
    )


#: the source every RAM-disk tmpfs is mounted with (the mount table's name)
TMPFS_SOURCE = "flux-rsa"


def mount_tmpfs(path, size, mode=0o755, source=TMPFS_SOURCE):
    """A tmpfs of ``size`` bytes at ``path``, nosuid and nodev: nothing on
    a RAM disk may raise privileges where it is mounted."""
    if os.geteuid() != 0:
        raise MountError(
            errno.EPERM,
            f"cannot mount a tmpfs at {path}: a tmpfs RAM disk needs root (this runs as uid "
            f"{os.geteuid()}); run the pool as root, give it flux-imp ([rsa] "
            'privilege = "imp"), or set [rsa] provider = "dir" for a test install',
        )
    _check(
        _mount(
            source,
            path,
            "tmpfs",
            MS_NOSUID | MS_NODEV,
            f"size={int(size)},mode={mode:04o}",
        ),
        f"mount tmpfs (size={size})",
        path,
    )


def mount_device(device, path, fstype, flags, options=None):
    """Mount the block ``device`` (a file system of type ``fstype``) at ``path``."""
    _check(_mount(device, path, fstype, flags, options), f"mount {device} on", path)


def resize_tmpfs(path, size, source=TMPFS_SOURCE):
    """Grow (or shrink) the tmpfs at ``path`` to ``size`` bytes."""
    if not mounted(path, "tmpfs"):
        raise MountError(
            errno.EINVAL, f"cannot resize {path}: no tmpfs is mounted there"
        )
    _check(
        _mount(
            source,
            path,
            "tmpfs",
            MS_REMOUNT | MS_NOSUID | MS_NODEV,
            f"size={int(size)}",
        ),
        f"remount tmpfs (size={size})",
        path,
    )


def private_namespace():
    """Move the calling process into a mount namespace of its own, where
    what it mounts is seen by nobody else and mounts elsewhere do not
    reach it."""
    _check(_libc().unshare(CLONE_NEWNS), "unshare", "the mount namespace")
    _check(
        _libc().mount(None, b"/", None, MS_REC | MS_PRIVATE, None), "make private", "/"
    )


def umount(path):
    """Unmount what is mounted at ``path``; lazily (MNT_DETACH) when busy."""
    rc = _libc().umount2(os.fsencode(path), 0)
    if rc != 0 and ctypes.get_errno() == errno.EBUSY:
        rc = _libc().umount2(os.fsencode(path), MNT_DETACH)
    _check(rc, "umount", path)


def umount_now(path):
    """Unmount what is mounted at ``path``, never lazily: an unmount that
    returns has written back everything (EBUSY when it is in use)."""
    _check(_libc().umount2(os.fsencode(path), 0), "umount", path)


def syncfs(path):
    """Write back everything of the file system mounted at ``path``."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        _check(_libc().syncfs(fd), "syncfs", path)
    finally:
        os.close(fd)


def umount_all(path):
    """Unmount everything stacked at ``path``."""
    while mounted(path):
        umount(path)


def _unescape(field):
    return (
        field.encode()
        .decode("unicode_escape")
        .encode("latin-1")
        .decode(errors="replace")
    )


def top_mount(path):
    """(type, source) of the file system mounted at ``path`` (the
    topmost), or (None, None) when nothing is mounted there."""
    found = (None, None)
    try:
        with open("/proc/self/mountinfo") as f:
            for line in f:
                fields = line.split()
                if _unescape(fields[4]) == path:
                    dash = fields.index("-")
                    found = (fields[dash + 1], _unescape(fields[dash + 2]))
    except (OSError, ValueError, IndexError):
        pass
    return found


def fstype(path):
    """The type of the file system mounted at ``path`` (the topmost), or
    None when nothing is mounted there."""
    return top_mount(path)[0]


def mounted(path, kind=None):
    """True when a file system (of type ``kind``, or any) is mounted at ``path``."""
    found = fstype(path)
    return found is not None and kind in (None, found)


def write_private(path, text):
    """Write ``text`` to ``path``, readable by root alone (never through a link)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text)


def in_private_namespace(fn):
    """Run ``fn()`` in a child process with a mount namespace of its own
    (what it mounts is gone when it returns: nobody else ever sees it);
    an exception it raises is raised here as MountError with its text."""
    import sys

    read, write = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.close(read)
            private_namespace()
            fn()
        except BaseException as exc:  # noqa: B036 - told to the parent, whatever it is
            os.write(write, str(exc).encode(errors="replace") or repr(exc).encode())
            code = 1
        finally:
            os._exit(code)
    os.close(write)
    with os.fdopen(read, "rb") as f:
        said = f.read().decode(errors="replace")
    status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    if status != 0:
        raise MountError(errno.EIO, said or f"exit status {status}")
