"""The service's figures for `flux rsa stats` and the scale benchmark: how
long the service takes from a message's arrival to the action it causes,
how long queue reads take, its full garbage collections, its CPU and
memory."""

import collections
import resource
import statistics
import time

SAMPLES = 100000  # latency samples kept (the newest): a whole 20,000-job burst (~1.5 actions a job)


def memory_kb(field, default=None):
    """VmHWM (peak) or VmRSS (now) of this process, in KiB.  Not
    ru_maxrss: Linux keeps that across execve, so a module started by a
    broker that had grown big would report the broker's size."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return default


def summary(seconds):
    """count, percentiles, max and mean of samples in seconds, in ms."""
    samples = sorted(seconds)

    def pct(p):
        return (
            samples[min(len(samples) - 1, int(p / 100 * len(samples)))] * 1000
            if samples
            else None
        )

    return {
        "count": len(samples),
        "p50": pct(50),
        "p90": pct(90),
        "p99": pct(99),
        "max": samples[-1] * 1000 if samples else None,
        "mean": statistics.fmean(samples) * 1000 if samples else None,
    }


class Metrics:
    def __init__(self):
        self.intake = time.time()  # when the message being handled arrived
        self.latency = collections.deque(
            maxlen=SAMPLES
        )  # seconds, intake -> action sent
        self.reads = collections.deque(
            maxlen=SAMPLES
        )  # seconds, queue read sent -> pass done
        self.passes = collections.deque(
            maxlen=SAMPLES
        )  # seconds, job-list's answer -> pass done
        self.collections = collections.deque(
            maxlen=SAMPLES
        )  # seconds, full garbage collections
        self.messages = 0  # messages handled (events, requests, answers, job timers)

    def arrived(self, message=True):
        """A message (event, request, timer) is being handled from now;
        ``message=False``: work the service set itself (an on-deck pass)."""
        self.intake = time.time()
        self.messages += message
        return self.intake

    def sent(self, intake):
        """An action caused by what arrived at ``intake`` was sent."""
        self.latency.append(time.time() - intake)

    def read(self, seconds, pass_seconds):
        """A queue read and the pass on it took ``seconds``, the pass alone
        (from job-list's answer) ``pass_seconds``."""
        self.reads.append(seconds)
        self.passes.append(pass_seconds)

    def stats(self, records, active_jobs):
        usage = resource.getrusage(resource.RUSAGE_SELF)
        states = collections.Counter(r.rsa_state.value for r in records.values())
        return {
            "records": len(records),
            "states": dict(states),
            "active_jobs": active_jobs,
            "latency_ms": summary(self.latency),
            "queue_read_ms": summary(self.reads),
            "ondeck_pass_ms": summary(self.passes),
            "full_gc_ms": summary(self.collections),
            "cpu_seconds": usage.ru_utime + usage.ru_stime,
            "maxrss_kb": memory_kb("VmHWM", usage.ru_maxrss),
            "rss_kb": memory_kb("VmRSS"),
            "restages": sum(r.restages for r in records.values()),
        }
