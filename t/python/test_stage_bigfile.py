"""How a range of a big file is copied: one decision, checked case by case."""

import pytest

from flux_rsa.stage import bigfile
from flux_rsa.stage.bigfile import (BUFFERED, DIRECT_READ, DIRECT_WRITE, KERNEL,
                                    SPARSE, direct_modes, range_strategy)


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
