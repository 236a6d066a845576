"""bench/pipeline's persistent file system, and the tree reads and writes
its steps make: an ext4 (or XFS) image on a throttled loop device
(slowfs.py's loop device and throttle, without GlusterFS), whose page
cache is dropped so that reads reach the device.
"""

import ctypes
import os
import time

from benchlib.figures import MiB
from benchlib.slowfs import attach_loop, throttle_device
from benchlib.system import run


def syncfs(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        if ctypes.CDLL(None, use_errno=True).syncfs(fd) != 0:
            raise OSError(ctypes.get_errno(), f"syncfs {path}")
    finally:
        os.close(fd)


def drop_caches(path):
    """Write back the file system holding PATH, then drop the page cache
    (and dentries and inodes) so that the next reads reach the device."""
    syncfs(path)
    with open("/proc/sys/vm/drop_caches", "w") as f:
        f.write("3\n")


def read_tree(src):
    """Every regular file under SRC read fully: {relative path: chunks}."""
    data = {}
    for top, dirs, files in os.walk(src):
        dirs.sort()
        for name in sorted(files):
            path = os.path.join(top, name)
            chunks = []
            with open(path, "rb", buffering=0) as f:
                while True:
                    chunk = f.read(4 * MiB)
                    if not chunk:
                        break
                    chunks.append(chunk)
            data[os.path.relpath(path, src)] = chunks
    return data


def write_tree(dst, data):
    for rel, chunks in data.items():
        path = os.path.join(dst, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            for chunk in chunks:
                os.write(fd, chunk)
        finally:
            os.close(fd)


def device_bytes(dev):
    """(bytes read, bytes written) of block device DEV so far."""
    with open(f"/sys/block/{os.path.basename(dev)}/stat") as f:
        fields = f.read().split()
    return int(fields[2]) * 512, int(fields[6]) * 512


class LoopFS:
    """ARGS.fs on a loop device over an image in WORK, mounted at
    ``self.mnt``; ``throttle`` slows it (ARGS.bandwidth, .iops, .dirty)."""

    def __init__(self, work, args):
        self.image = os.path.join(work, "pfs.img")
        self.mnt = os.path.join(work, "pfs")
        self.args = args
        self.loop = self.devno = None

    def start(self, undo):
        a = self.args
        os.makedirs(self.mnt)
        with open(self.image, "wb") as f:
            f.truncate(a.image_size)
        if a.fs == "xfs":
            run(["mkfs.xfs", "-q", "-f", self.image])
        else:
            lazy = "lazy_itable_init=0,lazy_journal_init=0"
            run(["mkfs.ext4", "-q", "-F", "-E", lazy, self.image])
        self.loop, self.devno = attach_loop(self.image, undo)
        run(["mount", self.loop, self.mnt])
        undo.push(f"mount {self.mnt}", lambda: run(["umount", self.mnt]))
        os.chmod(self.mnt, 0o755)

    def throttle(self, undo):
        a = self.args
        rules = {
            "read_bps_device": a.bandwidth,
            "write_bps_device": a.bandwidth,
            "read_iops_device": a.iops,
            "write_iops_device": a.iops,
        }
        throttle_device(self.devno, rules, a.dirty, undo)

    def describe(self):
        a = self.args
        return {
            "fs": a.fs,
            "device": self.loop,
            "image_bytes": a.image_size,
            "bandwidth": a.bandwidth,
            "iops": a.iops,
            "dirty": a.dirty,
        }

    def measure(self, nbytes, nfiles, fsize):
        """The file system's speed, as the jobs will see it: a stream
        written and synced, read back cold; small files created and synced,
        read back cold."""
        d = os.path.join(self.mnt, "measure")
        os.makedirs(os.path.join(d, "small"))
        block = os.urandom(MiB)
        fig = {}
        t = time.monotonic()
        write_tree(d, {"stream": [block] * (nbytes // MiB)})
        syncfs(d)
        fig["write_MiBps"] = nbytes / MiB / (time.monotonic() - t)
        drop_caches(d)
        t = time.monotonic()
        read_tree(d)  # the stream (the small files' directory is still empty)
        fig["read_MiBps"] = nbytes / MiB / (time.monotonic() - t)
        os.unlink(os.path.join(d, "stream"))
        small = os.path.join(d, "small")
        t = time.monotonic()
        write_tree(small, {f"f{i:06d}": [block[:fsize]] for i in range(nfiles)})
        syncfs(d)
        fig["creates_per_s"] = nfiles / (time.monotonic() - t)
        drop_caches(d)
        t = time.monotonic()
        read_tree(small)
        fig["small_reads_per_s"] = nfiles / (time.monotonic() - t)
        run(["rm", "-rf", d])
        os.sync()
        return fig

    def make_input(self, phase, args):
        """Step 1's input of PHASE: one big file, or many small ones."""
        path = os.path.join(self.mnt, phase, "input")
        os.makedirs(path)
        block = os.urandom(MiB)
        if phase == "big":
            write_tree(path, {"data.0": [block] * (args.big // MiB)})
        else:
            files = {f"f{i:06d}": [block[: args.file_size]] for i in range(args.files)}
            write_tree(path, files)
