"""Sizes and figures: a size as given on a command line (512M, 2G), as
printed (human), medians, percentiles and ranges over runs, a figure
or "-".
"""

import os
import statistics
import sys

from benchlib import PYPATH

if PYPATH not in sys.path:
    sys.path.append(PYPATH)
# sizes as flux-rsa reads them ("512M", "2G", "64MiB"), with its messages
from flux_rsa.core.units import parse_size  # noqa: E402,F401

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30


def human(nbytes):
    for unit, size in (("G", GiB), ("M", MiB), ("K", KiB)):
        if nbytes >= size:
            return f"{nbytes / size:.4g}{unit}"
    return str(nbytes)


def tree_size(path):
    n = size = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            n += 1
            size += os.lstat(os.path.join(root, f)).st_size
    return {"files": n, "bytes": size}


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def spread(values):
    values = [v for v in values if v is not None]
    return [min(values), max(values)] if values else None


def fmt(v, spec=".2f", none="-"):
    return none if v is None else format(v, spec)


def pct(values, p):
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, int(p / 100 * len(values)))]
