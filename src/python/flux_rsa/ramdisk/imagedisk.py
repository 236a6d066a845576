"""A RAM disk that is a file-system image, from its making to its end.

On its RSA node (HOST) the RAM disk ``ROOT/NAME`` is a directory holding
only its marker (kind ``image``, the image's path); the files are in the
image, ``ROOT/.store-HOST/images/NAME.img`` (``store``), made by the holder
(``build``) and removed with the RAM disk (``remove``).  Kept through a
pool restart, it stays in the store; an adopting holder grows it if need
be (``grow``).

Where the image is mounted, and by whom, one writer at a time, ever:

* a stage (stage-in, stage-out, the hand-off's read of a producer's
  outputs, the switch's purge once the job is gone) mounts it at
  ``ROOT/NAME`` in a mount namespace of its own for as long as it runs
  (``opened``): read-write when it writes, read-only when it only reads;
* the job's compute node mounts it read-write at ``MOUNT_ROOT/NAME``
  (``attach``) from before the job starts until after it ended
  (``detach``), through the store's client that node keeps
  (``store.Transports``).

Who has it mounted is in its ``.use`` directory beside it (``image.Use``,
which both sides see); a stage refuses an image a compute node still
holds, and a compute node one a stage still writes.  The marker on top,
inside the image, says which RAM disk it is and whose, as a tmpfs's does.

How the store is served and reached is the provider's; nothing here names
a network engine.
"""

import json
import os
import time

from flux_rsa.core import providercaps
from flux_rsa.ramdisk import image, layout, store, sysmount

KIND = "image"
#: a compute node keeps at most this much written data of an image in its
#: memory (unless the attach says otherwise: ``[rsa] image-writeback``);
#: the rest goes to the RSA node while the job runs, so that its end (the
#: unmount) has at most this much left to write
DIRTY_LIMIT = providercaps.IMAGE_WRITEBACK
#: a compute node's attach waits at most this long for a stage to let go
STOPPING_STAGE = 10.0


def is_image(marker):
    return marker is not None and marker.get("kind") == KIND


def image_path(marker, index=0):
    """The file of image ``index`` of the RAM disk ``marker`` describes."""
    return image_paths(marker)[index]


def image_paths(marker):
    """Every image of the RAM disk ``marker`` describes: one, or one per
    compute node of a job on several (``rsa.fs=per-node``)."""
    return marker.get("images") or [marker["image"]]


def image_names(name, count):
    """The names of the images of RAM disk ``name``: NAME, or NAME-0 ...
    NAME-(count-1) for one per compute node of a job on several."""
    return [name] if count <= 1 else [f"{name}-{i}" for i in range(count)]


def ramdisk_of(image_name):
    """The RAM disk an image name belongs to (NAME-I: NAME)."""
    return image_name.rsplit("-", 1)[0] if "-" in image_name else image_name


# --- on the RSA node ------------------------------------------------------------------


def build(path, marker, size):
    """Make the image RAM disk ``path`` (its ``marker`` names its images,
    each of ``size`` bytes): the directory and its marker, each image with
    the marker on top and the owner's areas.  On failure nothing is left;
    RamdiskError says why."""
    try:
        os.mkdir(path, 0o755)
        layout.write_marker(path, marker)
        for file in image_paths(marker):
            remove_image(file)  # a dead holder's leftover of the same name
            image.make(file, size, marker["name"])
            sysmount.in_private_namespace(lambda: _fill(file, path, marker))
    except (OSError, image.ImageError) as exc:
        try:
            remove(path, marker)
            layout.remove(path)
        except (OSError, image.ImageError):
            pass
        raise layout.RamdiskError(f"cannot build {path}: {exc}") from None
    return path


def _fill(file, path, marker):
    image.mount(file, path)
    layout.mark_on_top(path, marker)
    layout.make_areas(path, marker)
    image.unmount(path)


def remove(path, marker):
    """Give the images of the RAM disk at ``path`` back (the caller removes
    the directory)."""
    for file in image_paths(marker):
        remove_image(file)


def remove_image(file):
    """Remove an image file and its use entries."""
    image.Use(file, None).remove()
    try:
        os.unlink(file)
    except FileNotFoundError:
        pass


def grow(path, size):
    """Grow the images of the RAM disk at ``path`` to share ``size`` bytes."""
    marker = layout.read_marker(path)
    files = image_paths(marker)
    for file in files:
        image.grow(file, size // len(files))


def served_by(path):
    """The store login of the image RAM disk at ``path`` on its node."""
    marker = layout.read_marker(path)
    return store.login(store.serving(os.path.dirname(path), marker["host"]))


class opened:
    """Mount image ``index`` of the RAM disk ``ramdisk`` at ``at`` (by
    default ``ramdisk`` itself), for a stage on its RSA node (``host``: the
    node its marker names), in the caller's own mount namespace
    (``sysmount.private_namespace`` first): read-write when it ``write``s,
    else read-only.  A stage never mounts an image a compute node holds,
    except one whose node was lost (``reclaim``: the names of those
    nodes), and an image not unmounted cleanly is checked and repaired
    before anything reads it.  Nothing happens for a RAM disk that is not
    an image.  ``what`` says who we are, in the use entry."""

    def __init__(
        self, ramdisk, write, what, reclaim=(), jobid=None, host=None, index=0, at=None
    ):
        self.ramdisk = ramdisk
        self.at = at or ramdisk
        self.index = index
        self.marker = layout.read_marker(ramdisk)
        # (a stage runs on the image's own node, which its marker names)
        self.host = host or (self.marker or {}).get("host")
        self.write = write
        self.what = what
        self.reclaim = reclaim
        self.jobid = jobid
        self.use = self.name = None
        self.repaired = None  # what e2fsck said, when it had to repair it

    def __enter__(self):
        if not is_image(self.marker) or self.marker.get("mounted"):
            return self  # not an image, or mounted here already (a compute node)
        file = image_path(self.marker, self.index)
        if not os.path.exists(file):
            raise image.ImageError(
                f"{self.ramdisk}: its image {file} is gone (the RSA node's store was "
                "lost: a reboot?)"
            )
        self.use = image.Use(file, self.host)
        for host in self.reclaim or ():
            self.use.reclaim(host)
        why = image.unclean(file)
        write = self.write or why is not None
        who = image.me(self.host, what=self.what, jobid=self.jobid)
        self.name = self.use.take(write, who)
        try:
            if why is not None:
                said = image.check(file)
                self.repaired = f"{why}; e2fsck -p: {said or 'clean'}"
            image.mount(file, self.at, read_only=not self.write)
        except BaseException:
            self.use.give(self.name)
            raise
        return self

    def __exit__(self, *exc):
        if self.use is None:
            return
        try:
            image.unmount(self.at)
        finally:
            self.use.give(self.name)


def count(ramdisk):
    """How many images the RAM disk ``ramdisk`` (on its RSA node) has (0:
    it is no image, or it is one mounted here already)."""
    marker = layout.read_marker(ramdisk)
    if not is_image(marker) or marker.get("mounted"):
        return 0
    return len(image_paths(marker))


# --- on a compute node -----------------------------------------------------------------


def attach(transports, values, mountpoint, host, rank):
    """Mount the image the attach ``values`` name (``IMAGE`` in the store
    whose login they carry) at ``mountpoint``, as the one writer; returns
    how it was done, for ``detach``."""
    login = {
        "servers": list(values["SERVERS"]),
        "user": values["USER"],
        "secret": values["SECRET"],
    }
    file = os.path.join(transports.join(login), values["IMAGE"])
    use = image.Use(file, host)
    who = image.me(
        host, what="the compute node", rank=rank, jobid=values.get("JOBID"), mount=True
    )
    name = _take(use, who)
    try:
        if image.unclean(file):
            raise image.ImageError(
                f"{file} was not unmounted cleanly where it was last used: the stage "
                "that reads it next checks it first"
            )
        # the loop device reads and writes the file as the transport serves
        # it, directly: many requests at once, none cached twice (measured:
        # 2-4x the bandwidth of a buffered one, the end's write-back 3-5x
        # faster)
        device = image.mount(
            file, mountpoint, direct=True, dirty=writeback_limit(values)
        )
    except BaseException:
        use.give(name)
        raise
    how = {"image": file, "use": name, "device": device, "host": host}
    # the job's inputs, read from the RSA node while the job starts
    how["read_ahead"] = image.start_read_ahead(mountpoint)
    return how


def writeback_limit(values):
    """The most this node may keep unwritten of the image the attach
    ``values`` name (None: the kernel's own limits)."""
    said = values.get("WRITEBACK")
    if said is None:
        return DIRTY_LIMIT
    return int(said) or None


def _take(use, who):
    """Become the image's writer; a stage still there (one being stopped:
    the job started before its stage-in ended) is waited for a while."""
    deadline = time.monotonic() + STOPPING_STAGE
    while True:
        try:
            return use.take(True, who)
        except image.Busy:
            holder = use.writer() or {}
            if holder.get("mount") or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def detach(mountpoint, how):
    """Unmount the image ``how`` says was attached at ``mountpoint`` (all
    it still held in memory written back first) and stop being its user;
    prints how long the unmount took."""
    seconds = 0.0
    if how.get("read_ahead"):
        image.stop_read_ahead(how["read_ahead"])
    if sysmount.mounted(mountpoint):
        seconds = image.unmount(mountpoint)
    try:
        image.Use(how["image"], how.get("host")).give(how["use"])
    except OSError as exc:
        # its RSA node (or the way to it) is gone, and the image with it
        print(f"{how['image']}: its use entry stays ({exc.strerror})", flush=True)
    print(json.dumps({"event": "detached", "unmount": round(seconds, 3)}), flush=True)
