"""A RAM disk over two RSA nodes (one GlusterFS volume) kept across a
restart of the whole instance, then adopted: its bricks' tmpfs outlive
the instance (their servers, which keep no state, stop), the new pool
lists it once with both of its nodes, an adopting holder on those nodes
serves the bricks again and mounts the volume where it was, and the files
the first life wrote are all there; a compute node attaches it.  Tests
run in file order and share the story's state."""

import os
import subprocess

import pytest
from test_pool_helpers import (
    PYPATH,
    Lives,
    MiB,
    mounts_under,
    ramdisks_in,
    requires_flux,
    requires_root,
    store_servers,
)

from flux_rsa.ramdisk import gluster

pytestmark = [
    requires_flux,
    requires_root,
    pytest.mark.skipif(
        not gluster.installed(),
        reason="GlusterFS is not installed (Debian: glusterfs-server "
        "glusterfs-client): no RAM disk over several nodes",
    ),
]


@pytest.fixture(scope="module")
def story():
    s = Lives(provider="glusterfs")
    s.path = None  # the RAM disk over both nodes
    yield s
    s.close()


def files(path):
    return {
        name: open(os.path.join(path, name), "rb").read()
        for name in sorted(os.listdir(path))
    }


def test_a_ram_disk_over_both_nodes_is_kept_at_shutdown(story):
    pool = story.start()
    pool.service.call(
        "hold", jobid=601, gen=1, need=96 * MiB, userid=story.owner.pw_uid
    )
    built = pool.service.wait_for("ramdisk-built", jobid=601)
    story.path = built["path"]
    out = os.path.join(story.path, "out")
    story.files = {f"part{i}": os.urandom(6 * MiB) for i in range(8)}
    for name, data in story.files.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)
    result = pool.stop_pool(keep=[{"jobid": 601, "gen": 1}])
    assert result.returncode == 0
    end = pool.service.seen("holder-end", jobid=601)[0]
    assert (end["error"], end["kept"]) == (None, story.path)
    pool.service.close()
    assert pool.instance.stop() == 0, pool.instance.output()
    # the bricks' tmpfs outlive the instance; nothing serves or mounts them
    root = os.path.dirname(story.path)
    assert sorted(os.path.basename(m) for m in mounts_under(root)) == [
        "601.1.b0",
        "601.1.b1",
    ]
    # (but the stores' servers, the pool's own)
    stores = [r for r in gluster.processes_in(root) if r in store_servers(root)]
    assert [r for r in gluster.processes_in(story.workdir) if r not in stores] == []


def test_the_next_instance_lists_it_once_with_both_nodes(story):
    pool = story.start()
    (kept,) = pool.service.call("list")["kept"]
    assert (kept["jobid"], kept["path"], kept["hosts"], kept["bytes"]) == (
        601,
        story.path,
        ["rsa0", "rsa1"],
        96 * MiB,
    )


def test_adopted_on_its_nodes_its_files_are_all_there(story):
    pool = story.pool
    pool.service.call(
        "hold",
        jobid=601,
        gen=1,
        need=96 * MiB,
        userid=story.owner.pw_uid,
        adopt=story.path,
    )
    alloc = pool.service.wait_for("holder-alloc", jobid=601)
    assert alloc["nodes"] == ["rsa0", "rsa1"]
    built = pool.service.wait_for("ramdisk-built", jobid=601)
    assert built["path"] == story.path
    assert gluster.mounted(story.path)
    assert files(os.path.join(story.path, "out")) == story.files
    st = os.statvfs(story.path)
    assert st.f_blocks * st.f_frsize == 96 * MiB
    story.volume = built["volume"]
    assert pool.service.call("list")["kept"] == []


def test_a_compute_node_attaches_the_adopted_volume(story):
    from flux_rsa.privileged.caller import subjob_environment
    from flux_rsa.privileged.variables import environment

    mount_root = os.path.join(story.workdir, "compute")
    env = environment(
        "attach",
        root=mount_root,
        name="601.1",
        rank=0,
        provider="glusterfs",
        owner=story.owner.pw_uid,
        user=story.volume["user"],
        servers=",".join(story.volume["servers"]),
        secret=story.volume["secret"],
    )
    done = subprocess.run(
        ["/usr/bin/python3", "-m", "flux_rsa.privileged"],
        env={**subjob_environment(os.environ), **env, "PYTHONPATH": PYPATH},
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr
    assert files(os.path.join(mount_root, "601.1", "out")) == story.files
    env = environment("detach", root=mount_root, name="601.1", rank=0)
    done = subprocess.run(
        ["/usr/bin/python3", "-m", "flux_rsa.privileged"],
        env={**subjob_environment(os.environ), **env, "PYTHONPATH": PYPATH},
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stderr


def test_released_nothing_is_left(story):
    pool = story.pool
    pool.service.call("cancel", jobid=601, gen=1)
    end = pool.service.wait_for("holder-end", jobid=601)
    assert end["error"] is None, end
    root = os.path.dirname(story.path)
    assert mounts_under(root) == [] and ramdisks_in(root) == []
    # (but the stores' servers, the pool's own)
    stores = [r for r in gluster.processes_in(root) if r in store_servers(root)]
    assert [r for r in gluster.processes_in(story.workdir) if r not in stores] == []
