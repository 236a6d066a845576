"""The service's timers: one helper (``Timer``) for every "do this soon,
once" of the service, and the core's per-job timers built on it.

A ``Timer`` armed while it is armed does nothing: whatever asked for the
call meanwhile is served by the one pending (passes, flushes and commits
are batched this way).  An exception in the call is logged, never let
through to the reactor (it would stop the module).
"""

from flux_rsa.core import events as E


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
