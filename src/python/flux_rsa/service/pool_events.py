"""Notifications of the pool's agent (``rsa.pool-event``): the pool came
up, a holder, stage or measure moved (a core event for its job), or
something only worth a log line."""

import dataclasses
import time

from flux_rsa.pool import protocol
from flux_rsa.service import wire


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
        found = wire.event(payload, time.time())
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
