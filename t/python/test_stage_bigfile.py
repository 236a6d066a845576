"""How a range of a big file is copied: one decision, checked case by case."""

import errno
import os

import pytest
from test_stage_helpers import tmpfs

from flux_rsa.stage import bigfile, copyio, fsutil
from flux_rsa.stage.bigfile import (
    BUFFERED,
    CACHED_READ,
    CHUNK,
    DIRECT_READ,
    DIRECT_WRITE,
    KERNEL,
    SPARSE,
    direct_modes,
    one_writer,
    pieces,
    range_strategy,
    source_cached,
)


@pytest.mark.parametrize(
    "sparse, read_direct, write_direct, same_fs, expected",
    [
        # holes stay holes whatever else holds
        (True, True, False, False, SPARSE),
        (True, False, True, False, SPARSE),
        (True, False, False, True, SPARSE),
        # device -> RAM disk: O_DIRECT into the destination's pages
        (False, True, False, False, DIRECT_READ),
        # RAM disk -> device: O_DIRECT from the mapped source
        (False, False, True, False, DIRECT_WRITE),
        # O_DIRECT refused (or not wanted): across file systems a buffer,
        # within one the kernel's copy
        (False, False, False, False, BUFFERED),
        (False, False, False, True, KERNEL),
    ],
)
def test_range_strategy(sparse, read_direct, write_direct, same_fs, expected):
    assert range_strategy(sparse, read_direct, write_direct, same_fs) == expected


@pytest.mark.parametrize(
    "sparse, read_direct, write_direct, same_fs, expected",
    [
        # in the page cache already: read through it, not again from the device
        (False, True, False, False, CACHED_READ),
        # a RAM disk to another RAM disk: from memory too
        (False, False, False, False, CACHED_READ),
        # elsewhere nothing changes
        (True, True, False, False, SPARSE),
        (False, False, True, False, DIRECT_WRITE),
        (False, False, False, True, KERNEL),
    ],
)
def test_range_strategy_of_a_cached_source(
    sparse, read_direct, write_direct, same_fs, expected
):
    assert (
        range_strategy(sparse, read_direct, write_direct, same_fs, src_cached=True)
        == expected
    )


@pytest.mark.parametrize(
    "pages, cached",
    [
        ((8192, 8192), True),
        ((4096, 8192), True),  # half: the rest comes with read-ahead
        ((4095, 8192), False),
        ((0, 8192), False),
        ((0, 0), False),
        (None, False),  # mincore could not tell: as before, O_DIRECT
    ],
)
def test_source_cached(pages, cached):
    assert source_cached(pages) is cached


@pytest.mark.parametrize(
    "dst_mem, src_mem, src_cached, whole",
    [
        (True, False, True, True),  # page cache to RAM disk: one writer
        (True, True, False, True),  # RAM disk to RAM disk: one writer
        (True, False, False, False),  # device to RAM disk: ranges, all workers
        (False, True, False, False),  # RAM disk to device: ranges
        (False, False, True, False),  # to a device: ranges
    ],
)
def test_one_writer(dst_mem, src_mem, src_cached, whole):
    assert one_writer(dst_mem, src_mem, src_cached) is whole


@pytest.mark.parametrize(
    "off, length, whole, expected",
    [
        (0, 2 * CHUNK + 5, False, [(0, CHUNK), (CHUNK, CHUNK), (2 * CHUNK, 5)]),
        (0, 2 * CHUNK + 5, True, [(0, 2 * CHUNK + 5)]),
        (CHUNK, CHUNK, False, [(CHUNK, CHUNK)]),
    ],
)
def test_pieces(off, length, whole, expected):
    assert pieces(off, length, whole) == expected


@pytest.mark.parametrize(
    "src_mem, dst_mem, direct, expected",
    [
        (False, True, None, (True, False)),  # stage-in: direct reads
        (True, False, None, (False, True)),  # stage-out: direct writes
        (False, False, None, (False, False)),  # disk to disk: page cache
        (True, True, None, (False, False)),  # RAM disk to RAM disk
        (False, False, True, (True, False)),  # asked for
        (False, True, False, (False, False)),  # refused by the caller
    ],
)
def test_direct_modes(src_mem, dst_mem, direct, expected):
    assert direct_modes(src_mem, dst_mem, direct) == expected


def test_big_files_are_split_into_whole_chunks():
    assert bigfile.BIG % bigfile.CHUNK == 0 and bigfile.CHUNK % bigfile.PIECE == 0


def _copy_range(src, dst, size):
    """One range of SRC (0, SIZE) copied by a RangeCopier set for O_DIRECT
    reads, as into a RAM disk; returns its strategy counts."""
    rc = bigfile.RangeCopier(
        read_direct=True,
        write_direct=False,
        same_fs=False,
        src_in_memory=False,
        writeback=False,
    )

    class F:
        name = os.path.basename(src)
        sparse = False

    F.src = None
    sdir = os.open(os.path.dirname(src), fsutil.DIR_FLAGS)
    sfd = os.open(src, fsutil.OPEN_FLAGS)
    dfd = os.open(dst, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        os.ftruncate(dfd, size)
        assert rc.copy(F, sfd, sdir, dfd, None, None, 0, size) == size
    finally:
        for fd in (sdir, sfd, dfd):
            os.close(fd)
    return rc.used


def _on_disk(path, size):
    """(PATH as bytes, the SIZE random bytes written there and flushed)."""
    data = os.urandom(size)
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    return os.fsencode(path), data


def test_a_cached_big_file_is_read_through_the_cache(tmp_path):
    """A source whose pages are in the page cache is read through it; the
    same file dropped from the cache is read with O_DIRECT; both copies
    whole."""
    size = (8 << 20) + 12345
    src, data = _on_disk(tmp_path / "big", size)
    fd = os.open(src, os.O_RDONLY)
    try:
        # A kernel that reclaims cold pages on its own (DAMON) may drop the
        # file between the read and the copy: then the copy is right to read
        # it from the device, and the case is tried again.
        for _ in range(5):
            os.pread(fd, size, 0)  # now cached
            if not source_cached(fsutil.cached_pages(fd, 0, size)):
                pytest.skip("mincore cannot see the page cache here")
            used = _copy_range(src, os.fsencode(tmp_path / "out1"), size)
            assert (tmp_path / "out1").read_bytes() == data
            if used == {CACHED_READ: 1}:
                break
            assert DIRECT_READ in used, used
        else:
            pytest.skip("the page cache dropped the file before each copy")
        # and the other way round: on a busy machine the file may be back in
        # the cache by the copy (then reading it there is right), and the
        # case is tried again
        for _ in range(5):
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            if source_cached(fsutil.cached_pages(fd, 0, size)):
                pytest.skip("the page cache kept the file")
            used = _copy_range(src, os.fsencode(tmp_path / "out2"), size)
            assert (tmp_path / "out2").read_bytes() == data
            if used != {CACHED_READ: 1}:
                break
        else:
            pytest.skip("the file was back in the page cache before each copy")
    finally:
        os.close(fd)
    assert used == {DIRECT_READ: 1} or used == {DIRECT_READ: 1, BUFFERED: 1}


def test_a_range_cached_only_at_its_start_is_counted(tmp_path):
    """When only the start of a range is in the cache (less than the first
    read takes), the pages of the whole range decide: here too few, so it is
    read with O_DIRECT, and the copy is whole."""
    size = 8 << 20
    src, data = _on_disk(tmp_path / "big", size)
    fd = os.open(src, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # no read-ahead
        os.pread(fd, bigfile.PROBE // 4, 0)
        pages = fsutil.cached_pages(fd, 0, size)
        if pages is None or not 0 < pages[0] < bigfile.PROBE // 4096:
            pytest.skip(f"the page cache holds {pages} of the file, not its start only")
    finally:
        os.close(fd)
    assert _copy_range(src, os.fsencode(tmp_path / "out"), size) == {DIRECT_READ: 1}
    assert (tmp_path / "out").read_bytes() == data


def _plan_of_one(src_dir, size):
    """A plan of SRC_DIR holding one big file "big" of SIZE random bytes,
    flushed; (plan, data)."""
    from flux_rsa.stage import plan as planmod

    _, data = _on_disk(src_dir / "big", size)
    return planmod.walk(os.fsencode(src_dir)), data


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (tmpfs mount)")
def test_which_big_files_go_whole_to_one_worker(tmp_path):
    """Into a RAM disk, a big file whose pages are cached goes whole to one
    worker, the same file out of the cache in ranges; out of a RAM disk
    into another, whole; to a disk, in ranges."""
    from flux_rsa.stage.copy import Copier

    (tmp_path / "src").mkdir()
    p, _ = _plan_of_one(tmp_path / "src", (64 << 20) + 5)
    f = p.files[0]
    path = os.fsencode(tmp_path / "src" / "big")
    with tmpfs(tmp_path / "ram", "200m") as mnt:
        c = Copier(p, os.fsencode(mnt / "out"))
        c.open()
        fd = os.open(path, os.O_RDONLY)
        try:
            os.pread(fd, f.size, 0)
            if not bigfile.source_cached(fsutil.cached_pages(fd, 0, f.size)):
                pytest.skip("mincore cannot see the page cache here")
            assert c.whole(f)
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            if fsutil.cached_pages(fd, 0, f.size)[0]:
                pytest.skip("the page cache kept the file")
            assert not c.whole(f)
        finally:
            os.close(fd)
            c.close()
        (mnt / "src").mkdir()
        p2, _ = _plan_of_one(mnt / "src", (64 << 20) + 5)
        with tmpfs(tmp_path / "ram2", "100m") as mnt2:
            c = Copier(p2, os.fsencode(mnt2 / "out"))
            c.open()
            try:
                assert c.whole(p2.files[0])
            finally:
                c.close()
        c = Copier(p2, os.fsencode(tmp_path / "disk_out"))
        c.open()
        try:
            assert not c.whole(p2.files[0])
        finally:
            c.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (tmpfs mount)")
@pytest.mark.parametrize("from_ram", [False, True])
def test_a_big_file_copied_whole_reports_each_chunk(tmp_path, from_ram):
    """A big file copied whole by one worker (cached, or from a RAM disk)
    arrives whole, and its progress advances a CHUNK at a time meanwhile,
    not only at its end."""
    from flux_rsa.stage.copy import Copier

    with tmpfs(tmp_path / "ram", "300m") as mnt:
        src = (mnt if from_ram else tmp_path) / "src"
        src.mkdir()
        size = 3 * CHUNK + 12345
        p, data = _plan_of_one(src, size)
        with open(src / "big", "rb") as f:  # cached
            f.read()
        seen = []
        c = Copier(
            p, os.fsencode(mnt / "out"), progress=lambda t: seen.append(t.bytes_done)
        )
        try:
            c.run()
        finally:
            c.close()
        assert (mnt / "out" / "big").read_bytes() == data
        assert sorted({b for b in seen if 0 < b < size}) == [
            CHUNK,
            2 * CHUNK,
            3 * CHUNK,
        ]


def test_a_file_system_that_cannot_find_holes_gets_the_whole_range_copied(
    tmp_path, monkeypatch
):
    """A sharded GlusterFS volume answers SEEK_DATA with EOPNOTSUPP: the
    sparse copy then copies everything (holes as zeros), rather than fail."""
    src = tmp_path / "sparse"
    with open(src, "wb") as f:
        f.truncate(3 << 20)
        f.seek(2 << 20)
        f.write(b"data")
    real_lseek = os.lseek

    def lseek(fd, pos, how):
        if how in (os.SEEK_DATA, os.SEEK_HOLE):
            raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP))
        return real_lseek(fd, pos, how)

    monkeypatch.setattr(os, "lseek", lseek)
    fd = os.open(src, os.O_RDONLY)
    try:
        assert list(copyio.data_segments(fd, 0, 3 << 20)) == [(0, 3 << 20)]
        assert list(copyio.data_segments(fd, 1 << 20, 3 << 20)) == [(1 << 20, 2 << 20)]
    finally:
        os.close(fd)
