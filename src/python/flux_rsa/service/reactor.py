"""The service and the reactor: every "do this soon, once" (``Timer``), the
core's per-job timers (``JobTimers``, ``timer_event``), futures answered
once and let go as soon as their answer is handled (``on_answer``), and
Python's full garbage collections moved to the service's quiet ticks
(``Collector``).
"""


import gc
import time

from flux_rsa.core import events as E

# --- Timers ------------------------------------------------------------------
# The service's timers: one helper (``Timer``) for every "do this soon, once"
# of the service, and the core's per-job timers built on it.
#
# A ``Timer`` armed while it is armed does nothing: whatever asked for the
# call meanwhile is served by the one pending (passes, flushes and commits
# are batched this way). An exception in the call is logged, never let
# through to the reactor (it would stop the module).


class Timer:
    """Call ``fn()`` ``after`` seconds after ``arm``, then every ``every``
    seconds when given (until ``stop``)."""

    def __init__(self, h, log, what, fn, after=0.0, every=0.0):
        self.log = log
        self.what = what  # for the log line when fn fails
        self.fn = fn
        self.after = after
        self.every = every
        self.armed = False
        self.watcher = h.timer_watcher_create(after, self._fire, repeat=every)

    def arm(self, after=None):
        """Call fn once, ``after`` seconds from now (default: the timer's
        delay), unless a call is pending already."""
        if not self.armed:
            self.restart(after)

    def restart(self, after=None):
        """Call fn ``after`` seconds from now, dropping a pending call."""
        self.armed = True
        self.watcher.reset(
            after=self.after if after is None else max(0.0, after), repeat=self.every
        )
        self.watcher.start()

    def stop(self):
        self.armed = False
        self.watcher.stop()

    def _fire(self, handle, watcher, revents, arg):
        self.armed = bool(self.every)
        try:
            self.fn()
        except Exception as exc:  # never let a timer kill the module
            self.log.error(f"rsa: {self.what}: {exc!r}")


def timer_event(action, t):
    """The core event a StartTimer action asked for."""
    if action.name == "delay":
        return E.InputReleased(t, why="delay")
    if action.name == "late":
        return E.LateTimeout(t)
    if action.name == "retry":
        return E.RetryStage(t)
    return E.Timeout(t, action.state, action.since)


class JobTimers:
    """The timers the core asks for (StartTimer actions): one per (job,
    name), a new one replacing the old; ``fired(jobid, event)`` gets the
    core event when one goes off."""

    def __init__(self, h, log, fired):
        self.h = h
        self.log = log
        self.fired = fired
        self.timers = {}  # (jobid, name) -> Timer

    def set(self, action):
        key = (action.jobid, action.name)
        old = self.timers.pop(key, None)
        if old is not None:
            old.stop()

        def fire():
            self.timers.pop(key, None)
            self.fired(action)

        timer = Timer(
            self.h, self.log, f"job {action.jobid}: timer {action.name}", fire
        )
        timer.arm(max(0.0, action.seconds))
        self.timers[key] = timer

    def stop(self):
        for timer in self.timers.values():
            timer.stop()


# --- Futures answered once ---------------------------------------------------
# Futures answered once, let go as soon as their answer is handled.
#
# Flux's Python ``Future.then`` gives its C continuation a handle that refers
# back to the Future and keeps it in the Future: a reference cycle. The
# Future (with the answer's message, which its C future holds, and the
# callback with everything the callback closes over) then lives until a full
# garbage collection, and the service puts those off to its quiet moments
# (``Collector`` below): every answer of a busy service would pile up until
# then. A future answered once (an RPC, a KVS commit) never calls its
# continuation again, so once the callback has returned the handle can go,
# and the Future with it. A streaming future (an event watch) must keep its
# handle: never pass one here.


def on_answer(future, callback):
    """``future.then(callback)`` for a future answered once; returns it."""

    def handled(f):
        try:
            callback(f)
        finally:
            f.cb_handle = None  # breaks the cycle: freed when the caller lets go

    return future.then(handled)


# --- Full garbage collections at quiet ticks ---------------------------------
# Python's full garbage collections, moved to the service's quiet moments.
#
# A full collection (the oldest generation) walks every object the service
# holds, so its pause grows with the queue: with 20,000 RSA jobs queued it
# took 130 ms (median of 11, the longest 300 ms; bench/scale --growth), and
# Python starts one whenever the long-lived objects have grown by a quarter,
# i.e. again and again while a queue fills, in the middle of the bursts the
# service must answer fast. Those pauses were the whole tail of the on-deck
# pass (p99 155 ms against 41 ms without them).
#
# So Python is told never to start one itself (its young generations are
# collected as before: their pauses do not grow with the queue), and the
# service's tick asks ``check``: once enough collections of the middle
# generation have promoted objects into the oldest, a full collection runs at
# the first tick after a whole tick without a message, or after waiting
# ``MOST`` seconds on a service that is never quiet, so the garbage cycles
# that only a full collection frees are held a few minutes at most.

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
