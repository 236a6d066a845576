"""python3 -m flux_rsa.stage.measure PATH --as-user UID: the apparent size and
file count of a tree, as its owner, never following a symbolic link."""

import json
import os
import subprocess
import tempfile

import pytest
from test_ramdisk_hold import IS_ROOT, PY, PYPATH


def measure(path, *args):
    env = dict(os.environ, PYTHONPATH=PYPATH)
    return subprocess.run(
        [PY, "-m", "flux_rsa.stage.measure", path, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.fixture
def tree():
    """3 files (one hard-linked twice), a link out of the tree, 2 dirs."""
    with tempfile.TemporaryDirectory(prefix="rsa-measure-") as d:
        os.chmod(d, 0o755)
        top = os.path.join(d, "in")
        os.makedirs(os.path.join(top, "sub"))
        with open(os.path.join(top, "a"), "wb") as f:
            f.write(b"x" * 1000)
        with open(os.path.join(top, "sub", "b"), "wb") as f:
            f.write(b"y" * 24)
        os.link(os.path.join(top, "sub", "b"), os.path.join(top, "b-again"))
        outside = os.path.join(d, "outside")
        os.makedirs(outside)
        with open(os.path.join(outside, "big"), "wb") as f:
            f.write(b"z" * 100000)
        os.symlink(outside, os.path.join(top, "escape"))
        yield top


def test_measure_sums_apparent_sizes_without_following_links(tree):
    proc = measure(tree)
    assert proc.returncode == 0, proc.stderr
    link = len(os.readlink(os.path.join(tree, "escape")))
    # a (1000) + b once (24) + the link itself; files: a, b, b-again, escape
    assert json.loads(proc.stdout) == {"bytes": 1024 + link, "files": 4, "dirs": 2}


def test_measure_of_a_single_file_and_a_top_level_link(tree):
    assert json.loads(measure(os.path.join(tree, "a")).stdout) == {
        "bytes": 1000,
        "files": 1,
        "dirs": 0,
    }
    link = json.loads(measure(os.path.join(tree, "escape")).stdout)
    assert (
        link["files"] == 1 and link["bytes"] < 1000
    )  # the link, not what it points at


def test_measure_names_a_missing_path(tree):
    proc = measure(os.path.join(tree, "nope"))
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        f"flux-rsa-measure: {tree}/nope: No such file or directory "
        f"(as uid {os.geteuid()})"
    )


@pytest.mark.skipif(not IS_ROOT, reason="switching users needs root")
def test_measure_runs_as_the_owner(tree, owner):
    os.chmod(os.path.join(tree, "sub"), 0o700)  # root's only
    proc = measure(tree, "--as-user", str(owner.pw_uid))
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        f"flux-rsa-measure: {tree}/sub: Permission denied " f"(as uid {owner.pw_uid})"
    )
    os.chmod(os.path.join(tree, "sub"), 0o755)
    ok = measure(tree, "--as-user", str(owner.pw_uid))
    assert ok.returncode == 0 and json.loads(ok.stdout)["files"] == 4
