"""What goes between the service and the running pool's agent: requests
out (``PoolLink``: ``rsa-pool.<method>``, queued while the pool is away;
``to_request``: a core action as a pool request), notifications in
(``PoolEvents``: ``rsa.pool-event``; ``to_event``: a notification as a core
event), the RSA nodes taken out of new reservations (``Drains``), and
after a restart of either side what each still runs against what the
records want (``Reconciler``).
"""


import dataclasses
import errno
import time
from collections import deque

from flux_rsa.core import actions as A
from flux_rsa.core import events as E
from flux_rsa.core import inflight, outputs
from flux_rsa.core.record import Progress
from flux_rsa.pool import protocol
from flux_rsa.service.reactor import on_answer

# --- Requests to the pool ----------------------------------------------------
# The service's side of the pool: requests to the agent's ``rsa-pool``
# service (registered on the parent broker of the pool's first node, so no
# ssh is needed), queued while the pool is starting or restarting.


class PoolLink:
    def __init__(self, h, log):
        self.h = h
        self.log = log
        self.rank = None  # parent rank where the agent serves rsa-pool
        self.nodes = []  # RSA node hostnames, in pool rank order
        self.info = {}
        self.queue = deque()

    @property
    def ready(self):
        return self.rank is not None

    def up(self, info):
        """The agent announced itself (pool-ready)."""
        self.rank = int(info["rank"])
        self.nodes = list(info.get("nodes", []))
        self.info = info
        queued, self.queue = self.queue, deque()
        for method, payload in queued:
            self.call(method, payload)

    def down(self):
        self.rank = None

    def call(self, method, payload):
        """Send rsa-pool.<method>; keep it for later if the pool is away."""
        if self.rank is None:
            self.queue.append((method, payload))
            return
        future = self.h.rpc(protocol.topic(method), payload, nodeid=self.rank)

        def answered(f):
            try:
                f.get()
            except OSError as exc:
                if exc.errno in (errno.ENOSYS, errno.EHOSTUNREACH, errno.ECONNRESET):
                    self.log.warning(
                        f"rsa: pool not reachable ({exc.strerror}): rsa-pool.{method} queued until it is back"
                    )
                    self.down()
                    self.queue.append((method, payload))
                else:
                    self.log.error(
                        f"rsa: rsa-pool.{method} {payload.get('jobid', '')}: {exc.strerror or exc}"
                    )

        on_answer(future, answered)

    def rpc(self, method, payload=None):
        """A request whose answer the caller wants (status, list)."""
        if self.rank is None:
            raise OSError(errno.EAGAIN, "the RSA pool is not running yet")
        return self.h.rpc(protocol.topic(method), payload or {}, nodeid=self.rank)


# --- Core actions and pool notifications -------------------------------------
# Core actions to pool requests, pool notifications to core events.

METHOD = {
    A.RequestCapacity: protocol.HOLD,
    A.CancelHolder: protocol.CANCEL,
    A.StartStage: protocol.STAGE,
    A.StopStage: protocol.STOP,
    A.PurgeInput: protocol.PURGE,
    A.Measure: protocol.MEASURE,
}

PROGRESS = ("bytes_done", "bytes_total", "files_done", "files_total", "rate", "quiet")

EVENT = {
    protocol.HOLDER_ALLOC: lambda t, m: E.HolderAllocated(
        t, m["gen"], tuple(m["nodes"]), m["granted"]
    ),
    protocol.HOLDER_START: lambda t, m: E.HolderStarted(t, m["gen"]),
    protocol.RAMDISK_BUILT: lambda t, m: E.RamdiskBuilt(
        t, m["gen"], m["path"], m.get("volume")
    ),
    protocol.HOLDER_END: lambda t, m: E.HolderEnded(t, m["gen"], m.get("error")),
    protocol.STAGE_PROGRESS: lambda t, m: E.StageProgress(
        t,
        m["seq"],
        Progress(**{k: (m.get("progress") or {}).get(k, 0) for k in PROGRESS}),
    ),
    protocol.STAGE_END: lambda t, m: E.StageEnded(
        t, m["seq"], bool(m["ok"]), m.get("error"), m.get("reused")
    ),
    protocol.MEASURE_END: lambda t, m: E.Measured(
        t, bool(m["ok"]), int(m.get("bytes") or 0), m.get("error")
    ),
}


def to_request(action):
    """(method, payload) asking the pool to carry out a core action."""
    payload = dataclasses.asdict(action)
    for key in ("nodes", "prefer"):
        if key in payload:
            payload[key] = list(payload[key])
    return METHOD[type(action)], payload


def to_event(payload, t):
    """(jobid, core event) for a job notification, None for pool-level ones."""
    build = EVENT.get(payload.get("kind"))
    if build is None:
        return None
    return int(payload["jobid"]), build(t, payload)


# --- Notifications from the pool ---------------------------------------------
# Notifications of the pool's agent (``rsa.pool-event``): the pool came up, a
# holder, stage or measure moved (a core event for its job), or something
# only worth a log line.


class PoolEvents:
    """``service`` provides ``metrics``, ``keeper`` (the PoolKeeper or
    None), ``pool`` (PoolLink), ``drains``, ``reconciler``,
    ``apply(jobid, event)``, ``arm_flush()`` and ``arm_plan()``."""

    def __init__(self, log, service):
        self.log = log
        self.service = service

    def on_event(self, payload):
        self.service.metrics.arrived()
        kind = payload.get("kind")
        if kind == protocol.POOL_READY:
            self.up(payload)
            return
        if kind == protocol.PURGE_END and not payload.get("ok"):
            self.log.warning(
                f"rsa: job {payload.get('jobid')}: dropping inputs failed: {payload.get('error')}"
            )
        elif kind == protocol.NODE_STATE:
            self.log.warning(
                f"rsa: RSA node {payload.get('host')} is {payload.get('state')}"
            )
        elif kind == protocol.DISCARD_END and not payload.get("ok"):
            self.log.error(
                f"rsa: removing kept RAM disk {payload.get('path')} failed: {payload.get('error')}"
            )
        if kind == protocol.HOLDER_END and payload.get("kept"):
            # kept through a pool shutdown: the RAM disk lives on, to be
            # adopted by the next pool (Reconciler.reconciled)
            self.log.info(
                f"rsa: job {payload.get('jobid')}: RAM disk {payload['kept']} kept for the next pool"
            )
            return
        found = to_event(payload, time.time())
        if found is not None:
            jobid, event = found
            self.service.apply(int(jobid), event)

    def up(self, info):
        """The pool is ready (pool-ready, or found running at load)."""
        svc = self.service
        if svc.keeper is not None:
            svc.keeper.ready(info)
        self.log.info(
            f"rsa: pool ready on parent rank {info.get('rank')}: nodes {info.get('nodes')}"
        )
        unusable = (info.get("privilege") or {}).get("error")
        if unusable:
            self.log.error(
                f"rsa: the RSA pool cannot make RAM disks, RSA jobs use their "
                f"directories: {unusable}"
            )
        svc.pool.up(info)
        # jobs that come from now on know the most one reservation can hold
        svc.policy = dataclasses.replace(svc.policy, pool_nodes=len(svc.pool.nodes))
        svc.drains.tell_pool()
        svc.reconciler.reconcile_pool()
        svc.arm_flush()
        svc.arm_plan()


# --- Drained RSA nodes -------------------------------------------------------
# RSA nodes the instance owner took out of new reservations (`flux rsa
# drain`): kept in the KVS (rsa.drained), told to the pool whenever it comes
# up, and left out by the on-deck rule.


class Drains:
    def __init__(self, pool, store, drained):
        self.pool = pool  # PoolLink
        self.store = store  # store.Store
        self.drained = drained  # RSA node -> reason

    def drain(self, host, reason, undrain=False):
        """Take an RSA node out of new reservations (or back in)."""
        if self.pool.nodes and host not in self.pool.nodes:
            known = ", ".join(self.pool.nodes)
            raise OSError(
                errno.EINVAL,
                f"{host}: not an RSA node of the pool (RSA nodes: {known})",
            )
        if undrain:
            self.drained.pop(host, None)
            self.pool.call(protocol.UNDRAIN, {"host": host})
        else:
            self.drained[host] = reason or "drained by the instance owner"
            self.pool.call(protocol.DRAIN, {"host": host, "reason": self.drained[host]})
        self.store.save_drained(self.drained)
        return {"drained": dict(self.drained)}

    def tell_pool(self):
        """The pool came up: it learns which nodes are drained."""
        for host, reason in self.drained.items():
            self.pool.call(protocol.DRAIN, {"host": host, "reason": reason})


# --- After a restart ---------------------------------------------------------
# After a restart of the service or of the pool: what each side still runs
# against what the records want (both ways: orphan holders and stages are
# cancelled, RAM disks kept through a pool restart are adopted or discarded,
# what the pool lost is told to the core), and which RAM disks a pool
# shutdown must keep.


class Reconciler:
    """``records``: the service's records (jobid -> Record); ``pool``: the
    PoolLink; ``apply(jobid, event)`` gives the core an event; ``done()``
    once a reconciliation was handled (the actions it caused can go)."""

    def __init__(self, log, records, pool, apply, done):
        self.log = log
        self.records = records
        self.pool = pool
        self.apply = apply
        self.done = done

    def reconcile_pool(self):
        """Ask the pool what it runs (answer handled in ``reconciled``)."""

        def listed(f):
            try:
                self.reconciled(f.get())
            except OSError as exc:
                self.log.warning(f"rsa: pool list failed: {exc}")
            except Exception as exc:
                self.log.error(f"rsa: reconciling with the pool: {exc!r}")
            self.done()

        on_answer(self.pool.rpc(protocol.LIST), listed)

    def reconciled(self, listing):
        """Cancel what the pool runs for nobody; adopt the RAM disks kept
        through a restart (or discard them); learn what the pool lost."""
        plan = inflight.reconcile(self.records, listing, time.time())
        for kept, rec in plan.kept:
            if rec is not None:
                self.log.info(
                    f"rsa: adopting the RAM disk {kept['path']} kept for job {rec.jobid}"
                )
                self.pool.call(
                    protocol.HOLD,
                    {
                        "jobid": rec.jobid,
                        "gen": rec.gen,
                        "need": rec.need,
                        "userid": rec.userid,
                        "adopt": kept["path"],
                    },
                )
            else:
                self.log.info(
                    f"rsa: discarding the kept RAM disk {kept['path']} (nobody needs it)"
                )
                self.pool.call(protocol.DISCARD, {"path": kept["path"]})
        for jobid, gen in plan.cancel:
            self.log.warning(f"rsa: cancelling orphan holder {jobid}.{gen}")
            self.pool.call(protocol.CANCEL, {"jobid": jobid, "gen": gen})
        for jobid, seq in plan.stop:
            self.pool.call(protocol.STOP, {"jobid": jobid, "seq": seq})
        for jobid, event in plan.lost:
            self.apply(jobid, event)

    def keep_list(self):
        """Holders whose RAM disks must survive a pool shutdown (restart)."""
        return [
            {"jobid": rec.jobid, "gen": rec.gen}
            for rec in self.records.values()
            if outputs.at_risk(rec)
        ]
