"""Kept RAM disks: hold ends on SIGALRM keeping the RAM disk; sweeps leave
it alone; ``hold --adopt`` takes it over; ``discard`` removes it."""

import json
import os
import signal
import subprocess
import tempfile

import pytest
from conftest import ramdisk_marker
from test_ramdisk_hold import (  # noqa: F401
    STARTED,
    built,
    mounts_at,
    needs_root,
    no_stray_holders,
    ramdisk,
    start_hold,
    stop,
)

MiB = 2**20


def run(*args):
    cmd, env = ramdisk(*args)
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=30)


@pytest.fixture
def root():
    with tempfile.TemporaryDirectory(prefix="rsa-keep-") as d:
        os.chmod(d, 0o755)
        root = os.path.join(d, "root")
        yield root
        for name in os.listdir(root) if os.path.isdir(root) else []:
            run("discard", os.path.join(root, name))  # a failed test leaves no mount


def keep(proc):
    """SIGALRM: the hold ends, keeping its RAM disk; its 'kept' line."""
    proc.send_signal(signal.SIGALRM)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 0, err
    (line,) = out.splitlines()
    return json.loads(line)


def kept_disk(root, owner, provider="dir", name="42.1", size="8M"):
    """A RAM disk holding out/result, kept by its ended holder."""
    proc = start_hold(root, name=name, owner=owner.pw_uid, provider=provider, size=size)
    path = built(proc)
    with open(os.path.join(path, "out", "result"), "w") as f:
        f.write("precious output")
    kept = keep(proc)
    assert kept["event"] == "kept" and kept["path"] == path
    return path


def adopt(root, path, owner, jobid=42, size="8M", provider="dir"):
    cmd, env = ramdisk(
        "hold",
        "--provider",
        provider,
        "--root",
        root,
        "--name",
        "42.2",
        "--size",
        size,
        "--owner",
        str(owner),
        "--jobid",
        str(jobid),
        "--gen",
        "2",
        "--adopt",
        path,
    )
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    STARTED.append(proc)  # stopped after the test whatever happens
    return proc


def test_keep_leaves_the_ramdisk_marked_and_sweeps_spare_it(root, owner):
    path = kept_disk(root, owner)
    m = ramdisk_marker(path)
    assert (m["kept"], m["jobid"], m["gen"], m["owner"], m["size"]) == (
        True,
        42,
        1,
        owner.pw_uid,
        8 * MiB,
    )
    assert m["host"]  # outside Flux: the machine's name
    assert open(os.path.join(path, "out", "result")).read() == "precious output"
    swept = run("sweep", root, "--report-kept")
    assert swept.returncode == 0, swept.stderr
    assert [json.loads(line) for line in swept.stdout.splitlines()] == [
        {
            "event": "kept",
            "path": path,
            "jobid": 42,
            "gen": 1,
            "owner": owner.pw_uid,
            "bytes": 8 * MiB,
            "host": m["host"],
        }
    ]
    assert run("sweep", root).stdout == ""  # without the flag: silent, still spared
    assert os.path.exists(os.path.join(path, "out", "result"))


def test_a_new_hold_of_the_same_name_refuses_to_overwrite_a_kept_disk(root, owner):
    path = kept_disk(root, owner)
    proc = start_hold(root, name="42.1", owner=owner.pw_uid)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 1
    assert f"{path} is a kept RAM disk of job 42: adopt it" in err
    assert os.path.exists(os.path.join(path, "out", "result"))


@needs_root
def test_adopt_takes_a_kept_tmpfs_over_grows_it_and_destroys_it_at_the_end(root, owner):
    path = kept_disk(root, owner, provider="tmpfs", size="8M")
    assert mounts_at(path)
    proc = adopt(root, path, owner.pw_uid, size="12M", provider="tmpfs")
    lines = [json.loads(proc.stdout.readline()) for _ in range(2)]
    assert lines == [
        {"event": "adopted", "path": path, "size": 12 * MiB},
        {
            "event": "built",
            "path": path,
            "volume": {"provider": "tmpfs", "owner": owner.pw_uid},
        },
    ]
    m = ramdisk_marker(path)
    assert (m["kept"], m["pid"], m["size"]) == (False, proc.pid, 12 * MiB)
    vfs = os.statvfs(path)
    assert vfs.f_blocks * vfs.f_frsize == 12 * MiB
    assert open(os.path.join(path, "out", "result")).read() == "precious output"
    # a live adopted disk is not swept, not kept, not discardable
    assert run("sweep", root, "--report-kept").stdout == ""
    refused = run("discard", path)
    assert (
        refused.returncode == 1 and f"is held by process {proc.pid}" in refused.stderr
    )
    proc.send_signal(signal.SIGTERM)
    proc.communicate(timeout=20)
    assert proc.returncode == 0
    assert mounts_at(path) == [] and not os.path.exists(path)


@pytest.mark.parametrize(
    "jobid, uid, message",
    [
        (43, None, "cannot adopt {path} for job 43: it was kept for job 42"),
        (42, 4123457, "cannot adopt {path} for uid 4123457: it belongs to uid"),
    ],
)
def test_adopt_refuses_another_jobs_or_users_disk(root, owner, jobid, uid, message):
    path = kept_disk(root, owner)
    proc = adopt(root, path, owner.pw_uid if uid is None else uid, jobid=jobid)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 1 and out == ""
    assert message.format(path=path) in err
    assert ramdisk_marker(path)["kept"] is True


def test_adopt_refuses_a_disk_that_is_held_or_gone(root, owner):
    proc = start_hold(root, name="42.1", owner=owner.pw_uid)
    path = built(proc)
    second = adopt(root, path, owner.pw_uid)
    out, err = second.communicate(timeout=20)
    assert second.returncode == 1 and f"it is held by process {proc.pid}" in err
    assert stop(proc)[0] == 0
    third = adopt(root, path, owner.pw_uid)
    out, err = third.communicate(timeout=20)
    assert third.returncode == 1 and "no flux-rsa RAM disk there" in err


def test_an_adopted_disk_can_be_kept_again(root, owner):
    path = kept_disk(root, owner)
    proc = adopt(root, path, owner.pw_uid)
    assert [json.loads(proc.stdout.readline())["event"] for _ in range(2)] == [
        "adopted",
        "built",
    ]
    again = keep(proc)
    assert again["path"] == path and ramdisk_marker(path)["kept"] is True


@needs_root
def test_discard_removes_a_kept_tmpfs_and_is_idempotent(root, owner):
    path = kept_disk(root, owner, provider="tmpfs")
    done = run("discard", path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"flux-rsa-ramdisk: discarded {path}"
    assert mounts_at(path) == [] and not os.path.exists(path)
    again = run("discard", path)
    assert (again.returncode, again.stdout) == (0, "")


def test_discard_never_touches_what_is_not_a_ramdisk(root):
    foreign = os.path.join(root, "7.1")
    os.makedirs(os.path.join(foreign, "precious"))
    proc = run("discard", foreign)
    assert proc.returncode == 1 and "has no .rsa-ramdisk marker" in proc.stderr
    assert os.path.isdir(os.path.join(foreign, "precious"))
