"""Provider ``tmpfs``: a RAM disk on one RSA node, exported to the job's
compute nodes.

On the RSA node the RAM disk is a tmpfs of the reserved size at
``ROOT/NAME``; the stager reads and writes it directly (no network in
its way).  Compute nodes reach it over GlusterFS (``[rsa] attach =
"export"``, the default): the holder serves the tmpfs as the one brick of
a volume of its own (``ramdisk.gluster``; its volume file and log in the
root-only ``ROOT/NAME.srv``), and each compute node mounts that volume at
``MOUNT_ROOT/NAME``.  Files the stager writes straight into the tmpfs are
taken up by the server at their first lookup; files dropped straight from
it (the inputs, at the switch) leave GlusterFS handles behind, which
``purged`` removes.  With ``[rsa] attach = "site"`` nothing is served:
the site shows ``ROOT/NAME`` on its compute nodes under the same path by
its own means, and compute nodes only check that they see it.

Kept through a pool restart: the server stops (it keeps no state), the
tmpfs stays; an adopting holder grows it if need be and serves it again.

A job on one compute node gets an image instead (``Task.image``,
``imagedisk``): no tmpfs and no server of its own, but a file in its RSA
node's image store, which this provider serves over GlusterFS for as long
as the pool runs (``serve_store``), and which each compute node reaches
through one client it keeps (``transports``).
"""

import contextlib
import os

from flux_rsa.ramdisk import (
    disks,
    gluster,
    image,
    imagedisk,
    layout,
    mounts,
    store,
    sysmount,
    volfiles,
)
from flux_rsa.ramdisk.providers.base import Provider, ProviderError

SERVER_DIR = ".srv"


def server_dir(path):
    """Where the server of the RAM disk at ``path`` keeps its files."""
    return path + SERVER_DIR


def login(task):
    """The volume compute nodes mount (one brick: this node's tmpfs)."""
    jobid, gen = task.ids()
    host = task.fs_host.format(
        host=task.host or (task.nodes[0] if task.nodes else "localhost")
    )
    return volfiles.Volume(
        task.disk_name,
        (f"{host}:{task.port}",),
        volfiles.user_of(jobid, gen),
        task.secret,
    )


class Tmpfs(Provider):
    name = "tmpfs"

    def create(self, task):
        if task.index != 0:
            return None
        path = task.path
        if task.image:
            home = store.path_of(task.root, task.host)
            store.serving(task.root, task.host)
            names = imagedisk.image_names(task.disk_name, task.image)
            files = [store.image_of(home, name) for name in names]
            marker = layout.new_marker(
                task.disk_name,
                self.name,
                task.size,
                task.owner,
                *task.ids(),
                kind=imagedisk.KIND,
                image=files[0],
                host=task.host,
                **({"images": files} if len(files) > 1 else {}),
            )
            # (the reservation shared evenly by the job's compute nodes)
            return imagedisk.build(path, marker, task.size // len(files))
        marker = layout.new_marker(
            task.disk_name, self.name, task.size, task.owner, *task.ids()
        )
        disks.build(
            path, marker, lambda: sysmount.mount_tmpfs(path, task.size), areas=True
        )
        if task.port is not None:
            self._serve(task, path)
        return path

    def _serve(self, task, path):
        """Serve the tmpfs at ``path`` to compute nodes; its record goes
        into the marker (a sweep stops it after a holder that died)."""
        workdir = server_dir(path)
        try:
            if os.path.lexists(workdir):
                layout.remove(workdir)
            os.mkdir(workdir, 0o700)
            record = gluster.serve(path, workdir, 0, login(task))
            marker = layout.read_marker(path)
            layout.mark_on_top(path, {**marker, "server": record})
        except (OSError, gluster.GlusterError) as exc:
            try:
                disks.destroy(path)
            except layout.RamdiskError:
                pass
            raise layout.RamdiskError(
                f"cannot serve {path} to compute nodes: {exc}"
            ) from None

    def volume(self, task, path):
        marker = layout.read_marker(path)
        if imagedisk.is_image(marker):
            names = [os.path.basename(f) for f in imagedisk.image_paths(marker)]
            return {
                "provider": self.name,
                "owner": task.owner,
                "image": names[0],
                **({"images": names} if len(names) > 1 else {}),
                "store": True,
                **({"writeback": task.writeback} if task.writeback is not None else {}),
                **imagedisk.served_by(path),
            }
        if task.port is None:
            return {"provider": self.name, "owner": task.owner}
        vol = login(task)
        return {
            "provider": self.name,
            "owner": task.owner,
            "user": vol.user,
            "servers": list(vol.servers),
            "secret": vol.secret,
        }

    def destroy(self, path, marker):
        if imagedisk.is_image(marker):
            imagedisk.remove(path, marker)
            # removed on the store's brick itself: GlusterFS's handles of
            # the image (a compute node's client made one when it looked it
            # up) would keep all its memory taken, and the store would fill
            for brick in {os.path.dirname(f) for f in imagedisk.image_paths(marker)}:
                if os.path.isdir(os.path.join(brick, gluster.HANDLES)):
                    gluster.forget_orphans(brick)
            return
        _stop_server(path, marker)
        sysmount.umount_all(path)

    def resize(self, path, size):
        if imagedisk.is_image(layout.read_marker(path)):
            imagedisk.grow(path, size)
        else:
            sysmount.resize_tmpfs(path, size)

    def keep(self, task, paths):
        for path in paths:
            _stop_server(path, layout.read_marker(path) or {})
        return super().keep(task, paths)

    def adopt(self, task):
        path = super().adopt(task)
        if task.port is not None and not imagedisk.is_image(layout.read_marker(path)):
            self._serve(task, path)
        return path

    def purged(self, ramdisk):
        if os.path.isdir(os.path.join(ramdisk, gluster.HANDLES)):
            gluster.forget_orphans(ramdisk)

    def before_sweep(self, path):
        """A server directory whose RAM disk is gone (a holder killed
        between the two): stop what runs from it and remove it."""
        if path.endswith(SERVER_DIR) and not os.path.lexists(path[: -len(SERVER_DIR)]):
            gluster.stop_all([], path)
            layout.remove(path)

    def attach(self, mountpoint, rank, values):
        if values.get("SERVERS") is None:
            return  # [rsa] attach = "site": the site shows it here
        if values.get("IMAGE") is not None:
            self._attach_image(mountpoint, rank, values)
            return
        gluster.attach(mountpoint, rank, values, self.name)

    def _attach_image(self, mountpoint, rank, values):
        transports = self.transports(os.path.dirname(mountpoint))
        mounts.attach(
            mountpoint,
            rank,
            {"provider": self.name},
            lambda workdir: imagedisk.attach(
                transports, values, mountpoint, values.get("HOST"), rank
            ),
        )

    def detach(self, mountpoint, how, rank):
        if how.get("image"):
            imagedisk.detach(mountpoint, how)
            return
        gluster.unmount(mountpoint)

    def remote(self, values, mountpoint, workdir):
        if values.get("IMAGE") is None:
            return gluster.mounted_for(values, mountpoint, workdir)
        return _remote_image(values, mountpoint, workdir)

    # --- the image store -----------------------------------------------------------

    def serve_store(self, root, host, size, port, secret, fs_host):
        def stop(path, marker):
            gluster.stop_all([marker.get("process")], path)

        def serve(directory, workdir, login):
            volume = volfiles.Volume(
                login["name"], tuple(login["servers"]), login["user"], login["secret"]
            )
            try:
                return gluster.serve(directory, workdir, 0, volume)
            except gluster.GlusterError as exc:
                raise ProviderError(str(exc)) from None

        return store.open_store(root, host, size, port, secret, fs_host, serve, stop)

    def close_store(self, root, host):
        def stop(path, marker):
            gluster.stop_all([marker.get("process")], path)

        return store.close_store(root, host, stop)

    def transports(self, root):
        def mount(login, mountpoint, workdir):
            volume = volfiles.Volume(
                "rsa-store",
                tuple(login["servers"]),
                login["user"],
                login["secret"],
            )
            try:
                gluster.mount(volume, mountpoint, workdir)
            except gluster.GlusterError as exc:
                raise ProviderError(
                    f"cannot reach the image store at {login['servers'][0]}: {exc}"
                ) from None

        return store.Transports(root, mount, gluster.mounted, gluster.unmount)


@contextlib.contextmanager
def _remote_image(values, mountpoint, workdir):
    """The image in another node's store: a client of that store (in this
    namespace only: it writes only the reader's use entry), then the image
    read-only over it, as a reader."""
    client = os.path.join(workdir, "store")
    os.mkdir(client, 0o700)
    with gluster.mounted_for(values, client, workdir, read_only=False):
        file = os.path.join(client, values["IMAGE"])
        use = image.Use(file, values.get("HOST"))
        name = use.take(False, image.me(values.get("HOST"), what=values.get("WHAT")))
        try:
            image.mount(file, mountpoint, read_only=True, direct=True)
            try:
                yield mountpoint
            finally:
                image.unmount(mountpoint)
        finally:
            use.give(name)


def _stop_server(path, marker):
    workdir = server_dir(path)
    gluster.stop_all([marker.get("server")], workdir)
    try:
        layout.remove(workdir)
    except OSError as exc:
        raise ProviderError(f"cannot remove {workdir}: {exc.strerror}") from None


PROVIDER = Tmpfs()
