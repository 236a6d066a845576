"""Provider ``glusterfs``: one RAM disk over several RSA nodes, a GlusterFS
volume started and stopped per reservation (the thesis's PVFS over the
RSA nodes' RAM disks).  A reservation that fits one node gets a tmpfs
(``core.providercaps``: its ``one_node`` provider).

On RSA node ``i`` of the reservation, holder task ``i`` keeps a brick:

    ROOT/NAME.b<i>/            tmpfs of this node's share, root-only (0700)
        .rsa-ramdisk           marker (kind "brick", the server's record)
        brick/                 the files, served on PORT+i
        brick.vol, brick.log   (0600: they name the volume's secret)

and task 0 also mounts the whole volume where the stager works:

    ROOT/NAME/                 the namespace: marker underneath (kind
                               "volume"), the volume on top, with the
                               owner's in/ and out/
    ROOT/NAME.b0/client.vol, client.log

Compute nodes mount the volume at ``MOUNT_ROOT/NAME``.

Kept through a pool restart: the namespace is unmounted and every brick's
server stops (they keep no state); the bricks' tmpfs stay, marked kept.
An adopting holder runs on the same nodes: each task serves its brick
again, task 0 mounts the namespace again.
"""

import os
import tempfile

from flux_rsa.ramdisk import disks, gluster, layout, sysmount, volfiles
from flux_rsa.ramdisk.providers.base import Provider, ProviderError

BRICK = "brick"


def brick_path(root, name, index):
    return os.path.join(root, f"{name}.b{index}")


def volume_of(task):
    """The reservation's volume: brick ``i`` on ``task.nodes[i]``, reached at
    ``[rsa] fs-host`` on ``port + i``."""
    jobid, gen = task.ids()
    servers = tuple(
        f"{task.fs_host.format(host=node)}:{task.port + i}"
        for i, node in enumerate(task.nodes)
    )
    return volfiles.Volume(
        task.disk_name, servers, volfiles.user_of(jobid, gen), task.secret
    )


class GlusterFS(Provider):
    name = "glusterfs"

    def parts(self, task):
        brick = brick_path(task.root, task.disk_name, task.index)
        return [task.path, brick] if task.index == 0 else [brick]

    def create(self, task):
        volume = volume_of(task)
        brick = self._brick(task, volume)
        if task.index != 0:
            return None
        try:
            return self._namespace(task, volume, brick)
        except layout.RamdiskError:
            _stop([brick])
            raise

    def _brick(self, task, volume, marker=None):
        """This node's brick, served (``marker``: a kept one's, adopted)."""
        path = brick_path(task.root, task.disk_name, task.index)
        if marker is None:
            jobid, gen = task.ids()
            marker = layout.new_marker(
                os.path.basename(path),
                self.name,
                task.size,
                task.owner,
                jobid,
                gen,
                kind="brick",
                volume=task.disk_name,
                index=task.index,
                bricks=len(task.nodes),
            )

            def make():
                sysmount.mount_tmpfs(path, task.size, mode=0o700)
                os.mkdir(os.path.join(path, BRICK), 0o755)

            disks.build(path, marker, make, mode=0o700)
        try:
            record = gluster.serve(os.path.join(path, BRICK), path, task.index, volume)
            marker = layout.read_marker(path)
            layout.mark_on_top(path, {**marker, "server": record}, 0o700)
        except (OSError, gluster.GlusterError) as exc:
            _stop([path])
            raise layout.RamdiskError(f"cannot build brick {path}: {exc}") from None
        return path

    def _namespace(self, task, volume, brick, areas=True):
        """The whole volume mounted at ROOT/NAME (its client's files in
        this node's ``brick``), with the owner's areas."""
        path = task.path
        jobid, gen = task.ids()
        marker = layout.new_marker(
            task.disk_name,
            self.name,
            task.size * len(task.nodes),
            task.owner,
            jobid,
            gen,
            kind="volume",
            bricks=len(task.nodes),
        )

        def make():
            record = gluster.mount(volume, path, brick)
            brick_marker = layout.read_marker(brick)
            layout.mark_on_top(brick, {**brick_marker, "client": record}, 0o700)

        if os.path.lexists(path):
            layout.remove(path)  # a kept namespace's directory: mounted again
        return disks.build(path, marker, make, areas=areas)

    def volume(self, task, path):
        vol = volume_of(task)
        return {
            "provider": self.name,
            "owner": task.owner,
            "user": vol.user,
            "servers": list(vol.servers),
            "secret": vol.secret,
        }

    def destroy(self, path, marker):
        if marker.get("kind") == "volume":
            gluster.unmount(path)
            return
        gluster.stop_all([marker.get("client"), marker.get("server")], path)
        sysmount.umount_all(path)

    def stop(self, task, paths):
        return _stop(paths)

    def keep(self, task, paths):
        for path in paths:
            marker = layout.read_marker(path) or {}
            if marker.get("kind") == "volume" or gluster.mounted(path):
                gluster.unmount(path)
            else:
                gluster.stop_all([marker.get("client"), marker.get("server")], path)
        return super().keep(task, paths)

    def adopt(self, task):
        """Serve this node's kept brick again (task 0 also mounts the
        namespace again, as the kept one was)."""
        path = brick_path(task.root, task.disk_name, task.index)
        marker = layout.check_adopt(path, task.jobid, task.owner)
        if marker.get("index") != task.index or marker.get("bricks") != len(task.nodes):
            raise layout.RamdiskError(
                f"cannot adopt {path}: it is brick {marker.get('index')} of "
                f"{marker.get('bricks')}, the adopting holder's task {task.index} of "
                f"{len(task.nodes)} runs here"
            )
        size = max(task.size, marker.get("size", 0))
        if size > marker.get("size", 0):
            sysmount.resize_tmpfs(path, size)
        layout.adopted(path, marker, size)
        volume = volume_of(task)
        brick = self._brick(task, volume, marker)
        if task.index != 0:
            return None
        try:
            return self._namespace(task, volume, brick, areas=False)
        except layout.RamdiskError:
            _stop([brick])
            raise

    def before_sweep(self, path):
        """A namespace whose holder is gone is unmounted before its marker
        is read: its bricks may be gone too, and reading through such a
        mount can fail or hang."""
        if not gluster.mounted(path):
            return
        brick = layout.read_marker(
            brick_path(os.path.dirname(path), os.path.basename(path), 0)
        )
        if brick is None or not layout.holder_alive(brick):
            gluster.unmount(path)

    def expected_bytes(self, ramdisk):
        if not gluster.mounted(ramdisk):
            return None
        marker = self._brick0(ramdisk)
        return None if marker is None else marker["size"] * marker.get("bricks", 1)

    def check_whole(self, ramdisk):
        try:
            gluster.check_whole(ramdisk, self.expected_bytes(ramdisk))
        except (OSError, gluster.GlusterError) as exc:
            raise ProviderError(str(exc)) from None

    def remote(self, values, mountpoint, workdir):
        return gluster.mounted_for(values, mountpoint, workdir)

    def sees_own_writes_late(self, ramdisk):
        """A volume of several bricks is sharded, and GlusterFS 10.3's shard
        layer shows the client that wrote a file the mtime of its last
        write, not the one set after it (other clients see the right one)."""
        marker = self._brick0(ramdisk)
        return marker is not None and marker.get("bricks", 1) > 1

    def mount_fresh(self, ramdisk):
        """(in brick 0's directory, beside the namespace's own client)"""
        marker = self._brick0(ramdisk)
        brick = brick_path(os.path.dirname(ramdisk), os.path.basename(ramdisk), 0)
        workdir = tempfile.mkdtemp(prefix="fresh-client-", dir=brick)
        gluster.mount_file(
            os.path.join(brick, "client.vol"),
            ramdisk,
            workdir,
            os.path.basename(ramdisk),
            marker.get("bricks", 1),
        )
        return workdir

    @staticmethod
    def _brick0(ramdisk):
        marker = layout.read_marker(
            brick_path(os.path.dirname(ramdisk), os.path.basename(ramdisk), 0)
        )
        return marker if marker is not None and marker.get("kind") == "brick" else None

    def attach(self, mountpoint, rank, values):
        gluster.attach(mountpoint, rank, values, self.name)

    def detach(self, mountpoint, how, rank):
        gluster.unmount(mountpoint)


def _stop(paths):
    """Destroy the namespace first, then the brick; return the errors.  The
    namespace is unmounted before its marker is read: the marker on top
    lives on one brick, which another node may be stopping already."""
    errors = []
    for path in paths:
        try:
            if gluster.mounted(path):
                gluster.unmount(path)
            disks.destroy(path)
        except (OSError, layout.RamdiskError) as exc:
            errors.append(str(exc))
    return errors


PROVIDER = GlusterFS()
