"""File-system images: a RAM disk that is one ext4 file system in one file.

A job on one compute node gets its RAM disk as an image: a file of the
reserved size, kept in its RSA node's memory (``store``), holding an ext4
file system.  The stager on the RSA node mounts it through a loop
device over that file, straight from memory; the compute node mounts it
through a loop device over the same file as the network engine serves it.
Metadata then never leaves the kernel that uses the file system: only
blocks cross the network (doc/images.md says why and what it measured).

Everything here is engine-free: making an image (``make``, ``grow``), its
state (``unclean``, ``check``), loop devices (``Loop``), mounting one
(``mount``, ``unmount``), the compute node's bound on unwritten data
(``limit_dirty``), and who has it mounted (``Use``): an image is mounted
read-write in one place at a time, ever, and read-only only where no one
writes.

Why ext4, and how it is made: XFS refuses file systems under 300 MB
(test nodes hold 64M), ext4 makes one of any size in milliseconds.  Blocks
of 4 KiB always (mke2fs's small-file-system profile, 1 KiB blocks, creates
files 30 times slower), no blocks kept for root, and the inode tables
zeroed by punching holes, after which the whole file is allocated
(``reserve``): an image takes all its memory when it is made, so that its
store can never run out under a job's writes.  A reservation of C bytes holds C bytes of
files, as a tmpfs of C bytes does: the image is C bytes for the files and
room beside them for what ext4 keeps of its own (``file_size``): the blocks
it holds back from files for its own delayed allocations (2%, at most
16 MiB), an inode
per 4 KiB block (a tmpfs never runs out of inodes; an image that ran out
before its blocks would refuse small files with space left), the journal,
and the block groups' bookkeeping.  A journal where it costs at most 1/128
of the image (512 MiB and more): after a compute node is lost with the
image mounted, replaying it leaves a consistent file system for the
stage-out; smaller images have none (its 4 MiB minimum is a large share
of a small reservation), and ``check`` (e2fsck -p) repairs them or says
it cannot.
"""

import errno
import fcntl
import json
import os
import select
import signal
import stat
import struct
import time

from flux_rsa.ramdisk import sysmount
from flux_rsa.ramdisk.layout import ProviderError, starttime

BLOCK = 4096
INODE_SIZE = 256  # ext4's default: nanosecond times, extended attributes inline
FIRST_INODES = 16  # ext4 keeps the first 11 for itself; lost+found takes one
#: images of this size and more get a journal of 1/JOURNAL_SHARE of it
JOURNAL_FROM = 512 << 20
JOURNAL_SHARE = 128
JOURNAL_MAX = 128 << 20
SBIN = "/usr/sbin:/usr/bin:/sbin:/bin"
#: e2fsck -p's exit statuses below this mean "consistent now"
FSCK_FIXED = 4


class ImageError(ProviderError):
    """An image could not be made, checked, mounted or unmounted; str() says why."""


def _run(argv, what):
    import subprocess

    try:
        done = subprocess.run(
            argv,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env={"PATH": SBIN, "LC_ALL": "C"},
            check=False,
        )
    except OSError as exc:
        raise ImageError(f"{what}: {argv[0]}: {exc.strerror}") from None
    return done


def _said(done):
    lines = (done.stderr or done.stdout or "").strip().splitlines()
    return lines[-1] if lines else f"exit status {done.returncode}"


# --- making ----------------------------------------------------------------------


def journal_bytes(size):
    """The journal an image of ``size`` bytes gets (0: none)."""
    if size < JOURNAL_FROM:
        return 0
    return min(JOURNAL_MAX, size // JOURNAL_SHARE) >> 20 << 20


def file_size(capacity):
    """About the size of the image file of a reservation of ``capacity``
    bytes (``make`` fits it exactly): the capacity for files and the room
    for their extent blocks, what ext4 holds back from them, an inode per
    block, the journal, and 1/64 (at least 2 MiB) for the block groups'
    bitmaps and descriptors."""
    inodes = _free_blocks(capacity) * INODE_SIZE
    return (
        capacity
        + extent_room(capacity)
        + held_back(capacity // BLOCK) * BLOCK
        + inodes
        + journal_bytes(capacity)
        + max(capacity // 64, 2 << 20)
    )


def store_bytes(capacity, granule):
    """The most the images of reservations of ``capacity`` bytes in all
    (each a whole number of ``granule``) can take, each one's file whole:
    many small images have more of ext4's own beside their files (its
    held-back share and bookkeeping floor are per image) than one large."""
    count = max(1, capacity // max(granule, 2 << 20))
    return max(file_size(capacity), count * file_size(capacity // count)) + (
        journal_bytes(capacity)
    )


def extent_room(capacity):
    """Room beside a reservation of ``capacity`` bytes for the extent blocks
    of its files: a file written in pieces (each flushed before the next)
    may take more extents than its inode holds, and the block that holds
    them comes out of the same free blocks as the file's own, so that an
    image with exactly ``capacity`` free would refuse the file's last bytes
    (ENOSPC) where a tmpfs of that size takes them.  One 4 KiB block per 4
    MiB (340 extents of at least 64 KiB fit in one), 64 KiB at least."""
    return max(16 * BLOCK, capacity // 4096 // BLOCK * BLOCK)


def _free_blocks(capacity):
    """The blocks free for files in the image of a reservation of
    ``capacity`` bytes: the reservation's and the room for extents."""
    return (capacity + extent_room(capacity)) // BLOCK


def held_back(blocks):
    """The blocks a mounted ext4 of ``blocks`` blocks in all keeps from
    files for its own metadata (the kernel's reserved clusters: 2%, at most
    4096)."""
    return min(blocks // 50, 4096)


def mkfs_argv(path, capacity, label):
    journal = journal_bytes(capacity)
    return [
        "mke2fs",
        "-q",
        "-F",
        "-t",
        "ext4",
        "-b",
        str(BLOCK),
        "-m",
        "0",
        "-N",
        # a file per free block, beside ext4's own first inodes
        str(max(_free_blocks(capacity), 1024) + FIRST_INODES),
        "-I",
        str(INODE_SIZE),
        "-L",
        label[:16],
        "-E",
        "lazy_itable_init=0,lazy_journal_init=0,root_owner=0:0",
        *(["-J", f"size={journal >> 20}"] if journal else ["-O", "^has_journal"]),
        path,
    ]


def make(path, capacity, label):
    """A new image at ``path`` (root's, 0600: only root may open it,
    wherever it is served) holding an empty ext4 file system with exactly
    ``capacity`` bytes free for files and ``extent_room`` for their extent
    blocks (what ``df`` shows available: files of ``capacity`` bytes fit,
    as on an empty tmpfs of that size): made once, then again on a file as
    much larger or smaller as ext4's own share of the first turned out to
    be."""
    if capacity < 2 << 20:
        raise ImageError(
            f"{path}: an image for {capacity} bytes is too small (2 MiB at least)"
        )
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        os.close(fd)
    except OSError as exc:
        raise ImageError(f"cannot make the image {path}: {exc.strerror}") from None
    try:
        _fit(path, capacity, lambda: _mkfs(path, capacity, label))
        reserve(path)
    except BaseException:
        os.unlink(path)
        raise


def reserve(path):
    """Give the image at ``path`` all the memory it may ever use, now: a
    sparse image would take its blocks from its store as the job writes
    them, and a store that ran out under a running job fails its writes
    behind its back (the loop device's write-back gets ENOSPC: the data is
    lost, and the job, whose writes had returned, never knows).  Made
    whole here, a store with no room for it refuses the image, before any
    stage or job uses it."""
    fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW)
    try:
        os.posix_fallocate(fd, 0, os.fstat(fd).st_size)
    except OSError as exc:
        raise ImageError(
            f"cannot reserve the memory of the image {path} "
            f"({os.fstat(fd).st_size >> 20} MiB): {exc.strerror} (its RSA node's "
            "store has no room left for it)"
        ) from None
    finally:
        os.close(fd)


def _mkfs(path, capacity, label):
    done = _run(
        mkfs_argv(path, capacity, label), f"cannot make a file system in {path}"
    )
    if done.returncode != 0:
        raise ImageError(f"cannot make a file system in {path}: {_said(done)}")


def _fit(path, capacity, build):
    """Size the file at ``path`` and ``build()`` the file system in it until
    exactly ``capacity`` bytes of blocks and ``extent_room`` are free for
    files once mounted; where no size gives exactly that (mke2fs drops a
    last block group too small to be worth its bookkeeping), the least that
    gives more."""
    want = _free_blocks(capacity)
    blocks = file_size(capacity) // BLOCK
    best = None  # (excess, blocks) of the closest that holds it all
    for _ in range(5):
        os.truncate(path, blocks * BLOCK)
        build()
        have = _available(path)
        if have == want:
            return
        if have > want and (best is None or have - want < best[0]):
            best = (have - want, blocks)
        blocks += want - have
    if best is not None:
        os.truncate(path, best[1] * BLOCK)
        build()


def _available(path):
    """The blocks free for files in the image at ``path`` once mounted:
    its free blocks less those the kernel holds back."""
    with open(path, "rb") as f:
        f.seek(_SUPER)
        sb = f.read(1024)

    def u64(lo, hi):
        high = struct.unpack_from("<I", sb, hi)[0]
        return high << 32 | struct.unpack_from("<I", sb, lo)[0]

    total, free = u64(0x04, 0x150), u64(0x0C, 0x158)
    return free - held_back(total)


def grow(path, capacity):
    """Grow the (unmounted) image at ``path`` to hold ``capacity`` bytes of
    files (an adopted reservation larger than the kept one)."""
    if _available(path) >= _free_blocks(capacity):
        return
    check(path, force=True)

    def resize():
        done = _run(["resize2fs", path], f"cannot grow {path}")
        if done.returncode != 0:
            raise ImageError(f"cannot grow {path} for {capacity} bytes: {_said(done)}")

    _fit(path, capacity, resize)
    reserve(path)


# --- its state ---------------------------------------------------------------------

_SUPER = 1024
_MAGIC = 0xEF53
_VALID_FS = 0x1
_ERROR_FS = 0x2
_RECOVER = 0x4  # incompat: the journal must be replayed


def unclean(path):
    """Why the image at ``path`` must be checked before it is used (not
    unmounted cleanly: its compute node was lost with it mounted; errors
    recorded), or None when it is clean."""
    with open(path, "rb") as f:
        f.seek(_SUPER)
        sb = f.read(1024)
    if len(sb) < 0x64 or struct.unpack_from("<H", sb, 0x38)[0] != _MAGIC:
        return "it holds no ext4 file system"
    state = struct.unpack_from("<H", sb, 0x3A)[0]
    incompat = struct.unpack_from("<I", sb, 0x60)[0]
    if incompat & _RECOVER:
        return "its journal was not replayed (it was not unmounted)"
    if state & _ERROR_FS:
        return "the kernel recorded errors in it"
    if not state & _VALID_FS:
        return "it was not unmounted cleanly"
    return None


def check(path, force=False):
    """e2fsck -p the (unmounted) image: replay its journal, repair what can
    be repaired without asking; ImageError when it cannot be."""
    done = _run(
        ["e2fsck", "-p", *(["-f"] if force else []), path], f"cannot check {path}"
    )
    if done.returncode >= FSCK_FIXED:
        raise ImageError(
            f"{path} cannot be repaired (e2fsck -p exit status {done.returncode}: "
            f"{_said(done)})"
        )
    return (done.stdout or "").strip()


# --- loop devices ----------------------------------------------------------------------

LOOP_CTL_GET_FREE = 0x4C82
LOOP_CONFIGURE = 0x4C0A
LO_FLAGS_READ_ONLY = 1
LO_FLAGS_AUTOCLEAR = 4
LO_FLAGS_DIRECT_IO = 16
_LOOP_INFO64 = "QQQQQIIII64s64s32sQQ"
_LOOP_CONFIG = "II" + _LOOP_INFO64 + "8Q"


def _loop_config(fd, flags, name):
    return struct.pack(
        "=" + _LOOP_CONFIG,
        fd,
        BLOCK,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        0,
        flags,
        name.encode()[:63],
        b"",
        b"",
        0,
        0,
        *([0] * 8),
    )


class Loop:
    """A loop device over an image file, cleared by the kernel when its
    last user (the mount) lets go."""

    def __init__(self, path, read_only=False, direct=False):
        self.path = path
        self.device = None
        self.fd = None
        flags = os.O_RDONLY if read_only else os.O_RDWR
        try:
            backing = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC)
        except OSError as exc:
            raise ImageError(f"cannot open the image {path}: {exc.strerror}") from None
        try:
            self._configure(backing, read_only, direct)
        finally:
            os.close(backing)

    def _configure(self, backing, read_only, direct):
        flags = LO_FLAGS_AUTOCLEAR | (LO_FLAGS_READ_ONLY if read_only else 0)
        flags |= LO_FLAGS_DIRECT_IO if direct else 0
        for _ in range(20):  # another process may take the free one first
            try:
                with open("/dev/loop-control", "rb") as ctl:
                    number = fcntl.ioctl(ctl, LOOP_CTL_GET_FREE)
                device = f"/dev/loop{number}"
                fd = os.open(
                    device, (os.O_RDONLY if read_only else os.O_RDWR) | os.O_CLOEXEC
                )
            except OSError as exc:
                raise ImageError(f"cannot get a loop device: {exc.strerror}") from None
            try:
                fcntl.ioctl(fd, LOOP_CONFIGURE, _loop_config(backing, flags, self.path))
            except OSError as exc:
                os.close(fd)
                if exc.errno == errno.EBUSY:
                    continue
                if direct and exc.errno == errno.EINVAL:
                    # the file cannot be read with O_DIRECT: buffered then
                    return self._configure(backing, read_only, False)
                raise ImageError(
                    f"cannot set up {device} over {self.path}: {exc.strerror}"
                ) from None
            self.device, self.fd = device, fd
            return
        raise ImageError("cannot get a loop device: every free one was taken meanwhile")

    def close(self):
        """Let go of the device: with nothing mounted on it, it is cleared."""
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def backing_file(device):
    """The file a loop device reads (its path as it was set up), or None."""
    name = os.path.basename(device)
    try:
        with open(f"/sys/block/{name}/loop/backing_file") as f:
            return f.read().strip()
    except OSError:
        return None


def loops_over(prefix):
    """Loop devices whose backing file lies under ``prefix`` (a leak check)."""
    found = []
    try:
        names = os.listdir("/sys/block")
    except OSError:
        return found
    for name in names:
        if name.startswith("loop"):
            path = backing_file(name)
            if path and path.startswith(prefix.rstrip("/") + "/"):
                found.append((f"/dev/{name}", path))
    return sorted(found)


# --- mounting --------------------------------------------------------------------------


def mount(path, target, read_only=False, direct=False, dirty=None):
    """Mount the image at ``path`` on ``target`` (nosuid, nodev: nothing in
    it may raise privileges here) through a new loop device; ``dirty``:
    the most unwritten data (bytes) this node may keep for it.  Returns
    the loop device."""
    loop = Loop(path, read_only, direct)
    try:
        flags = sysmount.MS_NOSUID | sysmount.MS_NODEV
        flags |= sysmount.MS_RDONLY if read_only else 0
        sysmount.mount_device(loop.device, target, "ext4", flags)
        limit_dirty(loop.device, dirty)
        return loop.device
    except (OSError, ImageError) as exc:
        raise ImageError(f"cannot mount the image {path} at {target}: {exc}") from None
    finally:
        loop.close()


def unmount(target):
    """Unmount the image at ``target``, writing back what its node still
    holds of it first; the seconds that took.  (Never lazily: a writer
    left behind would write under the next one.)  Its loop device gets
    the kernel's own limits back first: whoever takes it next finds it as
    the kernel made it."""
    t0 = time.monotonic()
    kind, device = sysmount.top_mount(target)
    if kind == "ext4" and device.startswith("/dev/loop"):
        limit_dirty(device, None)
    try:
        sysmount.umount_now(target)
    except OSError as exc:
        raise ImageError(str(exc)) from None
    return time.monotonic() - t0


def limit_dirty(device, nbytes):
    """At most ``nbytes`` of data written to the file system on ``device``
    may wait in this node's memory (None: the kernel's own limits): the
    rest is written back while the job runs, so its end has little left
    to write."""
    try:
        bdi = f"/sys/class/bdi/{_major_minor(device)}"
    except OSError:
        return  # the device is gone
    settings = (
        [("strict_limit", "0"), ("max_ratio", "100")]
        if nbytes is None
        else [("max_bytes", str(int(nbytes))), ("strict_limit", "1")]
    )
    for name, value in settings:
        try:
            with open(os.path.join(bdi, name), "w") as f:
                f.write(value)
        except OSError:
            return  # an older kernel: its global limits hold


def _major_minor(device):
    st = os.stat(device)
    return f"{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"


# --- what the job will read, read ahead ------------------------------------------------

#: the share of a compute node's available memory the read-ahead may fill
READ_AHEAD_SHARE = 4
#: the largest file read ahead: a larger one is read as the job reads it,
#: the kernel's own read-ahead keeping requests in flight
READ_AHEAD_FILE = 1 << 20


def _available_memory():
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def read_ahead(root, limit=None, largest=READ_AHEAD_FILE):
    """Ask the kernel to read every regular file of at most ``largest``
    bytes under the mounted image at ``root`` into this node's page cache
    (``POSIX_FADV_WILLNEED``: the reads are queued, many at once, and not
    waited for), so that the job's first reads of its small inputs come
    from memory, not one round trip to the RSA node each.  The pages are
    the file system's own, the ones the job's reads use (the loop device
    reads the image file directly: nothing is cached twice), and they go
    with the unmount.  At most ``limit`` bytes (default: a quarter of the
    node's available memory).  Never follows a symbolic link or leaves the
    file system (the job may change its tree meanwhile), opens nothing
    that is not a regular file.  Returns the bytes asked for."""
    limit = _available_memory() // READ_AHEAD_SHARE if limit is None else limit
    done = 0
    top = os.stat(root).st_dev
    for _, dirs, files, dirfd in os.fwalk(root):
        if os.fstat(dirfd).st_dev != top:
            dirs[:] = []
            continue
        for name in files:
            if done >= limit:
                return done
            try:
                fd = os.open(
                    name,
                    os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY,
                    dir_fd=dirfd,
                )
            except OSError:
                continue  # gone, a symbolic link, a device (nodev)
            try:
                st = os.fstat(fd)
                if (
                    stat.S_ISREG(st.st_mode)
                    and st.st_dev == top
                    and st.st_size <= largest
                ):
                    length = min(st.st_size, limit - done)
                    os.posix_fadvise(fd, 0, length, os.POSIX_FADV_WILLNEED)
                    done += length
            except OSError:
                pass
            finally:
                os.close(fd)
    return done


def start_read_ahead(root):
    """``read_ahead(root)`` in a process of its own, apart from the caller
    (a session of its own, no inherited output) so that the caller may
    end at once; returns ``[pid, start time]`` for ``stop_read_ahead``."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child)
        try:
            os.setsid()
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            os.closerange(3, os.sysconf("SC_OPEN_MAX"))  # no lock of the caller's
            read_ahead(root)
        finally:
            os._exit(0)
    return [pid, starttime(pid)]


def stop_read_ahead(who, wait=5.0):
    """Stop a read-ahead ``start_read_ahead`` began, if it still runs, and
    wait (at most ``wait`` seconds) until it has let go of the file system
    (its open directories would keep the unmount from happening)."""
    pid, start = who
    try:
        pidfd = os.pidfd_open(pid)
    except OSError:
        return  # gone
    try:
        if start is None or starttime(pid) != start:
            return  # gone, and its number taken by another process
        signal.pidfd_send_signal(pidfd, signal.SIGKILL)
        select.select([pidfd], [], [], wait)  # readable once it has ended
    except OSError:
        pass
    finally:
        os.close(pidfd)


# --- who has it mounted --------------------------------------------------------------

USE = ".use"
WRITER = "w"


class Busy(ImageError):
    """Someone else has the image mounted in a way that excludes us."""


def use_dir(path):
    return path + USE


def me(host, **fields):
    """Who we are, for a use entry: this node and this process."""
    return {
        "host": host,
        "pid": os.getpid(),
        "starttime": starttime(os.getpid()),
        "boot_id": _boot_id(),
        "at": time.time(),
        **fields,
    }


def _boot_id():
    with open("/proc/sys/kernel/random/boot_id") as f:
        return f.read().strip()


def describe(entry):
    """How a use entry names its holder to a person."""
    where = entry.get("host") or "?"
    if entry.get("rank") is not None:
        where += f" (rank {entry['rank']})"
    what = entry.get("what") or "a process"
    return f"{what} on {where}" + (
        f" for job {entry['jobid']}" if entry.get("jobid") else ""
    )


class Use:
    """Who has the image at ``path`` mounted: its ``.use`` directory beside
    it holds one file ``w`` for the writer, ever one, and one ``r.*`` per
    reader; a writer comes only when there is no reader, a reader only
    when there is no writer.  Each side creates its entry first and then
    looks for the other's, so of two that come at once at least one sees
    the other and steps back.  An entry held by a process (a stage) whose
    process is gone on ``host``, where we run, is stale and removed; one
    held by a mount (``mount``: a compute node's) is removed only by whoever
    unmounts it, or broken by ``reclaim`` when its node was lost."""

    def __init__(self, path, host):
        self.path = path
        self.dir = use_dir(path)
        self.host = host

    def entries(self):
        """{name: entry} of the image's users, stale ones removed."""
        found = {}
        try:
            names = os.listdir(self.dir)
        except FileNotFoundError:
            return found
        for name in names:
            if name.startswith("."):
                continue
            entry = _read(os.path.join(self.dir, name))
            if entry is None:
                continue
            if self._stale(entry):
                _unlink(os.path.join(self.dir, name))
                continue
            found[name] = entry
        return found

    def _stale(self, entry):
        if entry.get("mount") or entry.get("host") != self.host:
            return False
        if entry.get("boot_id") != _boot_id():
            return True
        return starttime(entry.get("pid")) != entry.get("starttime")

    def take(self, write, who):
        """Become a user (``write``: the writer); Busy naming the one in
        the way; returns the entry's name, for ``give``."""
        os.makedirs(self.dir, mode=0o700, exist_ok=True)
        name = WRITER if write else f"r.{who['host']}.{who['pid']}.{time.time_ns()}"
        entry = os.path.join(self.dir, name)
        self.entries()  # a stale writer of ours goes first
        try:
            fd = os.open(
                entry, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600
            )
        except FileExistsError:
            holder = _read(entry) or {}
            raise Busy(
                f"{self.path} is mounted read-write by {describe(holder)}"
            ) from None
        with os.fdopen(fd, "w") as f:
            json.dump(who, f)
        others = {n: e for n, e in self.entries().items() if n != name}
        blocking = sorted(n for n in others if write or n == WRITER)
        if blocking:
            _unlink(entry)
            how = "read-write" if blocking[0] == WRITER else "read-only"
            holder = describe(others[blocking[0]])
            raise Busy(f"{self.path} is mounted {how} by {holder}")
        return name

    def give(self, name):
        """Stop being a user."""
        _unlink(os.path.join(self.dir, name))

    def writer(self):
        return self.entries().get(WRITER)

    def reclaim(self, host):
        """Break the writer's entry of ``host``, a compute node that was lost
        with the image mounted; True when there was one."""
        writer = self.writer()
        if writer is None or writer.get("host") != host:
            return False
        _unlink(os.path.join(self.dir, WRITER))
        return True

    def remove(self):
        """Forget every user (the image is being removed)."""
        try:
            for name in os.listdir(self.dir):
                _unlink(os.path.join(self.dir, name))
            os.rmdir(self.dir)
        except FileNotFoundError:
            pass


def _read(path):
    try:
        with open(path) as f:
            entry = json.load(f)
    except (OSError, ValueError):
        return None
    return entry if isinstance(entry, dict) else None


def _unlink(path):
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
