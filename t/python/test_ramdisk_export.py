"""Provider tmpfs, served to compute nodes: the stager writes the tmpfs on
the RSA node directly, a compute node mounts it over GlusterFS and sees
exactly that, and what the job writes there is in the tmpfs.  Real
glusterfsd and glusterfs on loopback; needs root (tmpfs, FUSE)."""

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile

import pytest

from flux_rsa.ramdisk import gluster, sysmount

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYPATH = os.path.join(ROOT, "src", "python")
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
SECRET = "export-test-secret-0123"
MiB = 1 << 20

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="tmpfs and FUSE mounts need root"),
    pytest.mark.skipif(
        not gluster.installed(),
        reason="GlusterFS is not installed (Debian: glusterfs-server "
        "glusterfs-client): no exported RAM disk tests",
    ),
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Site:
    """An RSA node's RAM-disk root and a compute node's mount root (one
    machine), and the holder serving RAM disk 5.1 there."""

    def __init__(self):
        self.top = tempfile.mkdtemp(prefix="rsa-export-")
        self.root = os.path.join(self.top, "ramdisk")
        self.mnt = os.path.join(self.top, "mnt")
        self.port = free_port()
        self.holder = None

    def env(self, **variables):
        env = {"PATH": "/usr/bin:/bin:/usr/sbin:/sbin", "PYTHONPATH": PYPATH}
        env.update({f"RSA_{k.upper()}": str(v) for k, v in variables.items()})
        return env

    def hold(self, size="16M", adopt=None, name="5.1"):
        args = [
            "hold",
            "--provider",
            "tmpfs",
            "--root",
            self.root,
            "--name",
            name,
            "--size",
            size,
            "--owner",
            "0",
            "--port",
            str(self.port),
            "--secret",
            SECRET,
        ]
        if adopt:
            args += ["--adopt", adopt, "--jobid", "5"]
        self.holder = subprocess.Popen(
            [PY, "-m", "flux_rsa.ramdisk", *args],
            env=self.env(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        events = [json.loads(self.holder.stdout.readline())]
        while events[-1]["event"] != "built":
            line = self.holder.stdout.readline()
            assert line, self.holder.stderr.read()
            events.append(json.loads(line))
        return events[-1]

    def stop(self, sig=signal.SIGTERM):
        self.holder.send_signal(sig)
        out, err = self.holder.communicate(timeout=60)
        assert self.holder.returncode == 0, err
        return out

    def attach(self, volume, owner=0):
        return subprocess.run(
            [PY, "-m", "flux_rsa.privileged"],
            capture_output=True,
            text=True,
            timeout=90,
            env=self.env(
                op="attach",
                root=self.mnt,
                name="5.1",
                rank=0,
                provider="tmpfs",
                owner=owner,
                user=volume["user"],
                servers=",".join(volume["servers"]),
                secret=volume["secret"],
            ),
        )

    def detach(self):
        return subprocess.run(
            [PY, "-m", "flux_rsa.privileged"],
            capture_output=True,
            text=True,
            timeout=90,
            env=self.env(op="detach", root=self.mnt, name="5.1", rank=0),
        )

    def cleanup(self):
        if self.holder is not None and self.holder.poll() is None:
            self.holder.kill()
            self.holder.wait()
        for record in gluster.processes_in(self.top):
            gluster.stop_process(record)
        with open("/proc/mounts") as f:
            mounted = [
                line.split()[1]
                for line in f
                if line.split()[1].startswith(self.top + "/")
            ]
        for path in sorted(mounted, reverse=True):
            subprocess.run(["umount", "-l", path])
        subprocess.run(["rm", "-rf", self.top])


@pytest.fixture
def site():
    s = Site()
    yield s
    s.cleanup()


def leftovers(site):
    with open("/proc/mounts") as f:
        mounts = [
            line.split()[1] for line in f if line.split()[1].startswith(site.top + "/")
        ]
    return sorted(
        os.listdir(site.root)
        + os.listdir(site.mnt)
        + mounts
        + [str(r["pid"]) for r in gluster.processes_in(site.top)]
    )


def test_the_compute_node_sees_what_the_stager_wrote_and_the_rsa_node_what_the_job_wrote(
    site,
):
    built = site.hold()
    path = built["path"]
    volume = built["volume"]
    assert (
        volume["servers"] == [f"127.0.0.1:{site.port}"] and volume["user"] == "rsa-5-1"
    )
    # the stager writes the tmpfs itself: files, a directory, a link, a mode
    os.makedirs(os.path.join(path, "in", "sub"))
    with open(os.path.join(path, "in", "sub", "data"), "wb") as f:
        f.write(os.urandom(3 * MiB))
    os.symlink("sub/data", os.path.join(path, "in", "link"))
    os.chmod(os.path.join(path, "in", "sub", "data"), 0o640)
    os.utime(os.path.join(path, "in", "sub", "data"), ns=(10**18, 10**18))
    done = site.attach(volume)
    assert done.returncode == 0, done.stderr
    where = os.path.join(site.mnt, "5.1")
    assert sysmount.fstype(where) == "fuse.glusterfs"
    seen = os.stat(os.path.join(where, "in", "sub", "data"))
    here = os.stat(os.path.join(path, "in", "sub", "data"))
    assert (seen.st_size, seen.st_mode, seen.st_mtime_ns) == (
        here.st_size,
        here.st_mode,
        10**18,
    )
    assert (
        open(os.path.join(where, "in", "link"), "rb").read()
        == open(os.path.join(path, "in", "sub", "data"), "rb").read()
    )
    assert os.readlink(os.path.join(where, "in", "link")) == "sub/data"
    # what the job writes lands in the tmpfs, and nothing of GlusterFS shows
    with open(os.path.join(where, "out", "result"), "w") as f:
        f.write("42\n")
    assert open(os.path.join(path, "out", "result")).read() == "42\n"
    assert ".glusterfs" not in os.listdir(where)
    assert site.detach().returncode == 0
    assert not os.path.exists(where)
    site.stop()
    assert leftovers(site) == []


def run_on_mount(argv, mount, timeout=60):
    """Run ``argv`` against the FUSE mount ``mount``; if it hangs there (a
    dead client leaves writers waiting in the kernel), abort the mount's
    connection so the test fails instead of hanging."""
    proc = subprocess.Popen(
        argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        # the mount's device from the mount table (a stat of it would hang too)
        with open("/proc/self/mountinfo") as f:
            (device,) = [line.split()[2] for line in f if line.split()[4] == mount]
        subprocess.run(
            ["mount", "-t", "fusectl", "none", "/sys/fs/fuse/connections"],
            capture_output=True,
        )
        with open(f"/sys/fs/fuse/connections/{device.split(':')[1]}/abort", "w") as f:
            f.write("1")
        proc.communicate()
        raise AssertionError(f"{argv} hung on {mount}")
    return subprocess.CompletedProcess(argv, proc.returncode, out, err)


def test_a_full_ram_disk_says_so_and_still_shows_what_was_written_into_it(site):
    """Writers that fill the RAM disk get ENOSPC, again and again, and the
    mount stays whole (GlusterFS 10.3's write-behind killed the client
    there), showing also what the stager wrote into the tmpfs directly."""
    built = site.hold(size="8M")
    path = built["path"]
    with open(os.path.join(path, "in", "staged"), "w") as f:
        f.write("staged\n")
    assert site.attach(built["volume"]).returncode == 0
    where = os.path.join(site.mnt, "5.1")
    for _ in range(6):
        fill = run_on_mount(
            [
                "sh",
                "-c",
                f'seq 1 100000 >"{where}/out/seq" && '
                f'head -c 12M /dev/zero >"{where}/out/big"',
            ],
            where,
        )
        assert "No space left on device" in fill.stderr
        os.unlink(os.path.join(where, "out", "big"))
        os.unlink(os.path.join(where, "out", "seq"))
    assert open(os.path.join(where, "in", "staged")).read() == "staged\n"
    assert site.detach().returncode == 0
    site.stop()


def test_an_attach_that_finds_another_ram_disk_is_undone(site):
    built = site.hold()
    # another job's RAM disk served under the same login would not do: the
    # compute node checks the name in the marker it sees
    marker_path = os.path.join(built["path"], ".rsa-ramdisk")
    marker = json.load(open(marker_path))
    json.dump({**marker, "name": "6.1"}, open(marker_path, "w"))
    done = site.attach(built["volume"])
    assert done.returncode == 1
    assert done.stderr.strip().endswith(
        f"attach: {site.mnt}/5.1 is not the RAM disk 5.1 (its " "marker names '6.1')"
    )
    assert not os.path.exists(os.path.join(site.mnt, "5.1"))
    json.dump(marker, open(marker_path, "w"))
    done = site.attach(built["volume"], owner=4242)
    assert done.returncode == 1 and "of uid 4242 (it belongs to uid 0)" in done.stderr
    site.stop()
    assert leftovers(site) == []


def test_dropped_inputs_give_their_memory_back(site):
    built = site.hold(size="32M")
    path = built["path"]
    with open(os.path.join(path, "in", "big"), "wb") as f:
        f.write(os.urandom(16 * MiB))
    assert site.attach(built["volume"]).returncode == 0
    where = os.path.join(site.mnt, "5.1")
    assert (
        len(open(os.path.join(where, "in", "big"), "rb").read()) == 16 * MiB
    )  # looked up
    purge = subprocess.run(
        [PY, "-m", "flux_rsa.ramdisk", "purge", os.path.join(path, "in")],
        env=site.env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert purge.returncode == 0, purge.stderr
    st = os.statvfs(path)
    assert (
        st.f_blocks - st.f_bfree
    ) * st.f_frsize < MiB  # not held by a GlusterFS handle
    assert site.detach().returncode == 0
    site.stop()


def test_kept_the_server_stops_and_an_adopting_holder_serves_it_again(site):
    built = site.hold(size="8M")
    path = built["path"]
    with open(os.path.join(path, "out", "kept"), "w") as f:
        f.write("kept\n")
    out = site.stop(signal.SIGALRM)
    assert json.loads(out.splitlines()[-1])["event"] == "kept"
    assert gluster.processes_in(site.top) == []  # the server keeps no state
    assert sysmount.mounted(path, "tmpfs")
    site.port = free_port()
    again = site.hold(size="12M", adopt=path, name="5.2")
    assert again["path"] == path and again["volume"]["servers"] == [
        f"127.0.0.1:{site.port}"
    ]
    assert site.attach(again["volume"]).returncode == 0
    assert open(os.path.join(site.mnt, "5.1", "out", "kept")).read() == "kept\n"
    assert site.detach().returncode == 0
    site.stop()
    assert leftovers(site) == []
