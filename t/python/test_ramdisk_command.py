"""Provider command through the privileged entry point, with small site
scripts written here: every holder task runs create, task 0 makes the
owner's areas, destroy runs at the end (and in a sweep after a holder
died); compute nodes attach and detach through the site's scripts; a
failing or overrunning script says why in one line and leaves nothing.
Through flux-imp the scripts come from the site's [rsa] table alone."""

import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile

import pytest
from conftest import wait_until

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYPATH = os.path.join(ROOT, "src", "python")
PY = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
NOBODY = pwd.getpwnam("nobody")

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="site scripts run as root (mounts, root-owned scripts)"
)

# what every script does first: record the step's variables for the test
RECORD = 'env | grep "^RSA_" | sort >"$LOG/$RSA_STEP.${RSA_INDEX:-$RSA_RANK}"\n'
SCRIPTS = {
    # a tmpfs of the whole reservation on the first node only
    "create": RECORD + 'test "$RSA_INDEX" = 0 || exit 0\n'
    'n=$(echo "$RSA_NODES" | tr , "\\n" | wc -l)\n'
    'mountpoint -q "$RSA_PATH" || '
    'mount -t tmpfs -o size=$((RSA_SIZE * n)),mode=0755 rsa-cmd "$RSA_PATH"\n',
    "destroy": RECORD + 'test "$RSA_INDEX" = 0 || exit 0\n'
    'if mountpoint -q "$RSA_PATH"; then umount "$RSA_PATH"; fi\n',
    # everything is one machine: a bind mount of the RSA-side path
    "attach": RECORD
    + 'mountpoint -q "$RSA_PATH" || mount --bind "$RSA_SOURCE" "$RSA_PATH"\n',
    "detach": RECORD + 'if mountpoint -q "$RSA_PATH"; then umount "$RSA_PATH"; fi\n',
    "failing": RECORD + 'echo "looking at $RSA_NODES"\necho "some noise" >&2\n'
    'echo "$RSA_NAME: no room on this node" >&2\nexit 3\n',
    "mount-then-fail": RECORD + 'mount --bind "$RSA_SOURCE" "$RSA_PATH"\n'
    'echo "client refused: no route" >&2\nexit 1\n',
}


class Site:
    """A RAM-disk root, a mount root, root-owned scripts and a root-owned
    configuration directory, in a root-only temporary directory."""

    def __init__(self):
        self.top = tempfile.mkdtemp(prefix="rsa-cmd-")
        self.root = self.sub("ramdisk")
        self.mnt = self.sub("mnt")
        self.log = self.sub("log")
        self.bin = self.sub("bin")
        self.conf = self.sub("conf")
        self.procs = []
        for name, body in SCRIPTS.items():
            self.script(name, body)

    def sub(self, name):
        path = os.path.join(self.top, name)
        os.mkdir(path, 0o755)
        return path

    def script(self, name, body, mode=0o755):
        path = os.path.join(self.bin, f"{name}.sh")
        with open(path, "w") as f:
            f.write(f"#!/bin/sh\nLOG={self.log}\n{body}")
        os.chmod(path, mode)
        return path

    def path(self, name):
        return os.path.join(self.bin, f"{name}.sh")

    def scripts(self, op, **scripts):
        """The RSA_COMMAND_* variables a trusted caller gives ``op``: the
        scripts of its steps (``step="name"`` replaces one)."""
        from flux_rsa.privileged.variables import OPS, script_var

        return {
            f"RSA_{script_var(step)}": self.path(scripts.get(step, step))
            for step in OPS[op].scripts
        }

    def recorded(self, step, who):
        try:
            with open(os.path.join(self.log, f"{step}.{who}")) as f:
                return dict(line.rstrip("\n").split("=", 1) for line in f)
        except FileNotFoundError:
            return None

    def cleanup(self):
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        with open("/proc/mounts") as f:
            mounted = [
                line.split()[1]
                for line in f
                if line.split()[1].startswith(self.top + "/")
            ]
        for path in sorted(mounted, reverse=True):
            subprocess.run(["umount", "-l", path])
        shutil.rmtree(self.top, ignore_errors=True)


@pytest.fixture
def site():
    s = Site()
    yield s
    s.cleanup()


def entry(variables, extra=None):
    """(argv, env) of the privileged entry point run directly, as the pool
    does when it runs as root."""
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": PYPATH, **(extra or {})}
    env.update({k: str(v) for k, v in variables.items()})
    return [PY, "-m", "flux_rsa.privileged"], env


def run_op(variables, extra=None):
    argv, env = entry(variables, extra)
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)


def hold_vars(site, index, nodes="rsa0,rsa1", name="12.1", size=8 << 20):
    return {
        "RSA_OP": "hold",
        "RSA_ROOT": site.root,
        "RSA_NAME": name,
        "RSA_SIZE": size,
        "RSA_OWNER": NOBODY.pw_uid,
        "RSA_PROVIDER": "command",
        "RSA_TASK_RANK": index,
        "RSA_NODES": nodes,
        "RSA_JOBID": 12,
        "RSA_GEN": 1,
        "RSA_PORT": 24200,
    }


def start_hold(site, index, **kw):
    scripts = site.scripts(
        "hold", **{k: kw.pop(k) for k in ("create", "destroy") if k in kw}
    )
    argv, env = entry(hold_vars(site, index, **kw), scripts)
    proc = subprocess.Popen(
        argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    site.procs.append(proc)
    return proc


def events(proc):
    """The JSON lines the holder task printed (the other lines are the
    scripts' output, copied for the logs)."""
    out = []
    for line in proc.stdout:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
        if out[-1].get("event") == "built":
            break
    return out


def mounted(path):
    with open("/proc/mounts") as f:
        return [line.split()[2] for line in f if line.split()[1] == path]


def leftovers(site):
    with open("/proc/mounts") as f:
        mounts = [
            line.split()[1] for line in f if line.split()[1].startswith(site.top + "/")
        ]
    return os.listdir(site.root) + os.listdir(site.mnt) + mounts


# --- on the RSA nodes --------------------------------------------------------


def test_every_holder_task_runs_create_and_task_0_makes_the_owners_areas(site):
    first, second = start_hold(site, 0), start_hold(site, 1)
    built = events(first)
    path = os.path.join(site.root, "12.1")
    assert built[-1] == {
        "event": "built",
        "path": path,
        "volume": {
            "provider": "command",
            "owner": NOBODY.pw_uid,
            "nodes": ["rsa0", "rsa1"],
            "source": path,
            "jobid": 12,
            "port": 24200,
        },
    }
    assert mounted(path) == ["tmpfs"]
    vfs = os.statvfs(path)
    assert vfs.f_blocks * vfs.f_frsize == 16 << 20  # 2 nodes x 8M, as the script chose
    for area in ("in", "out"):
        st = os.stat(os.path.join(path, area))
        assert (st.st_uid, st.st_gid, st.st_mode & 0o7777) == (
            NOBODY.pw_uid,
            NOBODY.pw_gid,
            0o700,
        )
    # the tasks create at the same time: task 0 says built when its own
    # create is done, task 1 may still be running its create
    wait_until(lambda: site.recorded("create", 1), 30, "task 1 running its create")
    for index in (0, 1):
        told = site.recorded("create", index)
        assert told == {
            "RSA_STEP": "create",
            "RSA_PATH": path,
            "RSA_NAME": "12.1",
            "RSA_SIZE": str(8 << 20),
            "RSA_INDEX": str(index),
            "RSA_NODES": "rsa0,rsa1",
            "RSA_OWNER": str(NOBODY.pw_uid),
            "RSA_GROUP": str(NOBODY.pw_gid),
            "RSA_JOBID": "12",
            "RSA_GEN": "1",
            "RSA_PORT": "24200",
        }
    # task 1 keeps a marker of its own, so a sweep on its node finds it
    marker = json.load(open(os.path.join(site.root, "12.1.n1", ".rsa-ramdisk")))
    assert (marker["provider"], marker["index"], marker["ramdisk"]) == (
        "command",
        1,
        path,
    )
    for proc in (first, second):
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0, proc.stderr.read()
    for index in (0, 1):
        assert site.recorded("destroy", index)["RSA_STEP"] == "destroy"
    assert leftovers(site) == []


def test_a_failing_create_says_why_in_one_line_and_leaves_nothing(site):
    proc = start_hold(site, 0, create="failing")
    assert proc.wait(timeout=60) == 1
    err = proc.stderr.read().strip().splitlines()
    path = os.path.join(site.root, "12.1")
    assert err[-1] == (
        f"flux-rsa-ramdisk: cannot build {path}: command-create "
        f"{site.path('failing')} failed (exit status 3): 12.1: no room on this node"
    )
    assert site.recorded("destroy", 0) is not None  # undone, as destroy undoes
    assert leftovers(site) == []


def killed_holder(site):
    """A holder task 0 that built its RAM disk, then was killed (SIGKILL:
    no destroy ran)."""
    proc = start_hold(site, 0)
    events(proc)
    proc.kill()
    proc.wait()
    assert mounted(os.path.join(site.root, "12.1")) == ["tmpfs"]


def test_a_killed_holders_leftovers_are_destroyed_by_a_sweep(site):
    killed_holder(site)
    # the sweep runs the site's destroy, with the variables create had
    done = run_op(
        {"RSA_OP": "sweep", "RSA_ROOT": site.root},
        {"RSA_COMMAND_DESTROY": site.path("destroy")},
    )
    assert done.returncode == 0, done.stderr
    assert f"removed leftover RAM disk {site.root}/12.1" in done.stdout
    assert site.recorded("destroy", 0)["RSA_PORT"] == "24200"
    assert leftovers(site) == []


def test_a_sweep_without_the_destroy_script_leaves_the_ram_disk_and_says_so(site):
    killed_holder(site)
    done = run_op({"RSA_OP": "sweep", "RSA_ROOT": site.root})
    assert done.returncode == 1
    assert (
        "provider command has no destroy script: set [rsa] command-destroy"
        in done.stdout
    )
    assert mounted(os.path.join(site.root, "12.1")) == ["tmpfs"]


def test_a_step_that_overruns_is_killed_with_what_it_started(site, monkeypatch):
    from flux_rsa.ramdisk.layout import ProviderError
    from flux_rsa.ramdisk.providers import command

    pids = os.path.join(site.log, "pids")
    slow = site.script("slow", f"sleep 600 & echo $! >{pids}\nwait\n")
    monkeypatch.setitem(command.TIMEOUT, "create", 1)
    command.configure({"create": slow})
    with pytest.raises(
        ProviderError,
        match=rf"command-create {slow} did not finish within 1s "
        r"and was killed \(a create step must end within 1s\)",
    ):
        command.run("create", {"NAME": "1.1"})
    child = int(open(pids).read())

    def gone():
        try:
            return open(f"/proc/{child}/stat").read().split()[2] == "Z"
        except FileNotFoundError:
            return True

    # the step's group was signalled; the step's own child (not ours to
    # wait for) exits on its own time, which CI once saw still running
    wait_until(gone, 10, "the step's child exiting", every=0.02)


def test_a_script_root_would_run_must_be_root_owned_and_not_writable_by_others(site):
    os.chmod(site.path("create"), 0o775)
    done = run_op(hold_vars(site, 0), site.scripts("hold"))
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"flux-rsa-helper: RSA_COMMAND_CREATE {site.path('create')} is owned by uid 0 with mode "
        "0775: root runs only scripts that only root can change (chown root and chmod go-w it)"
    )
    assert site.recorded("create", 0) is None and leftovers(site) == []


# --- on the compute nodes ------------------------------------------------------


def attach_vars(site, op, rank, source=None):
    variables = {
        "RSA_OP": op,
        "RSA_ROOT": site.mnt,
        "RSA_NAME": "12.1",
        "RSA_RANK": rank,
    }
    if op == "attach":
        variables.update(
            {
                "RSA_PROVIDER": "command",
                "RSA_OWNER": NOBODY.pw_uid,
                "RSA_NODES": "rsa0,rsa1",
                "RSA_SOURCE": source or os.path.join(site.root, "12.1"),
                "RSA_JOBID": 12,
                "RSA_PORT": 24200,
            }
        )
    return variables


def ramdisk_with_a_file(site, marker=True):
    """A RAM disk as the RSA nodes have it (its marker on top, unless not
    ``marker``) with one output file."""
    path = os.path.join(site.root, "12.1")
    os.makedirs(os.path.join(path, "out"))
    with open(os.path.join(path, "out", "result"), "w") as f:
        f.write("42\n")
    if marker:
        with open(os.path.join(path, ".rsa-ramdisk"), "w") as f:
            json.dump(
                {
                    "name": "12.1",
                    "provider": "command",
                    "owner": NOBODY.pw_uid,
                    "mounted": True,
                },
                f,
            )
    return path


def test_compute_nodes_attach_and_detach_through_the_site_scripts(site):
    ramdisk_with_a_file(site)
    where = os.path.join(site.mnt, "12.1")
    for rank in (3, 4):  # two ranks of the job on this one machine share the mount
        done = run_op(attach_vars(site, "attach", rank), site.scripts("attach"))
        assert done.returncode == 0, done.stderr
    assert open(os.path.join(where, "out", "result")).read() == "42\n"
    assert site.recorded("attach", 3) == {
        "RSA_STEP": "attach",
        "RSA_PATH": where,
        "RSA_SOURCE": os.path.join(site.root, "12.1"),
        "RSA_NAME": "12.1",
        "RSA_NODES": "rsa0,rsa1",
        "RSA_JOBID": "12",
        "RSA_GEN": "1",
        "RSA_PORT": "24200",
        "RSA_RANK": "3",
    }
    assert site.recorded("attach", 4) is None  # the second rank found it attached
    assert (
        run_op(attach_vars(site, "detach", 3), site.scripts("detach")).returncode == 0
    )
    assert mounted(where) != []  # rank 4 still uses it
    done = run_op(attach_vars(site, "detach", 4), site.scripts("detach"))
    assert done.returncode == 0, done.stderr
    assert site.recorded("detach", 4)["RSA_SOURCE"] == os.path.join(site.root, "12.1")
    assert mounted(where) == [] and os.listdir(site.mnt) == []
    assert (
        run_op(attach_vars(site, "detach", 4), site.scripts("detach")).returncode == 0
    )  # again


def test_a_failed_attach_is_undone_and_says_why(site):
    ramdisk_with_a_file(site)
    where = os.path.join(site.mnt, "12.1")
    done = run_op(
        attach_vars(site, "attach", 3), site.scripts("attach", attach="mount-then-fail")
    )
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        f"flux-rsa-ramdisk: attach {where}: command-attach {site.path('mount-then-fail')} "
        "failed (exit status 1): client refused: no route"
    )
    assert site.recorded("detach", 3) is not None  # the site's detach undid it
    assert mounted(where) == [] and os.listdir(site.mnt) == []


def test_an_attach_that_shows_anything_but_the_ram_disk_is_undone_and_says_so(site):
    """The site's attach ends well but what is at the mount point has no
    marker of RAM disk 12.1 (a wrong source, an empty directory): the job
    must not be given it."""
    ramdisk_with_a_file(site, marker=False)
    where = os.path.join(site.mnt, "12.1")
    done = run_op(attach_vars(site, "attach", 3), site.scripts("attach"))
    assert done.returncode == 1
    assert done.stderr.strip().splitlines()[-1] == (
        f"flux-rsa-ramdisk: attach: {where} is not the RAM disk 12.1 (no .rsa-ramdisk marker "
        "there)"
    )
    assert site.recorded("detach", 3) is not None  # undone by the site's detach
    assert mounted(where) == [] and os.listdir(site.mnt) == []
