"""RAM disks kept across a restart of the whole instance, then adopted.

A first instance (content store in a state directory) runs a pool with
three holders; the pool is shut down keeping two of them, and the instance
is stopped.  The same instance is started again (same state directory: its
KVS and job history survive), a new pool is launched: it lists the kept
RAM disks (their tmpfs mounts outlived the instance), adopts one - on a
drained node, with the files the first pool's job wrote - and discards the
other.  Tests run in file order and share the story's state.
"""

import os
import subprocess

import pytest
from conftest import ramdisk_marker
from test_pool_helpers import (
    FLUX,
    Lives,
    MiB,
    mounts_under,
    ramdisks_in,
    requires_flux,
    requires_root,
)

pytestmark = [requires_flux, requires_root]


@pytest.fixture(scope="module")
def story():
    s = Lives()
    s.paths = {}  # jobid -> RAM disk path
    yield s
    s.close()


def hold(pool, owner, jobid, need, gen=1, **extra):
    return pool.service.call(
        "hold", jobid=jobid, gen=gen, need=need, userid=owner.pw_uid, **extra
    )


def test_shutdown_keeps_the_named_ramdisks_and_destroys_the_others(story):
    pool = story.start()
    for jobid, need in ((501, 16 * MiB), (502, 8 * MiB), (504, 8 * MiB)):
        hold(pool, story.owner, jobid, need)
    for jobid in (501, 502, 504):
        story.paths[jobid] = pool.service.wait_for("ramdisk-built", jobid=jobid)["path"]
        out = os.path.join(story.paths[jobid], "out", f"result-{jobid}")
        with open(out, "w") as f:
            f.write(f"output of job {jobid}")
        os.chown(out, story.owner.pw_uid, story.owner.pw_gid)
    story.host = pool.service.seen("holder-alloc", jobid=501)[0]["nodes"][0]

    result = pool.stop_pool(keep=[{"jobid": 501, "gen": 1}, {"jobid": 504, "gen": 1}])
    assert result.returncode == 0
    ends = {p["jobid"]: p for p in pool.service.seen("holder-end")}
    assert (ends[501]["error"], ends[501]["kept"]) == (None, story.paths[501])
    assert (ends[504]["error"], ends[504]["kept"]) == (None, story.paths[504])
    assert (ends[502]["error"], ends[502]["kept"]) == (None, None)
    assert not os.path.exists(story.paths[502])
    m = ramdisk_marker(story.paths[501])
    assert (m["kept"], m["jobid"], m["gen"], m["owner"], m["size"], m["host"]) == (
        True,
        501,
        1,
        story.owner.pw_uid,
        16 * MiB,
        story.host,
    )
    pool.service.close()
    assert pool.instance.stop() == 0, pool.instance.output()


def test_a_tmpfs_made_by_a_job_outlives_the_instance(story):
    for jobid in (501, 504):
        path = story.paths[jobid]
        assert mounts_under(path) == [path]
        assert (
            open(os.path.join(path, "out", f"result-{jobid}")).read()
            == f"output of job {jobid}"
        )


def test_the_restarted_instance_has_its_history_and_the_pool_lists_the_kept_ramdisks(
    story,
):
    first_pool = story.pool.jobid
    pool = story.start()
    env = dict(os.environ, FLUX_URI=pool.instance.uri)
    jobs = subprocess.run(
        [FLUX, "jobs", "-a", "-n", "-o", "{id.dec} {name} {state}"],
        env=env,
        capture_output=True,
        text=True,
    ).stdout
    assert f"{first_pool} rsa-pool INACTIVE" in jobs  # the same instance, restarted
    kept = {k["jobid"]: k for k in pool.service.call("list")["kept"]}
    assert sorted(kept) == [501, 504]
    assert kept[501] == {
        "jobid": 501,
        "gen": 1,
        "host": story.host,
        "path": story.paths[501],
        "bytes": 16 * MiB,
        "owner": story.owner.pw_uid,
        "hosts": [story.host],
        "adopting": None,
    }


def test_adopt_is_refused_for_the_wrong_job_or_a_path_that_is_not_kept(story):
    pool = story.pool
    with pytest.raises(OSError, match=r"was kept for job 501, not job 777"):
        hold(pool, story.owner, 777, 4 * MiB, adopt=story.paths[501])
    with pytest.raises(
        OSError, match=r"is not a kept RAM disk on this pool's nodes \(kept: "
    ):
        hold(pool, story.owner, 501, 4 * MiB, gen=2, adopt=story.paths[502])
    with pytest.raises(OSError, match=r"is a kept RAM disk of job 501 gen 1: adopt it"):
        hold(pool, story.owner, 501, 4 * MiB)  # same name, without adopt


def test_adopt_on_a_drained_node_keeps_the_files_and_the_drain(story):
    pool, host = story.pool, story.host
    other = "rsa1" if host == "rsa0" else "rsa0"
    assert pool.service.call("drain", host=host, reason="maintenance") == {}
    hold(pool, story.owner, 505, 4 * MiB)
    assert pool.service.wait_for("holder-alloc", jobid=505)["nodes"] == [other]

    path = story.paths[501]
    assert hold(pool, story.owner, 501, 20 * MiB, gen=2, adopt=path) == {}
    alloc = pool.service.wait_for("holder-alloc", jobid=501, gen=2)
    assert (alloc["nodes"], alloc["granted"]) == ([host], 20 * MiB)  # grown to the need
    assert pool.service.wait_for("ramdisk-built", jobid=501, gen=2)["path"] == path
    assert open(os.path.join(path, "out", "result-501")).read() == "output of job 501"
    vfs = os.statvfs(path)
    assert vfs.f_blocks * vfs.f_frsize == 20 * MiB
    m = ramdisk_marker(path)
    assert (m["kept"], m["size"]) == (False, 20 * MiB)
    assert [k["jobid"] for k in pool.service.call("list")["kept"]] == [504]
    with pytest.raises(OSError, match=r"is held by holder 501.2 already"):
        hold(pool, story.owner, 501, 4 * MiB, gen=3, adopt=path)

    # the node is still drained: the next holder goes elsewhere
    status = {n["host"]: n for n in pool.service.call("status")["nodes"]}
    assert (status[host]["drained"], status[host]["reason"]) == (True, "maintenance")
    hold(pool, story.owner, 506, 4 * MiB)
    assert pool.service.wait_for("holder-alloc", jobid=506)["nodes"] == [other]
    assert pool.service.call("undrain", host=host) == {}


def test_discard_removes_a_kept_ramdisk(story):
    pool, path = story.pool, story.paths[504]
    assert pool.service.call("discard", path=path) == {}
    end = pool.service.wait_for("discard-end", path=path, timeout=60)
    assert (end["ok"], end["error"]) == (True, None)
    assert mounts_under(path) == [] and not os.path.exists(path)
    assert pool.service.call("list")["kept"] == []


def test_the_adopted_ramdisk_is_destroyed_when_its_holder_is_released(story):
    pool, path = story.pool, story.paths[501]
    for jobid, gen in ((501, 2), (505, 1), (506, 1)):
        pool.service.call("cancel", jobid=jobid, gen=gen)
    for jobid, gen in ((501, 2), (505, 1), (506, 1)):
        end = pool.service.wait_for("holder-end", jobid=jobid, gen=gen)
        assert (end["error"], end["kept"]) == (None, None)
    assert mounts_under(path) == [] and not os.path.exists(path)
    result, rc = pool.shutdown()
    assert (result.returncode, rc) == (0, 0), pool.instance.output()
    assert ramdisks_in(pool.root) == []
