"""The pool under real Flux: Fluxion accounts RAM-disk capacity as memory.

One test instance (node[0-1] plus RSA nodes rsa[0-1]) and one pool with
64 MiB per RSA node in 4 MiB granules, shared by the tests in file order;
each test releases what it holds.  Holders make real tmpfs RAM disks.
"""

import json
import os
import time

import pytest
from conftest import freed_status, release_holders, stop_pool
from test_pool_helpers import (
    MiB,
    Pool,
    mounts_under,
    owner_account,
    ramdisks_in,
    requires_flux,
    requires_root,
)

pytestmark = [requires_flux, requires_root]
TIMINGS = {}


@pytest.fixture(scope="module")
def pool():
    p = Pool()
    p.owner = owner_account()
    yield p
    stop_pool(p)
    print("\npool timings:", {k: round(v, 3) for k, v in TIMINGS.items()})


def hold(pool, jobid, need, gen=1):
    t0 = time.monotonic()
    assert (
        pool.service.call(
            "hold", jobid=jobid, gen=gen, need=need, userid=pool.owner.pw_uid
        )
        == {}
    )
    return t0


def built(pool, jobid, gen=1):
    return pool.service.wait_for("ramdisk-built", jobid=jobid, gen=gen)["path"]


def test_pool_is_ready_with_memory_in_fluxion(pool):
    TIMINGS["pool start-up (launch to pool-ready)"] = pool.startup
    ready = pool.service.seen("pool-ready")[0]
    assert ready["pool"] == pool.jobid
    assert ready["rank"] == 2  # the parent broker of rsa0, where rsa-pool is served
    assert ready["nodes"] == ["rsa0", "rsa1"]
    assert (ready["node_capacity"], ready["granule"]) == (64 * MiB, 4 * MiB)
    assert pool.info["rank"] == 2 and pool.info["jobid"] == pool.jobid
    from flux_rsa.pool import launch

    assert launch.find(pool.h) == pool.jobid
    out = pool.in_pool("ion-resource", "find", "--format=jgf", "status=up")
    assert out.returncode == 0, out.stderr
    graph = json.loads(out.stdout[out.stdout.index("{") :])["graph"]
    memory = [
        v["metadata"] for v in graph["nodes"] if v["metadata"]["type"] == "memory"
    ]
    assert {r: sum(1 for m in memory if m["rank"] == r) for r in (0, 1)} == {
        0: 16,
        1: 16,
    }
    # the pool runs on the RSA nodes only
    out = pool.in_pool("resource", "list", "-no", "{nodelist}")
    assert out.stdout.split() == ["rsa[0-1]"]


def test_big_holders_spread_and_the_third_waits_for_a_cancel(pool):
    t0 = hold(pool, 101, 40 * MiB)
    hold(pool, 102, 40 * MiB)
    a = pool.service.wait_for("holder-alloc", jobid=101)
    TIMINGS["holder allocation (hold to holder-alloc)"] = (
        pool.service.when("holder-alloc", jobid=101)[0] - t0
    )
    b = pool.service.wait_for("holder-alloc", jobid=102)
    assert (a["granted"], b["granted"]) == (40 * MiB, 40 * MiB)
    assert len(a["nodes"]) == len(b["nodes"]) == 1 and a["nodes"] != b["nodes"]
    built(pool, 101)
    TIMINGS["RAM disk ready (hold to ramdisk-built)"] = (
        pool.service.when("ramdisk-built", jobid=101)[0] - t0
    )
    built(pool, 102)
    # order of one holder's notifications
    kinds = [p["kind"] for _, p in pool.service.events if p.get("jobid") == 101]
    assert kinds == ["holder-alloc", "holder-start", "ramdisk-built"]

    hold(pool, 103, 40 * MiB)
    pool.service.pump(2.0)
    assert pool.service.seen("holder-alloc", jobid=103) == []
    listed = {h["jobid"]: h for h in pool.service.call("list")["holders"]}
    assert listed[103]["state"] == "pending" and listed[103]["nodes"] == []
    assert listed[101]["state"] == "built" and listed[101]["nodes"] == a["nodes"]

    release_holders(pool, 101)
    c = pool.service.wait_for("holder-alloc", jobid=103)
    assert c["nodes"] == a["nodes"]
    built(pool, 103)
    release_holders(pool, 102, 103)


def test_small_holders_share_a_node(pool):
    hold(pool, 111, 24 * MiB)
    hold(pool, 112, 24 * MiB)
    a = pool.service.wait_for("holder-alloc", jobid=111)
    b = pool.service.wait_for("holder-alloc", jobid=112)
    assert a["nodes"] == b["nodes"] and (a["granted"], b["granted"]) == (
        24 * MiB,
        24 * MiB,
    )
    status = {n["host"]: n for n in pool.service.call("status")["nodes"]}
    node = status[a["nodes"][0]]
    assert (node["total"], node["reserved"], node["free"]) == (
        64 * MiB,
        48 * MiB,
        16 * MiB,
    )
    assert sorted(h["jobid"] for h in node["holders"]) == [111, 112]
    other = [n for host, n in status.items() if host != a["nodes"][0]][0]
    assert (other["reserved"], other["holders"]) == (0, [])
    release_holders(pool, 111, 112)
    assert len(freed_status(pool)["nodes"]) == 2


def test_a_tmpfs_holder_bigger_than_a_node_is_refused(pool):
    """A tmpfs lives on one node: a reservation it could not use is never
    made (test_pool_parallel: a glusterfs RAM disk spans nodes)."""
    with pytest.raises(
        OSError,
        match="more than one RSA node holds .* provider tmpfs cannot " "span nodes",
    ):
        hold(pool, 121, 100 * MiB)
    assert not pool.service.seen("holder-alloc", jobid=121)


def test_a_holder_makes_a_tmpfs_of_the_granted_size_for_the_owner(pool):
    hold(pool, 131, 10 * MiB)  # 3 granules
    alloc = pool.service.wait_for("holder-alloc", jobid=131)
    assert alloc["granted"] == 12 * MiB
    path = built(pool, 131)
    assert path == os.path.join(pool.root, "131.1")
    assert mounts_under(path) == [path]
    with open("/proc/mounts") as f:
        (fstype,) = [line.split()[2] for line in f if line.split()[1] == path]
    assert fstype == "tmpfs"
    vfs = os.statvfs(path)
    assert vfs.f_blocks * vfs.f_frsize == 12 * MiB
    for area in ("in", "out"):
        st = os.stat(os.path.join(path, area))
        assert (st.st_uid, st.st_gid) == (pool.owner.pw_uid, pool.owner.pw_gid)
        assert st.st_mode & 0o777 == 0o700
    release_holders(pool, 131)
    assert mounts_under(path) == [] and not os.path.exists(path)


def test_a_holder_canceled_from_outside_ends_with_an_error(pool):
    hold(pool, 141, 8 * MiB)
    path = built(pool, 141)
    subjob = {h["jobid"]: h for h in pool.service.call("list")["holders"]}[141][
        "subjob"
    ]
    out = pool.in_pool("cancel", str(subjob))
    assert out.returncode == 0, out.stderr
    end = pool.service.wait_for("holder-end", jobid=141)
    assert end["error"] and "canceled outside flux-rsa" in end["error"]
    assert mounts_under(path) == []
    assert [h for h in pool.service.call("list")["holders"] if h["jobid"] == 141] == []


def test_a_holder_killed_outright_has_its_ramdisk_swept(pool):
    hold(pool, 143, 8 * MiB)
    path = built(pool, 143)
    subjob = {h["jobid"]: h for h in pool.service.call("list")["holders"]}[143][
        "subjob"
    ]
    out = pool.in_pool("job", "kill", "--signal=SIGKILL", str(subjob))
    assert out.returncode == 0, out.stderr
    end = pool.service.wait_for("holder-end", jobid=143)
    assert "failed (Killed)" in end["error"]
    assert end["error"].endswith("its leftover RAM disk was removed by a sweep")
    assert mounts_under(path) == [] and not os.path.exists(path)


def test_a_ramdisk_that_cannot_be_built_ends_its_holder_with_the_reason(pool):
    pool.service.call("hold", jobid=145, gen=1, need=4 * MiB, userid=4123457)
    end = pool.service.wait_for("holder-end", jobid=145)
    assert (
        "failed: flux-rsa-ramdisk: owner uid 4123457 has no passwd entry"
        in end["error"]
    )
    assert pool.service.seen("ramdisk-built", jobid=145) == []
    freed_status(pool)


def test_cancel_of_an_unknown_holder_still_reports_its_end(pool):
    assert pool.service.call("cancel", jobid=151, gen=4) == {}
    assert pool.service.wait_for("holder-end", jobid=151, gen=4)["error"] is None


def test_repeated_hold_does_the_work_once(pool):
    hold(pool, 161, 4 * MiB)
    hold(pool, 161, 4 * MiB)
    built(pool, 161)
    pool.service.pump(0.5)
    assert len(pool.service.seen("holder-alloc", jobid=161)) == 1
    assert (
        len([h for h in pool.service.call("list")["holders"] if h["jobid"] == 161]) == 1
    )
    release_holders(pool, 161)


def test_bad_requests_are_refused_with_a_message(pool):
    with pytest.raises(OSError, match="rsa-pool.hold: missing field 'need'"):
        pool.service.call("hold", jobid=1, gen=1, userid=0)
    with pytest.raises(OSError, match="is more than one RSA node holds"):
        pool.service.call("hold", jobid=1, gen=1, need=200 * MiB, userid=0)
    with pytest.raises(OSError, match="nodes\\[0\\]='node0' is not a pool node"):
        pool.service.call(
            "purge", jobid=1, path="/x/in", data_in=None, userid=0, nodes=["node0"]
        )
    with pytest.raises(OSError, match="unknown method"):
        pool.service.call("explode")
    assert pool.service.call("list") == {
        "holders": [],
        "stages": [],
        "measures": [],
        "kept": [],
    }


def test_shutdown_releases_everything(pool):
    hold(pool, 171, 8 * MiB)
    path = built(pool, 171)
    result, rc = pool.shutdown()
    assert pool.service.seen("holder-end", jobid=171)[0]["error"] is None
    assert result.returncode == 0
    assert rc == 0, pool.instance.output()
    assert mounts_under(pool.workdir) == [] and not os.path.exists(path)
    assert ramdisks_in(pool.root) == []
