"""GlusterFS volume files of a job's parallel RAM disk (pure: text only).

A job's RAM disk spanning N RSA nodes is one GlusterFS volume without
glusterd and without a peer pool: each node runs one brick server
(``glusterfsd -N -f brick.vol``) over a tmpfs of its share, and every
client (the stager on the first RSA node, each compute node of the job)
mounts ``glusterfs -N -f client.vol MNT``, which connects straight to the
bricks' ports.  Data is distributed over the bricks (cluster/distribute),
one copy (it is scratch: the persistent copy is data_out).

Only clients that present the volume's user and secret are let in
(``auth.login`` with ``strict-auth-accept``: without it a client that
sends no credentials is accepted); the secret is made per reservation and
travels only to the processes that mount.
"""

from dataclasses import dataclass

from flux_rsa.core import providercaps

#: brick xlator names end in this; clients ask for it as remote-subvolume
BRICK = "brick"
#: distribute's free-space rule (new files skip a brick with less free
#: than this), off: distribute asks the bricks how full they are at most
#: once a second (GlusterFS 10.3, dht_get_du_info), so at memory speed it
#: does not balance them but sends a second's worth of new pieces to the
#: brick that was emptiest then (each with a link file on the brick its
#: hash named).  Pieces go by hash, which the bricks' headroom is counted
#: for (core.spread; measured in doc/pool.md)
MIN_FREE_DISK = "0"
#: a file over several bricks is cut into pieces of this many bytes, spread
#: by the distribute layer like files of their own (None: whole files; only
#: bench/span sets it, to measure what sharding costs)
SHARD_BLOCK = providercaps.GLUSTER_SHARD
#: a dead brick turns into ENOTCONN after this many seconds (default 42)
PING_TIMEOUT = 10


@dataclass(frozen=True)
class Volume:
    """What it takes to mount a job's volume (``servers``: "host:port" of
    each brick, in brick order)."""

    name: str  # the RAM disk's name, JOBID.GEN
    servers: tuple
    user: str
    secret: str

    def to_dict(self):
        return {
            "name": self.name,
            "servers": list(self.servers),
            "user": self.user,
            "secret": self.secret,
        }

    @classmethod
    def from_dict(cls, d):
        return cls(d["name"], tuple(d["servers"]), d["user"], d["secret"])


def user_of(jobid, gen):
    """The login a reservation's clients present."""
    return f"rsa-{jobid}-{gen}"


def _block(name, kind, options=(), subvolumes=()):
    lines = [f"volume {name}", f"  type {kind}"]
    lines += [f"  option {key} {value}" for key, value in options]
    if subvolumes:
        lines.append(f"  subvolumes {' '.join(subvolumes)}")
    lines.append("end-volume")
    return "\n".join(lines) + "\n"


def brick_name(index):
    return f"{BRICK}{index}"


def brick(index, directory, bind, port, user, secret):
    """The volume file of brick ``index``: files kept in ``directory`` (on
    the node's tmpfs), served on ``bind``:``port`` to ``user`` only.  The
    volume's root directory is root's, like a tmpfs RAM disk's: the job
    owner's areas are made in it."""
    b = brick_name(index)
    if '"' in directory or "\n" in directory:
        raise ValueError(
            f"{directory!r}: a brick directory cannot hold '\"' or a newline "
            "(choose another [rsa] ramdisk-root)"
        )
    return "".join(
        [
            # quoted: the volume file's words end at a space
            # no reserve: the reservation is the tmpfs, whole (with posix's
            # default 1% kept back, a full RAM disk would also refuse to take
            # up the files written straight into it: they vanish from lookups)
            _block(
                f"{b}-posix",
                "storage/posix",
                [("directory", f'"{directory}"'), ("reserve", 0)],
            ),
            _block(f"{b}-locks", "features/locks", subvolumes=[f"{b}-posix"]),
            _block(
                f"{b}-iot",
                "performance/io-threads",
                [("thread-count", 4)],
                [f"{b}-locks"],
            ),
            _block(b, "debug/io-stats", subvolumes=[f"{b}-iot"]),
            _block(
                f"{b}-server",
                "protocol/server",
                [
                    ("transport-type", "tcp"),
                    ("transport.address-family", "inet"),
                    ("transport.socket.bind-address", bind),
                    ("transport.socket.listen-port", port),
                    (f"auth.login.{b}.allow", user),
                    (f"auth.login.{user}.password", secret),
                    # no credentials, no entry (else a client sending none is let in)
                    ("strict-auth-accept", "on"),
                ],
                [b],
            ),
        ]
    )


def client(volume):
    """The volume file a client mounts: one protocol/client per brick,
    distributed, with the caches that paid for themselves when measured
    (quick-read, open-behind, md-cache).  Not write-behind: in GlusterFS
    10.3 (Debian 12) a client whose write ends in ENOSPC with it corrupts
    its own heap and dies (glibc's "corrupted double-linked list"), and
    the job's writers then hang in the kernel on the dead mount; measured
    here, a full RAM disk crashed the client within 1 to 3 tries of
    "write until full" with it, and never in 24 without."""
    clients = [f"{volume.name}-client-{i}" for i in range(len(volume.servers))]
    text = ""
    for i, server in enumerate(volume.servers):
        host, port = server.rsplit(":", 1)
        text += _block(
            clients[i],
            "protocol/client",
            [
                ("transport-type", "tcp"),
                ("transport.address-family", "inet"),
                ("remote-host", host),
                ("remote-port", port),
                ("remote-subvolume", brick_name(i)),
                ("username", volume.user),
                ("password", volume.secret),
                ("ping-timeout", PING_TIMEOUT),
            ],
        )
    below = f"{volume.name}-dht"
    text += _block(
        below, "cluster/distribute", [("min-free-disk", MIN_FREE_DISK)], clients
    )
    if len(volume.servers) > 1 and SHARD_BLOCK is not None:
        text += _block(
            f"{volume.name}-shard",
            "features/shard",
            [("shard-block-size", f"{SHARD_BLOCK >> 20}MB")],
            [below],
        )
        below = f"{volume.name}-shard"
    for cache in ("quick-read", "open-behind", "md-cache"):
        text += _block(
            f"{volume.name}-{cache}", f"performance/{cache}", subvolumes=[below]
        )
        below = f"{volume.name}-{cache}"
    text += _block(volume.name, "debug/io-stats", subvolumes=[below])
    return text
