"""Python's full garbage collections, moved to the service's quiet moments.

A full collection (the oldest generation) walks every object the service
holds, so its pause grows with the queue: with 20,000 RSA jobs queued it
took 130 ms (median of 11, the longest 300 ms; bench/scale --growth), and
Python starts one whenever the long-lived objects have grown by a quarter,
i.e. again and again while a queue fills, in the middle of the bursts the
service must answer fast.  Those pauses were the whole tail of the
on-deck pass (p99 155 ms against 41 ms without them).

So Python is told never to start one itself (its young generations are
collected as before: their pauses do not grow with the queue), and the
service's tick asks ``check``: once enough collections of the middle
generation have promoted objects into the oldest, a full collection runs
at the first tick after a whole tick without a message, or after waiting
``MOST`` seconds on a service that is never quiet, so the garbage cycles
that only a full collection frees are held a few minutes at most.
"""

import gc
import time

#: young collections promoted into the oldest generation before a full
#: collection is worth it (Python's own third threshold)
PROMOTIONS = 10
#: seconds a full collection waits for a quiet tick, at most
MOST = 300.0
NEVER = 2**31 - 1  # a threshold no count reaches


def due(promotions, quiet, waited, most=MOST):
    """Is a full collection due?  ``promotions``: collections of the middle
    generation since the last full one; ``quiet``: no message was handled
    since the last look; ``waited``: seconds since it became worth it."""
    return promotions >= PROMOTIONS and (quiet or waited >= most)


class Collector:
    def __init__(self, metrics, gcmod=gc, clock=time.monotonic):
        self.metrics = metrics  # .messages (a count), .collections (seconds of each)
        self.gc = gcmod
        self.clock = clock
        self.saved = None  # Python's thresholds, while ours are set
        self.seen = 0  # metrics.messages at the last look
        self.worth_since = None  # when PROMOTIONS were reached

    def start(self):
        self.saved = self.gc.get_threshold()
        young, middle = self.saved[0], self.saved[1]
        self.gc.set_threshold(young, middle, NEVER)

    def stop(self):
        if self.saved is not None:
            self.gc.set_threshold(*self.saved)
            self.saved = None

    def check(self):
        """A tick: run a full collection if one is due."""
        messages = self.metrics.messages
        quiet, self.seen = messages == self.seen, messages
        promotions = self.gc.get_count()[2]
        now = self.clock()
        if promotions < PROMOTIONS:
            self.worth_since = None
            return
        if self.worth_since is None:
            self.worth_since = now
        if due(promotions, quiet, now - self.worth_since):
            self.gc.collect()
            self.metrics.collections.append(self.clock() - now)
            self.worth_since = None
