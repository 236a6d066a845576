"""The image stores: on every RSA node one subjob, for as long as the pool
runs, serving that node's store of images (``ramdisk.store``), so that a
compute node reaches every image of the node through one client it keeps.

Started at start-up, after the sweep and before ``pool-ready`` (the agent
waits, bounded, until each serves: an image holder needs its node's
store); stopped last at shutdown, once every holder has ended (a store
with images left in it, kept ones, keeps them for the next pool).  Each
store listens on its own port, the first ports of ``[rsa] fs-ports`` in
the pool's rank order, so that a restarted pool serves a kept store where
compute nodes' clients reach it again.
"""

import json
import secrets

from flux_rsa.pool import jobspecs
from flux_rsa.pool.subjob import Subjob

STOP_REASON = "flux-rsa: the pool stops"


class Store(Subjob):
    """The store subjob of one RSA node."""

    def __init__(self, ctx, jobspec, host):
        self.host = host
        self.server = None  # "host:port" once it serves
        super().__init__(ctx, jobspec)

    @property
    def serving(self):
        return self.server is not None and not self.ended

    def on_stdout(self, line):
        try:
            msg = json.loads(line)
        except ValueError:
            return
        if isinstance(msg, dict) and msg.get("event") == "store":
            self.server = msg.get("server")
        elif isinstance(msg, dict) and msg.get("event") == "store-closed":
            kept = msg.get("kept") or []
            if kept:
                self.ctx.log(
                    f"image store of {self.host}: kept for the next pool with "
                    f"{len(kept)} kept image(s)"
                )

    def update(self):
        if self.ended and self.cancel_reason is None:
            self.ctx.log(
                f"image store of {self.host} ended: {self.failure() or 'no reason given'}; "
                "RAM disks that are images cannot be made there until the pool restarts"
            )

    def problem(self):
        """Why it does not serve, or None."""
        if self.serving:
            return None
        if self.ended:
            return self.failure() or "it ended"
        return "not serving yet"


class Stores:
    """Every node's store."""

    def __init__(self, ctx, via, policy, environment, hosts, ports):
        self.ctx = ctx
        self.stores = {}  # rank -> Store
        for rank, host in sorted(hosts.items()):
            port = ports.take(("store", host), 1)
            js = jobspecs.store(
                via, policy, host, rank, port, secrets.token_urlsafe(24), environment
            )
            self.stores[rank] = Store(ctx, js, host)

    def settled(self):
        """Every store serves, or has ended."""
        return all(s.serving or s.ended for s in self.stores.values())

    def problems(self):
        """{host: why} of the stores that do not serve."""
        return {
            s.host: s.problem() for s in self.stores.values() if s.problem() is not None
        }

    def stop(self):
        """Stop every store (once)."""
        for store in self.stores.values():
            if store.cancel_reason is None:
                store.cancel(STOP_REASON)

    def active(self):
        return [s for s in self.stores.values() if not s.ended]
