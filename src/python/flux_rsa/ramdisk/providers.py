"""Providers: how a RAM disk's space is made and given back.

A provider is a triple of functions selected by name:

* ``create(path, size)`` turns the empty directory ``path`` into storage
  of ``size`` bytes (``path`` exists, root-owned, holding only the marker);
* ``destroy(path)`` gives the space back and leaves ``path`` an ordinary
  directory (or gone) that the caller removes;
* ``resize(path, size)`` grows the storage at ``path`` to ``size`` bytes
  (when a kept RAM disk is adopted for a larger reservation).

``tmpfs`` (default) mounts a tmpfs of the granted size: needs root.
``dir`` is a plain directory without a size limit, for unprivileged test
installs.  A RAM disk spanning several RSA nodes as one namespace needs a
parallel file system (e.g. BeeOND, GekkoFS) started across the nodes: add
a provider here whose create/destroy start and stop it; until then the
other nodes of a spanning reservation hold capacity only.
"""

import ctypes
import errno
import os
from collections import namedtuple

Provider = namedtuple("Provider", "create destroy resize")

MS_NOSUID = 2
MS_NODEV = 4
MS_REMOUNT = 32
MNT_DETACH = 2

_libc = ctypes.CDLL(None, use_errno=True)


class ProviderError(Exception):
    pass


def _check(rc, what, path):
    if rc != 0:
        err = ctypes.get_errno()
        raise ProviderError(f"{what} {path}: {os.strerror(err)}") from OSError(err, os.strerror(err))


def create_tmpfs(path, size):
    if os.geteuid() != 0:
        raise ProviderError(
            f"cannot mount a tmpfs at {path}: provider tmpfs needs root (this runs as uid "
            f"{os.geteuid()}); run the pool as root or set [rsa] provider = \"dir\" for a test install"
        )
    options = f"size={int(size)},mode=0755".encode()
    rc = _libc.mount(b"flux-rsa", os.fsencode(path), b"tmpfs", MS_NOSUID | MS_NODEV, options)
    _check(rc, f"mount tmpfs (size={size})", path)


def resize_tmpfs(path, size):
    if not os.path.ismount(path):
        raise ProviderError(f"cannot resize {path}: no tmpfs is mounted there")
    options = f"size={int(size)}".encode()
    rc = _libc.mount(b"flux-rsa", os.fsencode(path), b"tmpfs",
                     MS_REMOUNT | MS_NOSUID | MS_NODEV, options)
    _check(rc, f"remount tmpfs (size={size})", path)


def destroy_tmpfs(path):
    """Unmount every tmpfs stacked at ``path``; lazily when busy."""
    while os.path.ismount(path):
        rc = _libc.umount2(os.fsencode(path), 0)
        if rc != 0 and ctypes.get_errno() == errno.EBUSY:
            rc = _libc.umount2(os.fsencode(path), MNT_DETACH)
        _check(rc, "umount", path)


def create_dir(path, size):
    del path, size  # a plain directory: nothing to set up, no size limit


def destroy_dir(path):
    del path  # the caller removes the tree


def resize_dir(path, size):
    del path, size  # no size limit


PROVIDERS = {
    "tmpfs": Provider(create_tmpfs, destroy_tmpfs, resize_tmpfs),
    "dir": Provider(create_dir, destroy_dir, resize_dir),
}


def get(name):
    try:
        return PROVIDERS[name]
    except KeyError:
        raise ProviderError(
            f"unknown RAM-disk provider {name!r} (known: {', '.join(PROVIDERS)})"
        ) from None
