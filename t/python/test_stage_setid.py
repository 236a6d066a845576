"""Set-user-ID and set-group-ID bits, staged as the owner (not root).

The kernel clears S_ISUID, and S_ISGID with group execute, when a process
without CAP_FSETID writes to a file, and chmod(2) by such a process drops
S_ISGID when the file's group is not one of its groups.  `rsync -a`, run as
the owner, sets a file's mode after its data, so it keeps both bits; where
the kernel refuses setgid (the copy's group is not one of the owner's) it
ends without it and says nothing.  These tests run the stager and `rsync -a`
the same way, as an unprivileged user (runuser), and check the modes a user
would see with ls -l.  What rsync -a gives in each case, as asserted below:

* 4755, 2755 and 6755 files, and files in a 2775 directory: the same modes;
* a 2775 directory: 2775;
* a 2755 file whose copy's group is not one of the owner's (it lands in a
  setgid directory of such a group): 0755, exit 0.
"""

import contextlib
import grp
import json
import os
import pathlib
import pwd
import shutil
import stat
import subprocess
import tarfile
import tempfile

import pytest
from test_stage_helpers import PY, PYPATH, tmpfs

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="needs root to run the stager as another user"
)

USER = "rsa-stage-test"  # the stager tests' owner (conftest.TEST_USER)
OTHER_GROUP = "rsa-stage-other"  # a group USER is not in
BIG = 64 << 20  # bigfile.BIG: copied in ranges

# the tree every test stages: path -> mode
MODES = {
    "setuid": 0o4755,
    "setgid": 0o2755,
    "both": 0o6755,
    "plain": 0o755,
    "shared": stat.S_IFDIR | 0o2775,
    "shared/setuid-inside": 0o4755,
    "shared/data": 0o644,
    "big-setuid": 0o4755,
}


@contextlib.contextmanager
def _made(name, lookup, make, remove):
    """The account NAME (a user or group), made by MAKE if missing and then
    removed by REMOVE at the end; one already there is used and left."""
    try:
        found = lookup(name)
    except KeyError:
        found = None
    if found is not None:
        yield found
        return
    subprocess.run(make, check=True)
    try:
        yield lookup(name)
    finally:
        subprocess.run(remove, check=True)


@pytest.fixture(scope="module")
def owner():
    with _made(
        USER,
        pwd.getpwnam,
        ["useradd", "--system", "--no-create-home", "--shell", "/bin/sh", USER],
        ["userdel", USER],
    ) as pw:
        yield pw


@pytest.fixture(scope="module")
def other_group(owner):
    with _made(
        OTHER_GROUP,
        grp.getgrnam,
        ["groupadd", "--system", OTHER_GROUP],
        ["groupdel", OTHER_GROUP],
    ) as gr:
        assert owner.pw_name not in gr.gr_mem and gr.gr_gid != owner.pw_gid
        yield gr


@pytest.fixture
def space(owner):
    """DISK (a directory of /tmp's disk) and RAM (a tmpfs, as a RAM disk),
    both open to the owner, under a root-owned 0755 base."""
    base = tempfile.mkdtemp(dir="/tmp", prefix="rsa-setid-")
    try:
        os.chmod(base, 0o755)
        disk = os.path.join(base, "disk")
        os.mkdir(disk)
        os.chown(disk, owner.pw_uid, owner.pw_gid)
        with tmpfs(pathlib.Path(base) / "ram", "512m") as ram:
            os.chown(ram, owner.pw_uid, owner.pw_gid)
            os.chmod(ram, 0o700)
            yield {"disk": disk, "ram": str(ram)}
    finally:
        shutil.rmtree(base)


def as_owner(*cmd, python=True, env=()):
    """Run CMD as USER (runuser); the stager's module when PYTHON."""
    pre = ["runuser", "-u", USER, "--", "env", f"PYTHONPATH={PYPATH}", *env]
    if python:
        pre += [PY, "-m", "flux_rsa.stage"]
    return subprocess.run(
        pre + list(cmd), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def make_tree(root, owner, modes=MODES):
    """MODES under ROOT, every entry the owner's, each file's content its
    name (the big one BIG bytes)."""
    os.mkdir(root)
    os.chown(root, owner.pw_uid, owner.pw_gid)
    for rel, mode in sorted(modes.items()):
        path = os.path.join(root, rel)
        if stat.S_ISDIR(mode):
            os.mkdir(path)
        else:
            with open(path, "wb") as f:
                f.write(
                    rel.encode() * (BIG // len(rel) + 1)
                    if rel.startswith("big")
                    else rel.encode()
                )
        # chown first: it clears the set-ID bits chmod then sets
        os.chown(path, owner.pw_uid, owner.pw_gid)
        os.chmod(path, stat.S_IMODE(mode))


def modes_of(root):
    """path -> mode of everything under ROOT (directories with S_IFDIR),
    as ls -l shows them."""
    found = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(dirpath, name)
            st = os.lstat(path)
            rel = os.path.relpath(path, root)
            found[rel] = stat.S_IMODE(st.st_mode) | (
                stat.S_IFDIR if stat.S_ISDIR(st.st_mode) else 0
            )
    return found


def same_contents(a, b):
    for rel, mode in MODES.items():
        if not stat.S_ISDIR(mode):
            with open(os.path.join(a, rel), "rb") as x, open(
                os.path.join(b, rel), "rb"
            ) as y:
                assert x.read() == y.read(), rel


def rsync_as_owner(src, dst):
    proc = as_owner("rsync", "-a", src + "/", dst + "/", python=False)
    assert proc.returncode == 0, proc.stderr
    return modes_of(dst)


@pytest.mark.parametrize("loop", ["C", "Python"])
@pytest.mark.parametrize("direction", ["in", "out"])
def test_copy_as_the_owner_keeps_set_id_bits_as_rsync_does(
    space, owner, direction, loop
):
    """Stage-in (disk to RAM disk) and stage-out (RAM disk to disk), small
    files by the C loop or by Python, and a big file by ranges."""
    frm, to = ("disk", "ram") if direction == "in" else ("ram", "disk")
    src = os.path.join(space[frm], "src")
    make_tree(src, owner)
    env = () if loop == "C" else ("FLUX_RSA_COPYBATCH=",)
    proc = as_owner("copy", src, os.path.join(space[to], "dst"), env=env)
    assert proc.returncode == 0, proc.stderr
    assert modes_of(os.path.join(space[to], "dst")) == MODES
    assert rsync_as_owner(src, os.path.join(space[to], "rsync")) == MODES
    same_contents(src, os.path.join(space[to], "dst"))


def test_tar_and_untar_as_the_owner_keep_set_id_bits(space, owner):
    """Stage-out as one archive, then stage-in of that archive with a
    set-user-ID file beside it (copied as by copy)."""
    src = os.path.join(space["ram"], "src")
    make_tree(src, owner)
    out = os.path.join(space["disk"], "out")
    proc = as_owner("tar", src, out)
    assert proc.returncode == 0, proc.stderr
    archive = os.path.join(out, "rsa-output.tar")
    with tarfile.open(archive) as t:  # what tar tvf lists
        members = {
            m.name: m.mode | (stat.S_IFDIR if m.isdir() else 0)
            for m in t.getmembers()
            if m.name != "."
        }
    assert members == MODES
    with open(os.path.join(out, "launcher"), "wb") as f:
        f.write(b"#!/bin/sh\n")
    os.chown(os.path.join(out, "launcher"), owner.pw_uid, owner.pw_gid)
    os.chmod(os.path.join(out, "launcher"), 0o4755)
    dst = os.path.join(space["ram"], "dst")
    proc = as_owner("untar", out, dst)
    assert proc.returncode == 0, proc.stderr
    assert modes_of(dst) == dict(MODES, launcher=0o4755)
    assert rsync_as_owner(src, os.path.join(space["disk"], "rsync")) == MODES
    same_contents(src, dst)


def test_a_replica_keeps_set_id_bits_and_is_reused(space, owner):
    """A staged copy matches its source (modes included) and a stage-in
    from it keeps the bits too."""
    src = os.path.join(space["disk"], "src")
    make_tree(src, owner)
    replica = os.path.join(space["ram"], "replica")
    assert as_owner("copy", src, replica).returncode == 0
    dst = os.path.join(space["ram"], "dst")
    proc = as_owner("copy", src, dst, "--replica", replica)
    assert proc.returncode == 0, proc.stderr
    assert {"reused": replica} in [
        json.loads(line) for line in proc.stdout.splitlines()
    ]
    assert modes_of(dst) == MODES


def test_running_the_stage_again_mends_copies_that_lost_their_bits(space, owner):
    """Copies left with the same size and mtime but without their set-ID
    bits (what earlier versions left as the owner) are not skipped as
    complete: running the stage again gives them their mode, as rsync -a
    would."""
    src = os.path.join(space["disk"], "src")
    make_tree(src, owner)
    dst = os.path.join(space["ram"], "dst")
    as_owner("copy", src, dst)
    for rel, mode in MODES.items():
        if not stat.S_ISDIR(mode):
            os.chmod(os.path.join(dst, rel), mode & 0o1777)  # mtime unchanged
    proc = as_owner("copy", src, dst, "--summary")
    assert proc.returncode == 0, proc.stderr
    assert modes_of(dst) == MODES
    summary = json.loads(proc.stderr.splitlines()[-1])
    assert summary["files_copied"] == 5  # the five with set-ID bits


def test_setgid_the_kernel_refuses_is_dropped_as_rsync_does(space, owner, other_group):
    """A 2755 file whose copy lands in a setgid directory of a group the
    owner is not in: the kernel drops setgid when the mode is set, for
    rsync -a as for the stager; both end with 0755 and succeed, and a
    second run finds the copy complete."""
    src = os.path.join(space["disk"], "src")
    os.mkdir(src)
    path = os.path.join(src, "setgid")
    with open(path, "wb") as f:
        f.write(b"x")
    for p, mode in ((src, 0o2775), (path, 0o2755)):
        os.chown(p, owner.pw_uid, other_group.gr_gid)
        os.chmod(p, mode)
    want = {"setgid": 0o755}
    for name in ("dst", "rsync"):
        # a destination as the source's root: rsync leaves it alone
        d = os.path.join(space["ram"], name)
        os.mkdir(d)
        os.chown(d, owner.pw_uid, other_group.gr_gid)
        os.chmod(d, 0o2775)
    dst = os.path.join(space["ram"], "dst")
    proc = as_owner("copy", src, dst)
    assert proc.returncode == 0, proc.stderr
    assert modes_of(dst) == want
    assert os.stat(os.path.join(dst, "setgid")).st_gid == other_group.gr_gid
    assert rsync_as_owner(src, os.path.join(space["ram"], "rsync")) == want
    proc = as_owner("copy", src, dst, "--summary")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stderr.splitlines()[-1])["files_copied"] == 0
