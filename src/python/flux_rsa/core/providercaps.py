"""The RAM-disk providers: their names, what each can do, and where each
lives.  The one place that lists them (pure: no files, no processes, no
module loaded; the core, the request checks and the RAM-disk code read
it).

A provider is how a RAM disk comes to exist on the RSA nodes and reaches
the job's compute nodes.  Its code is one module of
``flux_rsa.ramdisk.providers`` (a ``Provider`` subclass, see
``providers.base``), loaded by name (``ramdisk.disks.provider``) when a
RAM disk is made, attached or removed; nothing else names a provider.
Adding one: write its module and add its ``Caps`` here.
"""

from dataclasses import dataclass, field

#: TCP ports (from [rsa] fs-ports) each reservation of provider command gets
COMMAND_PORTS = 8
#: the steps of provider command, each a site script ([rsa] command-STEP)
COMMAND_STEPS = ("create", "destroy", "attach", "detach")
#: a GlusterFS volume of several bricks cuts files into pieces of this size
#: (features/shard's block; 4 MiB is the least it accepts), each placed on
#: a brick by the hash of its name (cluster/distribute)
GLUSTER_SHARD = 4 << 20
#: a compute node keeps at most this much unwritten of a job's image unless
#: the site says otherwise ([rsa] image-writeback; the attach is told)
IMAGE_WRITEBACK = 128 << 20


@dataclass(frozen=True)
class Caps:
    """What a provider can do, and what it is told."""

    name: str
    module: str
    summary: str
    #: may one RAM disk span several RSA nodes (True, False, or the
    #: [rsa] key that says, e.g. "command-spans")
    spans: object = False
    #: can compute nodes mount it over the network (else they only check
    #: that they see it where the site shows it), and the [rsa] key that
    #: says whether they do ("attach": when it is "export"; another key:
    #: when it is set)
    exports: bool = False
    exported_by: str = "attach"
    #: does a RAM disk outlive a pool restart (kept, then adopted)?
    keeps: bool = True
    #: a spanning RAM disk's files go to the nodes by hash, in pieces of at
    #: most this many bytes (0: the engine balances them itself): each
    #: node is charged a headroom beyond its share (core.spread)
    piece: int = 0
    #: ports(nodes, exported): how many TCP ports from [rsa] fs-ports a
    #: holder over ``nodes`` RSA nodes takes
    ports: object = None
    #: does a holder get a volume secret (its clients must present it)?
    secret: bool = False
    #: the provider a one-node reservation of this one gets instead ("": itself)
    one_node: str = ""
    #: can a one-node RAM disk of it be a file-system image, which the job's
    #: compute node mounts itself (when it exports to compute nodes)?
    images: bool = False
    #: variables of RSA_OP=hold beyond the common ones: (needed, optional)
    hold_vars: tuple = ((), ())
    #: variables of RSA_OP=attach beyond the common ones: (needed, optional),
    #: and groups that come all together or not at all
    attach_vars: tuple = ((), ())
    attach_together: tuple = ()
    #: [rsa] keys only this provider uses (their prefix), those it needs,
    #: and pairs that come together
    config_prefix: str = ""
    config_needs: tuple = ()
    config_together: tuple = field(default_factory=tuple)

    def spans_with(self, policy):
        """May one RAM disk span RSA nodes, under ``policy``?"""
        if isinstance(self.spans, str):
            return bool(getattr(policy, self.spans.replace("-", "_")))
        return self.spans

    def exported(self, policy):
        """Do compute nodes mount its RAM disks, under ``policy``?"""
        if not self.exports:
            return False
        value = getattr(policy, self.exported_by.replace("-", "_"))
        return value == "export" if self.exported_by == "attach" else bool(value)

    def ports_for(self, nodes, policy):
        """TCP ports a holder over ``nodes`` RSA nodes takes."""
        return self.ports(nodes, self.exported(policy)) if self.ports else 0


def _gluster_ports(nodes, exported):
    """One brick server per node (port base + i); a one-node RAM disk has
    one only when it is exported."""
    return nodes if nodes > 1 or exported else 0


_LOGIN = ("USER", "SERVERS", "SECRET")

PROVIDERS = {
    caps.name: caps
    for caps in (
        Caps(
            "tmpfs",
            "flux_rsa.ramdisk.providers.tmpfs",
            "one RSA node: a tmpfs, exported to compute nodes over GlusterFS (a job "
            "on one compute node: an image in the node's store, which it mounts)",
            exports=True,
            ports=lambda nodes, exported: 1 if exported else 0,
            secret=True,
            images=True,
            hold_vars=(
                (),
                ("NODES", "PORT", "SECRET", "FS_HOST", "IMAGE", "WRITEBACK"),
            ),
            attach_vars=((), _LOGIN + ("IMAGE", "STORE", "JOBID", "WRITEBACK")),
            attach_together=(_LOGIN,),
        ),
        Caps(
            "dir",
            "flux_rsa.ramdisk.providers.directory",
            "one RSA node: a plain directory (unprivileged tests; shared file system)",
        ),
        Caps(
            "glusterfs",
            "flux_rsa.ramdisk.providers.glusterfs",
            "several RSA nodes: one GlusterFS volume over a tmpfs brick per node",
            spans=True,
            exports=True,
            keeps=True,
            piece=GLUSTER_SHARD,
            ports=_gluster_ports,
            secret=True,
            one_node="tmpfs",
            hold_vars=(("NODES", "TASK_RANK", "PORT", "SECRET"), ("FS_HOST",)),
            attach_vars=((), _LOGIN),
            attach_together=(_LOGIN,),
        ),
        Caps(
            "command",
            "flux_rsa.ramdisk.providers.command",
            "the site's own scripts for each step (e.g. BeeOND)",
            spans="command-spans",
            exports=True,
            exported_by="command-attach",
            keeps=False,
            ports=lambda nodes, exported: COMMAND_PORTS,
            hold_vars=(("NODES", "TASK_RANK"), ("PORT",)),
            attach_vars=((), ("NODES", "SOURCE", "JOBID", "PORT")),
            attach_together=(("NODES", "SOURCE"),),
            config_prefix="command-",
            config_needs=("command-create", "command-destroy"),
            config_together=(("command-attach", "command-detach"),),
        ),
    )
}


class UnknownProvider(ValueError):
    pass


def caps(name):
    try:
        return PROVIDERS[name]
    except KeyError:
        raise UnknownProvider(
            f"unknown RAM-disk provider {name!r} (known: " f"{', '.join(PROVIDERS)})"
        ) from None


def all_vars(kind):
    """Every provider variable of ``kind`` ("hold_vars" or "attach_vars")."""
    return {v for c in PROVIDERS.values() for part in getattr(c, kind) for v in part}
