"""A RAM disk over several RSA nodes (provider ``glusterfs``): each holder
task keeps a brick on its node, the first also mounts the whole volume as
the RAM disk ``ROOT/NAME`` the stager uses (layout in ``glusterfs``).

``hold()`` is the holder task's life: build, report, wait for a signal,
stop in order.  ``destroy()`` removes what a marker describes (a brick or
a namespace), for a holder that ends and for a sweep after one that died.
A parallel RAM disk is not kept through a pool restart: its servers are
the holder's children.
"""

import os
import signal
import socket
import sys

from flux_rsa.ramdisk import glusterfs, layout, volfiles
from flux_rsa.ramdisk.glusterfs import GlusterError
from flux_rsa.ramdisk.providers import ProviderError, destroy_tmpfs, mount_tmpfs

PROVIDER = "glusterfs"
#: seconds a holder task that failed waits before it exits (see hold)
OUTPUT_LINGER = 1.0


def servers(nodes, fs_host, port):
    """The "host:port" of each brick: brick ``i`` on ``nodes[i]``, reached
    at ``fs_host`` (``{host}`` is the node's name) on ``port + i``."""
    return tuple(f"{fs_host.format(host=node)}:{port + i}" for i, node in enumerate(nodes))


def volume_user(jobid, gen):
    return f"rsa-{jobid}-{gen}"


def volume_of(name, jobid, gen, nodes, fs_host, port, secret):
    return volfiles.Volume(name, servers(nodes, fs_host, port), volume_user(jobid, gen), secret)


def _address(server):
    host = server.rsplit(":", 1)[0]
    try:
        return socket.gethostbyname(host)
    except OSError as exc:
        raise GlusterError(f"cannot resolve {host} ([rsa] fs-host): {exc}") from None


# --- build ------------------------------------------------------------------


def build_brick(root, name, index, size, owner, volume, jobid, gen):
    """This node's brick: a root-only tmpfs of ``size`` bytes at
    ROOT/NAME.b<index> with a brick server on it.  Returns (path, marker)."""
    path = glusterfs.brick_path(root, name, index)
    marker = layout.new_marker(os.path.basename(path), PROVIDER, size, owner, jobid, gen,
                               kind="brick", volume=name, index=index,
                               bricks=len(volume.servers))
    layout.claim(path)
    server = volume.servers[index]
    try:
        os.mkdir(path, 0o700)
        layout.write_marker(path, marker)
        mount_tmpfs(path, size, mode=0o700)
        layout.write_marker(path, marker)
        proc = glusterfs.start_brick(path, index, _address(server),
                                     int(server.rsplit(":", 1)[1]), volume)
        marker["server"] = glusterfs.process_record(proc)
        layout.write_marker(path, marker)
    except (OSError, ValueError, ProviderError, GlusterError) as exc:
        _undo(path)
        raise layout.RamdiskError(f"cannot build brick {path}: {exc}") from None
    return path, marker


def build_namespace(root, name, size, owner, volume, jobid, gen, brick):
    """The whole volume mounted at ROOT/NAME with the owner's areas; the
    client's files live in ``brick`` (this node's brick directory).
    Returns the path."""
    path = layout.path_of(root, name)
    marker = layout.new_marker(name, PROVIDER, size, owner, jobid, gen, kind="volume",
                               bricks=len(volume.servers))
    layout.claim(path)
    try:
        os.mkdir(path, 0o755)
        layout.write_marker(path, marker)
        client = glusterfs.mount(volume, path, brick)
        _record(brick, "client", glusterfs.process_record(client))
        os.chmod(path, 0o755)
        layout.write_marker(path, marker)  # on top too: purge and sweep read it
        layout.make_areas(path, marker)
    except (OSError, ProviderError, GlusterError) as exc:
        _undo(path)
        raise layout.RamdiskError(f"cannot build {path}: {exc}") from None
    return path


def _record(brick, key, value):
    marker = layout.read_marker(brick)
    marker[key] = value
    layout.write_marker(brick, marker)


def _undo(path):
    try:
        layout.destroy(path)
    except layout.RamdiskError:
        pass


# --- is it whole? --------------------------------------------------------------


def expected_bytes(ramdisk):
    """The bytes the bricks of the parallel RAM disk mounted at ``ramdisk``
    hold together (from its first brick's marker, on this node), or None
    when ``ramdisk`` is not one."""
    if not glusterfs.mounted(ramdisk):
        return None
    marker = layout.read_marker(glusterfs.brick_path(os.path.dirname(ramdisk),
                                                     os.path.basename(ramdisk), 0))
    if marker is None or marker.get("kind") != "brick":
        return None
    return marker["size"] * marker.get("bricks", 1)


def check_whole(ramdisk, expected):
    """Raise GlusterError unless every brick of the RAM disk answers: a
    volume with a brick down shows (and lists) only the other bricks'
    files, so a copy from it would look complete and be partial."""
    if expected is None:
        return
    st = os.statvfs(ramdisk)
    have = st.f_blocks * st.f_frsize
    if have < expected:
        raise GlusterError(
            f"{ramdisk}: only {have >> 20} MiB of its {expected >> 20} MiB answer: a brick "
            "server or its RSA node is down, so part of the RAM disk's files cannot be seen "
            "(what the other nodes hold is kept)")


# --- destroy ----------------------------------------------------------------


def destroy(path, marker):
    """Give back what ``marker`` describes at ``path`` (the caller removes
    the directory): a namespace is unmounted (its client exits); a brick's
    client and server are stopped and its tmpfs unmounted."""
    if marker.get("kind") == "volume":
        glusterfs.unmount(path)
        return
    if marker.get("client"):
        glusterfs.stop_process(marker["client"])
    if marker.get("server"):
        glusterfs.stop_process(marker["server"])
    for record in glusterfs.processes_in(path):
        glusterfs.stop_process(record)
    destroy_tmpfs(path)


# --- the holder task --------------------------------------------------------


def hold(root, name, size, owner, index, volume, jobid=None, gen=None,
         prog="flux-rsa-ramdisk"):
    """Holder task ``index``: keep this node's brick (the first task also
    the namespace) until signalled, then stop in order.  Signals are
    blocked by the caller."""
    from flux_rsa.ramdisk.hold import KEEP_SIGNAL, STOP_SIGNALS, report

    built = []
    try:
        brick, _ = build_brick(root, name, index, size, owner, volume, jobid, gen)
        built.append(brick)
        if index == 0:
            built.insert(0, build_namespace(root, name, size * len(volume.servers), owner,
                                            volume, jobid, gen, brick))
            report("built", path=built[0])
    except layout.RamdiskError as exc:
        failed = _stop(built, prog)
        if signal.sigpending() & STOP_SIGNALS:
            # told to stop while building (a cancel in BOOTING): building
            # stopped and what was made is gone, as the stop asked
            signal.sigtimedwait(STOP_SIGNALS, 0)
            return 1 if failed else 0
        print(f"{prog}: {exc}", file=sys.stderr, flush=True)
        # the job ends at the first failed task (exit-on-error), and a
        # line from another node's shell can be lost if that comes first:
        # give it a moment to reach the job's output (the holder's error)
        signal.sigtimedwait(STOP_SIGNALS | {KEEP_SIGNAL}, OUTPUT_LINGER)
        return 1
    sig = signal.sigwait(STOP_SIGNALS | {KEEP_SIGNAL})
    failed = _stop(built, prog)
    if sig == KEEP_SIGNAL and index == 0:
        print(f"{prog}: {built[0]} was not kept: a RAM disk spanning RSA nodes "
              "does not outlive its holder (provider glusterfs)", file=sys.stderr, flush=True)
        return 1
    return 1 if failed else 0


def _stop(paths, prog):
    """Destroy the namespace first, then the brick; report failures.  The
    namespace is unmounted before its marker is read: the marker on top
    lives on one brick, which another node may be stopping already."""
    failed = 0
    for path in paths:
        try:
            if glusterfs.mounted(path):
                glusterfs.unmount(path)
            layout.destroy(path)
        except ProviderError as exc:
            print(f"{prog}: cannot unmount {path}: {exc}", file=sys.stderr, flush=True)
            failed += 1
        except layout.RamdiskError as exc:
            print(f"{prog}: {exc}", file=sys.stderr, flush=True)
            failed += 1
    return failed


def unmount_stale(path):
    """Before a sweep reads what is at ``path``: unmount a volume whose
    holder is gone (its bricks may be gone too, and reading through such a
    mount can fail or hang), so the marker underneath can be read."""
    if not glusterfs.mounted(path):
        return
    brick = layout.read_marker(glusterfs.brick_path(os.path.dirname(path),
                                                    os.path.basename(path), 0))
    if brick is None or not layout.holder_alive(brick):
        glusterfs.unmount(path)
