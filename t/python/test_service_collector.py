"""The service's full garbage collections (service.reactor): Python never
starts one itself while the service runs; the service's tick runs one once
enough young collections have promoted objects, at a quiet tick, or after
waiting MOST seconds on a service that is never quiet."""

import gc
import types

import pytest

from flux_rsa.service import reactor as C


class FakeGC:
    """The part of the gc module the collector uses, driven by the test."""

    def __init__(self):
        self.threshold = (700, 10, 10)
        self.count = [0, 0, 0]
        self.full = 0  # full collections run

    def get_threshold(self):
        return self.threshold

    def set_threshold(self, *t):
        self.threshold = t

    def get_count(self):
        return tuple(self.count)

    def collect(self):
        self.full += 1
        self.count = [0, 0, 0]


def make():
    metrics = types.SimpleNamespace(messages=0, collections=[])
    fake, now = FakeGC(), [0.0]
    col = C.Collector(metrics, gcmod=fake, clock=lambda: now[0])
    col.start()
    return col, metrics, fake, now


@pytest.mark.parametrize(
    "promotions, quiet, waited, expected",
    [
        (C.PROMOTIONS - 1, True, 0.0, False),  # not worth it yet
        (C.PROMOTIONS - 1, False, C.MOST, False),  # ... however long
        (C.PROMOTIONS, True, 0.0, True),  # worth it, quiet
        (C.PROMOTIONS, False, 0.0, False),  # worth it, busy: wait
        (C.PROMOTIONS, False, C.MOST - 1, False),
        (C.PROMOTIONS, False, C.MOST, True),  # busy for MOST: no longer
    ],
)
def test_due(promotions, quiet, waited, expected):
    assert C.due(promotions, quiet, waited) is expected


def test_python_starts_no_full_collection_while_it_runs_and_gets_its_thresholds_back():
    col, _, fake, _ = make()
    assert fake.threshold[:2] == (700, 10)
    assert fake.threshold[2] == C.NEVER
    col.stop()
    assert fake.threshold == (700, 10, 10)


def test_a_busy_service_collects_at_its_first_quiet_tick():
    col, metrics, fake, now = make()
    fake.count[2] = C.PROMOTIONS
    for _ in range(5):  # a message between every two ticks
        metrics.messages += 3
        now[0] += 2.0
        col.check()
    assert fake.full == 0
    now[0] += 2.0
    col.check()  # no message since the last tick
    assert fake.full == 1
    assert len(metrics.collections) == 1


def test_a_service_never_quiet_collects_after_waiting_most_seconds():
    col, metrics, fake, now = make()
    fake.count[2] = C.PROMOTIONS
    waited = []
    while fake.full == 0:
        metrics.messages += 1
        col.check()
        waited.append(now[0])
        now[0] += 2.0
    assert waited[-1] - waited[0] == C.MOST


def test_quiet_ticks_collect_nothing_while_little_was_promoted():
    col, _, fake, now = make()
    fake.count[2] = C.PROMOTIONS - 1
    for _ in range(3 * int(C.MOST / 2)):
        now[0] += 2.0
        col.check()
    assert fake.full == 0
    fake.count[2] = C.PROMOTIONS
    now[0] += 2.0
    col.check()
    assert fake.full == 1


def test_with_the_real_gc_no_full_collection_comes_until_the_tick_asks():
    saved = gc.get_threshold()
    full = []

    def seen(phase, info):
        if phase == "stop" and info["generation"] == 2:
            full.append(info)

    metrics = types.SimpleNamespace(messages=0, collections=[])
    col = C.Collector(metrics)
    gc.collect()
    gc.callbacks.append(seen)
    try:
        col.start()
        kept = [[i] for i in range(400000)]  # a queue's worth of long-lived objects
        assert gc.get_count()[2] >= C.PROMOTIONS
        assert full == []  # Python alone would have run one: they more than doubled
        col.check()  # quiet: no message since the collector started
        assert len(full) == 1
        assert len(metrics.collections) == 1
    finally:
        gc.callbacks.remove(seen)
        col.stop()
        gc.set_threshold(*saved)
    assert gc.get_threshold() == saved
    assert len(kept) == 400000
