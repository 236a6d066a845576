"""``sweep``: remove RAM disks left behind by holders that are gone.

Only directories under ROOT carrying our marker are looked at, and only
those whose holder process no longer runs are removed (unmounted first).
An empty RAM-disk tmpfs without a
marker on top (a build stopped between its mount and its marker, or a
destroy stopped halfway) is unmounted first, showing the marker beneath.
Kept RAM disks (see ``layout.keep``) are left alone; with ``report_kept``
each is printed as one JSON line ``{"event": "kept", "path", "jobid",
"gen", "owner", "bytes", "host"}``; a kept part of a RAM disk over several
nodes (a brick) also says ``part_of`` (the RAM disk's path), its ``index``
and how many ``parts`` there are.
"""

import fcntl
import json
import os

from flux_rsa.ramdisk import disks, imagedisk, layout, store, sysmount


def _part_of(entry, name):
    """The RAM disk ``name`` itself or a part of it on this node: NAME.X
    where X is a letter and digits (a brick NAME.b1, a marker NAME.n2)."""
    if entry == name:
        return True
    rest = entry[len(name) + 1 :] if entry.startswith(name + ".") else ""
    return rest[:1].isalpha() and rest[1:].isdigit()


def _unmarked_tmpfs(path):
    """A tmpfs of ours (by its mount source) mounted at ``path``, empty and
    without a marker on top: nothing in it to lose."""
    kind, source = sysmount.top_mount(path)
    return kind == "tmpfs" and source == sysmount.TMPFS_SOURCE and not os.listdir(path)


def sweep(root, say=print, report_kept=False, gone=None):
    """Remove leftovers under ``root``; return the number that failed.
    ``gone``: the name of a RAM disk whose holder job has ended: its
    holder process, if it still runs, is waited for and then killed."""
    try:
        fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        return 0
    except OSError as exc:
        say(f"cannot read {root}: {exc.strerror}")
        return 1
    try:
        # one sweep at a time on a node (two nodes of a test instance
        # share one machine)
        fcntl.flock(fd, fcntl.LOCK_EX)
        return _sweep(root, say, report_kept, gone)
    finally:
        os.close(fd)


def _sweep(root, say, report_kept, gone):
    failed = 0
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError as exc:
        say(f"cannot read {root}: {exc.strerror}")
        return 1
    if gone is not None:
        for entry in entries:
            # (never read through a network mount whose servers may be gone)
            network = (sysmount.fstype(entry.path) or "").startswith("fuse")
            if _part_of(entry.name, gone) and not network:
                marker = layout.read_marker(entry.path)
                if marker is not None and not marker.get("kept"):
                    layout.end_holder(marker)
    for entry in entries:
        if not entry.is_dir(follow_symlinks=False):
            continue
        for provider in disks.every_provider():
            provider.before_sweep(entry.path)
        marker = layout.read_marker(entry.path)
        if marker is None and _unmarked_tmpfs(entry.path):
            sysmount.umount(entry.path)
            say(
                f"unmounted an empty RAM disk without its marker at {entry.path} (its build "
                "or destroy was stopped halfway)"
            )
            marker = layout.read_marker(entry.path)
        if marker is None:
            continue
        if marker.get("kept"):
            if report_kept:
                report = {
                    "event": "kept",
                    "path": entry.path,
                    "jobid": marker.get("jobid"),
                    "gen": marker.get("gen"),
                    "owner": marker.get("owner"),
                    "bytes": marker.get("size"),
                    "host": marker.get("host"),
                }
                if marker.get("kind") == "image":  # in the node's store
                    report["kind"] = "image"
                if (
                    marker.get("kind") == "brick"
                ):  # a part of a RAM disk over several nodes
                    report.update(
                        part_of=os.path.join(root, marker["volume"]),
                        index=marker.get("index"),
                        parts=marker.get("bricks"),
                    )
                print(json.dumps(report), flush=True)
            continue
        if layout.holder_alive(marker):
            continue
        try:
            disks.destroy(entry.path)
            say(f"removed leftover RAM disk {entry.path}")
        except layout.RamdiskError as exc:
            say(str(exc))
            failed += 1
    return failed + _orphan_images(root, entries, say)


def _orphan_images(root, entries, say):
    """Remove images in this node's stores whose RAM disk is gone (no
    marker at ROOT/NAME: a holder killed between removing the one and the
    other); a RAM disk's marker is made before its image and removed
    after it, so one being built or removed is never taken for one."""
    failed = 0
    for entry in entries:
        if not entry.name.startswith(store.PREFIX):
            continue
        for name in store.images(entry.path):
            owner = imagedisk.ramdisk_of(name)
            if layout.read_marker(os.path.join(root, owner)) is not None:
                continue
            try:
                imagedisk.remove_image(store.image_of(entry.path, name))
                say(
                    f"removed the image of RAM disk {name}, which is gone, from {entry.path}"
                )
            except OSError as exc:
                say(
                    f"cannot remove the image of {name} from {entry.path}: {exc.strerror}"
                )
                failed += 1
    return failed
