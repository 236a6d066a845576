"""The pool in simulation mode (``simulate_rate`` > 0): holders and stages are
Flux test-execution jobs - Fluxion still allocates the capacity and every
notification still comes, but no process runs, nothing is mounted, nothing
is copied, and a stage lasts size / rate seconds."""

import os
import time

import pytest

from test_pool_helpers import MiB, Pool, mounts_under, requires_flux, requires_root

pytestmark = [requires_flux, requires_root]
RATE = 64 * MiB  # bytes/s


@pytest.fixture(scope="module")
def pool():
    p = Pool(simulate_rate=RATE)
    yield p
    if p.instance.proc.poll() is None:
        p.shutdown()
    p.cleanup()


def stage(pool, jobid, seq, size, nodes):
    t0 = time.monotonic()
    assert pool.service.call("stage", jobid=jobid, seq=seq, direction="in", src="/nowhere",
                             dst="/nowhere/either", method=None, userid=4123457,
                             verify="checksum", nodes=nodes, size=size) == {}
    return t0


def test_ready_says_it_simulates(pool):
    assert pool.info["simulate_rate"] == RATE
    assert pool.service.call("status")["simulate_rate"] == RATE


def test_a_simulated_holder_reports_a_ramdisk_and_makes_nothing(pool):
    # an owner with no passwd entry: a real holder would fail, this one never runs
    assert pool.service.call("hold", jobid=701, gen=1, need=40 * MiB, userid=4123457) == {}
    alloc = pool.service.wait_for("holder-alloc", jobid=701)
    assert alloc["granted"] == 40 * MiB and len(alloc["nodes"]) == 1
    path = pool.service.wait_for("ramdisk-built", jobid=701)["path"]
    assert path == os.path.join(pool.root, "701.1")
    assert [p["kind"] for _, p in pool.service.events if p.get("jobid") == 701] == [
        "holder-alloc", "holder-start", "ramdisk-built"]
    assert not os.path.exists(pool.root) and mounts_under(pool.workdir) == []
    status = {n["host"]: n for n in pool.service.call("status")["nodes"]}
    assert status[alloc["nodes"][0]]["reserved"] == 40 * MiB
    # capacity is real: a second 40 MiB holder goes to the other node, a third waits
    pool.service.call("hold", jobid=702, gen=1, need=40 * MiB, userid=0)
    assert pool.service.wait_for("holder-alloc", jobid=702)["nodes"] != alloc["nodes"]
    pool.service.call("hold", jobid=703, gen=1, need=40 * MiB, userid=0)
    pool.service.pump(1.0)
    assert pool.service.seen("holder-alloc", jobid=703) == []
    pool.nodes = alloc["nodes"]


def test_a_simulated_stage_lasts_size_over_rate_and_ends_ok(pool):
    t0 = stage(pool, 701, 1, 32 * MiB, pool.nodes)  # 0.5 s
    end = pool.service.wait_for("stage-end", jobid=701, seq=1)
    took = pool.service.when("stage-end", jobid=701, seq=1)[0] - t0
    assert (end["ok"], end["error"]) == (True, None)
    assert 0.45 <= took < 5.0, took
    # no size: at once (testexec would run a 0 s job for ever)
    t0 = stage(pool, 701, 2, 0, pool.nodes)
    assert pool.service.wait_for("stage-end", jobid=701, seq=2)["ok"] is True
    assert pool.service.when("stage-end", jobid=701, seq=2)[0] - t0 < 5.0


def test_a_simulated_stage_can_be_stopped(pool):
    stage(pool, 701, 3, 3600 * RATE, pool.nodes)  # an hour
    pool.service.poll(lambda: [s for s in pool.service.call("list")["stages"]
                               if s["seq"] == 3 and s["state"] == "running"])
    pool.service.call("stop", jobid=701, seq=3)
    end = pool.service.wait_for("stage-end", jobid=701, seq=3)
    assert (end["ok"], end["error"]) == (False, "stopped")


def test_simulated_purge_and_measure_end_at_once(pool):
    pool.service.call("purge", jobid=701, path="/nowhere/in", data_in=None, userid=0,
                      nodes=pool.nodes)
    assert pool.service.wait_for("purge-end", jobid=701)["ok"] is True
    pool.service.call("measure", jobid=701, seq=1, path="/nowhere", userid=0)
    end = pool.service.wait_for("measure-end", jobid=701, seq=1)
    assert (end["ok"], end["bytes"], end["files"], end["error"]) == (True, 0, 0, None)


def test_drain_works_in_simulation(pool):
    pool.service.call("drain", host=pool.nodes[0], reason="sim")
    pool.service.call("cancel", jobid=701, gen=1)  # frees room on the drained node only
    assert pool.service.wait_for("holder-end", jobid=701)["error"] is None
    pool.service.pump(1.0)
    assert pool.service.seen("holder-alloc", jobid=703) == []
    pool.service.call("undrain", host=pool.nodes[0])
    assert pool.service.wait_for("holder-alloc", jobid=703)["nodes"] == pool.nodes


def test_shutdown_keep_in_simulation_reports_the_kept_path(pool):
    result, rc = pool.shutdown(keep=[{"jobid": 703, "gen": 1}])
    assert (result.returncode, rc) == (0, 0), pool.instance.output()
    ends = {p["jobid"]: p for p in pool.service.seen("holder-end")}
    assert (ends[703]["error"], ends[703]["kept"]) == (None, os.path.join(pool.root, "703.1"))
    assert (ends[702]["error"], ends[702]["kept"]) == (None, None)
    assert not os.path.exists(pool.root) and mounts_under(pool.workdir) == []
