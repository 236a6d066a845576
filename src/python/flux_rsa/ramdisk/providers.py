"""Providers: how a RAM disk is made, reached and given back.

A provider has four steps, all run as root (through the privileged entry
point at a site):

* **create**, on each RSA node of the reservation (holder task ``i`` of
  ``n``): makes this node's share of the storage; the first node also
  makes the RAM disk the stager sees at ``ROOT/NAME`` (with the owner's
  ``in/`` and ``out/``);
* **attach**, on each compute node of the job before it starts: makes the
  RAM disk reachable at the path the job is given (``RSA_RAMDISK``);
* **detach**, on each compute node after the job ends and before the
  stage-out reads the data;
* **destroy**, on each RSA node when the reservation ends.

and says whether one RAM disk may span several RSA nodes (``spans``) and
whether compute nodes attach it (``attaches``; else the site makes the
RAM-disk root reachable from compute nodes itself, e.g. an NFS export).

Shipped:

* ``tmpfs`` (default): one node; a tmpfs of the reserved size (root);
* ``dir``: one node; a plain directory, no size limit (unprivileged tests);
* ``glusterfs``: spans nodes; one GlusterFS volume over a tmpfs brick per
  node, mounted by the stager and by every compute node (``glusterfs.py``,
  ``parallel.py``);
* ``command``: the site's own script for each step (``command.py``), e.g.
  to start BeeOND over the reservation's nodes.

Providers are picked by name.  ``create(path, size, marker)`` turns the
empty root-owned directory ``path`` (holding only the marker) into storage
of ``size`` bytes; ``destroy(path, marker)`` gives the space back and
leaves ``path`` an ordinary directory that the caller removes;
``resize(path, size)`` grows it (when a kept RAM disk is adopted by a
larger reservation).
"""

import ctypes
import errno
import os
from dataclasses import dataclass
from typing import Callable, Optional

MS_NOSUID = 2
MS_NODEV = 4
MS_REMOUNT = 32
MNT_DETACH = 2

_libc = ctypes.CDLL(None, use_errno=True)


class ProviderError(Exception):
    pass


@dataclass(frozen=True)
class Provider:
    name: str
    create: Callable
    destroy: Callable
    resize: Optional[Callable] = None
    spans: bool = False
    attaches: bool = False


def _check(rc, what, path):
    if rc != 0:
        err = ctypes.get_errno()
        raise ProviderError(f"{what} {path}: {os.strerror(err)}") from OSError(err, os.strerror(err))


def umount(path):
    """Unmount what is mounted at ``path``; lazily (MNT_DETACH) when busy."""
    rc = _libc.umount2(os.fsencode(path), 0)
    if rc != 0 and ctypes.get_errno() == errno.EBUSY:
        rc = _libc.umount2(os.fsencode(path), MNT_DETACH)
    _check(rc, "umount", path)


def mount_tmpfs(path, size, mode=0o755):
    if os.geteuid() != 0:
        raise ProviderError(
            f"cannot mount a tmpfs at {path}: provider tmpfs needs root (this runs as uid "
            f"{os.geteuid()}); run the pool as root, give it flux-imp ([rsa] privilege = "
            "\"imp\"), or set [rsa] provider = \"dir\" for a test install"
        )
    _check(_mount(path, f"size={int(size)},mode={mode:04o}"), f"mount tmpfs (size={size})", path)


def _mount(path, options, flags=0):
    return _libc.mount(b"flux-rsa", os.fsencode(path), b"tmpfs", flags | MS_NOSUID | MS_NODEV,
                       options.encode())


def create_tmpfs(path, size, marker=None):
    mount_tmpfs(path, size)


def resize_tmpfs(path, size):
    if not os.path.ismount(path):
        raise ProviderError(f"cannot resize {path}: no tmpfs is mounted there")
    _check(_mount(path, f"size={int(size)}", MS_REMOUNT), f"remount tmpfs (size={size})", path)


def destroy_tmpfs(path, marker=None):
    """Unmount every tmpfs stacked at ``path``; lazily when busy."""
    while os.path.ismount(path):
        umount(path)


def create_dir(path, size, marker=None):
    del path, size, marker  # a plain directory: nothing to set up, no size limit


def destroy_dir(path, marker=None):
    del path, marker  # the caller removes the tree


def resize_dir(path, size):
    del path, size  # no size limit


def destroy_glusterfs(path, marker):
    from flux_rsa.ramdisk import parallel

    try:
        parallel.destroy(path, marker)
    except (OSError, parallel.GlusterError) as exc:
        raise ProviderError(str(exc)) from None


def _create_spanning(path, size, marker=None):
    raise ProviderError(f"{path}: a glusterfs RAM disk is built by its holder's tasks "
                        "(ramdisk.parallel), not as one directory")


def create_command(path, size, marker):
    from flux_rsa.ramdisk import command

    command.create(path, marker)


def destroy_command(path, marker):
    from flux_rsa.ramdisk import command

    command.destroy(path, marker)


PROVIDERS = {
    "tmpfs": Provider("tmpfs", create_tmpfs, destroy_tmpfs, resize_tmpfs),
    "dir": Provider("dir", create_dir, destroy_dir, resize_dir),
    "glusterfs": Provider("glusterfs", _create_spanning, destroy_glusterfs, spans=True,
                          attaches=True),
    # spans and attaches as [rsa] command-spans and command-attach say
    "command": Provider("command", create_command, destroy_command, spans=True, attaches=True),
}


def get(name):
    try:
        return PROVIDERS[name]
    except KeyError:
        raise ProviderError(
            f"unknown RAM-disk provider {name!r} (known: {', '.join(PROVIDERS)})"
        ) from None
