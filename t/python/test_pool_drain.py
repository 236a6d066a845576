"""Drain and undrain an RSA node in the pool, and measure a tree as its owner.

One instance and pool (rsa0, rsa1: 64 MiB each in 4 MiB granules).  A
drained node takes no new holder while the holder already there keeps its
RAM disk and can still be staged into; undrain makes it usable again.
"""

import os

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


@pytest.fixture(scope="module")
def pool():
    p = Pool()
    p.owner = owner_account()
    yield p
    stop_pool(p)


def hold(pool, jobid, need):
    assert (
        pool.service.call(
            "hold", jobid=jobid, gen=1, need=need, userid=pool.owner.pw_uid
        )
        == {}
    )


def node_status(pool):
    return {n["host"]: n for n in pool.service.call("status")["nodes"]}


def test_drain_of_an_unknown_host_names_the_pool_nodes(pool):
    with pytest.raises(
        OSError, match=r"host='node0' is not a pool node " r"\(pool nodes: rsa0, rsa1\)"
    ):
        pool.service.call("drain", host="node0", reason="x")
    with pytest.raises(
        OSError, match=r"host='rsa9' is not a pool node \(pool nodes: rsa0, rsa1\)"
    ):
        pool.service.call("undrain", host="rsa9")


def test_a_drained_node_takes_no_new_holder_and_keeps_its_own(pool):
    status = node_status(pool)
    assert {h: (n["state"], n["drained"], n["reason"]) for h, n in status.items()} == {
        "rsa0": ("up", False, None),
        "rsa1": ("up", False, None),
    }
    hold(pool, 301, 40 * MiB)
    drained = pool.service.wait_for("holder-alloc", jobid=301)["nodes"][0]
    other = "rsa1" if drained == "rsa0" else "rsa0"
    path = pool.service.wait_for("ramdisk-built", jobid=301)["path"]
    assert pool.service.call("drain", host=drained, reason="memory test") == {}
    assert (
        pool.service.call("drain", host=drained, reason="DIMM swap") == {}
    )  # idempotent
    status = node_status(pool)
    assert (status[drained]["drained"], status[drained]["reason"]) == (
        True,
        "DIMM swap",
    )
    assert [h["jobid"] for h in status[drained]["holders"]] == [301]
    assert status[other]["drained"] is False

    # new holders go to the other node until it is full, then wait
    hold(pool, 302, 8 * MiB)
    assert pool.service.wait_for("holder-alloc", jobid=302)["nodes"] == [other]
    hold(pool, 303, 56 * MiB)
    assert pool.service.wait_for("holder-alloc", jobid=303)["nodes"] == [other]
    hold(pool, 304, 4 * MiB)  # fits on the drained node, not on the other
    pool.service.pump(1.5)
    assert pool.service.seen("holder-alloc", jobid=304) == []
    listed = {h["jobid"]: h for h in pool.service.call("list")["holders"]}
    assert listed[304]["state"] == "pending"

    # the holder on the drained node keeps its RAM disk and can be staged into
    assert listed[301]["state"] == "built" and mounts_under(path) == [path]
    src = os.path.join(pool.workdir, "drain-in")
    os.makedirs(src)
    with open(os.path.join(src, "f"), "w") as f:
        f.write("staged while drained")
    os.chmod(src, 0o755)
    assert (
        pool.service.call(
            "stage",
            jobid=301,
            seq=1,
            direction="in",
            src=src,
            dst=os.path.join(path, "in"),
            method=None,
            userid=pool.owner.pw_uid,
            verify="size",
            nodes=[drained],
        )
        == {}
    )
    end = pool.service.wait_for("stage-end", jobid=301, seq=1, timeout=60)
    assert (end["ok"], end["error"]) == (True, None)
    assert open(os.path.join(path, "in", "f")).read() == "staged while drained"

    # undrain: the waiting holder lands there at once
    assert pool.service.call("undrain", host=drained) == {}
    assert pool.service.wait_for("holder-alloc", jobid=304)["nodes"] == [drained]
    assert pool.service.call("undrain", host=drained) == {}  # idempotent
    assert node_status(pool)[drained]["drained"] is False
    release_holders(pool, 301, 302, 303, 304)
    assert mounts_under(path) == []


def test_a_holder_released_while_its_node_is_drained_ends_cleanly(pool):
    hold(pool, 311, 8 * MiB)
    node = pool.service.wait_for("holder-alloc", jobid=311)["nodes"][0]
    path = pool.service.wait_for("ramdisk-built", jobid=311)["path"]
    pool.service.call("drain", host=node, reason="x")
    release_holders(pool, 311)
    assert not os.path.exists(path)
    status = {n["host"]: n for n in freed_status(pool)["nodes"]}[node]
    assert (status["reserved"], status["drained"]) == (0, True)
    pool.service.call("undrain", host=node)
    # the freed granules are usable again
    hold(pool, 312, 64 * MiB)
    assert pool.service.wait_for("holder-alloc", jobid=312)["granted"] == 64 * MiB
    release_holders(pool, 312)


def make_tree(pool, name):
    top = os.path.join(pool.workdir, name)
    os.makedirs(os.path.join(top, "sub"))
    for rel, size in (("a", 1000), ("sub/b", 24)):
        with open(os.path.join(top, rel), "wb") as f:
            f.write(b"x" * size)
    for d in (top, os.path.join(top, "sub")):
        os.chmod(d, 0o755)
    return top


def test_measure_sums_a_tree_as_its_owner(pool):
    top = make_tree(pool, "measure-in")
    assert (
        pool.service.call(
            "measure", jobid=321, seq=1, path=top, userid=pool.owner.pw_uid
        )
        == {}
    )
    end = pool.service.wait_for("measure-end", jobid=321, seq=1, timeout=60)
    assert (end["ok"], end["bytes"], end["files"], end["error"]) == (
        True,
        1024,
        2,
        None,
    )
    # idempotent: the same answer again, no second subjob
    assert (
        pool.service.call(
            "measure", jobid=321, seq=1, path=top, userid=pool.owner.pw_uid
        )
        == {}
    )
    pool.service.wait(
        lambda: len(pool.service.seen("measure-end", jobid=321, seq=1)) == 2
    )
    again = pool.service.seen("measure-end", jobid=321, seq=1)[1]
    assert again == end
    out = pool.in_pool("jobs", "-a", "-n", "-o", "{name}")
    assert out.stdout.split().count("rsa-measure-321-1") == 1


def test_measure_says_what_the_owner_cannot_read(pool):
    top = make_tree(pool, "measure-secret")
    os.chmod(os.path.join(top, "sub"), 0o700)
    pool.service.call("measure", jobid=322, seq=1, path=top, userid=pool.owner.pw_uid)
    end = pool.service.wait_for("measure-end", jobid=322, seq=1, timeout=60)
    assert (end["ok"], end["bytes"], end["files"]) == (False, 0, 0)
    assert end["error"] == (
        f"flux-rsa-measure: {top}/sub: Permission denied "
        f"(as uid {pool.owner.pw_uid})"
    )


def test_discard_of_a_path_that_is_not_kept(pool):
    missing = os.path.join(pool.root, "999.1")
    assert pool.service.call("discard", path=missing) == {}
    end = pool.service.wait_for("discard-end", path=missing)
    assert (end["ok"], end["error"]) == (True, None)
    with pytest.raises(OSError, match="is not a RAM disk under"):
        pool.service.call("discard", path="/etc")


def test_shutdown_leaves_nothing(pool):
    result, rc = pool.shutdown()
    assert (result.returncode, rc) == (0, 0), pool.instance.output()
    assert mounts_under(pool.workdir) == [] and ramdisks_in(pool.root) == []
    ends = [p for _, p in pool.service.events if p.get("kind") == "holder-end"]
    assert ends and all(p["kept"] is None for p in ends)
