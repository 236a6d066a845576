"""How a range of a big file is copied: one decision, checked case by case."""

import os

import pytest

from flux_rsa.stage import bigfile, fsutil
from flux_rsa.stage.bigfile import (BUFFERED, CACHED_READ, DIRECT_READ, DIRECT_WRITE,
                                    KERNEL, SPARSE, direct_modes, head_cached,
                                    range_strategy, source_cached)


@pytest.mark.parametrize("sparse, read_direct, write_direct, same_fs, expected", [
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
])
def test_range_strategy(sparse, read_direct, write_direct, same_fs, expected):
    assert range_strategy(sparse, read_direct, write_direct, same_fs) == expected


@pytest.mark.parametrize("sparse, read_direct, write_direct, same_fs, expected", [
    # in the page cache already: read through it, not again from the device
    (False, True, False, False, CACHED_READ),
    # only where O_DIRECT reads were chosen; nothing else changes
    (True, True, False, False, SPARSE),
    (False, False, True, False, DIRECT_WRITE),
    (False, False, False, False, BUFFERED),
    (False, False, False, True, KERNEL),
])
def test_range_strategy_of_a_cached_source(sparse, read_direct, write_direct, same_fs,
                                           expected):
    assert range_strategy(sparse, read_direct, write_direct, same_fs,
                          src_cached=True) == expected


@pytest.mark.parametrize("pages, cached", [
    ((8192, 8192), True),
    ((4096, 8192), True),  # half: the rest comes with read-ahead
    ((4095, 8192), False),
    ((0, 8192), False),
    ((0, 0), False),
    (None, False),  # mincore could not tell: as before, O_DIRECT
])
def test_source_cached(pages, cached):
    assert source_cached(pages) is cached


@pytest.mark.parametrize("got, want, cached", [
    (1 << 20, 1 << 20, True),  # the whole first piece from the cache
    (5000, 5000, True),  # a range shorter than a piece, all cached
    (0, 1 << 20, False),  # its first page is not cached
    (4096, 1 << 20, None),  # part of it: mincore counts the range
    (None, 1 << 20, None),  # no RWF_NOWAIT here: mincore decides
])
def test_head_cached(got, want, cached):
    assert head_cached(got, want) is cached


@pytest.mark.parametrize("src_mem, dst_mem, direct, expected", [
    (False, True, None, (True, False)),  # stage-in: direct reads
    (True, False, None, (False, True)),  # stage-out: direct writes
    (False, False, None, (False, False)),  # disk to disk: page cache
    (True, True, None, (False, False)),  # RAM disk to RAM disk
    (False, False, True, (True, False)),  # asked for
    (False, True, False, (False, False)),  # refused by the caller
])
def test_direct_modes(src_mem, dst_mem, direct, expected):
    assert direct_modes(src_mem, dst_mem, direct) == expected


def test_big_files_are_split_into_whole_chunks():
    assert bigfile.BIG % bigfile.CHUNK == 0 and bigfile.CHUNK % bigfile.PIECE == 0


def _copy_range(src, dst, size):
    """One range of SRC (0, SIZE) copied by a RangeCopier set for O_DIRECT
    reads, as into a RAM disk; returns its strategy counts."""
    rc = bigfile.RangeCopier(read_direct=True, write_direct=False, same_fs=False,
                             src_in_memory=False, writeback=False)

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
        os.pread(fd, size, 0)  # now cached
        if not source_cached(fsutil.cached_pages(fd, 0, size)):
            pytest.skip("mincore cannot see the page cache here")
        assert _copy_range(src, os.fsencode(tmp_path / "out1"), size) == {CACHED_READ: 1}
        assert (tmp_path / "out1").read_bytes() == data
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        if source_cached(fsutil.cached_pages(fd, 0, size)):
            pytest.skip("the page cache kept the file")
    finally:
        os.close(fd)
    used = _copy_range(src, os.fsencode(tmp_path / "out2"), size)
    assert used == {DIRECT_READ: 1} or used == {DIRECT_READ: 1, BUFFERED: 1}
    assert (tmp_path / "out2").read_bytes() == data


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
        os.pread(fd, 64 << 10, 0)
        pages = fsutil.cached_pages(fd, 0, size)
        if pages is None or not 0 < pages[0] < 256:
            pytest.skip(f"the page cache holds {pages} of the file, not its start only")
    finally:
        os.close(fd)
    assert _copy_range(src, os.fsencode(tmp_path / "out"), size) == {DIRECT_READ: 1}
    assert (tmp_path / "out").read_bytes() == data
