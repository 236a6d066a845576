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
"""

import os

from flux_rsa.ramdisk import disks, gluster, layout, sysmount, volfiles
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
        _stop_server(path, marker)
        sysmount.umount_all(path)

    def resize(self, path, size):
        sysmount.resize_tmpfs(path, size)

    def keep(self, task, paths):
        for path in paths:
            _stop_server(path, layout.read_marker(path) or {})
        return super().keep(task, paths)

    def adopt(self, task):
        path = super().adopt(task)
        if task.port is not None:
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
        gluster.attach(mountpoint, rank, values, self.name)

    def detach(self, mountpoint, how, rank):
        gluster.unmount(mountpoint)


def _stop_server(path, marker):
    workdir = server_dir(path)
    gluster.stop_all([marker.get("server")], workdir)
    try:
        layout.remove(workdir)
    except OSError as exc:
        raise ProviderError(f"cannot remove {workdir}: {exc.strerror}") from None


PROVIDER = Tmpfs()
