"""bench/span's image path: a one-node RAM disk as a job on one compute
node gets it (doc/images.md), built with flux-rsa's own code.

The RSA node's image store (a tmpfs served as a one-brick GlusterFS
volume: the tmpfs provider's ``serve_store``), a compute node's client of
it (``transports(root).join(login)``), an ext4 image made in the store
with ``image.make`` and loop-mounted over that client with
``image.mount(..., direct=True, dirty=imagedisk.DIRTY_LIMIT)``, as a job's
attach does
(without the use entry and the marker check, a few file operations
through the client).  Measured on it, as on the other rows of the table:
sequential write and read, 4 KiB creates, what fits before ENOSPC; and
what only an image has: the end's sync (``image.unmount`` right after the
creates: the write-back of what the compute node still held, at most
DIRTY_LIMIT of data plus the file system's metadata) and the attach, with
the client already mounted (loop device and mount) and the first one of a
compute node (its client's mount too).

Everything it starts it stops: a run's store, client and image are gone
at its end, the loop devices it used have the kernel's write-back limits
again (the bound ``limit_dirty`` sets outlives the device's clearing), and ``cleanup`` takes what an interrupted run left (the
image's mount, whose loop device the kernel then clears, the client, the
store's server and tmpfs); ``leftovers`` names anything still there.
"""

import os
import time

from benchlib.span_measure import creates, fill, uncreate, write_read

from flux_rsa.ramdisk import disks, gluster, image, imagedisk, store, sysmount

KIND = "image (served)"
HOST = "rsa0"
NAME = "span-image"
SECRET = "bench-image-" + "s" * 20
#: pool/jobspecs.py's room beside a store's images
STORE_SLACK = 16 << 20


class ImageDisk:
    """The image path of one run: a store of its own (served on ``port``),
    a compute-side client of it under ``work``/compute-img, an image of
    ``size`` bytes for files."""

    def __init__(self, work, size, port):
        self.root = os.path.join(work, "ramdisks")  # the RSA node's RAM-disk root
        self.mount_root = os.path.join(work, "compute-img")  # the compute node's
        self.size, self.port = size, port
        self.provider = disks.provider("tmpfs")
        self.store = store.path_of(self.root, HOST)
        self.file = store.image_of(self.store, NAME)
        self.job_path = os.path.join(self.mount_root, NAME)
        self.transports = self.provider.transports(self.mount_root)
        self.login = None
        self.devices = set()  # the loop devices its mounts took

    def serve(self):
        """The store, served (as the pool starts it on an RSA node); seconds."""
        t0 = time.monotonic()
        os.makedirs(self.root, exist_ok=True)
        # sized as the pool sizes it (pool/jobspecs.py: the node's capacity,
        # its images' metadata, STORE_SLACK more; that module needs Flux)
        marker = self.provider.serve_store(
            self.root,
            HOST,
            image.file_size(self.size) + STORE_SLACK,
            self.port,
            SECRET,
            "127.0.0.1",
        )
        self.login = store.login(marker)
        return time.monotonic() - t0

    def make(self):
        """The image, made in the store (as its holder makes it); seconds."""
        t0 = time.monotonic()
        image.make(self.file, self.size, NAME)
        return time.monotonic() - t0

    def attach(self):
        """Mount the image where the job sees it, through the client
        (mounted first if it is not); (seconds in all, of which the
        client's mount)."""
        t0 = time.monotonic()
        client = self.transports.join(self.login)
        t1 = time.monotonic()
        os.makedirs(self.job_path, exist_ok=True)
        device = image.mount(
            os.path.join(client, os.path.basename(self.file)),
            self.job_path,
            direct=True,
            dirty=imagedisk.DIRTY_LIMIT,
        )
        seconds = time.monotonic() - t0
        self.devices.add(device)
        return seconds, t1 - t0

    def detach(self):
        """Unmount the image (writing back what this node still held); seconds."""
        seconds = image.unmount(self.job_path)
        self.unlimit()
        return seconds

    def unlimit(self):
        """The kernel's own write-back limits again on the loop devices the
        mounts took and let go: the device outlives its clearing, and with
        it the bound ``limit_dirty`` set, for whoever takes it next."""
        for device in sorted(self.devices):
            if image.backing_file(device) is None:
                image.limit_dirty(device, None)
                self.devices.discard(device)

    def remove(self):
        """The image unmounted if it is, and removed from the store (as a
        job's detach and its holder's teardown); seconds."""
        t0 = time.monotonic()
        if sysmount.mounted(self.job_path):
            self.detach()
        imagedisk.remove_image(self.file)
        return time.monotonic() - t0

    def close(self):
        """The client unmounted, the store stopped and removed (a pool's end)."""
        self.transports.leave()
        self.provider.close_store(self.root, HOST)


def run_once(disk, args):
    """One run of the image row: every figure of it, in seconds or per second."""
    s = {"store_s": disk.serve()}
    s["make_s"] = disk.make()
    s["first_attach_s"], s["client_s"] = disk.attach()
    area = os.path.join(disk.job_path, "out")
    os.mkdir(area)
    w, r = write_read(area, min(1 << 30, args.node_size // 2))
    s["write_MBps"], s["read_MBps"] = w / 1e6, r / 1e6
    s["creates_per_s"] = creates(area, args.files, keep=True)
    s["sync_s"] = disk.detach()
    s["attach_s"], _ = disk.attach()
    s["create_s"] = s["make_s"] + s["attach_s"]
    uncreate(area)
    s["usable"] = fill(area, args.node_size)
    s["destroy_s"] = disk.remove()
    disk.close()
    return s


def cleanup(work):
    """What an interrupted run left: the image's mount, the client, the
    store (its server, its tmpfs); before the other rows' clean-up, which
    would take the store for a RAM disk."""
    disk = ImageDisk(work, 0, 0)
    if sysmount.mounted(disk.job_path):
        device = sysmount.top_mount(disk.job_path)[1]
        sysmount.umount(disk.job_path)  # (lazily when busy)
        disk.devices.add(device)
        disk.unlimit()
    if os.path.isdir(disk.store):
        imagedisk.remove_image(disk.file)
    disk.transports.leave()
    if os.path.isdir(disk.store):
        disk.provider.close_store(disk.root, HOST)


def leftovers(work, grace=10.0):
    """What is still there of a run under ``work``: mounts, loop devices
    over a file there, GlusterFS processes started from there (a client
    exits by itself after its unmount: given ``grace`` seconds)."""
    deadline = time.monotonic() + grace
    while gluster.processes_in(work) and time.monotonic() < deadline:
        time.sleep(0.1)
    prefix = work.rstrip("/") + "/"
    with open("/proc/self/mountinfo") as f:
        left = [
            f"mounted: {line.split()[4]}"
            for line in f
            if line.split()[4].startswith(prefix)
        ]
    left += [f"loop device {dev} over {path}" for dev, path in image.loops_over(work)]
    left += [f"process {p['pid']}" for p in gluster.processes_in(work)]
    return left
