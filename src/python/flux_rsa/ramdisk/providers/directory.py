"""Provider ``dir``: a RAM disk that is a plain directory on one RSA node,
without a size limit and without root (an unprivileged test install).
Compute nodes see it where the site shows ``ramdisk-root`` (a directory
every node shares); they only check that they do."""

from flux_rsa.ramdisk import disks, layout
from flux_rsa.ramdisk.providers.base import Provider


class Directory(Provider):
    name = "dir"

    def create(self, task):
        if task.index != 0:
            return None
        marker = layout.new_marker(
            task.disk_name, self.name, task.size, task.owner, *task.ids()
        )
        return disks.build(task.path, marker, lambda: None, areas=True)


PROVIDER = Directory()
