"""What every RAM-disk provider provides: one documented base class.

A provider makes RAM disks on the RSA nodes and brings them to the job's
compute nodes, in steps run as root (through the privileged entry point
at a site):

===========  ==================================  =============================
step         where                               when
===========  ==================================  =============================
``create``   each RSA node of the reservation    the holder starts (task i of n)
``attach``   each compute node of the job        before the job starts on it
``detach``   each compute node of the job        after the job ends, before the
                                                 stage-out reads the RAM disk
``destroy``  each RSA node of the reservation    the holder ends (or a sweep
                                                 finds a dead holder's leftover)
``keep``     each RSA node                       the pool stops with its outputs
                                                 not home: the RAM disk outlives
                                                 it, for a later ``adopt``
===========  ==================================  =============================

The holder loop (``ramdisk.holder``) is the same for all: claim the
paths the task will make (``parts``), ``create`` (task 0 returns the RAM
disk, ``ROOT/NAME``, where the stager works), report it with its
``volume`` (what compute nodes need to attach it), wait for a signal,
then ``keep`` or ``stop``.  A provider's module imports no other
provider's; ``core.providercaps`` lists them and what each can do.
"""

from dataclasses import dataclass, field
from typing import Optional

from flux_rsa.ramdisk import disks, imagedisk, layout
from flux_rsa.ramdisk.layout import ProviderError


@dataclass(frozen=True)
class Task:
    """What holder task ``index`` of a reservation is told."""

    root: str
    name: str  # JOBID.GEN
    size: int  # bytes on this node
    owner: int
    jobid: Optional[int] = None
    gen: Optional[int] = None
    index: int = 0
    nodes: tuple = ()  # the reservation's RSA nodes, in order
    port: Optional[int] = None  # the first of its ports ([rsa] fs-ports)
    secret: Optional[str] = None  # the volume's login, when compute nodes mount it
    fs_host: str = "{host}"
    host: Optional[str] = None  # this node's name in the pool (for a kept marker)
    adopt: Optional[str] = None  # the kept RAM disk to take over
    image: int = 0  # file-system images, one per compute node of the job (0: none)
    writeback: Optional[int] = None  # what a compute node keeps unwritten of one
    extra: dict = field(default_factory=dict)

    @property
    def disk_name(self):
        """The RAM disk's name: the kept one's when adopting, else NAME."""
        return self.adopt.rstrip("/").rsplit("/", 1)[-1] if self.adopt else self.name

    @property
    def path(self):
        """The RAM disk, ROOT/NAME (the kept one when adopting)."""
        return layout.path_of(self.root, self.disk_name)

    def ids(self):
        if self.jobid is not None and self.gen is not None:
            return self.jobid, self.gen
        return layout.ids_from_name(self.name)


class Provider:
    """The interface, with what most providers do by default."""

    name = ""

    # --- on the RSA nodes -------------------------------------------------

    def parts(self, task):
        """The paths task ``task`` makes on its node, in the order they are
        destroyed (each is claimed first: a dead holder's leftover there is
        removed, anything else is refused)."""
        return [task.path] if task.index == 0 else []

    def create(self, task):
        """Make this node's share; return the RAM disk's path on task 0
        (None on the others).  On failure undo what was made and raise
        layout.RamdiskError."""
        raise NotImplementedError

    def volume(self, task, path):
        """What compute nodes are told to attach the RAM disk at ``path``
        (task 0): a dict of request values (``provider`` and the variables
        of RSA_OP=attach), or None when there is nothing to attach."""
        return {"provider": self.name, "owner": task.owner}

    def destroy(self, path, marker):
        """Give back what ``marker`` describes at ``path`` (a RAM disk or a
        part); the caller then removes the directory."""

    def stop(self, task, paths):
        """The holder ends: destroy what ``paths`` hold, in order; return
        the errors (one line each)."""
        errors = []
        for path in paths:
            try:
                disks.destroy(path)
            except layout.RamdiskError as exc:
                errors.append(str(exc))
        return errors

    def resize(self, path, size):
        """Grow the RAM disk at ``path`` to ``size`` bytes (an adopted
        reservation larger than the kept one)."""

    def keep(self, task, paths):
        """Let what ``paths`` hold outlive the holder (marked kept, on
        ``task.host``); return the kept marker of the first (on task 0,
        the RAM disk's)."""
        markers = [layout.keep(path, task.host) for path in paths]
        return markers[0] if markers else None

    def adopt(self, task):
        """Take over the kept RAM disk ``task.adopt`` (grown to
        ``task.size``); return its path on task 0."""
        path = task.path
        marker = layout.check_adopt(path, task.jobid, task.owner)
        try:
            if task.size > marker.get("size", 0):
                self.resize(path, task.size)
            layout.adopted(path, marker, max(task.size, marker.get("size", 0)))
        except (OSError, ProviderError) as exc:
            raise layout.RamdiskError(f"cannot adopt {path}: {exc}") from None
        return path

    def purged(self, ramdisk):
        """Files of the RAM disk at ``ramdisk`` were removed on the RSA
        node directly (the inputs dropped at the switch)."""

    def before_sweep(self, path):
        """A sweep is about to read the marker at ``path`` (any provider's):
        clear what would keep it from reading it."""

    def expected_bytes(self, ramdisk):
        """The bytes the RAM disk mounted at ``ramdisk`` must show when it
        is whole (checked around every stage), or None."""
        return None

    def check_whole(self, ramdisk):
        """Raise ProviderError unless every part of the RAM disk mounted at
        ``ramdisk`` answers (checked before and after every stage)."""

    def opened(self, ramdisk, write, what, reclaim=(), jobid=None, index=0, at=None):
        """A context in which a stage on this RSA node finds the RAM disk
        ``ramdisk`` there (or at ``at``), in the caller's own mount
        namespace: its image ``index`` is mounted for it
        (``imagedisk.opened``), anything else is there already."""
        return imagedisk.opened(
            ramdisk, write, what, reclaim, jobid, index=index, at=at
        )

    def images(self, ramdisk):
        """How many images a stage on this RSA node finds the RAM disk
        ``ramdisk`` made of (0: it is no image, or mounted here already)."""
        return imagedisk.count(ramdisk)

    def remote(self, values, mountpoint, workdir):
        """A context in which the RAM disk of another RSA node that
        ``values`` describe (a producer's, for the hand-off: ``SERVERS``,
        ``USER``, ``SECRET`` of its volume or store, and ``IMAGE`` when it
        is an image) is mounted read-only at ``mountpoint``, in the
        caller's own mount namespace, with what a client needs in
        ``workdir``."""
        raise ProviderError(
            f"provider {self.name} cannot reach another node's RAM disk"
        )

    def sees_own_writes_late(self, ramdisk):
        """True when the client that wrote files into the RAM disk mounted
        at ``ramdisk`` may show them with stale attributes (mtimes), so
        that a stage-in is verified through a client of its own
        (``mount_fresh``)."""
        return False

    def mount_fresh(self, ramdisk):
        """Mount another client of the RAM disk mounted at ``ramdisk`` over
        it, in the caller's own mount namespace; return the directory of
        its files, removed by the caller after the unmount."""
        raise NotImplementedError

    # --- on the compute nodes -------------------------------------------

    def attach(self, mountpoint, rank, values):
        """Make the RAM disk reachable at ``mountpoint`` for job rank
        ``rank``.  By default the site shows it there by its own means:
        nothing is mounted, the caller only checks it is the RAM disk."""

    def detach(self, mountpoint, how, rank):
        """Undo an attach (for the last rank of the job on this node)."""

    # --- the image store (providercaps: Caps.images) ----------------------------------

    def serve_store(self, root, host, size, port, secret, fs_host):
        """Serve this RSA node's image store (``store.open_store``) on
        ``port``; return its marker."""
        raise ProviderError(f"provider {self.name} keeps no image store")

    def close_store(self, root, host):
        """Stop serving this node's store; return the images left in it."""
        return []

    def transports(self, root):
        """This compute node's clients of the RSA nodes' stores (``store.Transports``)."""
        raise ProviderError(f"provider {self.name} keeps no image store")
