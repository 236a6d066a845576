"""Stage, stop and purge subjobs in a real pool, with the real stager.

One instance and pool; one holder (job 201) whose tmpfs RAM disk every
test stages into or out of, as the job owner.
"""

import os
import tarfile
import time

import pytest
from conftest import stop_pool
from test_pool_helpers import (
    MiB,
    Pool,
    mounts_under,
    owner_account,
    requires_flux,
    requires_root,
)

pytestmark = [requires_flux, requires_root]
JOB = 201
TIMINGS = {}


@pytest.fixture(scope="module")
def pool():
    p = Pool()
    p.owner = owner_account()
    p.service.call("hold", jobid=JOB, gen=1, need=40 * MiB, userid=p.owner.pw_uid)
    p.nodes = p.service.wait_for("holder-alloc", jobid=JOB)["nodes"]
    p.ramdisk = p.service.wait_for("ramdisk-built", jobid=JOB)["path"]
    p.data_in = make_data_in(p.workdir)
    yield p
    stop_pool(p)
    print("\nstage timings:", {k: round(v, 3) for k, v in TIMINGS.items()})
    print(
        "stage 1 notifications:", [p for _, p in p.service.events if p.get("seq") == 1]
    )


def make_data_in(workdir):
    """20 files of 256 KiB in a tree any user may read."""
    top = os.path.join(workdir, "data-in")
    for i in range(20):
        sub = os.path.join(top, f"dir{i % 4}")
        os.makedirs(sub, exist_ok=True)
        with open(os.path.join(sub, f"file{i}"), "wb") as f:
            f.write(bytes([i]) * (256 * 1024))
    for dirpath, _, _ in os.walk(top):
        os.chmod(dirpath, 0o755)
    return top


def stage(pool, seq, direction, src, dst, method=None, verify="size"):
    t0 = time.monotonic()
    assert (
        pool.service.call(
            "stage",
            jobid=JOB,
            seq=seq,
            direction=direction,
            src=src,
            dst=dst,
            method=method,
            userid=pool.owner.pw_uid,
            verify=verify,
            nodes=pool.nodes,
        )
        == {}
    )
    return t0


def ended(pool, seq, timeout=60):
    return pool.service.wait_for("stage-end", jobid=JOB, seq=seq, timeout=timeout)


def script(pool, name, body):
    path = os.path.join(pool.workdir, name)
    with open(path, "w") as f:
        f.write("#!/bin/sh\n" + body)
    os.chmod(path, 0o755)
    return path


def test_stage_in_copies_as_the_owner_and_reports_progress(pool):
    dst = os.path.join(pool.ramdisk, "in")
    t0 = stage(pool, 1, "in", pool.data_in, dst, verify="checksum")
    end = ended(pool, 1)
    TIMINGS["stage subjob, 5 MiB copy (stage to stage-end)"] = (
        pool.service.when("stage-end", jobid=JOB, seq=1)[0] - t0
    )
    assert (end["ok"], end["error"]) == (True, None)
    progress = pool.service.seen("stage-progress", jobid=JOB, seq=1)
    assert progress, "no stage-progress before stage-end"
    assert set(progress[0]["progress"]) >= {
        "bytes_done",
        "bytes_total",
        "files_done",
        "files_total",
        "rate",
        "phase",
    }
    kinds = [p["kind"] for _, p in pool.service.events if p.get("seq") == 1]
    assert kinds[-1] == "stage-end" and set(kinds[:-1]) == {"stage-progress"}
    stamps = pool.service.when("stage-progress", jobid=JOB, seq=1)
    assert all(b - a >= 0.9 for a, b in zip(stamps, stamps[1:]))  # at most one a second
    copied = os.path.join(dst, "dir3", "file19")
    assert open(copied, "rb").read() == bytes([19]) * (256 * 1024)
    st = os.stat(copied)
    assert (st.st_uid, st.st_gid) == (pool.owner.pw_uid, pool.owner.pw_gid)


def test_stage_cannot_read_what_the_owner_cannot(pool):
    secret = os.path.join(pool.workdir, "root-only")
    os.makedirs(os.path.join(secret, "d"))
    os.chmod(secret, 0o700)
    stage(pool, 2, "in", secret, os.path.join(pool.ramdisk, "in"))
    end = ended(pool, 2)
    assert end["ok"] is False
    assert (
        end["error"].startswith("flux-rsa-stage: ")
        and "Permission denied" in end["error"]
    )


def test_stage_out_tar_writes_one_archive_owned_by_the_owner(pool):
    out = os.path.join(pool.ramdisk, "out")
    data_out = os.path.join(pool.workdir, "data-out")
    os.makedirs(data_out)
    os.chown(data_out, pool.owner.pw_uid, pool.owner.pw_gid)
    # what the job wrote on its RAM disk, as its owner
    os.makedirs(os.path.join(out, "res"))
    with open(os.path.join(out, "res", "answer"), "w") as f:
        f.write("42\n")
    for path in (os.path.join(out, "res"), os.path.join(out, "res", "answer")):
        os.chown(path, pool.owner.pw_uid, pool.owner.pw_gid)
    stage(pool, 4, "out", out, data_out, method="tar")
    end = ended(pool, 4)
    assert (end["ok"], end["error"]) == (True, None)
    (archive,) = os.listdir(data_out)
    path = os.path.join(data_out, archive)
    assert os.stat(path).st_uid == pool.owner.pw_uid
    with tarfile.open(path) as tar:
        assert tar.extractfile("res/answer").read() == b"42\n"


def test_stop_ends_a_running_stage(pool):
    slow = script(pool, "slow.sh", "sleep 60\n")
    stage(pool, 5, "out", os.path.join(pool.ramdisk, "out"), pool.workdir, method=slow)
    pool.service.wait(
        lambda: [
            s
            for s in pool.service.call("list")["stages"]
            if s["seq"] == 5 and s["state"] == "running"
        ],
        timeout=30,
    )
    listed = pool.service.call("list")
    assert [
        (h["jobid"], h["state"], h["nodes"], h["ramdisk"]) for h in listed["holders"]
    ] == [(JOB, "built", pool.nodes, pool.ramdisk)]
    assert [(s["jobid"], s["seq"]) for s in listed["stages"]] == [(JOB, 5)]
    t0 = time.monotonic()
    assert pool.service.call("stop", jobid=JOB, seq=5) == {}
    end = ended(pool, 5, timeout=30)
    assert (end["ok"], end["error"]) == (False, "stopped")
    assert time.monotonic() - t0 < 15
    assert pool.service.call("list")["stages"] == []


def test_stop_of_an_unknown_stage_still_reports_its_end(pool):
    assert pool.service.call("stop", jobid=JOB, seq=77) == {}
    end = ended(pool, 77)
    assert (end["ok"], end["error"]) == (False, "stopped")


def test_purge_leaves_a_link_to_data_in(pool):
    path = os.path.join(pool.ramdisk, "in")
    assert os.listdir(path)  # staged by the first test
    assert (
        pool.service.call(
            "purge",
            jobid=JOB,
            path=path,
            data_in=pool.data_in,
            userid=pool.owner.pw_uid,
            nodes=pool.nodes,
        )
        == {}
    )
    end = pool.service.wait_for("purge-end", jobid=JOB)
    assert (end["ok"], end["error"]) == (True, None)
    assert os.path.islink(path) and os.readlink(path) == pool.data_in
    assert os.lstat(path).st_uid == pool.owner.pw_uid
    # (.glusterfs: the handles of a RAM disk served to compute nodes)
    assert sorted(set(os.listdir(pool.ramdisk)) - {".glusterfs"}) == [
        ".rsa-ramdisk",
        "in",
        "out",
    ]


def test_shutdown_leaves_nothing(pool):
    result, rc = pool.shutdown()
    assert pool.service.seen("holder-end", jobid=JOB)[0]["error"] is None
    assert (result.returncode, rc) == (0, 0), pool.instance.output()
    assert mounts_under(pool.workdir) == [] and os.listdir(pool.root) == []
