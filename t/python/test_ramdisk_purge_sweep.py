"""python3 -m flux_rsa.ramdisk purge PATH [--link DATA_IN] and sweep ROOT."""

import json
import os
import subprocess
import tempfile

import pytest
from test_ramdisk_hold import (  # noqa: F401
    built,
    mounts_at,
    needs_root,
    no_stray_holders,
    ramdisk,
    start_hold,
    stop,
)


def run(*args):
    cmd, env = ramdisk(*args)
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=30)


@pytest.fixture
def space():
    with tempfile.TemporaryDirectory(prefix="rsa-purge-") as d:
        os.chmod(d, 0o755)
        yield d


@pytest.fixture
def disk(space):
    """A held RAM disk (dir provider) with staged inputs, and its holder."""
    proc = start_hold(os.path.join(space, "root"))
    path = built(proc)
    tree = os.path.join(path, "in", "sub", "deep")
    os.makedirs(tree)
    with open(os.path.join(tree, "data"), "w") as f:
        f.write("x" * 1000)
    yield path
    assert stop(proc)[0] == 0


def outside_file(space):
    """A directory outside the RAM disk a link may point at."""
    other = os.path.join(space, "outside")
    os.makedirs(other)
    with open(os.path.join(other, "precious"), "w") as f:
        f.write("keep me")
    return other


def test_purge_leaves_a_link_to_data_in(space, disk):
    data_in = os.path.join(space, "data-in")
    other = outside_file(space)
    os.symlink(other, os.path.join(disk, "in", "sub", "escape"))
    st = os.stat(os.path.join(disk, "in"))
    proc = run("purge", os.path.join(disk, "in"), "--link", data_in)
    assert proc.returncode == 0, proc.stderr
    link = os.path.join(disk, "in")
    assert os.path.islink(link) and os.readlink(link) == data_in
    lst = os.lstat(link)
    assert (lst.st_uid, lst.st_gid) == (st.st_uid, st.st_gid)
    # the staged tree is gone, nothing behind the link inside it was touched
    assert sorted(os.listdir(disk)) == [".rsa-ramdisk", "in", "out"]
    assert open(os.path.join(other, "precious")).read() == "keep me"
    # again: already done, still fine
    again = run("purge", link, "--link", data_in)
    assert again.returncode == 0, again.stderr
    assert os.readlink(link) == data_in


def test_purge_without_data_in_leaves_an_empty_directory(disk):
    st = os.stat(os.path.join(disk, "in"))
    proc = run("purge", os.path.join(disk, "in"))
    assert proc.returncode == 0, proc.stderr
    path = os.path.join(disk, "in")
    assert os.path.isdir(path) and not os.path.islink(path)
    assert os.listdir(path) == []
    new = os.stat(path)
    assert (new.st_uid, new.st_gid, oct(new.st_mode & 0o7777)) == (
        st.st_uid,
        st.st_gid,
        "0o700",
    )


def test_purge_finishes_a_purge_killed_half_way(disk):
    # a crashed purge leaves the renamed tree aside; the next one removes it
    os.rename(os.path.join(disk, "in"), os.path.join(disk, ".purged-in.999"))
    proc = run("purge", os.path.join(disk, "in"), "--link", "/data/in")
    assert proc.returncode == 0, proc.stderr
    assert sorted(os.listdir(disk)) == [".rsa-ramdisk", "in", "out"]


def test_purge_refuses_paths_outside_a_ramdisk(space):
    victim = os.path.join(space, "not-ours", "in")
    os.makedirs(victim)
    proc = run("purge", victim, "--link", "/data/in")
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        f"flux-rsa-ramdisk: {victim}: not inside a flux-rsa RAM disk (no .rsa-ramdisk in "
        f"{os.path.dirname(victim)}); give the RAM disk's in directory"
    )
    assert os.path.isdir(victim) and not os.path.islink(victim)


def make_leftover(root, name, provider="dir"):
    """What a holder killed with SIGKILL leaves behind."""
    proc = start_hold(root, name=name, provider=provider)
    path = built(proc)
    open(os.path.join(path, "out", "result"), "w").close()
    proc.kill()
    proc.wait()
    return path


def test_sweep_removes_only_leftovers(space):
    root = os.path.join(space, "root")
    dead = make_leftover(root, "1.1")
    live_proc = start_hold(root, name="2.1")
    live = built(live_proc)
    foreign = os.path.join(root, "someone-elses")
    os.makedirs(foreign)
    # a marker naming a pid that is reused by another process is not alive
    reused = make_leftover(root, "3.1")
    marker = json.load(open(os.path.join(reused, ".rsa-ramdisk")))
    marker["pid"] = os.getpid()
    with open(os.path.join(reused, ".rsa-ramdisk"), "w") as f:
        json.dump(marker, f)
    proc = run("sweep", root)
    assert proc.returncode == 0, proc.stderr
    assert sorted(proc.stdout.splitlines()) == [
        f"flux-rsa-ramdisk: removed leftover RAM disk {dead}",
        f"flux-rsa-ramdisk: removed leftover RAM disk {reused}",
    ]
    assert sorted(os.listdir(root)) == ["2.1", "someone-elses"]
    assert os.path.isdir(os.path.join(live, "in"))
    assert stop(live_proc)[0] == 0


def test_sweep_of_a_missing_root_is_fine(space):
    proc = run("sweep", os.path.join(space, "nothing-here"))
    assert proc.returncode == 0 and proc.stdout == ""


@needs_root
def test_sweep_unmounts_a_leftover_tmpfs(space):
    root = os.path.join(space, "root")
    dead = make_leftover(root, "4.1", provider="tmpfs")
    assert mounts_at(dead)
    proc = run("sweep", root)
    assert proc.returncode == 0, proc.stderr
    assert mounts_at(dead) == []
    assert os.listdir(root) == []


def test_sweep_after_a_holder_job_ended_ends_its_process_too(space):
    """A holder task killed with its job may outlive the job's end for a
    moment (or, orphaned, for good): the sweep after that job waits for it,
    then kills it, and removes its RAM disk; other holders stay."""
    root = os.path.join(space, "root")
    orphan = start_hold(root, name="5.1")
    gone = built(orphan)
    live_proc = start_hold(root, name="6.1")
    live = built(live_proc)
    proc = run("sweep", root, "--gone", "5.1")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [
        f"flux-rsa-ramdisk: removed leftover RAM disk {gone}"
    ]
    assert orphan.wait(timeout=30) == -9
    assert os.listdir(root) == ["6.1"] and os.path.isdir(os.path.join(live, "in"))
    assert stop(live_proc)[0] == 0


def test_a_marker_naming_no_known_provider_is_refused_by_name(space):
    # (a directory with a marker flux-rsa never wrote: no traceback, a refusal)
    fake = os.path.join(space, "98.1")
    os.makedirs(os.path.join(fake, "in"))
    with open(os.path.join(fake, ".rsa-ramdisk"), "w") as f:
        json.dump({"name": "98.1", "mounted": True}, f)
    r = run("purge", os.path.join(fake, "in"))
    assert r.returncode != 0 and "Traceback" not in r.stderr
    assert (
        "marker of RAM disk '98.1' names an unknown RAM-disk provider None" in r.stderr
    )
