"""How fast stage-in really goes: measured from the records of finished
stage-ins (bytes over the time from STAGING_IN to READY)."""

import statistics

from flux_rsa.core.states import RsaState

S = RsaState
RECENT = 20  # stage-ins looked at


def stage_rate(records, default):
    """Median bytes/s of the most recent complete stage-ins, else ``default``."""
    samples = []
    for rec in records.values():
        if rec.progress is None or not rec.progress.bytes_total:
            continue
        t_in = t_ready = None
        for tr in rec.history:
            if tr.rsa_state is S.STAGING_IN:
                t_in = tr.t
            elif tr.rsa_state is S.READY and t_in is not None:
                t_ready = tr.t
        if t_in is not None and t_ready is not None and t_ready > t_in:
            samples.append((t_ready, rec.progress.bytes_total / (t_ready - t_in)))
    if not samples:
        return float(default)
    samples.sort()
    return statistics.median(rate for _, rate in samples[-RECENT:])
