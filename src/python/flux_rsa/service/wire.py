"""Core actions to pool requests, pool notifications to core events."""

import dataclasses

from flux_rsa.core import actions as A
from flux_rsa.core import events as E
from flux_rsa.core.record import Progress
from flux_rsa.pool import protocol as P

METHOD = {
    A.RequestCapacity: P.HOLD,
    A.CancelHolder: P.CANCEL,
    A.StartStage: P.STAGE,
    A.StopStage: P.STOP,
    A.PurgeInput: P.PURGE,
    A.Measure: P.MEASURE,
}

PROGRESS = ("bytes_done", "bytes_total", "files_done", "files_total", "rate", "quiet")

EVENT = {
    P.HOLDER_ALLOC: lambda t, m: E.HolderAllocated(
        t, m["gen"], tuple(m["nodes"]), m["granted"]
    ),
    P.HOLDER_START: lambda t, m: E.HolderStarted(t, m["gen"]),
    P.RAMDISK_BUILT: lambda t, m: E.RamdiskBuilt(
        t, m["gen"], m["path"], m.get("volume")
    ),
    P.HOLDER_END: lambda t, m: E.HolderEnded(t, m["gen"], m.get("error")),
    P.STAGE_PROGRESS: lambda t, m: E.StageProgress(
        t,
        m["seq"],
        Progress(**{k: (m.get("progress") or {}).get(k, 0) for k in PROGRESS}),
    ),
    P.STAGE_END: lambda t, m: E.StageEnded(
        t, m["seq"], bool(m["ok"]), m.get("error"), m.get("reused")
    ),
    P.MEASURE_END: lambda t, m: E.Measured(
        t, bool(m["ok"]), int(m.get("bytes") or 0), m.get("error")
    ),
}


def request(action):
    """(method, payload) asking the pool to carry out a core action."""
    payload = dataclasses.asdict(action)
    for key in ("nodes", "prefer"):
        if key in payload:
            payload[key] = list(payload[key])
    return METHOD[type(action)], payload


def event(payload, t):
    """(jobid, core event) for a job notification, None for pool-level ones."""
    build = EVENT.get(payload.get("kind"))
    if build is None:
        return None
    return int(payload["jobid"]), build(t, payload)
