"""Actions waiting to be sent: those the core asked for while a message was
handled go out together once it is done (at the next turn of the
reactor), in the order they were asked for.  Records are not waited for:
the store commits them on its own schedule (service.store)."""

from dataclasses import dataclass
from typing import Optional

from flux_rsa.core import actions as A
from flux_rsa.service.timers import Timer


@dataclass(frozen=True)
class Outgoing:
    action: A.Action  # a core action, or the service's own (execute.PostState)
    intake: Optional[
        float
    ]  # when what caused it arrived; None: not counted in the latency


class Outbox:
    """``prepare(action)`` may amend an action just before it goes
    (``run(action)`` sends it); ``metrics.sent(intake)`` times it."""

    def __init__(self, h, log, run, metrics, prepare=lambda action: action):
        self.run = run
        self.metrics = metrics
        self.prepare = prepare
        self.waiting = []  # Outgoing
        self.timer = Timer(h, log, "flush", self.flush)

    def add(self, actions, intake):
        """Send ``actions`` soon, timed from ``intake`` (None: not timed)."""
        self.waiting.extend(Outgoing(a, intake) for a in actions)
        self.timer.arm()

    def stop(self):
        self.timer.stop()

    def flush(self):
        out, self.waiting = self.waiting, []
        for item in out:
            self.run(self.prepare(item.action))
            if item.intake is not None:
                self.metrics.sent(item.intake)
