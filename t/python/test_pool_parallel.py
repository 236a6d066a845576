"""A RAM disk over two RSA nodes (provider glusterfs) under a real pool:
one brick server and tmpfs per node, one volume the stager sees, data
spread over both nodes, compute-node attach and detach, nothing left."""

import json
import os
import subprocess

import pytest
from conftest import freed_status, stop_pool, wait_until
from test_pool_helpers import (
    FLUX,
    MiB,
    Pool,
    mounts_under,
    owner_account,
    ramdisks_in,
    requires_flux,
    requires_root,
)

from flux_rsa.ramdisk import gluster as glusterfs  # noqa: E402

pytestmark = [
    requires_flux,
    requires_root,
    pytest.mark.skipif(
        not glusterfs.installed(),
        reason="GlusterFS is not installed (Debian: glusterfs-server "
        "glusterfs-client): no parallel RAM disk tests",
    ),
]


@pytest.fixture(scope="module")
def pool():
    p = Pool(provider="glusterfs", fs_host="127.0.0.1", fs_ports="24400-24499")
    p.owner = owner_account()
    yield p
    stop_pool(p)


def gluster_processes(pool):
    """Brick servers and clients of this pool (other test instances may run)."""
    found = subprocess.run(
        ["pgrep", "-a", "-f", "rsa-brick|rsa-client"], capture_output=True, text=True
    ).stdout
    return [
        line
        for line in found.splitlines()
        if pool.workdir in line and "/.store-" not in line  # (the pool's own)
    ]


def used_mib(path):
    st = os.statvfs(path)
    return (st.f_blocks - st.f_bfree) * st.f_frsize / MiB


def as_owner(pool, *argv):
    return subprocess.run(
        ["runuser", "-u", pool.owner.pw_name, "--", *argv],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_reservation_over_two_nodes_is_one_volume_of_both_shares(pool):
    assert (
        pool.service.call(
            "hold", jobid=11, gen=1, need=128 * MiB, userid=pool.owner.pw_uid
        )
        == {}
    )
    alloc = pool.service.wait_for("holder-alloc", jobid=11)
    assert alloc["nodes"] == ["rsa0", "rsa1"] and alloc["granted"] == 128 * MiB
    built = pool.service.wait_for("ramdisk-built", jobid=11)
    path = built["path"]
    assert path == os.path.join(pool.root, "11.1")
    volume = built["volume"]
    # (the first ports are the RSA nodes' image stores')
    assert volume["servers"] == ["127.0.0.1:24402", "127.0.0.1:24403"]
    assert volume["user"] == "rsa-11-1" and len(volume["secret"]) >= 16
    # one namespace of both shares, the owner's areas in it
    assert glusterfs.mounted(path)
    st = os.statvfs(path)
    assert st.f_blocks * st.f_frsize == 128 * MiB
    for area in ("in", "out"):
        s = os.stat(os.path.join(path, area))
        assert (s.st_uid, s.st_mode & 0o777) == (pool.owner.pw_uid, 0o700)
    # a brick per node: root-only tmpfs of the node's share
    for i in (0, 1):
        brick = os.path.join(pool.root, f"11.1.b{i}")
        assert brick in mounts_under(pool.root)
        assert os.stat(brick).st_mode & 0o777 == 0o700
        st = os.statvfs(brick)
        assert st.f_blocks * st.f_frsize == 64 * MiB
    pool.path, pool.volume = path, volume


def test_one_and_a_half_nodes_of_data_land_on_both_nodes(pool):
    out = os.path.join(pool.path, "out")
    write = as_owner(
        pool,
        "sh",
        "-c",
        f"for i in $(seq 1 24); do "
        f'head -c 4194304 /dev/urandom >"{out}/part$i" || exit 1; done',
    )
    assert write.returncode == 0, write.stderr
    shares = [used_mib(os.path.join(pool.root, f"11.1.b{i}")) for i in (0, 1)]
    assert sum(shares) >= 96, shares
    assert min(shares) >= 24, shares  # spread: neither node holds it all
    assert (
        sum(os.path.getsize(os.path.join(out, f"part{i}")) for i in range(1, 25))
        == 96 * MiB
    )


def test_a_client_without_the_secret_is_refused(pool):
    from flux_rsa.ramdisk import volfiles

    wrong = volfiles.Volume(
        "11.1",
        tuple(pool.volume["servers"]),
        pool.volume["user"],
        "not-the-secret-at-all",
    )
    where = os.path.join(pool.workdir, "intruder")
    os.makedirs(where)
    with pytest.raises(glusterfs.GlusterError, match="Authentication failed"):
        glusterfs.mount(wrong, where, pool.workdir)
    assert not glusterfs.mounted(where)


def attach(pool, op, rank, mount_root):
    from flux_rsa.privileged.variables import environment

    if op == "attach":
        env = environment(
            "attach",
            root=mount_root,
            name="11.1",
            user=pool.volume["user"],
            servers=",".join(pool.volume["servers"]),
            secret=pool.volume["secret"],
            rank=rank,
            provider="glusterfs",
            owner=pool.owner.pw_uid,
        )
    else:
        env = environment("detach", root=mount_root, name="11.1", rank=rank)
    from flux_rsa.privileged.caller import subjob_environment

    return subprocess.run(
        [os.sys.executable, "-m", "flux_rsa.privileged"],
        env={**subjob_environment(os.environ), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_compute_nodes_attach_the_volume_and_detach_it(pool):
    mount_root = os.path.join(pool.workdir, "compute")
    where = os.path.join(mount_root, "11.1")
    for rank in (0, 1):  # two ranks of the job on this one machine share the mount
        done = attach(pool, "attach", rank, mount_root)
        assert done.returncode == 0, done.stderr
    assert glusterfs.mounted(where)
    seen = as_owner(pool, "sh", "-c", f'cat "{where}"/out/part* | wc -c')
    assert seen.stdout.strip() == str(96 * MiB)
    assert attach(pool, "detach", 0, mount_root).returncode == 0
    assert glusterfs.mounted(where)  # rank 1 still uses it
    assert attach(pool, "detach", 1, mount_root).returncode == 0
    assert not glusterfs.mounted(where)
    assert not os.path.exists(where) and not os.path.exists(where + ".client")
    # detaching again is harmless
    assert attach(pool, "detach", 1, mount_root).returncode == 0


def test_release_stops_servers_unmounts_and_frees_the_capacity(pool):
    pool.service.call("cancel", jobid=11, gen=1)
    end = pool.service.wait_for("holder-end", jobid=11)
    assert end["error"] is None, end
    assert mounts_under(pool.root) == []
    assert ramdisks_in(pool.root) == []
    assert gluster_processes(pool) == []
    assert [n["reserved"] for n in freed_status(pool)["nodes"]] == [0, 0]


def test_a_killed_holder_leaves_what_the_sweep_removes(pool):
    assert (
        pool.service.call(
            "hold", jobid=12, gen=1, need=100 * MiB, userid=pool.owner.pw_uid
        )
        == {}
    )
    path = pool.service.wait_for("ramdisk-built", jobid=12)["path"]
    subjob = next(
        h["subjob"] for h in pool.service.call("list")["holders"] if h["jobid"] == 12
    )
    pool.in_pool("job", "kill", "--signal=SIGKILL", str(subjob))
    end = pool.service.wait_for("holder-end", jobid=12)
    assert "removed by a sweep" in end["error"], end
    assert not glusterfs.mounted(path)
    assert mounts_under(pool.root) == [] and ramdisks_in(pool.root) == []
    assert gluster_processes(pool) == []


def test_pool_status_shows_each_nodes_share(pool):
    assert (
        pool.service.call(
            "hold", jobid=13, gen=1, need=96 * MiB, userid=pool.owner.pw_uid
        )
        == {}
    )
    pool.service.wait_for("ramdisk-built", jobid=13)
    nodes = pool.service.call("status")["nodes"]
    assert [[h["bytes"] for h in n["holders"] if h["jobid"] == 13] for n in nodes] == [
        [48 * MiB],
        [48 * MiB],
    ]
    pool.service.call("cancel", jobid=13, gen=1)
    assert pool.service.wait_for("holder-end", jobid=13)["error"] is None
    assert gluster_processes(pool) == [] and mounts_under(pool.root) == []
    print(json.dumps(nodes))


def test_a_brick_that_cannot_start_fails_the_holder_saying_why(pool):
    import socket

    # ports are handed out round the range: the next holder's block follows
    # the last one given
    given = [
        int(server.rsplit(":", 1)[1])
        for _, event in pool.service.events
        if event.get("kind") == "ramdisk-built"
        for server in event["volume"]["servers"]
    ]
    last = max(given, default=24399)
    port = last + 2  # brick 1's port of the next holder
    busy = socket.socket()
    busy.setsockopt(
        socket.SOL_SOCKET, socket.SO_REUSEADDR, 1
    )  # past old bricks' TIME_WAIT
    busy.bind(("127.0.0.1", port))
    busy.listen()
    try:
        assert (
            pool.service.call(
                "hold", jobid=14, gen=1, need=96 * MiB, userid=pool.owner.pw_uid
            )
            == {}
        )
        end = pool.service.wait_for("holder-end", jobid=14, timeout=60)
    finally:
        busy.close()
    assert "flux-rsa-ramdisk: cannot build brick" in end["error"], end
    assert f"port {port} on 127.0.0.1 is in use by another program" in end["error"]
    assert gluster_processes(pool) == [] and mounts_under(pool.root) == []


def test_the_next_holder_takes_other_ports_than_the_one_that_failed(pool):
    unused = {f"127.0.0.1:{p}" for p in range(24400, 24500)} - {
        server
        for _, event in pool.service.events
        if event.get("kind") == "ramdisk-built"
        for server in event["volume"]["servers"]
    }
    assert (
        pool.service.call(
            "hold", jobid=15, gen=1, need=96 * MiB, userid=pool.owner.pw_uid
        )
        == {}
    )
    built = pool.service.wait_for("ramdisk-built", jobid=15)
    assert set(built["volume"]["servers"]) <= unused  # a block not used before
    pool.service.call("cancel", jobid=15, gen=1)
    assert pool.service.wait_for("holder-end", jobid=15)["error"] is None
    assert gluster_processes(pool) == [] and mounts_under(pool.root) == []


def test_fs_ports_among_the_ephemeral_ports_are_named_in_the_pool_log():
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        low = int(f.read().split()[0])
    p = Pool(
        provider="glusterfs", fs_host="127.0.0.1", fs_ports=f"{low + 100}-{low + 199}"
    )
    want = f"fs-ports {low + 100}-{low + 199} overlaps this node's ephemeral ports"

    def output():
        return subprocess.run(
            [FLUX, "job", "eventlog", "-p", "guest.output", str(p.jobid)],
            env=dict(os.environ, FLUX_URI=p.instance.uri),
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout

    try:
        # the shell writes its output to the KVS in batches
        out = wait_until(
            lambda: want in output() and output(),
            20,
            f"{want!r} in the output",
            every=0.2,
        )
        assert f"choose ports below {low}" in out
    finally:
        stop_pool(p)
