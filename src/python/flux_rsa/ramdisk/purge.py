"""``purge``: drop a RAM disk's staged inputs, leave a link in their place.

PATH (the RAM disk's ``in`` directory) is renamed aside, replaced by a
symbolic link to DATA_IN (or by an empty directory) owned by the RAM
disk's owner, and the renamed tree is removed without following links.
Running it again finishes or repeats the job harmlessly.
"""

import os

from flux_rsa.ramdisk import disks, layout

ASIDE = ".purged-"


def purge(path, link=None):
    path = os.path.abspath(path)
    parent, leaf = os.path.split(path)
    marker = layout.read_marker(parent)
    if marker is None:
        raise layout.RamdiskError(
            f"{path}: not inside a flux-rsa RAM disk (no {layout.MARKER} in {parent}); "
            "give the RAM disk's in directory"
        )
    uid, gid = marker.get("owner", 0), marker.get("group", 0)
    done = (
        (os.path.islink(path) and os.readlink(path) == link)
        if link
        else (os.path.isdir(path) and not os.path.islink(path) and not os.listdir(path))
    )
    try:
        if not done:
            aside = os.path.join(parent, f"{ASIDE}{leaf}.{os.getpid()}")
            if os.path.lexists(path):
                os.rename(path, aside)
            if link:
                os.symlink(link, path)
                os.lchown(path, uid, gid)
            else:
                os.mkdir(path, 0o700)
                os.chown(path, uid, gid)
        for entry in os.listdir(parent):
            if entry.startswith(f"{ASIDE}{leaf}."):
                layout.remove(os.path.join(parent, entry))
        disks.provider_of(marker).purged(parent)
    except OSError as exc:
        raise layout.RamdiskError(f"cannot purge {path}: {exc}") from None
