"""The pool's life: launch errors, the start-up sweep, readiness, and
notifications that wait for the service and arrive in order."""

import json
import os
import signal
import subprocess

import pytest
from conftest import stop_pool, wait_until
from test_pool_helpers import (
    FLUX,
    PYPATH,
    Pool,
    mounts_under,
    ramdisks_in,
    requires_flux,
    requires_root,
)

flux = pytest.importorskip(
    "flux",
    reason="no Flux (flux-core and flux-sched not installed): the pool tests need a real instance",
)

from flux_rsa.pool import launch  # noqa: E402
from flux_rsa.pool.notifier import Notifier  # noqa: E402


class LeftoverPool(Pool):
    """A pool whose RSA nodes still carry a RAM disk from a crashed pool."""

    def before_launch(self):
        env = dict(os.environ, PYTHONPATH=PYPATH)
        proc = subprocess.Popen(
            [
                "/usr/bin/python3",
                "-m",
                "flux_rsa.ramdisk",
                "hold",
                "--provider",
                "tmpfs",
                "--root",
                self.root,
                "--name",
                "999.3",
                "--size",
                "4M",
                "--owner",
                "0",
            ],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.leftover = json.loads(proc.stdout.readline())["path"]
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        assert mounts_under(self.leftover) == [self.leftover]


@pytest.fixture(scope="module")
def pool():
    p = LeftoverPool()
    yield p
    stop_pool(p)


@requires_flux
@requires_root
def test_start_up_sweeps_leftover_ramdisks(pool):
    assert mounts_under(pool.leftover) == [] and not os.path.exists(pool.leftover)


@requires_flux
@requires_root
def test_ready_record_and_find(pool):
    assert launch.find(pool.h) == pool.jobid
    info = launch.wait_ready(pool.h, pool.jobid, timeout=5)
    assert info == pool.info
    assert (info["service"], info["notify"], info["nodes"]) == (
        "rsa-pool",
        "rsa.pool-event",
        ["rsa0", "rsa1"],
    )


@requires_flux
@requires_root
def test_launch_without_rsa_nodes_says_what_to_configure(pool):
    from flux_rsa.core.config import Policy

    with pytest.raises(launch.PoolError, match="no nodes with property 'bigmem'"):
        launch.launch(pool.h, Policy(node_property="bigmem"))


@requires_flux
@requires_root
def test_a_second_pool_while_the_rsa_nodes_are_busy_is_refused_clearly(pool):
    env = dict(os.environ, PATH=f"{os.environ.get('PATH', '')}:{os.path.dirname(FLUX)}")
    second = launch.launch(pool.h, pool.policy, env=env)
    with pytest.raises(
        launch.PoolError, match="launch the pool again once the RSA nodes are free"
    ):
        launch.wait_ready(pool.h, second, timeout=30)
    assert launch.find(pool.h) == pool.jobid


@requires_flux
@requires_root
def test_notifications_wait_for_the_service_and_keep_their_order(pool):
    service = pool.service
    service.close()  # the rsa module is being reloaded
    for gen in (1, 2, 3):
        assert service.call("cancel", jobid=301, gen=gen) == {}
    # the agent has tried and keeps them until the service is back
    wait_until(
        lambda: pool.h.rpc("rsa-pool.status", {}, nodeid=service.rank).get()[
            "notifications_pending"
        ]
        == 3,
        10,
        "three notifications pending",
    )
    pool.h.service_register("rsa").get()
    service.watcher.start()
    service.wait(lambda: len(service.seen("holder-end", jobid=301)) == 3, timeout=10)
    assert [p["gen"] for p in service.seen("holder-end", jobid=301)] == [1, 2, 3]


@requires_flux
@requires_root
def test_shutdown_is_clean(pool):
    result, rc = pool.shutdown()
    assert (result.returncode, rc) == (0, 0), pool.instance.output()
    assert ramdisks_in(pool.root) == []


# --- the notifier's queue, without Flux ------------------------------------------


class FakeParent:
    """Takes RPCs and never answers (the service hangs)."""

    def __init__(self):
        self.sent = []

    def rpc(self, topic, payload, nodeid):
        self.sent.append(payload)
        return self

    def then(self, *args, **kwargs):
        return self

    def timer_watcher_create(self, *args, **kwargs):
        return self


def test_a_full_queue_drops_progress_first_then_the_oldest():
    logged = []
    n = Notifier(FakeParent(), "rsa.pool-event", 7, logged.append, maxlen=3)
    n.send("holder-start", jobid=1, gen=1)  # in flight, never dropped
    n.send("stage-progress", jobid=1, seq=1, progress={})
    n.send("stage-end", jobid=1, seq=1, ok=True, error=None, reused=None)
    n.send("holder-end", jobid=1, gen=1, error=None, kept=None)  # progress goes
    assert [p["kind"] for p in n.queue] == ["holder-start", "stage-end", "holder-end"]
    n.send("purge-end", jobid=1, ok=True, error=None)  # the oldest waiting goes
    assert [p["kind"] for p in n.queue] == ["holder-start", "holder-end", "purge-end"]
    assert n.dropped == 1 and "dropped" in logged[0]
    assert n.parent.sent == [n.queue[0]]  # one in flight at a time
