"""``sweep``: remove RAM disks left behind by holders that are gone.

Only directories under ROOT carrying our marker are looked at, and only
those whose holder process no longer runs are removed (unmounted first).
"""

import os

from flux_rsa.ramdisk import layout


def sweep(root, say=print):
    """Remove leftovers under ``root``; return the number that failed."""
    failed = 0
    try:
        entries = list(os.scandir(root))
    except FileNotFoundError:
        return 0
    except OSError as exc:
        say(f"cannot read {root}: {exc.strerror}")
        return 1
    for entry in entries:
        if not entry.is_dir(follow_symlinks=False):
            continue
        marker = layout.read_marker(entry.path)
        if marker is None or layout.holder_alive(marker):
            continue
        try:
            layout.destroy(entry.path)
            say(f"removed leftover RAM disk {entry.path}")
        except layout.RamdiskError as exc:
            say(str(exc))
            failed += 1
    return failed
