"""``sweep``: remove RAM disks left behind by holders that are gone.

Only directories under ROOT carrying our marker are looked at, and only
those whose holder process no longer runs are removed (unmounted first).
Kept RAM disks (see ``layout.keep``) are left alone; with ``report_kept``
each is printed as one JSON line ``{"event": "kept", "path", "jobid",
"gen", "owner", "bytes", "host"}``.
"""

import fcntl
import json
import os

from flux_rsa.ramdisk import glusterfs, layout, parallel


def _part_of(entry, name):
    """The RAM disk ``name`` itself or its part on another node: a brick
    (NAME.bI, provider glusterfs) or a marker (NAME.nI, provider command)."""
    if entry == name:
        return True
    rest = entry[len(name) + 1:] if entry.startswith(name + ".") else ""
    return rest[:1] in ("b", "n") and rest[1:].isdigit()


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
            if _part_of(entry.name, gone) and not glusterfs.mounted(entry.path):
                marker = layout.read_marker(entry.path)
                if marker is not None and not marker.get("kept"):
                    layout.end_holder(marker)
    for entry in entries:
        if not entry.is_dir(follow_symlinks=False):
            continue
        parallel.unmount_stale(entry.path)
        marker = layout.read_marker(entry.path)
        if marker is None:
            continue
        if marker.get("kept"):
            if report_kept:
                print(json.dumps({"event": "kept", "path": entry.path,
                                  "jobid": marker.get("jobid"), "gen": marker.get("gen"),
                                  "owner": marker.get("owner"), "bytes": marker.get("size"),
                                  "host": marker.get("host")}), flush=True)
            continue
        if layout.holder_alive(marker):
            continue
        try:
            layout.destroy(entry.path)
            say(f"removed leftover RAM disk {entry.path}")
        except layout.RamdiskError as exc:
            say(str(exc))
            failed += 1
    return failed
