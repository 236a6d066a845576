"""A job's RAM disk on its compute nodes.

On a compute node the RAM disk of job NAME is attached at MOUNT_ROOT/NAME
(``attach``), whatever the provider.  Ranks of one job on one node share
that mount: MOUNT_ROOT/NAME.client/ (root-only) records which ranks use it
(``ranks``) and how it was attached (``how``: the provider and what its
undoing needs), so the last rank to leave (``detach``) undoes it the same
way, even when the pool's provider changed meanwhile.
"""

import errno
import fcntl
import json
import os

from flux_rsa.ramdisk import disks
from flux_rsa.ramdisk.sysmount import write_private


def _workdir(mountpoint):
    return mountpoint + ".client"


def _read_json(path, default):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def _refs_update(workdir, rank, add):
    """Add or remove ``rank`` from the ranks using this node's mount;
    return the ranks left."""
    path = os.path.join(workdir, "ranks")
    ranks = set(_read_json(path, []))
    (ranks.add if add else ranks.discard)(rank)
    write_private(path, json.dumps(sorted(ranks)))
    return ranks


def attach(mountpoint, rank, how, mount):
    """Make the RAM disk reachable at ``mountpoint`` for job rank ``rank``
    (idempotent): the first rank on this node calls ``mount(workdir)``;
    ``how`` (a dict with ``provider``), with what ``mount`` returned (a
    dict, or None), is kept for ``detach``.  When the mount fails and no
    other rank uses it, nothing of it is left."""
    import shutil

    workdir = _workdir(mountpoint)
    with _locked(workdir, create=True):
        if not _read_json(os.path.join(workdir, "ranks"), []):
            os.makedirs(mountpoint, mode=0o755, exist_ok=True)
            write_private(os.path.join(workdir, "how"), json.dumps(how))
            try:
                done = mount(workdir)
            except BaseException:
                _remove(mountpoint)
                shutil.rmtree(workdir, ignore_errors=True)
                raise
            if done:
                write_private(os.path.join(workdir, "how"), json.dumps({**how, **done}))
        _refs_update(workdir, rank, add=True)


def detach(mountpoint, rank):
    """This rank is done with the RAM disk: undo the attach when no rank of
    the job on this node uses it any more, and remove what attach made."""
    import shutil

    workdir = _workdir(mountpoint)
    with _locked(workdir, create=False) as lock:
        if lock is None or _refs_update(workdir, rank, add=False):
            return  # never attached here, or another rank still uses it
        how = _read_json(os.path.join(workdir, "how"), {})
        disks.provider(how.get("provider")).detach(mountpoint, how, rank)
        _remove(mountpoint)
        shutil.rmtree(workdir, ignore_errors=True)


def _remove(mountpoint):
    """Remove the empty mount point (left alone while something is mounted
    there or it holds files)."""
    try:
        os.rmdir(mountpoint)
    except FileNotFoundError:
        pass
    except OSError as exc:
        if exc.errno not in (errno.ENOTEMPTY, errno.EBUSY):
            raise


class _locked:
    """flock on ``workdir/lock``: attaches and detaches of several ranks on
    one node take turns.  A rank that waited while another removed the
    work directory takes the lock again on the new one (``create``), or
    gets None (nothing is attached here)."""

    def __init__(self, workdir, create):
        self.workdir, self.create = workdir, create
        self.path = os.path.join(workdir, "lock")
        self.fd = None

    def __enter__(self):
        while True:
            if self.create:
                os.makedirs(self.workdir, mode=0o700, exist_ok=True)
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
            except FileNotFoundError:
                if self.create:
                    continue
                return None
            fcntl.flock(fd, fcntl.LOCK_EX)
            try:
                if os.fstat(fd).st_ino == os.stat(self.path).st_ino:
                    self.fd = fd
                    return self
            except FileNotFoundError:
                pass
            os.close(fd)  # removed while we waited: start again

    def __exit__(self, *exc):
        if self.fd is not None:
            os.close(self.fd)
