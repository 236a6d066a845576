"""Losing an RSA node while the pool runs.

The parent instance's broker for rsa1 (and every process below it - the
pool's broker there, the holder on it: a node crash) is killed.  Flux
keeps the pool job alive (a nested instance marks only its rank 0 as
critical, so the parent raises a non-fatal node-failure exception), the
holder on rsa1 ends with an error naming the node, the holder on rsa0 and
the agent carry on, and the pool reports rsa1 down.

flux start runs with --test-exit-mode=leader so that one dead broker does
not make it kill the others.
"""

import os
import signal
import subprocess

import pytest
from conftest import wait_until
from test_pool_helpers import (
    FLUX,
    PYPATH,
    MiB,
    Pool,
    mounts_under,
    owner_account,
    requires_flux,
    requires_root,
)

pytestmark = [requires_flux, requires_root]


@pytest.fixture(scope="module")
def pool():
    p = Pool(options=["--test-exit-mode=leader"])
    p.owner = owner_account()
    yield p
    if p.instance.proc.poll() is None:
        p.shutdown()
    # the lost node's RAM disk is still mounted on this one machine: sweep it
    subprocess.run(
        ["/usr/bin/python3", "-m", "flux_rsa.ramdisk", "sweep", p.root],
        env=dict(os.environ, PYTHONPATH=PYPATH),
        capture_output=True,
    )
    p.cleanup()


def descendants(pid):
    out = subprocess.run(
        ["ps", "-e", "-o", "pid=,ppid="], capture_output=True, text=True
    ).stdout
    children = {}
    for line in out.splitlines():
        child, parent = map(int, line.split())
        children.setdefault(parent, []).append(child)
    found, todo = [], [pid]
    while todo:
        p = todo.pop()
        found.append(p)
        todo += children.get(p, [])
    return found


def crash_node(pool, rank):
    """SIGKILL the parent broker of ``rank`` and everything it started."""
    env = dict(os.environ, FLUX_URI=pool.instance.uri)
    pid = int(
        subprocess.run(
            [FLUX, "exec", "-r", str(rank), FLUX, "getattr", "broker.pid"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout
    )
    for p in descendants(pid):
        try:
            os.kill(p, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_holders_on_a_lost_node_end_with_its_name_and_the_rest_carries_on(pool):
    service = pool.service
    for jobid in (801, 802):
        service.call(
            "hold", jobid=jobid, gen=1, need=40 * MiB, userid=pool.owner.pw_uid
        )
    nodes = {
        jobid: service.wait_for("holder-alloc", jobid=jobid)["nodes"]
        for jobid in (801, 802)
    }
    paths = {
        jobid: service.wait_for("ramdisk-built", jobid=jobid)["path"]
        for jobid in (801, 802)
    }
    lost = 801 if nodes[801] == ["rsa1"] else 802
    kept = 802 if lost == 801 else 801
    assert nodes[kept] == ["rsa0"]

    crash_node(pool, 3)  # parent rank 3 is rsa1

    end = service.wait_for("holder-end", jobid=lost, timeout=60)
    assert end["error"].startswith("holder job ")
    assert "lost RSA node rsa1" in end["error"] and "node failure" in end["error"]
    assert end["error"].endswith(
        "the RAM disk and its data there are lost to this reservation; its node rsa1 is down, "
        "so nothing could remove what is left there (a later pool's start-up sweep does)"
    )
    state = service.wait_for("node-state", host="rsa1", timeout=60)
    assert (state["rank"], state["state"]) == (1, "down")

    status = {n["host"]: n for n in service.call("status")["nodes"]}
    assert (status["rsa1"]["state"], status["rsa0"]["state"]) == ("down", "up")
    assert status["rsa1"]["holders"] == []
    listed = {h["jobid"]: h for h in service.call("list")["holders"]}
    assert list(listed) == [kept] and listed[kept]["state"] == "built"
    assert mounts_under(paths[kept]) == [paths[kept]]

    # the agent carries on: a stage into the surviving RAM disk, a new holder
    src = os.path.join(pool.workdir, "lose-in")
    os.makedirs(src)
    with open(os.path.join(src, "f"), "w") as f:
        f.write("after the loss")
    os.chmod(src, 0o755)
    service.call(
        "stage",
        jobid=kept,
        seq=1,
        direction="in",
        src=src,
        dst=os.path.join(paths[kept], "in"),
        method=None,
        userid=pool.owner.pw_uid,
        verify="size",
        nodes=["rsa0"],
    )
    assert service.wait_for("stage-end", jobid=kept, seq=1, timeout=60)["ok"] is True
    service.call("hold", jobid=803, gen=1, need=8 * MiB, userid=pool.owner.pw_uid)
    assert service.wait_for("holder-alloc", jobid=803)["nodes"] == ["rsa0"]

    # the pool job is still running in the parent, with a non-fatal exception
    # (the parent may notice the lost broker later than the pool did)
    env = dict(os.environ, FLUX_URI=pool.instance.uri)
    out = subprocess.run(
        [FLUX, "job", "wait-event", "-t", "60", "-v", str(pool.jobid), "exception"],
        env=env,
        capture_output=True,
        text=True,
    )
    assert 'type="node-failure" severity=2' in out.stdout and "rsa1" in out.stdout, out
    log = subprocess.run(
        [FLUX, "job", "eventlog", str(pool.jobid)],
        env=env,
        capture_output=True,
        text=True,
    ).stdout
    assert "finish" not in log


def test_a_new_pool_can_be_asked_for_on_the_nodes_that_are_up(pool):
    from flux_rsa.pool import launch

    assert str(launch.rsa_nodes(pool.h, pool.policy).nodelist) == "rsa[0-1]"
    wait_until(
        lambda: str(launch.rsa_nodes(pool.h, pool.policy, include_down=False).nodelist)
        == "rsa0",
        60,
        "the parent seeing rsa1 go down",
        every=0.2,
    )
    up = launch.rsa_nodes(pool.h, pool.policy, include_down=False)
    js = launch.jobspec(
        pool.policy,
        up.nnodes,
        hosts=up.nodelist,
        env=dict(os.environ, PATH=f"{os.environ['PATH']}:{os.path.dirname(FLUX)}"),
    )
    assert js.jobspec["attributes"]["system"]["constraints"] == {
        "and": [{"properties": ["rsa"]}, {"hostlist": ["rsa0"]}]
    }


def test_the_pool_still_shuts_down_in_order(pool):
    for jobid in (801, 802, 803):
        pool.service.call("cancel", jobid=jobid, gen=1)
    result, rc = pool.shutdown()
    assert result.returncode == 0, pool.instance.output()
    ends = [p for p in pool.service.seen("holder-end") if p["jobid"] in (801, 802, 803)]
    assert len({p["jobid"] for p in ends}) == 3
