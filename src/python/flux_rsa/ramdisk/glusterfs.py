"""The parallel RAM disk: one GlusterFS volume over the reservation's RSA
nodes, started and stopped per job (no glusterd, no peer pool).

On an RSA node, the holder task ``i`` of reservation NAME keeps a brick:

    ROOT/NAME.b<i>/            tmpfs of this node's share, root-only (0700)
        .rsa-ramdisk           marker (kind "brick", the server's pid)
        brick/                 the files, served by glusterfsd on PORT+i
        brick.vol, brick.log   (0600: they name the volume's secret)

and the first task also mounts the whole volume for the stager:

    ROOT/NAME/                 the namespace: marker underneath (kind
                               "volume", the client's pid), glusterfs on top
        in/ out/               the job owner's areas (0700)
    ROOT/NAME.b0/client.vol, client.log

A compute node of the job attaches (``attach``) at MOUNT_ROOT/NAME with
the volume's servers and secret, keeping its client's files in
MOUNT_ROOT/NAME.client/ (root-only); ``mounts.detach`` unmounts it when
the last rank of the job on that node has detached.

Servers and clients run in sessions of their own: a signal meant for the
holder (forwarded by flux-imp to its process group) never reaches them,
so the holder stops them in order (clients, then servers, then tmpfs).
Everything started is recorded in a marker, so a sweep can stop what a
dead holder left behind.
"""

import os
import shutil
import signal
import socket
import subprocess
import time

from flux_rsa.ramdisk import mounts, volfiles
from flux_rsa.ramdisk.hold import unblock_signals

SBIN = "/usr/sbin:/usr/bin:/sbin:/bin"
#: a brick or a mount must come up within this many seconds
START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0
CONNECTED = "Connected, attached to remote volume"


class GlusterError(Exception):
    pass


def program(name):
    found = shutil.which(name, path=os.environ.get("PATH", "") + ":" + SBIN)
    if found is None:
        raise GlusterError(f"{name} is not installed on this node (Debian: glusterfs-server "
                           "on RSA nodes, glusterfs-client on RSA and compute nodes)")
    return found


def installed():
    """True when this node can serve and mount GlusterFS volumes."""
    try:
        program("glusterfsd")
        program("glusterfs")
    except GlusterError:
        return False
    return True


# --- processes ---------------------------------------------------------------


def starttime(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    return int(stat[stat.rindex(")") + 2:].split()[19])


def process_record(proc):
    return {"pid": proc.pid, "starttime": starttime(proc.pid)}


def _spawn(argv):
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True, close_fds=True,
                            preexec_fn=unblock_signals)


def stop_process(record, timeout=STOP_TIMEOUT):
    """Stop the process a marker recorded (SIGTERM, then SIGKILL), if it
    is still that process."""
    pid = record.get("pid") if isinstance(record, dict) else None
    if not isinstance(pid, int) or starttime(pid) != record.get("starttime"):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while starttime(pid) == record.get("starttime") and not _reaped(pid):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            deadline = time.monotonic() + timeout
        time.sleep(0.02)


def processes_in(workdir):
    """Records of the brick servers and clients whose files are in
    ``workdir`` (their command line names its volume file), found in /proc:
    a holder killed between starting one and recording it in the marker
    leaves one the marker does not name."""
    prefix = workdir.rstrip("/") + "/"
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as f:
                argv = f.read().decode(errors="replace").split("\0")
        except OSError:
            continue
        if os.path.basename(argv[0]) in ("glusterfs", "glusterfsd") and \
                any(arg.startswith(prefix) for arg in argv[1:]):
            pid = int(entry.name)
            found.append({"pid": pid, "starttime": starttime(pid)})
    return found


def _stopping():
    """True when the holder was told to stop while it builds (it blocks
    its stop signals then, so they wait as pending): building on would
    only be undone, and too late if the job kills it first."""
    return bool(signal.sigpending() & {signal.SIGTERM, signal.SIGINT, signal.SIGHUP})


def _reaped(pid):
    """Collect our own child when it has exited (a zombie counts as gone)."""
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == pid
    except ChildProcessError:
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] == "Z"
        except OSError:
            return True


def _log_tail(path, lines=3):
    try:
        with open(path, errors="replace") as f:
            tail = [line.strip() for line in f.readlines()[-50:] if " E " in line or "] E [" in line]
    except OSError:
        return ""
    return " / ".join(tail[-lines:])


# --- mounts ------------------------------------------------------------------


def mounted(path, fstype="fuse.glusterfs"):
    """True when a file system of ``fstype`` is mounted at ``path``."""
    return mounts.mounted(path, fstype)


def unmount(path):
    """Unmount the glusterfs client at ``path`` (lazily when busy); its
    client process exits by itself."""
    from flux_rsa.ramdisk.providers import umount

    while mounted(path):
        umount(path)


# --- bricks (on each RSA node) ----------------------------------------------


def brick_path(root, name, index):
    return os.path.join(root, f"{name}.b{index}")


def start_brick(workdir, index, bind, port, volume):
    """Serve ``workdir/brick`` as brick ``index`` of ``volume`` on
    ``bind``:``port``; return the server once it listens."""
    glusterfsd = program("glusterfsd")
    if _listening(bind, port):
        raise GlusterError(f"port {port} on {bind} is in use by another program (give "
                           "flux-rsa a range of its own: [rsa] fs-ports)")
    os.makedirs(os.path.join(workdir, "brick"), mode=0o755, exist_ok=True)
    volfile = os.path.join(workdir, "brick.vol")
    mounts.write_private(volfile, volfiles.brick(index, os.path.join(workdir, "brick"), bind,
                                                 port, volume.user, volume.secret))
    log = os.path.join(workdir, "brick.log")
    mounts.write_private(log, "")
    return _start([glusterfsd, "-N", "-f", volfile, "-l", log, "--process-name", "rsa-brick"],
                  lambda: _listening(bind, port), log,
                  exited=f"brick server on port {port} exited",
                  late=f"brick server did not listen on {bind}:{port}",
                  stopped="stopped before the brick server listened")


def _start(argv, ready, log, exited, late, stopped, undo=None):
    """Start a server or client (``argv``) and return it once ``ready()``.
    GlusterError when it exits (``exited`` and its log's last errors), is
    not ready within START_TIMEOUT (``late``), or the holder is told to
    stop meanwhile (``stopped``); in the last two it is stopped and
    ``undo()`` run."""
    proc = _spawn(argv)
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        # a stop is looked at first: a server that came up while this
        # process was not running (a loaded node) is stopped all the same
        why = None
        if _stopping():
            why = stopped
        elif ready():
            return proc
        elif proc.poll() is not None:
            raise GlusterError(f"{exited} ({_log_tail(log) or 'see ' + log})")
        elif time.monotonic() > deadline:
            why = f"{late} within {START_TIMEOUT:.0f}s"
        if why is not None:
            stop_process(process_record(proc))
            if undo is not None:
                undo()
            raise GlusterError(why)
        time.sleep(0.02)


def _listening(host, port):
    try:
        with socket.create_connection((host, int(port)), timeout=0.5):
            return True
    except OSError:
        return False


def wait_servers(servers, timeout=START_TIMEOUT):
    """Until every "host:port" in ``servers`` accepts connections."""
    deadline = time.monotonic() + timeout
    for server in servers:
        host, port = server.rsplit(":", 1)
        while not _listening(host, port):
            if _stopping():
                raise GlusterError("stopped while waiting for the bricks")
            if time.monotonic() > deadline:
                raise GlusterError(f"the brick at {server} did not answer within {timeout:.0f}s "
                                   "(its holder task failed, or the address is wrong: [rsa] fs-host)")
            time.sleep(0.05)


# --- the namespace (a client mount) ------------------------------------------


def mount(volume, mountpoint, workdir):
    """Mount ``volume`` at ``mountpoint`` (an existing directory), keeping
    its volume file and log in ``workdir``; return the client process once
    every brick is connected and the volume's size is whole."""
    glusterfs = program("glusterfs")
    wait_servers(volume.servers)
    volfile = os.path.join(workdir, "client.vol")
    mounts.write_private(volfile, volfiles.client(volume))
    log = os.path.join(workdir, "client.log")
    mounts.write_private(log, "")
    # nosuid, nodev: nothing on a RAM disk may raise privileges where it is
    # mounted (root mounts it; its files come from servers over the network)
    # never look into the mount before every brick took us: an access to a
    # mount whose bricks refused the client hangs
    return _start([glusterfs, "-N", "-f", volfile, "-l", log, "--fuse-mountopts=nosuid,nodev",
                   "--fs-display-name", f"rsa:{volume.name}", "--process-name", "rsa-client",
                   mountpoint],
                  lambda: mounted(mountpoint) and _count(log, CONNECTED) >= len(volume.servers),
                  log, exited=f"mounting the volume at {mountpoint} failed",
                  late=f"the volume was not mounted at {mountpoint} with all "
                       f"{len(volume.servers)} bricks",
                  stopped="stopped before the volume was mounted",
                  undo=lambda: unmount(mountpoint))


def _count(path, text):
    try:
        with open(path, errors="replace") as f:
            return f.read().count(text)
    except OSError:
        return 0


# --- attach (on the job's compute nodes) ---------------------------------


def attach(volume, mountpoint, rank):
    """Mount the volume at ``mountpoint`` on this node for job rank
    ``rank`` (idempotent; ranks of one job on one node share the mount,
    and ``mounts.detach`` unmounts it when the last one leaves)."""

    def mount_once(workdir):
        if not mounted(mountpoint):
            mount(volume, mountpoint, workdir)

    mounts.attach(mountpoint, rank, {"provider": "glusterfs"}, mount_once)
