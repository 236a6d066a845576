"""python3 -m flux_rsa.ramdisk hold: build, report, keep, destroy on a signal."""

import json
import os
import signal
import subprocess
import sys
import tempfile

import pytest
from conftest import wait_until

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYPATH = os.path.join(ROOT, "src", "python")
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
IS_ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(
    not IS_ROOT, reason="mounting a tmpfs and chown need root"
)


def ramdisk(*args, env=None, **kw):
    env = dict(os.environ if env is None else env, PYTHONPATH=PYPATH)
    return [PY, "-m", "flux_rsa.ramdisk", *args], env


STARTED = []


def start_hold(root, name="7.1", size="8M", owner=None, provider="dir", env=None):
    owner = os.getuid() if owner is None else owner
    cmd, env = ramdisk(
        "hold",
        "--provider",
        provider,
        "--root",
        str(root),
        "--name",
        name,
        "--size",
        size,
        "--owner",
        str(owner),
        env=env,
    )
    proc = subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    STARTED.append(proc)
    return proc


@pytest.fixture(autouse=True)
def no_stray_holders():
    """A failing test must not leave a holder (and its RAM disk) behind."""
    yield
    while STARTED:
        proc = STARTED.pop()
        if proc.poll() is None:
            proc.terminate()
            proc.communicate(timeout=20)


def built(proc):
    line = proc.stdout.readline()
    assert line, proc.stderr.read()
    msg = json.loads(line)
    assert msg["event"] == "built"
    return msg["path"]


def wait_blocked(proc):
    """Until the command blocks its stop signals (interpreter started):
    they show in SigBlk, or it sleeps in sigwait (which unblocks them)."""

    def blocking():
        with open(f"/proc/{proc.pid}/status") as f:
            blocked = next(
                int(line.split()[1], 16) for line in f if line.startswith("SigBlk:")
            )
        with open(f"/proc/{proc.pid}/wchan") as f:
            waiting = "sigtimedwait" in f.read()
        return waiting or blocked & (1 << (signal.SIGTERM - 1))

    wait_until(blocking, 10, "hold blocking SIGTERM", every=0.005)


def stop(proc, sig=signal.SIGTERM):
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=20)
    return proc.returncode, err


@pytest.fixture
def root():
    with tempfile.TemporaryDirectory(prefix="rsa-ramdisk-") as d:
        yield os.path.join(d, "root")


def mounts_at(path):
    with open("/proc/mounts") as f:
        return [line.split() for line in f if line.split()[1] == path]


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP])
def test_dir_provider_builds_reports_and_removes_on_signal(root, owner, sig):
    proc = start_hold(root, owner=owner.pw_uid)
    path = built(proc)
    assert path == os.path.join(root, "7.1")
    st = os.stat(path)
    assert (st.st_uid, oct(st.st_mode & 0o7777)) == (
        0 if IS_ROOT else os.getuid(),
        "0o755",
    )
    for area in ("in", "out"):
        st = os.stat(os.path.join(path, area))
        assert (st.st_uid, st.st_gid) == (owner.pw_uid, owner.pw_gid)
        assert oct(st.st_mode & 0o7777) == "0o700"
    marker = json.load(open(os.path.join(path, ".rsa-ramdisk")))
    assert marker["pid"] == proc.pid and marker["provider"] == "dir"
    # a link inside pointing outside must not make the removal follow it
    outside = tempfile.mkdtemp(prefix="outside-", dir=os.path.dirname(root))
    open(os.path.join(outside, "keep"), "w").close()
    os.symlink(outside, os.path.join(path, "out", "link"))
    rc, err = stop(proc, sig)
    assert rc == 0, err
    assert not os.path.exists(path)
    assert os.path.exists(os.path.join(outside, "keep"))


@needs_root
def test_tmpfs_has_the_granted_size_and_goes_away(root, owner):
    proc = start_hold(root, owner=owner.pw_uid, provider="tmpfs", size="12M")
    path = built(proc)
    (entry,) = mounts_at(path)
    assert entry[2] == "tmpfs" and "nosuid" in entry[3] and "nodev" in entry[3]
    vfs = os.statvfs(path)
    assert vfs.f_blocks * vfs.f_frsize == 12 * 2**20
    df = subprocess.run(
        ["df", "-B1", "--output=size", path], capture_output=True, text=True
    )
    assert df.stdout.split()[-1] == str(12 * 2**20)
    st = os.stat(os.path.join(path, "in"))
    assert (st.st_uid, st.st_gid) == (owner.pw_uid, owner.pw_gid)
    # busy: a process holds a file open in the RAM disk; umount goes lazy
    busy = subprocess.Popen(["sleep", "30"], cwd=os.path.join(path, "out"))
    try:
        rc, err = stop(proc)
    finally:
        busy.kill()
        busy.wait()
    assert rc == 0, err
    assert mounts_at(path) == []
    assert not os.path.exists(path)


def test_other_tasks_only_hold(root):
    proc = start_hold(root, env=dict(os.environ, FLUX_TASK_RANK="1"))
    wait_blocked(proc)
    rc, err = stop(proc)
    assert rc == 0, err
    assert not os.path.exists(root)


def test_signal_during_build_still_cleans_up(root):
    proc = start_hold(root)
    wait_blocked(proc)
    proc.send_signal(signal.SIGTERM)  # most likely before the build finished
    proc.communicate(timeout=20)
    assert proc.returncode == 0
    assert not os.path.exists(os.path.join(root, "7.1"))


def test_refuses_foreign_directory(root):
    os.makedirs(os.path.join(root, "7.1", "precious"))
    proc = start_hold(root)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 1 and out == ""
    assert err.strip() == (
        f"flux-rsa-ramdisk: {root}/7.1 exists and is not a flux-rsa RAM disk "
        "(remove it or choose another [rsa] ramdisk-root)"
    )
    assert os.path.isdir(os.path.join(root, "7.1", "precious"))


def test_replaces_a_leftover_of_a_dead_holder(root):
    first = start_hold(root)
    path = built(first)
    first.kill()  # SIGKILL: no cleanup
    first.wait()
    open(os.path.join(path, "in", "stale"), "w").close()
    second = start_hold(root)
    assert built(second) == path
    assert os.listdir(os.path.join(path, "in")) == []
    assert stop(second)[0] == 0


def test_refuses_a_disk_still_held(root):
    first = start_hold(root)
    built(first)
    second = start_hold(root)
    out, err = second.communicate(timeout=20)
    assert second.returncode == 1
    assert f"is still held by process {first.pid}" in err
    assert stop(first)[0] == 0


def test_unknown_owner_is_named(root):
    proc = start_hold(root, owner=4123457)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 1
    assert "owner uid 4123457 has no passwd entry" in err
    assert not os.path.exists(os.path.join(root, "7.1"))


@needs_root
def test_tmpfs_needs_root(root, owner):
    os.makedirs(root)
    os.chmod(os.path.dirname(root), 0o755)
    os.chown(root, owner.pw_uid, owner.pw_gid)
    cmd, env = ramdisk(
        "hold",
        "--provider",
        "tmpfs",
        "--root",
        root,
        "--name",
        "7.1",
        "--size",
        "4M",
        "--owner",
        str(owner.pw_uid),
    )
    proc = subprocess.run(
        cmd,
        env=env,
        capture_output=True,
        text=True,
        timeout=20,
        user=owner.pw_uid,
        group=owner.pw_gid,
    )
    assert proc.returncode == 1
    assert "a tmpfs RAM disk needs root" in proc.stderr
    assert 'set [rsa] provider = "dir"' in proc.stderr
    assert os.listdir(root) == []
