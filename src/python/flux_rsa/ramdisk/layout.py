"""What a RAM disk looks like on disk: its marker, its areas, its holder.

``ROOT/NAME`` (root-owned 0755) holds a marker file ``.rsa-ramdisk`` (JSON:
name, provider, size, owner, jobid, gen, and the holder process that keeps
it) and the job owner's ``in/`` and ``out/`` (mode 0700).  The marker is
written before the provider mounts anything and again on top (with
``"mounted": true``), so a directory is known to be ours whether or not
its mount is still there, and the RAM disk itself (the marker on top) is
told from the directory it was mounted on; nothing without a marker is
ever touched.  Trees are removed with ``shutil.rmtree``, which never
follows a symbolic link.  How a RAM disk is made and removed is its
provider's business (``disks``, ``providers``).

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
import signal
import time

from flux_rsa.core.areas import IN_AREA, OUT_AREA

MARKER = ".rsa-ramdisk"
#: seconds a sweep waits for the process of a holder whose job ended
HOLDER_GRACE = 5.0
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*$")


class RamdiskError(Exception):
    """A RAM disk could not be made, used or removed; str() says why."""


class ProviderError(Exception):
    """A step of a provider failed; str() says which and why."""


# --- the holder process, for liveness checks -----------------------------------


def _boot_id():
    with open("/proc/sys/kernel/random/boot_id") as f:
        return f.read().strip()


def starttime(pid):
    """The process's start time in clock ticks since boot, or None when
    there is no such process (or only its zombie)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    # the command name (field 2) may hold spaces and parentheses
    fields = stat[stat.rindex(")") + 2 :].split()
    return None if fields[0] == "Z" else int(fields[19])


def holder_alive(marker):
    """True when the process that wrote the marker still runs."""
    pid = marker.get("pid")
    if not isinstance(pid, int) or marker.get("boot_id") != _boot_id():
        return False
    return starttime(pid) == marker.get("starttime")


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


# --- paths, owners, areas ------------------------------------------------------


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
        raise RamdiskError(
            f"root {root!r} must be an absolute path ([rsa] ramdisk-root)"
        )
    if not _NAME.match(name):
        raise RamdiskError(
            f"name {name!r} must be letters, digits, '.', '_' or '-' (e.g. 1234.1)"
        )
    return os.path.join(root, name)


def holder_fields():
    """The marker fields that name the process holding the RAM disk."""
    return {
        "pid": os.getpid(),
        "starttime": starttime(os.getpid()),
        "boot_id": _boot_id(),
    }


def ids_from_name(name):
    """(jobid, gen) from a JOBID.GEN name, else (None, None)."""
    jobid, _, gen = name.partition(".")
    if jobid.isdigit() and gen.isdigit():
        return int(jobid), int(gen)
    return None, None


def new_marker(name, provider, size, owner, jobid=None, gen=None, **fields):
    """The marker of a RAM disk (or part of one) this process builds and holds."""
    uid, gid = owner_ids(owner)
    if jobid is None or gen is None:
        jobid, gen = ids_from_name(name)
    return {
        "name": name,
        "provider": provider,
        "size": int(size),
        "owner": uid,
        "group": gid,
        "jobid": jobid,
        "gen": gen,
        "kept": False,
        **fields,
        **holder_fields(),
    }


def mark_on_top(path, marker, mode=0o755):
    """Write ``marker`` on top of what is mounted at ``path``: that is the
    RAM disk (the one underneath only names the directory)."""
    os.chmod(path, mode)
    write_marker(path, {**marker, "mounted": True})


def make_areas(path, marker):
    """The job owner's in/ and out/ (mode 0700) in the RAM disk at ``path``."""
    for area in (IN_AREA, OUT_AREA):
        sub = os.path.join(path, area)
        os.mkdir(sub, 0o700)
        os.chown(sub, marker["owner"], marker["group"])


def check_ramdisk(path, name, owner=None):
    """Raise RamdiskError unless ``path`` shows the RAM disk ``name`` (of
    uid ``owner``): its marker on top, not the directory it is mounted on,
    nor another RAM disk.  What a job or a stage may be given."""
    marker = read_marker(path)
    if marker is None:
        why = (
            "no such directory"
            if not os.path.isdir(path)
            else f"no {MARKER} marker there"
        )
        raise RamdiskError(f"{path} is not the RAM disk {name} ({why})")
    if marker.get("name") != name:
        raise RamdiskError(
            f"{path} is not the RAM disk {name} (its marker names "
            f"{marker.get('name')!r})"
        )
    if not marker.get("mounted"):
        raise RamdiskError(
            f"{path} is not the RAM disk {name} (only the directory it was "
            "mounted on is there: the RAM disk is not mounted)"
        )
    if owner is not None and marker.get("owner") != owner:
        raise RamdiskError(
            f"{path} is not the RAM disk {name} of uid {owner} (it belongs to "
            f"uid {marker.get('owner')})"
        )
    return marker


# --- kept RAM disks --------------------------------------------------------------


def keep(path, host):
    """Let the RAM disk (or part) at ``path`` outlive its holder: mark it
    kept (on ``host``, the node's name as the pool knows it); return the
    marker."""
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


def check_adopt(path, jobid, owner):
    """The marker of the kept RAM disk (or part) at ``path``, which job
    ``jobid`` of uid ``owner`` may take over; else RamdiskError saying why."""
    marker = read_marker(path)
    if marker is None:
        raise RamdiskError(
            f"cannot adopt {path}: no flux-rsa RAM disk there (no {MARKER}; "
            "it may have been discarded, or the node rebooted)"
        )
    if not marker.get("kept"):
        why = (
            f"it is held by process {marker.get('pid')}"
            if holder_alive(marker)
            else "it was not kept (its holder ended without keeping it)"
        )
        raise RamdiskError(f"cannot adopt {path}: {why}")
    if marker.get("jobid") != jobid:
        raise RamdiskError(
            f"cannot adopt {path} for job {jobid}: it was kept for job "
            f"{marker.get('jobid')}"
        )
    if marker.get("owner") != owner:
        raise RamdiskError(
            f"cannot adopt {path} for uid {owner}: it belongs to uid "
            f"{marker.get('owner')}"
        )
    return marker


def adopted(path, marker, size):
    """Make this process the holder of the adopted RAM disk (or part) at
    ``path`` (now ``size`` bytes); return its new marker."""
    marker = {**marker, "kept": False, "size": int(size), **holder_fields()}
    marker.pop("kept_at", None)
    write_marker(path, marker)
    return marker


def remove(path):
    """Remove a file, link or tree without following links."""
    import shutil

    if os.path.isdir(path) and not os.path.islink(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        os.unlink(path)
