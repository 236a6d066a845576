"""Ports of the file-system servers of RAM disks.

Each holder of a GlusterFS RAM disk over several RSA nodes gets a block of
consecutive ports, one per node (brick ``i`` listens on ``base + i``), and
each holder of provider command a block for the site's scripts
(``RSA_PORT``), from ``[rsa] fs-ports``; no two live holders share a port,
so servers of different jobs never collide on a node (nor on one machine
in a test instance).  Blocks are handed out round the range (next fit): a
block just given back (a holder that failed, perhaps on a port another
program holds) is the last to be used again.  Pure bookkeeping.
"""


class PortsExhausted(RuntimeError):
    pass


def ephemeral_clash(low, high, ephemeral):
    """Why [rsa] fs-ports LOW-HIGH is unsafe on a node whose kernel gives
    connections local ports from EPHEMERAL (low, high: its
    net.ipv4.ip_local_port_range), or None: a port of both may be taken by
    any outgoing connection when a server wants it."""
    elow, ehigh = ephemeral
    if high < elow or low > ehigh:
        return None
    return (
        f"[rsa] fs-ports {low}-{high} overlaps this node's ephemeral ports {elow}-{ehigh} "
        "(net.ipv4.ip_local_port_range): an outgoing connection can take a port a RAM "
        f"disk's server needs; choose ports below {elow} (the default is 24100-24999) "
        "or reserve them (net.ipv4.ip_local_reserved_ports)"
    )


class Ports:
    def __init__(self, low, high):
        self.low, self.high = low, high
        self.blocks = {}  # key -> (base, count)
        self.next = low  # where the search for the next block starts

    def take(self, key, count):
        """A free block of ``count`` ports for ``key`` (the same one again if
        it has one already); raises PortsExhausted."""
        if key in self.blocks:
            return self.blocks[key][0]
        base = self._fit(self.next, count)
        if base is None:
            base = self._fit(self.low, count)
        if base is None:
            raise PortsExhausted(
                f"no {count} free ports left in [rsa] fs-ports {self.low}-{self.high} "
                f"({len(self.blocks)} RAM disks hold ports): widen the range"
            )
        self.blocks[key] = (base, count)
        self.next = base + count
        return base

    def _fit(self, start, count):
        """The first base >= start of ``count`` free ports in the range."""
        base = start
        for used, n in sorted(self.blocks.values()):
            if used + n <= base:
                continue
            if base + count <= used:
                break
            base = used + n
        return base if base + count - 1 <= self.high else None

    def give(self, key):
        self.blocks.pop(key, None)
