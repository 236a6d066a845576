"""The service's side of the pool: requests to the agent's ``rsa-pool``
service (registered on the parent broker of the pool's first node, so no
ssh is needed), queued while the pool is starting or restarting."""

import errno
from collections import deque

from flux_rsa.pool import protocol
from flux_rsa.service.answers import on_answer


class PoolLink:
    def __init__(self, h, log):
        self.h = h
        self.log = log
        self.rank = None  # parent rank where the agent serves rsa-pool
        self.nodes = []  # RSA node hostnames, in pool rank order
        self.info = {}
        self.queue = deque()

    @property
    def ready(self):
        return self.rank is not None

    def up(self, info):
        """The agent announced itself (pool-ready)."""
        self.rank = int(info["rank"])
        self.nodes = list(info.get("nodes", []))
        self.info = info
        queued, self.queue = self.queue, deque()
        for method, payload in queued:
            self.call(method, payload)

    def down(self):
        self.rank = None

    def call(self, method, payload):
        """Send rsa-pool.<method>; keep it for later if the pool is away."""
        if self.rank is None:
            self.queue.append((method, payload))
            return
        future = self.h.rpc(protocol.topic(method), payload, nodeid=self.rank)

        def answered(f):
            try:
                f.get()
            except OSError as exc:
                if exc.errno in (errno.ENOSYS, errno.EHOSTUNREACH, errno.ECONNRESET):
                    self.log.warning(
                        f"rsa: pool not reachable ({exc.strerror}): rsa-pool.{method} queued until it is back"
                    )
                    self.down()
                    self.queue.append((method, payload))
                else:
                    self.log.error(
                        f"rsa: rsa-pool.{method} {payload.get('jobid', '')}: {exc.strerror or exc}"
                    )

        on_answer(future, answered)

    def rpc(self, method, payload=None):
        """A request whose answer the caller wants (status, list)."""
        if self.rank is None:
            raise OSError(errno.EAGAIN, "the RSA pool is not running yet")
        return self.h.rpc(protocol.topic(method), payload or {}, nodeid=self.rank)
