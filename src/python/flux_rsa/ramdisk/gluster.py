"""GlusterFS as the engine that carries RAM disks over the network: brick
servers over RSA nodes' tmpfs, clients where the stager and the jobs run.
No glusterd and no peer pool: each server and client is started from a
volume file flux-rsa writes (``volfiles``), per RAM disk, on ports of its
own.  Used by the providers ``tmpfs`` (a one-node RAM disk exported to the
job's compute nodes) and ``glusterfs`` (one volume over several nodes).

Servers and clients run in sessions of their own with the holder's
blocked signals unblocked, so a signal meant for the holder never reaches
them and the holder stops them in order.  Every process started is
recorded in a marker (pid and start time), so whoever removes a RAM disk
(its holder, or a sweep after a holder that died) stops exactly those.
Servers keep no state of their own: the files, and GlusterFS's metadata
beside them (extended attributes, ``.glusterfs/``), live in the tmpfs, so
a server stopped at a pool restart is started again over the same brick
when a new holder adopts the RAM disk.
"""

import contextlib
import errno
import os
import time

from flux_rsa.ramdisk import mounts, signals, sysmount, volfiles
from flux_rsa.ramdisk.layout import ProviderError, starttime

SBIN = "/usr/sbin:/usr/bin:/sbin:/bin"
#: a brick or a mount must come up within this many seconds
START_TIMEOUT = 30.0
STOP_TIMEOUT = 10.0
CONNECTED = "Connected, attached to remote volume"
FUSE = "fuse.glusterfs"
#: GlusterFS's own directory in a brick: one link per file (its gfid handle)
HANDLES = ".glusterfs"


class GlusterError(ProviderError):
    pass


def program(name):
    import shutil

    found = shutil.which(name, path=os.environ.get("PATH", "") + ":" + SBIN)
    if found is None:
        raise GlusterError(
            f"{name} is not installed on this node (Debian: glusterfs-server "
            "on RSA nodes, glusterfs-client on RSA and compute nodes)"
        )
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


def process_record(proc):
    return {"pid": proc.pid, "starttime": starttime(proc.pid)}


def _spawn(argv):
    import subprocess

    return subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
        preexec_fn=signals.unblock,
    )


def stop_process(record, timeout=STOP_TIMEOUT):
    """Stop the process a marker recorded (SIGTERM, then SIGKILL), if it
    is still that process."""
    pid = record.get("pid") if isinstance(record, dict) else None
    if not isinstance(pid, int) or starttime(pid) != record.get("starttime"):
        return
    try:
        os.kill(pid, 15)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + timeout
    while starttime(pid) == record.get("starttime") and not _reaped(pid):
        if time.monotonic() > deadline:
            os.kill(pid, 9)
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
        if os.path.basename(argv[0]) in ("glusterfs", "glusterfsd") and any(
            arg.startswith(prefix) for arg in argv[1:]
        ):
            pid = int(entry.name)
            found.append({"pid": pid, "starttime": starttime(pid)})
    return found


def stop_all(records, workdir):
    """Stop the recorded processes, then any other started from ``workdir``."""
    for record in records:
        if record:
            stop_process(record)
    for record in processes_in(workdir):
        stop_process(record)


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
            tail = [
                line.strip()
                for line in f.readlines()[-50:]
                if " E " in line or "] E [" in line
            ]
    except OSError:
        return ""
    return " / ".join(tail[-lines:])


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
        if signals.stopping():
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


# --- servers -----------------------------------------------------------------


def address(server):
    """The address a "host:port" server listens on (its host resolved)."""
    import socket

    host = server.rsplit(":", 1)[0]
    try:
        return socket.gethostbyname(host)
    except OSError as exc:
        raise GlusterError(f"cannot resolve {host} ([rsa] fs-host): {exc}") from None


def _listening(host, port):
    import socket

    try:
        with socket.create_connection((host, int(port)), timeout=0.5):
            return True
    except OSError:
        return False


def serve(directory, workdir, index, volume):
    """Serve ``directory`` as brick ``index`` of ``volume`` (on
    ``volume.servers[index]``), its volume file and log in ``workdir``
    (root-only); return the server's record once it listens."""
    glusterfsd = program("glusterfsd")
    server = volume.servers[index]
    bind, port = address(server), int(server.rsplit(":", 1)[1])
    if _listening(bind, port):
        raise GlusterError(
            f"port {port} on {bind} is in use by another program (give "
            "flux-rsa a range of its own: [rsa] fs-ports)"
        )
    volfile = os.path.join(workdir, "brick.vol")
    sysmount.write_private(
        volfile,
        volfiles.brick(index, directory, bind, port, volume.user, volume.secret),
    )
    log = os.path.join(workdir, "brick.log")
    sysmount.write_private(log, "")
    proc = _start(
        [glusterfsd, "-N", "-f", volfile, "-l", log, "--process-name", "rsa-brick"],
        lambda: _listening(bind, port),
        log,
        exited=f"brick server on port {port} exited",
        late=f"brick server did not listen on {bind}:{port}",
        stopped="stopped before the brick server listened",
    )
    return process_record(proc)


def wait_servers(servers, timeout=START_TIMEOUT):
    """Until every "host:port" in ``servers`` accepts connections."""
    deadline = time.monotonic() + timeout
    for server in servers:
        host, port = server.rsplit(":", 1)
        while not _listening(host, port):
            if signals.stopping():
                raise GlusterError("stopped while waiting for the bricks")
            if time.monotonic() > deadline:
                raise GlusterError(
                    f"the brick at {server} did not answer within {timeout:.0f}s "
                    "(its holder task failed, or the address is wrong: [rsa] fs-host)"
                )
            time.sleep(0.05)


# --- clients -----------------------------------------------------------------


def mount(volume, mountpoint, workdir, read_only=False):
    """Mount ``volume`` at ``mountpoint`` (an existing directory), keeping
    its volume file and log in ``workdir``; return the client's record once
    every brick is connected."""
    wait_servers(volume.servers)
    volfile = os.path.join(workdir, "client.vol")
    sysmount.write_private(volfile, volfiles.client(volume))
    return mount_file(
        volfile, mountpoint, workdir, volume.name, len(volume.servers), read_only
    )


def mount_file(volfile, mountpoint, workdir, name, bricks, read_only=False):
    """Mount the volume ``name`` of ``bricks`` bricks that ``volfile``
    describes at ``mountpoint``, its log in ``workdir`` (``read_only``: a
    client that writes nothing); return the client's record once every
    brick is connected."""
    glusterfs = program("glusterfs")
    log = os.path.join(workdir, "client.log")
    sysmount.write_private(log, "")
    # nosuid, nodev: nothing on a RAM disk may raise privileges where it is
    # mounted (root mounts it; its files come from servers over the network);
    # never look into the mount before every brick took us: an access to a
    # mount whose bricks refused the client hangs
    proc = _start(
        [
            glusterfs,
            "-N",
            "-f",
            volfile,
            "-l",
            log,
            "--fuse-mountopts=nosuid,nodev",
            *(["--read-only"] if read_only else []),
            "--fs-display-name",
            f"rsa:{name}",
            "--process-name",
            "rsa-client",
            mountpoint,
        ],
        lambda: mounted(mountpoint) and _count(log, CONNECTED) >= bricks,
        log,
        exited=f"mounting the volume at {mountpoint} failed",
        late=f"the volume was not mounted at {mountpoint} with all " f"{bricks} bricks",
        stopped="stopped before the volume was mounted",
        undo=lambda: unmount(mountpoint),
    )
    return process_record(proc)


def mount_login(login, mountpoint, workdir, read_only=False):
    """Mount the volume a login reaches (``servers``, ``user``, ``secret``,
    and a ``name`` to show) at ``mountpoint``; return the client's record."""
    volume = volfiles.Volume(
        login.get("name", "rsa"),
        tuple(login["servers"]),
        login["user"],
        login["secret"],
    )
    return mount(volume, mountpoint, workdir, read_only)


def login_of(values):
    """The login in request ``values`` (SERVERS, USER, SECRET)."""
    return {
        "servers": list(values["SERVERS"]),
        "user": values["USER"],
        "secret": values["SECRET"],
    }


@contextlib.contextmanager
def mounted_for(values, mountpoint, workdir, read_only=True):
    """The volume request ``values`` reach, mounted (``read_only``) at
    ``mountpoint`` (its client's files in ``workdir``) while in the context."""
    try:
        mount_login(login_of(values), mountpoint, workdir, read_only=read_only)
    except (OSError, GlusterError) as exc:
        raise ProviderError(str(exc)) from None
    try:
        yield mountpoint
    finally:
        unmount(mountpoint)


def attach(mountpoint, rank, values, provider):
    """A compute node's attach of a volume (the RSA_OP=attach values NAME,
    SERVERS, USER, SECRET) at ``mountpoint`` for job rank ``rank``: one
    client shared by the job's ranks on the node (``mounts.attach``)."""
    volume = volfiles.Volume(
        values["NAME"], values["SERVERS"], values["USER"], values["SECRET"]
    )
    mounts.attach(
        mountpoint,
        rank,
        {"provider": provider},
        lambda workdir: mount(volume, mountpoint, workdir),
    )


def _count(path, text):
    try:
        with open(path, errors="replace") as f:
            return f.read().count(text)
    except OSError:
        return 0


def mounted(path):
    """True when a GlusterFS client is mounted at ``path``."""
    return sysmount.mounted(path, FUSE)


def unmount(path):
    """Unmount the client at ``path`` (lazily when busy); its process
    exits by itself."""
    while mounted(path):
        sysmount.umount(path)


# --- is it whole? ----------------------------------------------------------------


def check_whole(ramdisk, expected):
    """Raise GlusterError unless the whole ``expected`` bytes of the volume
    mounted at ``ramdisk`` answer: a volume with a brick down shows (and
    lists) only the other bricks' files, so a copy from it would look
    complete and be partial."""
    if expected is None:
        return
    st = os.statvfs(ramdisk)
    have = st.f_blocks * st.f_frsize
    if have < expected:
        raise GlusterError(
            f"{ramdisk}: only {have >> 20} MiB of its {expected >> 20} MiB answer: a brick "
            "server or its RSA node is down, so part of the RAM disk's files cannot be seen "
            "(what the other nodes hold is kept)"
        )


# --- a brick written directly -------------------------------------------------------


def forget_orphans(brick):
    """After files of an exported brick were removed directly (not through
    a client, e.g. the inputs dropped at the switch): remove GlusterFS's
    handles of those files, which would keep their memory taken.  A
    handle is a hard link ``.glusterfs/XX/YY/GFID`` (a symbolic link for a
    directory); one left as the file's only link (or pointing nowhere) is
    an orphan.  Returns how many were removed."""
    top = os.path.join(brick, HANDLES)
    removed = 0
    for first in _hex_dirs(top):
        for second in _hex_dirs(first):
            for entry in os.scandir(second):
                if not _is_gfid(entry.name):
                    continue
                try:
                    st = entry.stat(follow_symlinks=False)
                    orphan = (
                        entry.is_symlink() and not os.path.exists(entry.path)
                    ) or (entry.is_file(follow_symlinks=False) and st.st_nlink == 1)
                    if orphan:
                        os.unlink(entry.path)
                        removed += 1
                except FileNotFoundError:
                    continue
    return removed


def _hex_dirs(path):
    try:
        return [
            e.path
            for e in os.scandir(path)
            if len(e.name) == 2
            and _hexdigits(e.name)
            and e.is_dir(follow_symlinks=False)
        ]
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return []
        raise


def _hexdigits(text):
    return all(c in "0123456789abcdef" for c in text)


def _is_gfid(name):
    import uuid

    try:
        return str(uuid.UUID(name)) == name
    except ValueError:
        return False
