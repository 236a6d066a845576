"""How fast stage-in really goes: measured from the records of finished
stage-ins (bytes over the time from STAGING_IN to READY)."""

import statistics

from flux_rsa.core.states import RsaState

S = RsaState
RECENT = 20  # stage-ins looked at


def sample(rec):
    """(time READY, bytes/s) of ``rec``'s complete stage-in, or None."""
    if rec.progress is None or not rec.progress.bytes_total:
        return None
    t_in = t_ready = None
    for tr in rec.history:
        if tr.rsa_state is S.STAGING_IN:
            t_in = tr.t
        elif tr.rsa_state is S.READY and t_in is not None:
            t_ready = tr.t
    if t_in is not None and t_ready is not None and t_ready > t_in:
        return (t_ready, rec.progress.bytes_total / (t_ready - t_in))
    return None


def newest(samples):
    """The RECENT newest of ``samples`` [(time, bytes/s)], oldest first."""
    return sorted(samples)[-RECENT:]


def median_rate(samples, default):
    """Median bytes/s of the RECENT newest ``samples``, else ``default``."""
    if not samples:
        return float(default)
    return statistics.median(rate for _, rate in newest(samples))


def stage_rate(records, default):
    """Median bytes/s of the most recent complete stage-ins, else ``default``."""
    return median_rate(
        [s for s in map(sample, records.values()) if s is not None], default
    )
