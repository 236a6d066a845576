"""A stand-in for a Flux handle's timers and KVS transactions, driven by
hand: ``advance(seconds)`` runs the timers that come due, in time order;
a KVS commit is answered when the test says so."""


class FakeWatcher:
    def __init__(self, reactor, after, callback, repeat):
        self.reactor = reactor
        self.after = after
        self.repeat = repeat
        self.callback = callback
        self.due = None  # reactor time it fires at, None when stopped

    def reset(self, after=None, repeat=None):
        self.after = self.after if after is None else after
        self.repeat = self.repeat if repeat is None else repeat
        self.start()

    def start(self):
        self.due = self.reactor.now + self.after

    def stop(self):
        self.due = None


class FakeReactor:
    """The handle part: ``timer_watcher_create`` as flux.Flux has it."""

    def __init__(self):
        self.now = 0.0
        self.watchers = []

    def timer_watcher_create(self, after, callback, repeat=0.0, args=None):
        w = FakeWatcher(self, after, callback, repeat)
        self.watchers.append(w)
        return w

    def advance(self, seconds):
        end = self.now + seconds
        while True:
            due = [w for w in self.watchers if w.due is not None and w.due <= end]
            if not due:
                break
            w = min(due, key=lambda w: w.due)
            self.now = w.due
            w.due = self.now + w.repeat if w.repeat else None
            w.callback(self, w, 0, None)
        self.now = end


class Log:
    def __init__(self):
        self.lines = []

    def error(self, text):
        self.lines.append(("error", text))

    def warning(self, text):
        self.lines.append(("warning", text))

    def info(self, text):
        self.lines.append(("info", text))
