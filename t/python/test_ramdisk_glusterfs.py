"""A brick's destroy stops every engine process working in it, also one
its marker does not name (a holder killed between starting the server and
recording it).  Real glusterfsd on loopback; needs root for the tmpfs."""

import os
import subprocess
import tempfile

import pytest

from flux_rsa.ramdisk import glusterfs, layout, parallel

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="bricks are tmpfs mounts: need root"),
    pytest.mark.skipif(not glusterfs.installed(),
                       reason="GlusterFS is not installed (Debian: glusterfs-server "
                              "glusterfs-client): no parallel RAM disk tests"),
]


@pytest.fixture
def root():
    """A RAM-disk root; whatever a failed test left there is stopped,
    unmounted and removed."""
    top = tempfile.mkdtemp(prefix="rsa-brick-test-")
    yield top
    for record in glusterfs.processes_in(top):
        glusterfs.stop_process(record)
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


def brick_servers(path):
    found = subprocess.run(["pgrep", "-a", "-f", "rsa-brick"], capture_output=True,
                           text=True).stdout
    return [line for line in found.splitlines() if path + "/" in line]


def test_a_brick_server_the_marker_does_not_name_is_stopped_with_the_brick(root):
    volume = parallel.volume_of("7.1", 7, 1, ["n0"], "127.0.0.1", free_port(), "s3cret")
    path, marker = parallel.build_brick(root, "7.1", 0, 16 << 20, os.getuid(), volume, 7, 1)
    assert len(brick_servers(path)) == 1
    del marker["server"]  # as if the holder died before recording it
    layout.write_marker(path, marker)
    layout.destroy(path)
    assert brick_servers(path) == []
    assert not os.path.exists(path)


def test_a_holder_told_to_stop_while_it_builds_stops_building_and_leaves_nothing(root):
    import signal

    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    try:
        os.kill(os.getpid(), signal.SIGTERM)  # pending, as in a holder
        volume = parallel.volume_of("8.1", 8, 1, ["n0"], "127.0.0.1", free_port(), "s3cret")
        with pytest.raises(layout.RamdiskError, match="stopped before the brick server listened"):
            parallel.build_brick(root, "8.1", 0, 16 << 20, os.getuid(), volume, 8, 1)
        assert glusterfs.processes_in(root) == []
        assert os.listdir(root) == []
    finally:
        signal.sigtimedwait({signal.SIGTERM}, 0)
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


def test_the_volume_is_mounted_nosuid_and_nodev(root):
    """Root mounts it, on RSA and compute nodes: a setuid file or a device
    node on it must not count there."""
    volume = parallel.volume_of("6.1", 6, 1, ["n0"], "127.0.0.1", free_port(), "s3cret")
    brick, _ = parallel.build_brick(root, "6.1", 0, 16 << 20, os.getuid(), volume, 6, 1)
    path = parallel.build_namespace(root, "6.1", 16 << 20, os.getuid(), volume, 6, 1, brick)
    with open("/proc/mounts") as f:
        (options,) = [line.split()[3].split(",") for line in f if line.split()[1] == path]
    assert "nosuid" in options and "nodev" in options
    layout.destroy(path)
    layout.destroy(brick)


def test_a_holder_task_stopped_while_it_builds_ends_as_a_stop_does(root, capsys):
    """A cancel in BOOTING is no failure: the task exits 0, says nothing,
    and leaves nothing."""
    import signal

    from flux_rsa.ramdisk.hold import STOP_SIGNALS

    old = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        volume = parallel.volume_of("9.1", 9, 1, ["n0"], "127.0.0.1", free_port(), "s3cret")
        assert parallel.hold(root, "9.1", 16 << 20, os.getuid(), 0, volume, 9, 1) == 0
        assert signal.sigpending() == set()
    finally:
        signal.sigtimedwait({signal.SIGTERM}, 0)
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
    assert capsys.readouterr().err == ""
    assert glusterfs.processes_in(root) == [] and os.listdir(root) == []
