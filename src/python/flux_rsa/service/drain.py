"""RSA nodes the instance owner took out of new reservations (`flux rsa
drain`): kept in the KVS (rsa.drained), told to the pool whenever it comes
up, and left out by the on-deck rule."""

import errno

from flux_rsa.pool import protocol


class Drains:
    def __init__(self, pool, store, drained):
        self.pool = pool  # PoolLink
        self.store = store  # store.Store
        self.drained = drained  # RSA node -> reason

    def drain(self, host, reason, undrain=False):
        """Take an RSA node out of new reservations (or back in)."""
        if self.pool.nodes and host not in self.pool.nodes:
            known = ", ".join(self.pool.nodes)
            raise OSError(
                errno.EINVAL,
                f"{host}: not an RSA node of the pool (RSA nodes: {known})",
            )
        if undrain:
            self.drained.pop(host, None)
            self.pool.call(protocol.UNDRAIN, {"host": host})
        else:
            self.drained[host] = reason or "drained by the instance owner"
            self.pool.call(protocol.DRAIN, {"host": host, "reason": self.drained[host]})
        self.store.save_drained(self.drained)
        return {"drained": dict(self.drained)}

    def tell_pool(self):
        """The pool came up: it learns which nodes are drained."""
        for host, reason in self.drained.items():
            self.pool.call(protocol.DRAIN, {"host": host, "reason": reason})
