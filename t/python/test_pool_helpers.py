"""Shared pieces of the pool tests: a real Flux test instance with two RSA
nodes, the pool launched in it, and a stand-in for the rsa service that
takes the agent's notifications (``rsa.pool-event``)."""

import os
import pwd
import random
import shutil
import subprocess
import sys
import tempfile
import time

import pytest
from conftest import wait_until

from flux_rsa.ramdisk import gluster

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PYPATH = os.path.join(ROOT, "src", "python")
# the flux configure found (make check exports FLUX), else /opt/flux
FLUX = os.environ.get("FLUX") or "/opt/flux/bin/flux"
FLUX_PYTHON = os.path.join(
    os.path.dirname(os.path.dirname(FLUX)),
    "lib",
    f"python{sys.version_info.major}.{sys.version_info.minor}",
    "site-packages",
)
USER = "rsa-stage-test"
MiB = 2**20

requires_flux = pytest.mark.skipif(
    not os.path.exists(FLUX),
    reason="no Flux (flux-core and flux-sched not installed): the pool tests need a real instance",
)
requires_root = pytest.mark.skipif(
    os.geteuid() != 0,
    reason="the pool tests mount tmpfs and run stages as another user: need root",
)

for path in (PYPATH, FLUX_PYTHON):
    if path not in sys.path:
        sys.path.insert(0, path)

CONFIG = """\
[resource]
noverify = true

[[resource.config]]
hosts = "node[0-1],rsa[0-1]"
cores = "0-1"

[[resource.config]]
hosts = "rsa[0-1]"
properties = ["rsa"]
"""


def owner_account():
    try:
        return pwd.getpwnam(USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--no-create-home", "--shell", "/bin/sh", USER], check=True
        )
        return pwd.getpwnam(USER)


class Instance:
    """flux start --test-size=4 --test-hosts=node[0-1],rsa[0-1], kept
    running by an initial program that ends when we close its stdin.

    ``statedir``: keep the content store (KVS, job history) there, so a
    later Instance with the same statedir is the same instance restarted.
    ``options``: more flux start options."""

    def __init__(self, workdir, statedir=None, options=()):
        self.workdir = workdir
        confdir = os.path.join(workdir, "conf")
        os.makedirs(confdir, exist_ok=True)
        with open(os.path.join(confdir, "resource.toml"), "w") as f:
            f.write(CONFIG)
        urifile = os.path.join(workdir, "uri")
        if os.path.exists(urifile):
            os.unlink(urifile)
        env = dict(os.environ, PYTHONPATH=f"{PYPATH}:{FLUX_PYTHON}")
        self.log = open(os.path.join(workdir, "flux-start.log"), "a")
        if statedir is not None:
            os.makedirs(statedir, exist_ok=True)
            options = (*options, f"-Sstatedir={statedir}")
        self.proc = subprocess.Popen(
            [
                FLUX,
                "start",
                "--test-size=4",
                "--test-hosts=node[0-1],rsa[0-1]",
                f"--config-path={confdir}",
                *options,
                "sh",
                "-c",
                f'echo "$FLUX_URI" >{urifile}.tmp && mv {urifile}.tmp {urifile} && '
                "exec cat >/dev/null",
            ],
            stdin=subprocess.PIPE,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=env,
        )

        def started():
            if self.proc.poll() is not None:
                raise RuntimeError(f"flux start failed: {self.output()}")
            return os.path.exists(urifile)

        wait_until(started, 60, "flux start writing its URI")
        self.uri = open(urifile).read().strip()

    def output(self):
        self.log.flush()
        return open(self.log.name).read()

    def stop(self):
        """End the instance; its exit code (0 when nothing was left behind)."""
        self.proc.stdin.close()
        try:
            return self.proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


class Service:
    """Stands in for the rsa module: takes notifications, calls the agent."""

    def __init__(self, uri, topic="rsa.pool-event"):
        import flux
        import flux.constants

        self.h = flux.Flux(uri)
        self.topic = topic
        self.events = []
        self.rank = None
        self.h.service_register(topic.split(".")[0]).get()
        self.watcher = self.h.msg_watcher_create(
            self._take, flux.constants.FLUX_MSGTYPE_REQUEST, topic
        )
        self.watcher.start()

    def _take(self, h, watcher, msg, arg):
        self.events.append((time.monotonic(), msg.payload))
        h.respond(msg, {})
        if self._until is not None and self._until():
            h.reactor_stop()

    _until = None

    def pump(self, seconds):
        """Take notifications for ``seconds``."""
        self.wait(lambda: False, seconds, quiet=True)

    def wait(self, pred, timeout=30.0, quiet=False):
        """Run the reactor until ``pred()`` holds; fail after ``timeout``."""
        if pred():
            return True
        self._until = pred
        timer = self.h.timer_watcher_create(timeout, lambda h, *a: h.reactor_stop())
        timer.start()
        try:
            self.h.reactor_run()
        finally:
            timer.stop()
            self._until = None
        if not pred() and not quiet:
            raise AssertionError(
                f"not seen within {timeout}s; notifications: "
                f"{[p for _, p in self.events]}"
            )
        return pred()

    def poll(self, pred, timeout=30.0, every=0.1):
        """Take notifications until ``pred()`` (e.g. asking the agent) holds."""
        deadline = time.monotonic() + timeout
        while not pred():
            if time.monotonic() > deadline:
                raise AssertionError(f"not true within {timeout}s")
            self.pump(every)
        return True

    def seen(self, kind, **match):
        return [
            p
            for _, p in self.events
            if p.get("kind") == kind and all(p.get(k) == v for k, v in match.items())
        ]

    def when(self, kind, **match):
        return [
            t
            for t, p in self.events
            if p.get("kind") == kind and all(p.get(k) == v for k, v in match.items())
        ]

    def wait_for(self, kind, timeout=30.0, **match):
        self.wait(lambda: self.seen(kind, **match), timeout)
        return self.seen(kind, **match)[0]

    def call(self, _method, **payload):
        return self.h.rpc(f"rsa-pool.{_method}", payload, nodeid=self.rank).get()

    def close(self):
        self.watcher.stop()
        self.h.service_unregister(self.topic.split(".")[0]).get()


class Pool:
    """An instance, the pool launched in it, and the stand-in service.

    ``statedir`` and ``options`` go to the Instance; ``workdir`` reuses the
    RAM-disk root of an earlier Pool (a restarted instance)."""

    def __init__(self, statedir=None, options=(), workdir=None, **policy):
        from flux_rsa.core.config import Policy

        if workdir is None:
            workdir = tempfile.mkdtemp(prefix="rsa-pool-test-")
            os.chmod(workdir, 0o755)
        self.workdir = workdir
        self.root = os.path.join(self.workdir, "ramdisks")
        # RAM disks served to compute nodes on loopback, on ports of this
        # pool's own (below the kernel's ephemeral ports); where GlusterFS
        # is missing, compute nodes would see them here ([rsa] attach = site)
        ports = 20000 + random.randrange(120) * 100
        defaults = dict(
            node_capacity=64 * MiB,
            granule=4 * MiB,
            # span-fill 0: these pools have nodes of 64M, too small for the
            # headroom of a RAM disk over two (the site's span-fill is run
            # by the sharness tests, on t/rsa-instance's nodes of 128M)
            span_fill=0,
            ramdisk_root=self.root,
            pool_cores=8,
            stage_workers=2,
            provider="tmpfs",
            fs_host="127.0.0.1",
            fs_ports=f"{ports}-{ports + 99}",
            attach="export" if gluster.installed() else "site",
        )
        self.policy = Policy(**{**defaults, **policy})
        self.before_launch()
        self.instance = Instance(self.workdir, statedir, options)
        self.service = Service(self.instance.uri)
        self.h = self.service.h
        self.launch()

    def launch(self):
        """Launch the pool and wait for pool-ready."""
        from flux_rsa.pool import launch

        # as in a broker, where `flux` has put its bin directory on PATH
        env = dict(
            os.environ, PATH=f"{os.environ.get('PATH', '')}:{os.path.dirname(FLUX)}"
        )
        t0 = time.monotonic()
        self.jobid = launch.launch(self.h, self.policy, env=env)
        self.service.wait_for("pool-ready", timeout=60, pool=self.jobid)
        self.startup = time.monotonic() - t0
        self.info = launch.ready_info(self.h)
        self.service.rank = self.info["rank"]

    def before_launch(self):
        """Subclasses prepare the RSA nodes here."""

    def pool_uri(self):
        return self.info["uri"]

    def in_pool(self, *args):
        """Run a flux command inside the pool instance."""
        env = dict(os.environ, FLUX_URI=self.pool_uri())
        return subprocess.run(
            [FLUX, *args], env=env, capture_output=True, text=True, timeout=60
        )

    def stop_pool(self, keep=None):
        """Stop the pool in order (``keep``: [{jobid, gen}]); its result."""
        from flux_rsa.pool import launch

        future = launch.shutdown_async(self.h, self.jobid, keep or ())
        future.then(lambda f: self.h.reactor_stop())
        self.h.reactor_run()
        return future.get_info()

    def shutdown(self, keep=None):
        """Stop the pool in order and the instance; (pool result, flux start rc)."""
        result = self.stop_pool(keep)
        self.service.close()
        rc = self.instance.stop()
        return result, rc

    def cleanup(self):
        # what a pool killed mid-test left mounted (an RSA node's image
        # store is unmounted by the pool's own end, which a lost pool skips)
        for path in sorted(mounts_under(self.workdir, stores=True), reverse=True):
            subprocess.run(["umount", "-l", path], capture_output=True)
        for record in gluster.processes_in(self.workdir):
            gluster.stop_process(record)
        shutil.rmtree(self.workdir, ignore_errors=True)


class Lives:
    """The lives of one instance (its content store in a state directory)
    and the pool launched in each, for tests that keep RAM disks across a
    restart; ``close`` leaves nothing behind, kept or not."""

    def __init__(self, **policy):
        self.workdir = tempfile.mkdtemp(prefix="rsa-pool-test-")
        os.chmod(self.workdir, 0o755)
        self.statedir = os.path.join(self.workdir, "state")
        self.owner = owner_account()
        self.policy = policy
        self.pool = None

    def start(self):
        """Start (or restart) the instance and launch a pool in it."""
        self.pool = Pool(statedir=self.statedir, workdir=self.workdir, **self.policy)
        return self.pool

    def close(self):
        if self.pool is not None and self.pool.instance.proc.poll() is None:
            self.pool.shutdown()
        root = os.path.join(self.workdir, "ramdisks")
        for name in sorted(os.listdir(root)) if os.path.isdir(root) else []:
            # whatever a failed test left, kept or not: unmounted and removed
            subprocess.run(
                [
                    "/usr/bin/python3",
                    "-m",
                    "flux_rsa.ramdisk",
                    "discard",
                    os.path.join(root, name),
                ],
                capture_output=True,
                env=dict(os.environ, PYTHONPATH=PYPATH),
            )
        for record in gluster.processes_in(self.workdir):
            gluster.stop_process(record)
        if self.pool is not None:
            self.pool.cleanup()


def mounts_under(path, stores=False):
    """Mounts under ``path``; the RSA nodes' image stores (the pool's own,
    there for as long as it runs) only with ``stores``."""
    with open("/proc/mounts") as f:
        mounts = [line.split()[1] for line in f if line.split()[1].startswith(path)]
    return [m for m in mounts if stores or "/.store-" not in m]


def store_servers(root):
    """Process records of the image stores' servers under ``root``."""
    found = []
    for entry in os.listdir(root):
        if entry.startswith(".store-"):
            found += gluster.processes_in(os.path.join(root, entry))
    return found


def ramdisks_in(root):
    """What is under the RAM-disk root but the pool's image stores."""
    return sorted(e for e in os.listdir(root) if not e.startswith(".store-"))
