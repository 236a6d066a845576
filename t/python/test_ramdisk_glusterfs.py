"""A brick's destroy stops every engine process working in it, also one
its marker does not name (a holder killed between starting the server and
recording it).  Real glusterfsd on loopback; needs root for the tmpfs."""

import os
import subprocess
import tempfile

import pytest

from flux_rsa.ramdisk import disks, gluster, holder, layout, signals
from flux_rsa.ramdisk.providers.base import Task
from flux_rsa.ramdisk.providers.glusterfs import brick_path

GLUSTER = disks.provider("glusterfs")

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="bricks are tmpfs mounts: need root"),
    pytest.mark.skipif(
        not gluster.installed(),
        reason="GlusterFS is not installed (Debian: glusterfs-server "
        "glusterfs-client): no parallel RAM disk tests",
    ),
]


@pytest.fixture
def root():
    """A RAM-disk root; whatever a failed test left there is stopped,
    unmounted and removed."""
    top = tempfile.mkdtemp(prefix="rsa-brick-test-")
    yield top
    for record in gluster.processes_in(top):
        gluster.stop_process(record)
    for entry in os.scandir(top):
        subprocess.run(["umount", "-l", entry.path], capture_output=True)
    subprocess.run(["rm", "-rf", top])


def free_port():
    """A loopback port nothing listens on, nor on the next one (a fixed
    port could be another run's brick server, which would look ready)."""
    import socket

    while True:
        with socket.socket() as a, socket.socket() as b:
            a.bind(("127.0.0.1", 0))
            port = a.getsockname()[1]
            try:
                b.bind(("127.0.0.1", port + 1))
            except OSError:
                continue
            return port


def task(root, name, index=0, nodes=("n0",), port=None):
    jobid, gen = layout.ids_from_name(name)
    return Task(
        root,
        name,
        16 << 20,
        os.getuid(),
        jobid=jobid,
        gen=gen,
        index=index,
        nodes=nodes,
        port=free_port() if port is None else port,
        secret="s3cret-s3cret-s3cret",
        fs_host="127.0.0.1",
    )


def brick_servers(path):
    found = subprocess.run(
        ["pgrep", "-a", "-f", "rsa-brick"], capture_output=True, text=True
    ).stdout
    return [line for line in found.splitlines() if path + "/" in line]


def test_a_brick_server_the_marker_does_not_name_is_stopped_with_the_brick(root):
    # task 1 of 2 makes only its brick
    assert GLUSTER.create(task(root, "7.1", index=1, nodes=("n0", "n1"))) is None
    path = brick_path(root, "7.1", 1)
    assert len(brick_servers(path)) == 1
    marker = layout.read_marker(path)
    del marker["server"]  # as if the holder died before recording it
    layout.write_marker(path, marker)
    disks.destroy(path)
    assert brick_servers(path) == []
    assert not os.path.exists(path)


def test_a_holder_told_to_stop_while_it_builds_stops_building_and_leaves_nothing(root):
    import signal

    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        os.kill(os.getpid(), signal.SIGTERM)  # pending, as in a holder
        with pytest.raises(
            layout.RamdiskError, match="stopped before the brick server listened"
        ):
            GLUSTER.create(task(root, "8.1", index=1, nodes=("n0", "n1")))
        assert gluster.processes_in(root) == []
        assert os.listdir(root) == []
    finally:
        signal.sigtimedwait({signal.SIGTERM}, 0)
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def test_the_volume_is_mounted_nosuid_and_nodev(root):
    """Root mounts it, on RSA and compute nodes: a setuid file or a device
    node on it must not count there."""
    t = task(root, "6.1")
    path = GLUSTER.create(t)
    with open("/proc/mounts") as f:
        (options,) = [
            line.split()[3].split(",") for line in f if line.split()[1] == path
        ]
    assert "nosuid" in options and "nodev" in options
    assert GLUSTER.stop(t, GLUSTER.parts(t)) == []
    assert os.listdir(root) == []


def test_a_holder_task_stopped_while_it_builds_ends_as_a_stop_does(root, capsys):
    """A cancel in BOOTING is no failure: the task exits 0, says nothing,
    and leaves nothing."""
    import signal

    old = signal.pthread_sigmask(signal.SIG_BLOCK, signals.STOP)
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        assert holder.hold(task(root, "9.1"), "glusterfs") == 0
        assert signal.sigpending() == set()
    finally:
        signal.sigtimedwait({signal.SIGTERM}, 0)
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
    assert capsys.readouterr().err == ""
    assert gluster.processes_in(root) == [] and os.listdir(root) == []
