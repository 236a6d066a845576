"""Sizes and durations as people write them: "16G", "512MiB", "90s", "2h".

Sizes are binary (K = 1024).  Durations follow Flux Standard Duration: a
non-negative number with an optional unit s, m, h or d.
"""

import math
import re

_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGTP]?)(i?B)?\s*$", re.IGNORECASE)
_SIZE_UNITS = {
    "": 1,
    "K": 2**10,
    "M": 2**20,
    "G": 2**30,
    "T": 2**40,
    "P": 2**50,
}
_FSD = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)\s*([smhd]?)\s*$")
_FSD_UNITS = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_size(value, what="size"):
    """Bytes from an int or a string like "4G"; ValueError says what is wrong."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(
            f'{what}: {value!r} is not a size (use a number of bytes or e.g. "16G")'
        )
    if isinstance(value, (int, float)):
        if value < 0 or not math.isfinite(value):
            raise ValueError(
                f"{what}: {value!r} must be a non-negative number of bytes"
            )
        return int(value)
    m = _SIZE.match(value)
    if not m:
        raise ValueError(
            f'{what}: {value!r} is not a size (use e.g. "512M", "16G", "2T")'
        )
    number, unit = float(m.group(1)), m.group(2).upper()
    return int(number * _SIZE_UNITS[unit])


def parse_duration(value, what="duration"):
    """Seconds from a number or an FSD string like "90s", "5m", "2h"."""
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(
            f'{what}: {value!r} is not a duration (use e.g. 300, "90s", "5m")'
        )
    if isinstance(value, (int, float)):
        seconds = float(value)
    else:
        m = _FSD.match(value)
        if not m:
            raise ValueError(
                f'{what}: {value!r} is not a duration (use e.g. "90s", "5m", "2h", "1d")'
            )
        seconds = float(m.group(1)) * _FSD_UNITS[m.group(2)]
    if seconds < 0 or not math.isfinite(seconds):
        raise ValueError(f"{what}: {value!r} must be a non-negative duration")
    return seconds


def format_size(nbytes):
    """Short human size: 0, 512K, 1.5G."""
    if nbytes is None:
        return "-"
    for unit in ("P", "T", "G", "M", "K"):
        scale = _SIZE_UNITS[unit]
        if nbytes >= scale:
            value = nbytes / scale
            return (
                f"{value:.1f}{unit}".replace(".0", "")
                if value < 100
                else f"{value:.0f}{unit}"
            )
    return str(int(nbytes))
