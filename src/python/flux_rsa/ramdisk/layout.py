"""What a RAM disk looks like on disk, and how it is made and removed.

``ROOT/NAME`` (root-owned 0755) holds a marker file ``.rsa-ramdisk`` (JSON:
name, provider, size, owner, jobid, gen, and the holder process that keeps
it) and the job owner's ``in/`` and ``out/`` (mode 0700).  The marker is
written before the provider mounts anything and again on top, so a
directory is known to be ours whether or not its mount is still there;
nothing without a marker is ever touched.  Trees are removed with
``shutil.rmtree``, which never follows a symbolic link.

A **kept** RAM disk (``keep``) outlives its holder: its marker says
``"kept": true`` with the node's name, sweeps leave it alone, and a new
holder may take it over (``adopt``) or it is removed on request
(``discard``).  Only the marker on top of the mount says so: if the node
rebooted, the tmpfs is gone and the marker underneath (not kept) lets the
next sweep remove the empty directory.
"""

import json
import os
import pwd
import re
import shutil
import signal
import time

from flux_rsa.core.record import IN_AREA, OUT_AREA
from flux_rsa.ramdisk import providers

MARKER = ".rsa-ramdisk"
#: seconds a sweep waits for the process of a holder whose job ended
HOLDER_GRACE = 5.0
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*$")


class RamdiskError(Exception):
    """A RAM disk could not be made, used or removed; str() says why."""


# --- the holder process, for liveness checks -----------------------------------


def _boot_id():
    with open("/proc/sys/kernel/random/boot_id") as f:
        return f.read().strip()


def _starttime(pid):
    """The process's start time in clock ticks since boot, or None when
    there is no such process (or only its zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses
    fields = stat[stat.rindex(")") + 2:].split()
    return None if fields[0] == "Z" else int(fields[19])


def holder_alive(marker):
    """True when the process that wrote the marker still runs."""
    pid = marker.get("pid")
    if not isinstance(pid, int) or marker.get("boot_id") != _boot_id():
        return False
    return _starttime(pid) == marker.get("starttime")


def end_holder(marker, grace=HOLDER_GRACE):
    """The holder job that wrote ``marker`` has ended: wait ``grace``
    seconds for its process to be gone (a task killed mid-build may still
    be leaving a mount), then kill it (still that process: same start time)."""
    for sig in (None, signal.SIGKILL):
        if sig is not None and holder_alive(marker):
            try:
                os.kill(marker["pid"], sig)
            except ProcessLookupError:
                return
        deadline = time.monotonic() + grace
        while holder_alive(marker):
            if time.monotonic() > deadline:
                break
            time.sleep(0.05)


# --- the marker ----------------------------------------------------------------


def read_marker(path):
    """The marker of the RAM disk at ``path``, or None when it is not ours."""
    try:
        fd = os.open(os.path.join(path, MARKER), os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return None
    try:
        with os.fdopen(fd) as f:
            marker = json.load(f)
    except (OSError, ValueError):
        return None
    return marker if isinstance(marker, dict) and marker.get("name") else None


def write_marker(path, marker):
    tmp = os.path.join(path, MARKER + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w") as f:
        json.dump(marker, f)
        f.write("\n")
    os.rename(tmp, os.path.join(path, MARKER))


# --- build and destroy ------------------------------------------------------------


def owner_ids(uid):
    try:
        return uid, pwd.getpwuid(uid).pw_gid
    except KeyError:
        raise RamdiskError(
            f"owner uid {uid} has no passwd entry on this node, so its primary group is unknown "
            "(add the user to this RSA node's user database)"
        ) from None


def path_of(root, name):
    if not os.path.isabs(root):
        raise RamdiskError(f"root {root!r} must be an absolute path ([rsa] ramdisk-root)")
    if not _NAME.match(name):
        raise RamdiskError(f"name {name!r} must be letters, digits, '.', '_' or '-' (e.g. 1234.1)")
    return os.path.join(root, name)


def _holder_fields():
    """The marker fields that name the process holding the RAM disk."""
    return {"pid": os.getpid(), "starttime": _starttime(os.getpid()), "boot_id": _boot_id()}


def ids_from_name(name):
    """(jobid, gen) from a JOBID.GEN name, else (None, None)."""
    jobid, _, gen = name.partition(".")
    if jobid.isdigit() and gen.isdigit():
        return int(jobid), int(gen)
    return None, None


def claim(path):
    """Make way for a new RAM disk at ``path``: refuse what is not ours, a
    kept one or one whose holder runs; remove a dead holder's leftover."""
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    if not os.path.lexists(path):
        return
    old = read_marker(path)
    if old is None:
        raise RamdiskError(f"{path} exists and is not a flux-rsa RAM disk (remove it or "
                           "choose another [rsa] ramdisk-root)")
    if old.get("kept"):
        raise RamdiskError(f"{path} is a kept RAM disk of job {old.get('jobid')}: adopt it "
                           "(rsa-pool.hold adopt) or discard it (rsa-pool.discard) first")
    if holder_alive(old):
        raise RamdiskError(f"{path} is still held by process {old['pid']}")
    destroy(path)


def new_marker(name, provider, size, owner, jobid=None, gen=None, **fields):
    """The marker of a RAM disk this process builds and holds."""
    uid, gid = owner_ids(owner)
    if jobid is None or gen is None:
        jobid, gen = ids_from_name(name)
    return {"name": name, "provider": provider, "size": int(size), "owner": uid,
            "group": gid, "jobid": jobid, "gen": gen, "kept": False, **fields,
            **_holder_fields()}


def make_areas(path, marker):
    """The job owner's in/ and out/ (mode 0700) in the RAM disk at ``path``."""
    for area in (IN_AREA, OUT_AREA):
        sub = os.path.join(path, area)
        os.mkdir(sub, 0o700)
        os.chown(sub, marker["owner"], marker["group"])


def build(root, name, size, owner, provider, jobid=None, gen=None, areas=True, **fields):
    """Make the RAM disk ROOT/NAME for uid ``owner`` on this node (with the
    owner's areas unless ``areas`` is false; ``fields`` go into the marker);
    return its path."""
    path = path_of(root, name)
    marker = new_marker(name, provider, size, owner, jobid, gen, **fields)
    make = providers.get(provider)
    claim(path)
    try:
        os.mkdir(path, 0o755)
        write_marker(path, marker)
        make.create(path, size, marker)
        os.chmod(path, 0o755)
        write_marker(path, marker)
        if areas:
            make_areas(path, marker)
    except (OSError, providers.ProviderError) as exc:
        try:
            destroy(path)
        except RamdiskError:
            pass
        raise RamdiskError(f"cannot build {path}: {exc}") from None
    return path


def keep(path, host):
    """Let the RAM disk at ``path`` outlive its holder: mark it kept (on
    ``host``, the node's name as the pool knows it); return the marker."""
    marker = read_marker(path)
    if marker is None:
        raise RamdiskError(f"cannot keep {path}: no {MARKER} marker")
    marker.update(kept=True, host=host, kept_at=time.time())
    try:
        write_marker(path, marker)
    except OSError as exc:
        raise RamdiskError(f"cannot keep {path}: writing its marker: {exc}") from None
    return marker


def kept(path):
    """The marker of the kept RAM disk at ``path``, or None."""
    marker = read_marker(path)
    return marker if marker is not None and marker.get("kept") else None


def adopt(path, jobid, size, owner):
    """Take over the kept RAM disk at ``path`` for job ``jobid``: check it is
    kept and whose it is, grow it to ``size`` bytes when it is smaller, and
    make this process its holder.  Return its marker."""
    marker = read_marker(path)
    if marker is None:
        raise RamdiskError(f"cannot adopt {path}: no flux-rsa RAM disk there (no {MARKER}; "
                           "it may have been discarded, or the node rebooted)")
    if not marker.get("kept"):
        why = (f"it is held by process {marker.get('pid')}" if holder_alive(marker)
               else "it was not kept (its holder ended without keeping it)")
        raise RamdiskError(f"cannot adopt {path}: {why}")
    if marker.get("jobid") != jobid:
        raise RamdiskError(f"cannot adopt {path} for job {jobid}: it was kept for job "
                           f"{marker.get('jobid')}")
    if marker.get("owner") != owner:
        raise RamdiskError(f"cannot adopt {path} for uid {owner}: it belongs to uid "
                           f"{marker.get('owner')}")
    try:
        if size > marker.get("size", 0):
            providers.get(marker.get("provider")).resize(path, size)
            marker["size"] = int(size)
        marker.update(kept=False, **_holder_fields())
        marker.pop("kept_at", None)
        write_marker(path, marker)
    except (OSError, providers.ProviderError) as exc:
        raise RamdiskError(f"cannot adopt {path}: {exc}") from None
    return marker


def discard(path):
    """Remove the kept (or abandoned) RAM disk at ``path``; nothing there is
    fine.  A RAM disk whose holder still runs is refused."""
    marker = read_marker(path)
    if marker is None and not os.path.lexists(path):
        return False
    if marker is not None and not marker.get("kept") and holder_alive(marker):
        raise RamdiskError(f"cannot discard {path}: it is held by process {marker['pid']} "
                           "(cancel its holder instead)")
    destroy(path)
    return True


def destroy(path):
    """Give the RAM disk at ``path`` back and remove it (ours only)."""
    marker = read_marker(path)
    if marker is None:
        if os.path.lexists(path):
            raise RamdiskError(f"{path} has no {MARKER} marker: not removing what flux-rsa did not make")
        return
    try:
        providers.get(marker.get("provider")).destroy(path, marker)
        remove(path)
    except (OSError, providers.ProviderError) as exc:
        raise RamdiskError(f"cannot remove {path}: {exc}") from None


def remove(path):
    """Remove a file, link or tree without following links."""
    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)
