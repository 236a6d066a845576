"""``sweep``: remove RAM disks left behind by holders that are gone.

Only directories under ROOT carrying our marker are looked at, and only
those whose holder process no longer runs are removed (unmounted first).
Kept RAM disks (see ``layout.keep``) are left alone; with ``report_kept``
each is printed as one JSON line ``{"event": "kept", "path", "jobid",
"gen", "owner", "bytes", "host"}``.
"""

import json
import os

from flux_rsa.ramdisk import layout, parallel


def sweep(root, say=print, report_kept=False):
    """Remove leftovers under ``root``; return the number that failed."""
    failed = 0
    try:
        entries = sorted(os.scandir(root), key=lambda e: e.name)
    except FileNotFoundError:
        return 0
    except OSError as exc:
        say(f"cannot read {root}: {exc.strerror}")
        return 1
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
