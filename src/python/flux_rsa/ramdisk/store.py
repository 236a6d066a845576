"""The image store of an RSA node, and the compute nodes' ways into it.

Every RSA node keeps the images of its one-node RAM disks in one tmpfs,
its store, which it serves for as long as the pool runs (one server per
node, on one port, with one login), so that a compute node reaches every
image of that node through one client it mounts once and keeps
(``Transports``): a job's attach is then a loop device and a mount, a few
milliseconds, not a new network client.

On RSA node HOST:

    ROOT/.store-HOST/        tmpfs (root-only 0700), the node's images
        .rsa-store           who serves it and how it is reached: port,
                             login, secret (root-only), the serving process
        images/              served; NAME.img (0600) and NAME.img.use/
                             (who has it mounted: ``image.Use``)

On a compute node:

    MOUNT_ROOT/.stores/      root-only (0700): users never reach an image
        HOST-PORT/           a client of HOST's store, mounted once
        HOST-PORT.client/    its volume file and log, the login it used

How a store is served and a client mounted is the provider's business
(``serve`` and ``mount`` given by it); this module keeps the layout, the
store's identity across pool restarts (a store kept with images in it is
served again with the same port and login, so compute nodes' clients and
kept images carry on) and the bookkeeping.
"""

import errno
import fcntl
import json
import os

from flux_rsa.ramdisk import image, layout, sysmount

PREFIX = ".store-"
MARKER = ".rsa-store"
IMAGES = "images"
SUFFIX = ".img"
#: the login every store's clients present (the secret differs per store)
USER = "rsa-store"
#: the mount table's name for a store's tmpfs (a sweep leaves it alone)
SOURCE = "flux-rsa-store"
TRANSPORTS = ".stores"


def path_of(root, host):
    """The store of RSA node ``host`` under RAM-disk root ``root``."""
    layout.path_of(root, host)  # a host name is checked like a RAM disk's
    return os.path.join(root, PREFIX + host)


def images_dir(store):
    return os.path.join(store, IMAGES)


def image_of(store, name):
    """The image file of RAM disk ``name`` in ``store``."""
    return os.path.join(images_dir(store), name + SUFFIX)


def read(store):
    """The store's marker, or None when no store is there."""
    try:
        with open(os.path.join(store, MARKER)) as f:
            marker = json.load(f)
    except (OSError, ValueError):
        return None
    return marker if isinstance(marker, dict) and marker.get("host") else None


def _write(store, marker):
    sysmount.write_private(os.path.join(store, MARKER + ".tmp"), json.dumps(marker))
    os.rename(os.path.join(store, MARKER + ".tmp"), os.path.join(store, MARKER))


def login(marker):
    """What a client presents to reach the store ``marker`` describes."""
    return {"servers": [marker["server"]], "user": USER, "secret": marker["secret"]}


def serving(root, host):
    """The marker of the store serving on this node, or RamdiskError."""
    store = path_of(root, host)
    marker = read(store)
    if marker is None or not sysmount.mounted(store, "tmpfs"):
        raise layout.RamdiskError(
            f"the image store of RSA node {host} is not there ({store}): the pool "
            "runs one on every RSA node; see its log"
        )
    if not layout.holder_alive(marker):
        raise layout.RamdiskError(
            f"the image store of RSA node {host} ({store}) is not served: its "
            "process ended; the pool starts it again when it restarts"
        )
    return marker


def images(store):
    """Names of the RAM disks whose images are in ``store``."""
    try:
        entries = os.listdir(images_dir(store))
    except FileNotFoundError:
        return []
    return sorted(e[: -len(SUFFIX)] for e in entries if e.endswith(SUFFIX))


def open_store(root, host, size, port, secret, fs_host, serve, stop):
    """Make (or take up again) the store of this node, ``size`` bytes, and
    serve it with ``serve(directory, workdir, login)`` (the provider's; it
    returns the server's process record).  A store left by an earlier pool
    keeps its secret when it is served on the same port, so that clients
    mounted before carry on; a server of it still running (its pool was
    killed, not stopped) is stopped first with ``stop(store, marker)``.
    Returns its marker."""
    store = path_of(root, host)
    os.makedirs(root, mode=0o755, exist_ok=True)
    old = read(store) if sysmount.mounted(store, "tmpfs") else None
    if old is None and os.path.isdir(store):
        stop(store, {})  # (a server of a store whose tmpfs is gone)
    if old is not None and layout.holder_alive(old):
        raise layout.RamdiskError(
            f"the image store {store} is already served by process {old['pid']}"
        )
    try:
        if old is None:
            if os.path.lexists(store) and not sysmount.mounted(store):
                layout.remove(store)
            os.makedirs(store, mode=0o700, exist_ok=True)
            if not sysmount.mounted(store, "tmpfs"):
                sysmount.mount_tmpfs(store, size, mode=0o700, source=SOURCE)
            os.makedirs(images_dir(store), mode=0o700, exist_ok=True)
        else:
            stop(store, old)
            if old.get("port") == port:  # clients mounted before reach it again
                secret = old["secret"]
            if size > old.get("size", 0):
                sysmount.resize_tmpfs(store, size, source=SOURCE)
        server = f"{fs_host.format(host=host)}:{port}"
        marker = {
            "host": host,
            "port": port,
            "server": server,
            "secret": secret,
            "size": max(size, (old or {}).get("size", 0)),
            **layout.holder_fields(),
        }
        _write(store, marker)
        marker["process"] = serve(
            images_dir(store), store, {**login(marker), "name": f"store-{host}"}
        )
        _write(store, marker)
    except (OSError, layout.ProviderError) as exc:
        raise layout.RamdiskError(
            f"cannot serve the image store {store}: {exc}"
        ) from None
    return marker


def close_store(root, host, stop):
    """Stop serving this node's store (``stop(marker)``, the provider's);
    remove it when it holds no image (kept ones stay, for the next pool).
    Returns the names of the images left."""
    store = path_of(root, host)
    marker = read(store) or {}
    stop(store, marker)
    left = images(store)
    if not left:
        sysmount.umount_all(store)
        layout.remove(store)
    return left


def discard(path):
    """Remove the store at ``path`` and every image left in it (an admin's,
    or a test's, clean-up once no pool will use them); refused while it is
    served.  False when there is none."""
    marker = read(path)
    if marker is not None and layout.holder_alive(marker):
        raise layout.RamdiskError(
            f"cannot discard {path}: it is served by process {marker['pid']} "
            "(stop the pool first)"
        )
    if not os.path.lexists(path):
        return False
    sysmount.umount_all(path)
    layout.remove(path)
    return True


# --- compute nodes ------------------------------------------------------------------


def _identity(login):
    import hashlib

    text = json.dumps([login["servers"], login["user"], login["secret"]])
    return hashlib.sha256(text.encode()).hexdigest()


class Transports:
    """This compute node's clients of RSA nodes' stores, under ``root``
    (the mount root): each mounted once, on the first attach of an image
    of that store, and kept for the next (``leave`` unmounts them)."""

    def __init__(self, root, mount, mounted, unmount):
        self.dir = os.path.join(root, TRANSPORTS)
        self.mount = mount  # mount(login, mountpoint, workdir): the provider's client
        self.mounted = mounted  # mounted(mountpoint) -> bool
        self.unmount = unmount  # unmount(mountpoint)

    def _lock(self):
        os.makedirs(self.dir, mode=0o700, exist_ok=True)
        fd = os.open(os.path.join(self.dir, ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
        fcntl.flock(fd, fcntl.LOCK_EX)
        return fd

    def join(self, login):
        """The directory where this node sees the store ``login`` reaches
        (its client mounted now if it was not, or mounted again if the
        store came back with another login or the client died)."""
        server = login["servers"][0]
        name = server.replace(":", "-").replace("/", "_")
        path = os.path.join(self.dir, name)
        workdir = path + ".client"
        fd = self._lock()
        try:
            want = _identity(login)
            if self.mounted(path):
                same = _read_text(os.path.join(workdir, "identity")) == want
                if same and _answers(path):
                    return path
                # the store changed (its images are gone), or the client
                # died (the images mounted through it failed with it)
                self._drop(path, workdir)
            os.makedirs(path, mode=0o700, exist_ok=True)
            os.makedirs(workdir, mode=0o700, exist_ok=True)
            self.mount(login, path, workdir)
            sysmount.write_private(os.path.join(workdir, "identity"), want)
            return path
        finally:
            os.close(fd)

    def _drop(self, path, workdir):
        self.unmount(path)
        layout.remove(workdir)
        try:
            os.rmdir(path)
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                raise

    def leave(self):
        """Unmount every client no image mounted here still uses; return
        (left, kept): the servers left, and those still in use."""
        left, kept = [], []
        if not os.path.isdir(self.dir):
            return left, kept
        fd = self._lock()
        try:
            for entry in sorted(os.listdir(self.dir)):
                path = os.path.join(self.dir, entry)
                if entry.startswith(".") or entry.endswith(".client"):
                    continue
                if image.loops_over(path):
                    kept.append(entry)
                    continue
                if self.mounted(path):
                    self.unmount(path)
                self._drop(path, path + ".client")
                left.append(entry)
        finally:
            os.close(fd)
        try:
            if not [e for e in os.listdir(self.dir) if e != ".lock"]:
                layout.remove(self.dir)
        except OSError:
            pass
        return left, kept


def _answers(path):
    """True when the client mounted at ``path`` still answers (a client
    process that died leaves its mount failing every call)."""
    try:
        os.statvfs(path)
    except OSError as exc:
        if exc.errno in (errno.ENOTCONN, errno.ECONNABORTED):
            return False
        raise
    return True


def _read_text(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None
