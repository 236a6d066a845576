"""The pool in simulation mode (``simulate_rate`` > 0): holders are Flux
test-execution jobs and stages are the agent's timers - Fluxion still
allocates the capacity and every notification still comes, but no process
runs, nothing is mounted, nothing is copied, and a stage lasts size / rate
seconds.  Each test makes and releases its own holders (any one runs alone
with -k)."""

import os
import time

import pytest
from conftest import stop_pool
from test_pool_helpers import MiB, Pool, mounts_under, requires_flux, requires_root

pytestmark = [requires_flux, requires_root]
RATE = 64 * MiB  # bytes/s


@pytest.fixture(scope="module")
def pool():
    p = Pool(simulate_rate=RATE)
    yield p
    stop_pool(p)


def hold(pool, jobid, need=40 * MiB):
    """A simulated holder of NEED bytes; its holder-alloc."""
    # an owner with no passwd entry: a real holder would fail, this one never runs
    assert (
        pool.service.call("hold", jobid=jobid, gen=1, need=need, userid=4123457) == {}
    )
    return pool.service.wait_for("holder-alloc", jobid=jobid)


def release(pool, *jobids):
    for jobid in jobids:
        pool.service.call("cancel", jobid=jobid, gen=1)
        assert pool.service.wait_for("holder-end", jobid=jobid)["error"] is None


def a_node(pool):
    return sorted(n["host"] for n in pool.service.call("status")["nodes"])[0]


def stage(pool, jobid, seq, size, nodes):
    t0 = time.monotonic()
    assert (
        pool.service.call(
            "stage",
            jobid=jobid,
            seq=seq,
            direction="in",
            src="/nowhere",
            dst="/nowhere/either",
            method=None,
            userid=4123457,
            verify="checksum",
            nodes=nodes,
            size=size,
        )
        == {}
    )
    return t0


def test_ready_says_it_simulates(pool):
    assert pool.info["simulate_rate"] == RATE
    assert pool.service.call("status")["simulate_rate"] == RATE


def test_a_simulated_holder_reports_a_ramdisk_and_makes_nothing(pool):
    alloc = hold(pool, 701)
    assert alloc["granted"] == 40 * MiB and len(alloc["nodes"]) == 1
    path = pool.service.wait_for("ramdisk-built", jobid=701)["path"]
    assert path == os.path.join(pool.root, "701.1")
    assert [p["kind"] for _, p in pool.service.events if p.get("jobid") == 701] == [
        "holder-alloc",
        "holder-start",
        "ramdisk-built",
    ]
    assert not os.path.exists(pool.root) and mounts_under(pool.workdir) == []
    status = {n["host"]: n for n in pool.service.call("status")["nodes"]}
    assert status[alloc["nodes"][0]]["reserved"] == 40 * MiB
    # capacity is real: a second 40 MiB holder goes to the other node, a third waits
    assert hold(pool, 702)["nodes"] != alloc["nodes"]
    pool.service.call("hold", jobid=703, gen=1, need=40 * MiB, userid=0)
    pool.service.pump(1.0)
    assert pool.service.seen("holder-alloc", jobid=703) == []
    release(pool, 701)  # the third takes its place
    assert pool.service.wait_for("holder-alloc", jobid=703)["nodes"] == alloc["nodes"]
    release(pool, 702, 703)


def test_a_simulated_stage_lasts_size_over_rate_and_ends_ok(pool):
    nodes = [a_node(pool)]
    t0 = stage(pool, 711, 1, 32 * MiB, nodes)  # 0.5 s
    end = pool.service.wait_for("stage-end", jobid=711, seq=1)
    took = pool.service.when("stage-end", jobid=711, seq=1)[0] - t0
    assert (end["ok"], end["error"]) == (True, None)
    assert 0.45 <= took < 5.0, took
    # no size: at once (testexec would run a 0 s job for ever)
    t0 = stage(pool, 711, 2, 0, nodes)
    assert pool.service.wait_for("stage-end", jobid=711, seq=2)["ok"] is True
    assert pool.service.when("stage-end", jobid=711, seq=2)[0] - t0 < 5.0


def test_a_simulated_stage_can_be_stopped(pool):
    stage(pool, 721, 1, 3600 * RATE, [a_node(pool)])  # an hour
    pool.service.poll(
        lambda: [
            s
            for s in pool.service.call("list")["stages"]
            if (s["jobid"], s["seq"]) == (721, 1) and s["state"] == "running"
        ]
    )
    pool.service.call("stop", jobid=721, seq=1)
    end = pool.service.wait_for("stage-end", jobid=721, seq=1)
    assert (end["ok"], end["error"]) == (False, "stopped")


def test_simulated_purge_and_measure_end_at_once(pool):
    pool.service.call(
        "purge",
        jobid=731,
        path="/nowhere/in",
        data_in=None,
        userid=0,
        nodes=[a_node(pool)],
    )
    assert pool.service.wait_for("purge-end", jobid=731)["ok"] is True
    pool.service.call("measure", jobid=731, seq=1, path="/nowhere", userid=0)
    end = pool.service.wait_for("measure-end", jobid=731, seq=1)
    assert (end["ok"], end["bytes"], end["files"], end["error"]) == (True, 0, 0, None)


def test_drain_works_in_simulation(pool):
    first = hold(pool, 741)["nodes"]
    hold(pool, 742)  # the other node
    pool.service.call("drain", host=first[0], reason="sim")
    release(pool, 741)  # frees room on the drained node only
    pool.service.call("hold", jobid=743, gen=1, need=40 * MiB, userid=0)
    pool.service.pump(1.0)
    assert pool.service.seen("holder-alloc", jobid=743) == []
    pool.service.call("undrain", host=first[0])
    assert pool.service.wait_for("holder-alloc", jobid=743)["nodes"] == first
    release(pool, 742, 743)


def test_shutdown_keep_in_simulation_reports_the_kept_path():
    pool = Pool(simulate_rate=RATE)  # its own: shutting down ends it
    try:
        hold(pool, 751)
        hold(pool, 752)
        result, rc = pool.shutdown(keep=[{"jobid": 751, "gen": 1}])
        assert (result.returncode, rc) == (0, 0), pool.instance.output()
        ends = {p["jobid"]: p for p in pool.service.seen("holder-end")}
        assert (ends[751]["error"], ends[751]["kept"]) == (
            None,
            os.path.join(pool.root, "751.1"),
        )
        assert (ends[752]["error"], ends[752]["kept"]) == (None, None)
        assert not os.path.exists(pool.root) and mounts_under(pool.workdir) == []
    finally:
        if pool.instance.proc.poll() is None:
            pool.shutdown()
        pool.cleanup()


def test_shutdown_while_a_simulated_stage_runs_winds_the_pool_down():
    pool = Pool(simulate_rate=RATE)  # its own: shutting down ends it
    try:
        node = hold(pool, 761)["nodes"]
        pool.service.wait_for("ramdisk-built", jobid=761)
        stage(pool, 761, 1, 64 * RATE, node)  # a minute of simulated stage-in
        result, rc = pool.shutdown()
        assert (result.returncode, rc) == (0, 0), pool.instance.output()
        assert pool.service.seen("holder-end", jobid=761)
    finally:
        if pool.instance.proc.poll() is None:
            pool.shutdown()
        pool.cleanup()
