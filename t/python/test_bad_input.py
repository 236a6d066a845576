"""The bad-input catalog, without Flux: malformed rsa attributes, each
refused at submit with its one-line message (key, value, what is accepted),
and nothing created or changed on the file system by checking them.

The catalog is bad_input_catalog.py; the same one runs under a real
instance in t/t2000-bad-input.t.
Permissions are judged as the submitting user: as root the catalog submits
as an unprivileged test user, otherwise as whoever runs it.
"""

import os
import pathlib
import pwd
import shutil
import subprocess
import tempfile

import pytest
from bad_input_catalog import CATALOG, POOL

from flux_rsa.checks import Pool, check_request
from flux_rsa.core import Policy

ROOT = os.geteuid() == 0
TEST_USER = "rsa-check-test"


@pytest.fixture(scope="module")
def submitter():
    """Who submits: an unprivileged test user when we are root."""
    if not ROOT:
        return pwd.getpwuid(os.geteuid())
    try:
        return pwd.getpwnam(TEST_USER)
    except KeyError:
        pass
    try:
        subprocess.run(
            ["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", TEST_USER],
            check=True,
        )
    except (OSError, subprocess.CalledProcessError) as exc:
        pytest.skip(f"cannot create test user {TEST_USER}: {exc}")
    return pwd.getpwnam(TEST_USER)


@pytest.fixture(scope="module")
def tree(submitter):
    # not pytest's tmp_path: its parents are private to root
    t = pathlib.Path(tempfile.mkdtemp(prefix="rsa-bad-input.", dir="/tmp"))
    for d in (
        "in/sub",
        "out",
        "unreadable",
        "unwritable",
        "locked/deep",
        "private/pub",
    ):
        (t / d).mkdir(parents=True)
    (t / "file").write_text("a file\n")
    for name, mode in (("stage.sh", 0o755), ("noexec.sh", 0o644), ("noread.sh", 0o311)):
        (t / name).write_text("#!/bin/sh\nexit 0\n")
        (t / name).chmod(mode)
    (t / "sneaky").symlink_to(t / "private" / "pub")
    (t / "outlink").symlink_to(t / "in" / "sub")
    (t / "loop").symlink_to(t / "loop")
    # the submitter may not read, write or enter these (owned by us: as
    # root, by root, and the submitter is another user)
    (t / "unreadable").chmod(0o311)
    (t / "unwritable").chmod(0o555)
    (t / "locked").chmod(0o600)
    (t / "private").chmod(0o600)
    # ... and these are the submitter's own
    for d in ("out", "in/sub"):
        os.chown(t / d, submitter.pw_uid, submitter.pw_gid)
    t.chmod(0o755)
    yield t
    for d in ("unreadable", "unwritable", "locked", "private"):
        (t / d).chmod(0o755)
    shutil.rmtree(t)


def _fill(value, t, u):
    if isinstance(value, str):
        return value.replace("{t}", str(t)).replace("{u}", u)
    if isinstance(value, dict):
        return {_fill(k, t, u): _fill(v, t, u) for k, v in value.items()}
    return value


def _snapshot(t):
    """Every entry under the tree with its type, mode, size and mtime."""
    out = []
    for root, dirs, files in os.walk(t):
        for name in sorted(dirs + files):
            path = os.path.join(root, name)
            try:
                st = os.lstat(path)
            except PermissionError:  # inside a directory we closed
                out.append((path, None, None, None))
                continue
            out.append((path, st.st_mode, st.st_size, st.st_mtime_ns))
    return sorted(out)


def test_the_catalog_is_big_enough():
    assert len(CATALOG) >= 25
    assert len({name for name, _, _ in CATALOG}) == len(CATALOG)


@pytest.mark.parametrize("name, attrs, message", CATALOG, ids=[c[0] for c in CATALOG])
def test_bad_input_is_refused_with_its_message(tree, submitter, name, attrs, message):
    u = submitter.pw_name
    why = check_request(_fill(attrs, tree, u), submitter.pw_uid, pool=POOL)
    assert why == _fill(message, tree, u)
    assert "\n" not in why


def test_checking_the_whole_catalog_changes_nothing(tree, submitter):
    before = _snapshot(tree)
    for _, attrs, _ in CATALOG:
        check_request(
            _fill(attrs, tree, submitter.pw_name), submitter.pw_uid, pool=POOL
        )
    assert _snapshot(tree) == before


def test_the_same_request_done_right_passes(tree, submitter):
    """The controls: what the catalog breaks, done right, is accepted."""
    good = {
        "data_in": f"{tree}/in",
        "data_out": f"{tree}/out",
        "stage_out": f"{tree}/stage.sh",
        "capacity": "128M",
        "delay": "30d",
        "on_late": "wait",
        "verify": "checksum",
    }
    assert check_request(good, submitter.pw_uid, pool=POOL) is None
    assert (
        check_request({"data_in": f"{tree}/in", "capacity": "16G"}, submitter.pw_uid)
        is None
    )  # pool unknown
    assert (
        check_request(
            {"data_in": f"{tree}/outlink/", "data_out": f"{tree}/out", "delay": 0},
            submitter.pw_uid,
        )
        is None
    )
    assert (
        check_request({"capacity": "16M"}, submitter.pw_uid, pool=POOL) is None
    )  # scratch only


def test_capacity_beyond_what_nodes_hold_with_their_headroom_is_refused(
    tree, submitter
):
    """Over several nodes, each node also holds its share's headroom
    (core.spread): two nodes of 112M hold 136M, not 224M."""
    pool = Pool(
        Policy(node_capacity=112 << 20, granule=4 << 20, provider="glusterfs"),
        nodes=2,
    )
    attrs = {"data_in": f"{tree}/in", "capacity": "136M"}
    assert check_request(attrs, submitter.pw_uid, pool=pool) is None
    attrs["capacity"] = "137M"
    assert check_request(attrs, submitter.pw_uid, pool=pool) == (
        "rsa.capacity: '137M' is more than the RSA pool can ever hold (at most 136M: "
        "2 RSA node(s) x 112M, less the headroom of a RAM disk over several nodes)"
    )


def test_capacity_beyond_one_node_is_refused_when_ramdisks_cannot_span(tree, submitter):
    one_node = Pool(
        Policy(node_capacity=64 << 20, granule=4 << 20, provider="tmpfs"), nodes=2
    )
    attrs = {"data_in": f"{tree}/in", "capacity": "65M"}
    assert check_request(attrs, submitter.pw_uid, pool=one_node) == (
        "rsa.capacity: '65M' is more than one RSA node holds (64M), and this site's RAM disks "
        'cannot span nodes ([rsa] provider = "tmpfs"): ask for at most 64M'
    )
    assert (
        check_request(dict(attrs, capacity="64M"), submitter.pw_uid, pool=one_node)
        is None
    )
