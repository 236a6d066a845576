"""RAM disks that are ext4 images (ramdisk.image, ramdisk.imagedisk), and
the merge of a job's nodes' outputs (stage.merge), without Flux: a
reservation's size is what df shows and what files can fill; one writer
at a time, whoever asks; a stale hold of a stage whose process is gone is
broken, a compute node's only by its name; an image not unmounted is
checked, and one that cannot be repaired says so; clashing names across
nodes are found."""

import errno
import json
import os
import subprocess
import tempfile
import time

import pytest

from flux_rsa.ramdisk import image, imagedisk, layout, sysmount
from flux_rsa.stage import merge
from flux_rsa.stage.errors import StageError

MiB = 1 << 20
needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="loop devices and mounts need root"
)


@pytest.fixture
def work():
    with tempfile.TemporaryDirectory(prefix="rsa-image-") as d:
        os.chmod(d, 0o755)
        yield d
        for name in os.listdir(d):
            path = os.path.join(d, name)
            if sysmount.mounted(path):
                sysmount.umount(path)
        assert image.loops_over(d) == []


def made(work, capacity=16 * MiB, name="img"):
    path = os.path.join(work, name)
    image.make(path, capacity, "42.1")
    return path


@needs_root
@pytest.mark.parametrize("capacity", [4 * MiB, 48 * MiB, 130 * MiB, 600 * MiB])
def test_df_shows_the_reservation_and_files_fill_it(work, capacity):
    path = made(work, capacity)
    mnt = os.path.join(work, "m")
    os.mkdir(mnt)
    image.mount(path, mnt)
    try:
        st = os.statvfs(mnt)
        # what is free for files is the reservation and the room for their
        # extent blocks (exactly, but where mke2fs cannot make that size: up
        # to a block group more)
        room = capacity + image.extent_room(capacity)
        assert room <= st.f_bavail * st.f_frsize <= room + 32 * MiB
        assert st.f_files >= capacity // image.BLOCK  # an inode per block
        # all its memory taken at once: nothing is left to run out of later
        assert os.stat(path).st_blocks * 512 >= os.path.getsize(path)
        if capacity <= 48 * MiB:
            # and one file of the reservation's size fits, even written in
            # pieces each flushed before the next (more extents than its
            # inode holds: ext4 needs a block of its own for them)
            chunk = b"f" * (64 * 1024)
            with open(os.path.join(mnt, "all"), "wb", buffering=0) as f:
                for _ in range(capacity // len(chunk)):
                    f.write(chunk)
                    os.fdatasync(f.fileno())
            assert os.path.getsize(os.path.join(mnt, "all")) == capacity
    finally:
        image.unmount(mnt)
    assert image.unclean(path) is None
    assert (image.journal_bytes(capacity) > 0) == (capacity >= image.JOURNAL_FROM)


@needs_root
def test_small_files_do_not_run_out_of_inodes_before_blocks(work):
    path = made(work, 8 * MiB)
    mnt = os.path.join(work, "m")
    os.mkdir(mnt)
    image.mount(path, mnt)
    try:
        n = 0
        data = b"x" * 4096
        while True:
            try:
                with open(os.path.join(mnt, f"f{n}"), "wb") as f:
                    f.write(data)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                break
            n += 1
        # an 8 MiB reservation holds (nearly) 2048 files of 4 KiB
        assert n >= 0.95 * (8 * MiB // 4096)
        assert os.statvfs(mnt).f_ffree > 0  # blocks ran out, not inodes
    finally:
        image.unmount(mnt)


@needs_root
def test_a_compute_nodes_bound_on_unwritten_data_ends_with_its_mount(work):
    """Mounted with a bound, its loop device writes back early; unmounted,
    the device is as the kernel made it for whoever takes it next."""
    path = made(work)
    mnt = os.path.join(work, "m")
    os.mkdir(mnt)
    device = image.mount(path, mnt, dirty=4 * MiB)
    st = os.stat(device)
    bdi = f"/sys/class/bdi/{os.major(st.st_rdev)}:{os.minor(st.st_rdev)}"
    if not os.path.exists(os.path.join(bdi, "strict_limit")):
        image.unmount(mnt)
        pytest.skip("this kernel has no per-device write-back limits")

    def setting(name):
        with open(os.path.join(bdi, name)) as f:
            return f.read().strip()

    assert setting("strict_limit") == "1"
    assert int(setting("max_ratio")) < 100
    image.unmount(mnt)
    assert (setting("strict_limit"), setting("max_ratio")) == ("0", "100")


@needs_root
def test_one_writer_then_readers_and_never_both(work):
    path = made(work)
    node = image.Use(path, "node0")
    stage = image.Use(path, "rsa0")
    w = node.take(True, image.me("node0", what="the compute node", rank=0, mount=True))
    with pytest.raises(
        image.Busy, match="mounted read-write by the compute node on node0"
    ):
        stage.take(False, image.me("rsa0", what="a stage"))
    with pytest.raises(image.Busy, match="mounted read-write"):
        stage.take(True, image.me("rsa0", what="a stage"))
    node.give(w)
    r1 = stage.take(False, image.me("rsa0", what="the stage-out"))
    r2 = stage.take(False, image.me("rsa1", what="a hand-off"))
    with pytest.raises(image.Busy, match="mounted read-only by the stage-out on rsa0"):
        node.take(True, image.me("node0", what="the compute node", mount=True))
    stage.give(r1)
    stage.give(r2)
    assert node.take(True, image.me("node0", mount=True)) == image.WRITER


@needs_root
def test_a_dead_stages_hold_is_stale_a_compute_nodes_only_reclaimed(work):
    path = made(work)
    use = image.Use(path, "rsa0")
    os.makedirs(image.use_dir(path))
    dead = {**image.me("rsa0", what="a stage"), "pid": 1, "starttime": -1}
    with open(os.path.join(image.use_dir(path), image.WRITER), "w") as f:
        json.dump(dead, f)
    # (its process is gone on this node: its hold goes)
    assert use.take(True, image.me("rsa0")) == image.WRITER
    use.give(image.WRITER)
    node = image.me("node1", what="the compute node", rank=1, mount=True)
    image.Use(path, "node1").take(True, node)
    with pytest.raises(image.Busy):
        use.take(False, image.me("rsa0"))
    assert not use.reclaim("node0")  # not that node's
    assert use.reclaim("node1")
    assert use.take(False, image.me("rsa0")).startswith("r.")


@needs_root
def test_an_image_not_unmounted_is_checked_before_it_is_read(work):
    ramdisk = os.path.join(work, "42.1")
    file = os.path.join(work, "42.1.img")
    marker = {
        **layout.new_marker("42.1", "tmpfs", 16 * MiB, 0),
        "kind": imagedisk.KIND,
        "image": file,
        "host": "rsa0",
    }
    imagedisk.build(ramdisk, marker, 16 * MiB)
    mnt = os.path.join(work, "m")
    os.mkdir(mnt)
    image.mount(file, mnt)
    with open(os.path.join(mnt, "out", "written"), "w") as f:
        f.write("kept")
    os.sync()
    image.unmount(mnt)
    # as if its node were lost with it mounted: its hold left, not clean
    image.Use(file, "node0").take(True, image.me("node0", mount=True))
    debugfs = ["debugfs", "-w", "-R", "ssv state 0", file]
    assert subprocess.run(debugfs, capture_output=True).returncode == 0
    assert image.unclean(file) == "it was not unmounted cleanly"

    def read():
        sysmount.private_namespace()
        with imagedisk.opened(ramdisk, False, "the stage-out", reclaim=("node0",)) as o:
            assert o.repaired and "e2fsck -p" in o.repaired
            with open(os.path.join(ramdisk, "out", "written")) as f:
                assert f.read() == "kept"

    sysmount.in_private_namespace(read)
    assert image.unclean(file) is None
    imagedisk.remove(ramdisk, marker)
    layout.remove(ramdisk)


@needs_root
def test_an_image_that_cannot_be_repaired_says_so(work):
    path = made(work)
    with open(path, "r+b") as f:  # its superblock and group descriptors: gone
        f.seek(1024)
        f.write(b"\x53\xef" * 4 + b"\xff" * 8192)
    with pytest.raises(image.ImageError, match="cannot be repaired|holds no ext4"):
        image.check(path)


@needs_root
def test_an_adopted_larger_reservation_grows_its_image(work):
    path = made(work, 16 * MiB)
    image.grow(path, 40 * MiB)
    mnt = os.path.join(work, "m")
    os.mkdir(mnt)
    image.mount(path, mnt)
    try:
        st = os.statvfs(mnt)
        assert st.f_blocks * st.f_frsize >= 40 * MiB
    finally:
        image.unmount(mnt)


def test_names_written_on_two_nodes_are_found_directories_are_merged(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for top in (a, b):
        (top / "shared" / "deep").mkdir(parents=True)
    (a / "shared" / "part.0").write_text("0")
    (b / "shared" / "part.1").write_text("1")
    assert merge.conflicts([str(a), str(b)]) == []
    (a / "result").write_text("a")
    (b / "result").write_text("b")
    (a / "shared" / "deep" / "x").mkdir()
    (b / "shared" / "deep" / "x").write_text("a file where the other has a directory")
    os.symlink("part.0", a / "shared" / "link")
    os.symlink("part.1", b / "shared" / "link")
    assert merge.conflicts([str(a), str(b)]) == [
        ("result", [0, 1]),
        ("shared/deep/x", [0, 1]),
        ("shared/link", [0, 1]),
    ]
    with pytest.raises(StageError) as err:
        merge.check([str(a), str(b)])
    assert "3 name(s) were written on more than one of the job's nodes" in str(
        err.value.line()
    )
    assert "result (on node 0 and node 1)" in err.value.line()


@needs_root
def test_a_store_with_no_room_for_an_image_refuses_it_when_made(work):
    # (made sparse, the image would have failed its writer's write-back
    # later, under a running job, with the job none the wiser)
    store = os.path.join(work, "store")
    os.mkdir(store)
    sysmount.mount_tmpfs(store, 40 * MiB, mode=0o700)
    try:
        with pytest.raises(image.ImageError, match="store has no room left for it"):
            image.make(os.path.join(store, "big.img"), 48 * MiB, "43.1")
        assert os.listdir(store) == []
        image.make(os.path.join(store, "small.img"), 16 * MiB, "44.1")
    finally:
        sysmount.umount(store)


def test_a_store_holds_the_images_of_its_nodes_reservations_whole():
    # many small reservations take more beside their files than one large
    for node, granule in ((128 * MiB, 4 * MiB), (3 << 30, 128 * MiB)):
        room = image.store_bytes(node, granule)
        assert room >= image.file_size(node)
        assert room >= (node // granule) * image.file_size(granule)


def test_an_image_removed_from_its_store_gives_its_memory_back(tmp_path):
    # a compute node's client that looked the image up left GlusterFS's
    # handle of it on the store's brick: a second hard link, which kept the
    # memory of every removed image taken until the store was full
    from flux_rsa.ramdisk import disks, imagedisk

    brick = tmp_path / "images"
    handles = brick / ".glusterfs" / "3f" / "2a"
    handles.mkdir(parents=True)
    file = brick / "7.1.img"
    file.write_bytes(b"x" * 4096)
    gfid = "3f2a0c1e-1b2c-4d5e-8f90-0123456789ab"
    os.link(file, handles / gfid)
    other = brick / "8.1.img"  # another job's image, still in use
    other.write_bytes(b"y")
    os.link(other, handles / "3f2a0c1e-1b2c-4d5e-8f90-0123456789ac")
    ramdisk = tmp_path / "7.1"
    ramdisk.mkdir()
    marker = {"kind": imagedisk.KIND, "name": "7.1", "image": str(file)}
    disks.provider("tmpfs").destroy(str(ramdisk), marker)
    assert not file.exists() and not (handles / gfid).exists()
    assert other.exists() and os.stat(other).st_nlink == 2


def resident(path):
    """Bytes of ``path`` in this node's page cache (util-linux fincore)."""
    said = subprocess.run(
        ["fincore", "--bytes", "--noheadings", "--output", "RES", path],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(said.stdout.split()[0])


def cached_soon(paths, want, seconds=10.0):
    """Bytes of ``paths`` in the page cache once ``want`` of them are (the
    read-ahead's reads are queued, not waited for), or after ``seconds``."""
    deadline = time.monotonic() + seconds
    while True:
        got = sum(resident(p) for p in paths)
        if got >= want or time.monotonic() > deadline:
            return got
        time.sleep(0.05)


@needs_root
def test_the_read_ahead_brings_the_files_into_memory_and_no_more(work):
    """What a compute node reads ahead after its attach is the small
    files of the mounted image (the job's inputs), read into the file
    system's own pages; not a large one (read as the job reads it), never
    a file a symbolic link in it names, and a FIFO in it keeps nothing
    waiting."""
    path = made(work, 64 * MiB)
    mnt = os.path.join(work, "m")
    os.mkdir(mnt)
    other = os.path.join(work, "o")  # a file outside, on a file system of its own
    os.mkdir(other)
    image.mount(made(work, 8 * MiB, "other"), other)
    outside = os.path.join(other, "outside")
    with open(outside, "wb") as f:
        f.write(os.urandom(1 * MiB))
    image.mount(path, mnt)
    data = os.urandom(16 * 1024)
    os.makedirs(os.path.join(mnt, "in", "a"))
    files = [os.path.join(mnt, "in", "a", f"f{i}") for i in range(600)]
    for name in files:  # 9.4 MiB in files of 16 KiB
        with open(name, "wb") as f:
            f.write(data)
    big = os.path.join(mnt, "in", "big")
    with open(big, "wb") as f:
        f.write(os.urandom(image.READ_AHEAD_FILE + 4096))
    os.symlink(outside, os.path.join(mnt, "in", "link"))
    os.symlink(other, os.path.join(mnt, "in", "dirlink"))
    os.mkfifo(os.path.join(mnt, "in", "fifo"))
    image.unmount(mnt)
    image.unmount(other)  # nothing of it cached any more
    image.mount(os.path.join(work, "other"), other)

    image.mount(path, mnt, direct=True)  # as a compute node's attach does
    try:
        assert sum(resident(p) for p in files) == 0
        assert image.read_ahead(mnt) == 600 * len(data)
        # (a read ahead is advice: under memory pressure the kernel may
        # drop a few of its pages before or after they are read; CI's
        # parallel tests once left 40 KiB of 9.4 MiB uncached)
        assert cached_soon(files, 600 * len(data)) >= 0.9 * 600 * len(data)
        assert resident(outside) == 0 and resident(big) == 0
    finally:
        image.unmount(mnt)
        image.unmount(other)
    image.mount(path, mnt, direct=True)
    try:
        assert image.read_ahead(mnt, limit=1 * MiB) == 1 * MiB
    finally:
        image.unmount(mnt)


@needs_root
def test_a_read_ahead_runs_apart_and_its_stop_lets_the_unmount_happen(work):
    path = made(work, 64 * MiB)
    mnt = os.path.join(work, "m")
    os.mkdir(mnt)
    image.mount(path, mnt)
    for i in range(20):  # enough to outlast the fork
        os.makedirs(os.path.join(mnt, f"d{i}", "e"))
        with open(os.path.join(mnt, f"d{i}", "e", "f"), "wb") as f:
            f.write(os.urandom(1 * MiB))
    who = image.start_read_ahead(mnt)
    image.stop_read_ahead(who)
    image.unmount(mnt)  # not busy: the read-ahead let go of it
    _, status = os.waitpid(who[0], 0)
    # killed, or done already: either way it ended cleanly
    assert os.WIFSIGNALED(status) or os.WEXITSTATUS(status) == 0
    assert layout.starttime(who[0]) is None
    image.stop_read_ahead(who)  # gone already: nothing to do
