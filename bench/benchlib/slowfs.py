"""The slow persistent file system of bench/thesis and bench/campaign,
made for a run and removed after it (bench/thesis's doc says what it is
and why): an XFS image on a throttled loop device, one GlusterFS brick
with delayed metadata, mounted over FUSE.
"""

import os
import socket
import subprocess
import time

from benchlib.figures import MiB
from benchlib.system import run, say, stop_process, unmount

#: fops slowed on the brick (debug/delay-gen's names)
DELAYED = "create,mknod,mkdir,open,rename,setattr,fsetattr"
#: the slow FS's write-back cache (BDI max_bytes)
DIRTY_MAX = 32 * MiB
SLOW_PORTS = range(19000, 19900)  # below flux-rsa's test ports, outside ephemeral ones


def volume_file(blocks):
    """GlusterFS volume-file text from (name, type, options, subvolumes)."""
    out = []
    for name, kind, options, below in blocks:
        out.append(f"volume {name}")
        out.append(f"  type {kind}")
        out += [f"  option {k} {v}" for k, v in options]
        if below:
            out.append(f"  subvolumes {below}")
        out.append("end-volume")
    return "\n".join(out) + "\n"


def free_port():
    for port in SLOW_PORTS:
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free TCP port on 127.0.0.1 in {SLOW_PORTS}")


class SlowFS:
    """A throttled loop-mounted XFS brick served by one GlusterFS server
    with delayed metadata, mounted over FUSE at ``self.mnt``."""

    def __init__(self, work, image_size, bandwidth, create_delay_us):
        self.work = work
        self.image_size, self.bandwidth, self.delay = (
            image_size,
            bandwidth,
            create_delay_us,
        )
        self.image = os.path.join(work, "slowfs.img")
        self.brick_mnt = os.path.join(work, "slowfs-brick")
        self.brick = os.path.join(self.brick_mnt, "data")
        self.mnt = os.path.join(work, "slow")
        self.etc = os.path.join(work, "slowfs-gluster")
        self.loop = self.devno = None
        self.port = None

    def describe(self):
        return {
            "kind": "GlusterFS (FUSE, loopback) over a throttled loop-mounted XFS brick",
            "bandwidth_Bps": self.bandwidth,
            "create_delay_us": self.delay,
            "delayed_fops": DELAYED,
            "writeback_cache_bytes": DIRTY_MAX,
            "image_bytes": self.image_size,
            "loop": self.loop,
            "mount": self.mnt,
        }

    def start(self, undo):
        for d in (self.brick_mnt, self.mnt, self.etc):
            os.makedirs(d, exist_ok=True)
        with open(self.image, "wb") as f:
            f.truncate(self.image_size)
        run(["mkfs.xfs", "-q", "-f", self.image])
        self.loop, self.devno = attach_loop(self.image, undo)
        run(["mount", self.loop, self.brick_mnt])
        undo.push(f"brick mount {self.brick_mnt}", lambda: unmount(self.brick_mnt))
        os.makedirs(self.brick, exist_ok=True)
        throttle_device(
            self.devno,
            {"read_bps_device": self.bandwidth, "write_bps_device": self.bandwidth},
            DIRTY_MAX,
            undo,
        )
        self._serve(undo)
        self._mount(undo)
        os.chmod(self.mnt, 0o755)

    def _serve(self, undo):
        self.port = free_port()
        brick = volume_file(
            [
                ("slow-posix", "storage/posix", [("directory", self.brick)], None),
                (
                    "slow-delay",
                    "debug/delay-gen",
                    [
                        ("delay-percentage", 100),
                        ("delay-duration", self.delay),
                        ("enable", DELAYED),
                    ],
                    "slow-posix",
                ),
                ("slow-locks", "features/locks", [], "slow-delay"),
                (
                    "slow-iot",
                    "performance/io-threads",
                    [("thread-count", 4)],
                    "slow-locks",
                ),
                ("slow", "debug/io-stats", [], "slow-iot"),
                (
                    "slow-server",
                    "protocol/server",
                    [
                        ("transport-type", "tcp"),
                        ("transport.address-family", "inet"),
                        ("transport.socket.bind-address", "127.0.0.1"),
                        ("transport.socket.listen-port", self.port),
                        ("auth.addr.slow.allow", "127.0.0.1"),
                    ],
                    "slow",
                ),
            ]
        )
        client = volume_file(
            [
                (
                    "slowfs-client",
                    "protocol/client",
                    [
                        ("transport-type", "tcp"),
                        ("transport.address-family", "inet"),
                        ("remote-host", "127.0.0.1"),
                        ("remote-port", self.port),
                        ("remote-subvolume", "slow"),
                    ],
                    None,
                ),
                ("slowfs", "performance/write-behind", [], "slowfs-client"),
            ]
        )
        for name, text in (("brick.vol", brick), ("client.vol", client)):
            with open(os.path.join(self.etc, name), "w") as f:
                f.write(text)
        self.server = self._gluster("glusterfsd", "brick")
        undo.push(
            "slow FS server (glusterfsd)",
            lambda: stop_process(self.server, "glusterfsd"),
        )
        deadline = time.monotonic() + 30
        while True:
            if self.server.poll() is not None:
                raise RuntimeError(
                    f"glusterfsd exited {self.server.returncode}: see "
                    f"{self.etc}/brick.log"
                )
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=1).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        f"glusterfsd not listening on 127.0.0.1:{self.port}"
                        " after 30 s"
                    )
                time.sleep(0.2)

    def _mount(self, undo):
        self.client = self._gluster("glusterfs", "client", self.mnt)

        def stop():
            unmount(self.mnt)
            stop_process(self.client, "glusterfs client")

        undo.push(f"slow FS mount {self.mnt}", stop)
        deadline = time.monotonic() + 30
        while not os.path.ismount(self.mnt):
            if self.client.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(
                    f"the slow FS did not mount on {self.mnt}: see "
                    f"{self.etc}/client.log"
                )
            time.sleep(0.2)
        os.statvfs(self.mnt)

    def _gluster(self, program, name, *more):
        """``program`` (glusterfsd or glusterfs) in the foreground on
        etc/NAME.vol, its log etc/NAME.log, its output etc/NAME.out."""
        etc = os.path.join(self.etc, name)
        with open(f"{etc}.out", "w") as out:
            return subprocess.Popen(
                [program, "-N", "-f", f"{etc}.vol", "-l", f"{etc}.log", *more],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def path(self, *names):
        return os.path.join(self.mnt, *names)

    def evict(self, *names):
        """Drop the files under NAMES (slow-FS relative) from the page
        cache, on the brick and on the FUSE side (which keeps its pages
        across opens: a second read of a 128 MiB file took 0.1 s after the
        brick's alone were dropped, 2.6 s after both), so the next read
        comes from the throttled device, as a reader on another node would.
        Each file costs one (delayed) open on the slow FS."""
        os.sync()
        for name in names or ("",):
            top = os.path.join(self.brick, name)
            for root, dirs, files in os.walk(top):
                dirs[:] = [d for d in dirs if d != ".glusterfs"]
                for f in files:
                    rel = os.path.relpath(os.path.join(root, f), self.brick)
                    drop_cached(os.path.join(self.brick, rel))
                    drop_cached(os.path.join(self.mnt, rel))

    def remove(self, *names):
        for name in names:
            subprocess.run(
                ["rm", "-rf", "--one-file-system", self.path(name)], check=False
            )

    def figures(self, seq_bytes, creates):
        """Sequential write and read MiB/s, and creates/s of 4 KiB files in
        one directory with 1 and 16 writers."""
        d = self.path("fsbench")
        os.makedirs(d, exist_ok=True)
        block = os.urandom(MiB)
        t0 = time.monotonic()
        fd = os.open(
            os.path.join(d, "seq"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644
        )
        for _ in range(seq_bytes // MiB):
            os.write(fd, block)
        os.close(fd)
        write_s = time.monotonic() - t0
        self.evict("fsbench")
        t0 = time.monotonic()
        with open(os.path.join(d, "seq"), "rb", buffering=0) as f:
            while f.read(MiB):
                pass
        read_s = time.monotonic() - t0
        out = {
            "seq_bytes": seq_bytes,
            "write_MiBps": seq_bytes / MiB / write_s,
            "read_MiBps": seq_bytes / MiB / read_s,
        }
        for writers in (1, 16):
            out[f"creates_per_s_{writers}"] = create_rate(
                os.path.join(d, f"c{writers}"), writers, creates
            )
        self.remove("fsbench")
        return out


def attach_loop(image, undo):
    """IMAGE on a loop device (direct I/O: the image's own page cache hides
    nothing), detached by UNDO: (device, its MAJ:MIN)."""
    loop = run(["losetup", "--find", "--show", "--direct-io=on", image]).strip()
    undo.push(f"loop device {loop}", lambda: run(["losetup", "-d", loop]))
    rdev = os.stat(loop).st_rdev
    return loop, f"{os.major(rdev)}:{os.minor(rdev)}"


def write_sysfs(path, text):
    with open(path, "w") as f:
        f.write(f"{text}\n")


def throttle_device(devno, rules, dirty, undo):
    """cgroup v1 blkio RULES ({"read_bps_device": bytes/s, ...}; 0 or None
    left out) for block device DEVNO in the root cgroup, so that every
    process's I/O to it is throttled, write-back included; and its
    write-back cache held to DIRTY bytes (the device's bdi strict_limit
    and max_bytes), so that writers feel the throttle.  UNDO removes both."""
    blkio = "/sys/fs/cgroup/blkio"
    for name, value in rules.items():
        path = f"{blkio}/blkio.throttle.{name}"
        if not os.path.exists(path):
            raise RuntimeError(f"{path}: no cgroup v1 blkio throttling on this machine")
        if value:
            write_sysfs(path, f"{devno} {value}")
            undo.push(
                f"{path} rule for {devno}",
                lambda p=path: write_sysfs(p, f"{devno} 0"),
            )
    bdi = f"/sys/class/bdi/{devno}"
    saved = {}
    for key in ("strict_limit", "max_ratio"):
        with open(f"{bdi}/{key}") as f:
            saved[key] = f.read().strip()
    undo.push(
        f"{bdi} write-back limits",
        lambda: (
            write_sysfs(f"{bdi}/max_ratio", saved["max_ratio"]),
            write_sysfs(f"{bdi}/strict_limit", saved["strict_limit"]),
        ),
    )
    write_sysfs(f"{bdi}/strict_limit", "1")
    write_sysfs(f"{bdi}/max_bytes", str(dirty))


def drop_cached(path):
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except OSError:
        return
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def create_rate(directory, writers, total):
    """creates/s of 4 KiB files by WRITERS processes in one directory."""
    os.makedirs(directory, exist_ok=True)
    each = max(1, total // writers)
    gate_r, gate_w = os.pipe()
    pids = []
    for i in range(writers):
        pid = os.fork()
        if pid == 0:
            code = 0
            try:
                os.close(gate_w)
                os.read(gate_r, 1)
                data = b"x" * 4096
                for k in range(each):
                    fd = os.open(
                        f"{directory}/f{i}.{k}",
                        os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                        0o644,
                    )
                    os.write(fd, data)
                    os.close(fd)
            except (
                BaseException
            ):  # noqa: BLE001 - a child never returns into the parent's code
                code = 1
            os._exit(code)
        pids.append(pid)
    os.close(gate_r)
    time.sleep(0.2)
    t0 = time.monotonic()
    os.close(gate_w)  # every writer's read returns: go
    failed = sum(os.waitpid(p, 0)[1] != 0 for p in pids)
    dt = time.monotonic() - t0
    if failed:
        say(f"{failed} of {writers} create writers failed in {directory}")
    return writers * each / dt
