"""--as-user: everything runs with the job owner's rights (root-only tests)."""

import os
import pathlib
import pwd
import shutil
import subprocess
import tempfile

import pytest
from test_stage_helpers import PYPATH, stage

USER = "rsa-stage-test"
pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="needs root to create a test user and switch to it"
)


@pytest.fixture(scope="module")
def owner():
    try:
        return pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--no-create-home", "--shell", "/bin/sh", USER], check=True
        )
        return pwd.getpwnam(USER)


@pytest.fixture
def space(owner):
    """A root-owned 0755 base (pytest's own tmp dirs are 0700) whose 'in'
    and 'out' belong to the owner."""
    base = pathlib.Path(tempfile.mkdtemp(prefix="rsa-stage-id-"))
    os.chmod(base, 0o755)
    for d in ("in", "out"):
        (base / d).mkdir()
        os.chown(base / d, owner.pw_uid, owner.pw_gid)
    yield base
    shutil.rmtree(base)


def test_symlink_to_root_only_file_is_copied_as_a_link(space, owner):
    secret = space / "secret"
    secret.write_bytes(b"root only content")
    secret.chmod(0o600)
    os.symlink(secret, space / "in" / "peek")
    (space / "in" / "mine").write_bytes(b"user data")
    os.chown(space / "in" / "mine", owner.pw_uid, owner.pw_gid)
    os.lchown(space / "in" / "peek", owner.pw_uid, owner.pw_gid)
    stage("copy", space / "in", space / "out" / "ram", "--as-user", USER, check=0)
    assert os.readlink(space / "out" / "ram" / "peek") == str(secret)
    for p in (space / "out" / "ram").iterdir():
        assert os.lstat(p).st_uid == owner.pw_uid
        if not p.is_symlink():
            assert b"root only" not in p.read_bytes()


def test_files_are_owned_by_the_owner(space, owner):
    (space / "in" / "f").write_bytes(b"x")
    os.chown(space / "in" / "f", owner.pw_uid, owner.pw_gid)
    stage(
        "copy",
        space / "in",
        space / "out" / "ram",
        "--as-user",
        str(owner.pw_uid),
        check=0,
    )
    assert os.stat(space / "out" / "ram" / "f").st_uid == owner.pw_uid


def test_unwritable_data_out_fails_with_permission_error(space, owner):
    (space / "in" / "f").write_bytes(b"x")
    locked = space / "rootdir"
    locked.mkdir(mode=0o755)
    proc = stage("copy", space / "in", locked / "out", "--as-user", USER)
    assert proc.returncode == 4
    line = proc.stderr.decode().strip()
    assert line == (
        f"flux-rsa-stage: {locked}/out: Permission denied "
        "(the job owner may not access this path)"
    )
    assert not (locked / "out").exists()


def test_unreadable_source_fails_with_permission_error(space, owner):
    private = space / "private"
    private.mkdir(mode=0o700)
    proc = stage("copy", private, space / "out" / "x", "--as-user", USER)
    assert proc.returncode == 4
    assert str(private) in proc.stderr.decode()


def test_user_script_has_only_the_owners_rights(space, owner):
    rootdir = space / "rootdir"
    rootdir.mkdir(mode=0o755)
    script = space / "s.sh"
    script.write_text(f'#!/bin/sh\nid -u > "$2/uid"\ntouch {rootdir}/evil\n')
    script.chmod(0o755)
    proc = stage("script", script, space / "in", space / "out", "--as-user", USER)
    assert proc.returncode == 7
    assert (space / "out" / "uid").read_text().strip() == str(owner.pw_uid)
    assert not (rootdir / "evil").exists()
    assert b"Permission denied" in proc.stderr


def test_non_root_cannot_switch_user(space, owner):
    proc = subprocess.run(
        [
            "setpriv",
            f"--reuid={owner.pw_uid}",
            f"--regid={owner.pw_gid}",
            "--clear-groups",
            "env",
            f"PYTHONPATH={PYPATH}",
            "/usr/bin/python3",
            "-m",
            "flux_rsa.stage",
            "copy",
            str(space / "in"),
            str(space / "out" / "x"),
            "--as-user",
            "root",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.returncode == 4
    assert b"cannot switch from uid" in proc.stderr
    assert b"flux-imp run" in proc.stderr
