"""Notifications to the service, in order, surviving its reloads.

One RPC in flight at a time to ``topic`` on rank 0 of the parent, so the
service sees notifications in the order they happened.  When the service
is not there (ENOSYS: not loaded, or reloading) the queue waits and the
head is retried every ``retry`` seconds.  The queue is bounded: when full,
the oldest ``stage-progress`` goes first (a newer one supersedes it), else
the oldest notification, and the loss is logged.
"""

import errno
from collections import deque

from flux_rsa.pool import protocol

#: the service is absent or restarting: keep and retry
RETRY = {
    errno.ENOSYS,
    errno.EAGAIN,
    errno.EHOSTUNREACH,
    errno.ECONNRESET,
    errno.ENOTCONN,
    errno.ETIMEDOUT,
}


class Notifier:
    def __init__(self, parent, topic, pool, log, maxlen=10000, retry=1.0, timeout=30.0):
        self.parent = parent
        self.topic = topic
        self.pool = pool
        self.log = log
        self.maxlen = maxlen
        self.timeout = timeout
        self.queue = deque()
        self.inflight = None
        self.dropped = 0
        self.timer = parent.timer_watcher_create(retry, self._retry, repeat=0)

    def send(self, name, **fields):
        if len(self.queue) >= self.maxlen:
            self._drop()
        self.queue.append(protocol.notification(name, self.pool, **fields))
        self._next()

    def _drop(self):
        for i, payload in enumerate(self.queue):
            if payload["kind"] == protocol.STAGE_PROGRESS and not (
                i == 0 and self.inflight
            ):
                del self.queue[i]
                return
        start = 1 if self.inflight else 0
        if len(self.queue) > start:
            lost = self.queue[start]
            del self.queue[start]
            self.dropped += 1
            self.log(f"notification queue full ({self.maxlen}): dropped {lost}")

    def _next(self):
        if self.inflight is not None or not self.queue:
            return
        self.inflight = self.parent.rpc(self.topic, self.queue[0], nodeid=0)
        self.inflight.then(self._done, timeout=self.timeout)

    def _done(self, future):
        try:
            self._settle(future)
        except Exception as exc:  # never let a callback stop the reactor
            self.log(f"notifier: {exc!r}")
            self.inflight = None

    def _settle(self, future):
        self.inflight = None
        try:
            future.get()
        except OSError as exc:
            if exc.errno in RETRY:
                self.timer.start()
                return
            self.log(
                f"{self.topic}: {self.queue[0]['kind']} refused: "
                f"{exc.strerror or exc} (dropped)"
            )
        self.queue.popleft()
        self._next()

    def _retry(self, *args):
        try:
            self.timer.stop()
            self._next()
        except Exception as exc:
            self.log(f"notifier: {exc!r}")

    def pending(self):
        return len(self.queue)
