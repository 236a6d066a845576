"""The machine, as a benchmark that adds to it sees it: commands that must
work, what was added undone in reverse order (even on failure or Ctrl-C),
children stopped, mounts removed, the work directory removed unless
something is still mounted in it.  Messages go to stderr, prefixed with
the running script's name (bench/NAME).
"""

import os
import signal
import subprocess
import sys

from benchlib.figures import MiB


def script():
    """bench/NAME, the running script."""
    return "bench/" + os.path.basename(sys.argv[0])


def say(*words):
    print(f"{script()}:", *words, file=sys.stderr, flush=True)


def run(cmd, **kw):
    """A system command that must work: its error says which and why."""
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: exit {r.returncode}: {r.stderr.strip()}")
    return r.stdout


class Undo:
    """What the benchmark added (mounts, servers, loop device, throttles,
    the instance), undone in reverse order; a step that fails is reported
    and the others still run.  Ctrl-C is ignored while undoing."""

    def __init__(self):
        self.steps = []

    def push(self, what, fn):
        self.steps.append((what, fn))

    def run(self):
        old = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            while self.steps:
                what, fn = self.steps.pop()
                try:
                    fn()
                except Exception as exc:  # noqa: BLE001 - report and go on
                    say(f"cleanup of {what} failed: {exc}")
        finally:
            signal.signal(signal.SIGINT, old)


def interrupt_on_signals():
    """SIGTERM and SIGHUP end the run like Ctrl-C, through the cleanup."""

    def handler(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGHUP, handler)


def stop_process(proc, what, timeout=15):
    """Ends a child we started (its own session): TERM, then KILL."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout)
    except subprocess.TimeoutExpired:
        say(f"{what} (pid {proc.pid}) ignored SIGTERM for {timeout}s: killing it")
        proc.kill()
        proc.wait(timeout)


def unmount(path):
    """umount, lazily when busy (a process of the test instance still in it)."""
    if not os.path.ismount(path):
        return
    r = subprocess.run(["umount", path], capture_output=True, text=True)
    if r.returncode != 0:
        say(f"umount {path}: {r.stderr.strip()}; detaching it lazily")
        run(["umount", "-l", path])


def mounts_under(path):
    prefix = path.rstrip("/") + "/"
    with open("/proc/self/mountinfo") as f:
        return [line.split()[4] for line in f if line.split()[4].startswith(prefix)]


#: what bench/thesis and bench/campaign run, and the Debian packages with them
GLUSTER_TOOLS = (
    ("glusterfsd", "glusterfs", "mkfs.xfs", "losetup"),
    "glusterfs-server glusterfs-client xfsprogs util-linux",
)


def preflight(tools=GLUSTER_TOOLS):
    """Root, and the programs TOOLS = (names, Debian packages) on PATH
    (or in /usr/sbin, /sbin, added to PATH)."""
    if os.geteuid() != 0:
        sys.exit(
            f"{script()}: needs root (loop device, mounts, blkio throttle, RAM disks)"
        )
    progs, packages = tools
    for prog in progs:
        if not any(
            os.access(os.path.join(d, prog), os.X_OK)
            for d in os.environ.get("PATH", "").split(":") + ["/usr/sbin", "/sbin"]
        ):
            sys.exit(f"{script()}: {prog} not found (Debian: {packages})")
    os.environ["PATH"] = os.environ.get("PATH", "") + ":/usr/sbin:/sbin"


def remove_work(work):
    """The work directory, unless something is still mounted in it."""
    left = mounts_under(work)
    if left:
        say(f"not removing {work}: still mounted there: {', '.join(left)}")
        return
    subprocess.run(["rm", "-rf", "--one-file-system", work], check=False)


def write_data(path, nbytes, block):
    """A job's task writes file PATH anew: NBYTES from BLOCK (a MiB of
    data), a MiB at a time, without fsync."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    left = nbytes
    while left > 0:
        left -= os.write(fd, block[: min(left, MiB)])
    os.close(fd)
