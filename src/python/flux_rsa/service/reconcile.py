"""After a restart of the service or of the pool: what each side still
runs against what the records want (both ways: orphan holders and stages
are cancelled, RAM disks kept through a pool restart are adopted or
discarded, what the pool lost is told to the core), and which RAM disks a
pool shutdown must keep."""

import time

from flux_rsa.core import inflight, outputs
from flux_rsa.pool import protocol
from flux_rsa.service.answers import on_answer


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
