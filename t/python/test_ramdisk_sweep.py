"""A sweep after a build or destroy stopped halfway: the empty tmpfs it
left without a marker on top goes, the RAM disk beneath with it; nothing
that is not an empty RAM-disk tmpfs of ours is touched."""

import os
import tempfile

import pytest

from flux_rsa.ramdisk import layout, sysmount
from flux_rsa.ramdisk.sweep import sweep

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")


@pytest.fixture
def root():
    with tempfile.TemporaryDirectory(prefix="rsa-sweep-") as d:
        yield d
        for name in os.listdir(d):
            sysmount.umount_all(os.path.join(d, name))


def half_built(root, name, source=sysmount.TMPFS_SOURCE):
    """What an instance stopped between a tmpfs mount and its marker on top
    leaves: the directory with the marker of a holder that is gone beneath,
    an empty tmpfs over it."""
    path = os.path.join(root, name)
    os.mkdir(path, 0o755)
    marker = layout.new_marker(name, "tmpfs", 8 << 20, 0)
    layout.write_marker(path, {**marker, "pid": 1, "starttime": -1})  # not its holder
    if source == sysmount.TMPFS_SOURCE:
        sysmount.mount_tmpfs(path, 8 << 20)
    else:
        assert os.system(f"mount -t tmpfs -o size=8m {source} '{path}'") == 0
    return path


@needs_root
def test_an_empty_unmarked_ram_disk_tmpfs_is_unmounted_and_removed(root):
    path = half_built(root, "9.1")
    assert layout.read_marker(path) is None and sysmount.mounted(path, "tmpfs")
    said = []
    assert sweep(root, say=said.append) == 0
    assert not sysmount.mounted(path) and not os.path.lexists(path)
    assert said == [
        f"unmounted an empty RAM disk without its marker at {path} (its build or "
        "destroy was stopped halfway)",
        f"removed leftover RAM disk {path}",
    ]


@needs_root
def test_a_tmpfs_with_files_or_of_another_source_is_left_alone(root):
    full = half_built(root, "9.2")
    with open(os.path.join(full, "data"), "w") as f:
        f.write("someone's\n")
    other = half_built(root, "9.3", source="site-scratch")
    said = []
    assert sweep(root, say=said.append) == 0
    assert said == []
    assert sysmount.mounted(full, "tmpfs") and os.path.exists(
        os.path.join(full, "data")
    )
    assert sysmount.top_mount(other) == ("tmpfs", "site-scratch")
