"""After a restart of the service or of the pool: what each side still
runs against what the records want (both ways: orphan holders and stages
are cancelled, RAM disks kept through a pool restart are adopted or
discarded, what the pool lost is told to the core), and which RAM disks a
pool shutdown must keep."""

import time

from flux_rsa.core import events as E
from flux_rsa.core.states import HOLDING, RsaState
from flux_rsa.pool import protocol

S = RsaState
#: rsa-states whose RAM disk may hold outputs not yet home: kept through a restart
KEEP_STATES = frozenset({S.INUSE_IN, S.INUSE_OUT, S.STAGING_OUT, S.HELD, S.STOPPING, S.ABORTED})


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

        self.pool.rpc(protocol.LIST).then(listed)

    def reconciled(self, listing):
        """Cancel what the pool runs for nobody; adopt the RAM disks kept
        through a restart (or discard them); learn what the pool lost."""
        holders = {(h["jobid"], h["gen"]) for h in listing.get("holders", [])}
        for kept in listing.get("kept", []):
            if kept.get("adopting"):
                holders.add((kept["jobid"], kept["gen"]))
                continue
            rec = self.records.get(kept["jobid"])
            if rec is not None and rec.gen == kept["gen"] and rec.rsa_state in KEEP_STATES:
                self.log.info(f"rsa: adopting the RAM disk {kept['path']} kept for job {rec.jobid}")
                self.pool.call(protocol.HOLD, {"jobid": rec.jobid, "gen": rec.gen, "need": rec.need,
                                               "userid": rec.userid, "adopt": kept["path"]})
                holders.add((rec.jobid, rec.gen))
            else:
                self.log.info(f"rsa: discarding the kept RAM disk {kept['path']} (nobody needs it)")
                self.pool.call(protocol.DISCARD, {"path": kept["path"]})
        stages = {(s["jobid"], s["seq"]) for s in listing.get("stages", [])}
        wanted_holders = {(r.jobid, r.gen) for r in self.records.values() if r.rsa_state in HOLDING}
        wanted_stages = {
            (r.jobid, r.stage_seq)
            for r in self.records.values()
            if r.rsa_state in (S.STAGING_IN, S.STAGING_OUT, S.STOPPING)
        }
        for jobid, gen in holders - wanted_holders:
            self.log.warning(f"rsa: cancelling orphan holder {jobid}.{gen}")
            self.pool.call(protocol.CANCEL, {"jobid": jobid, "gen": gen})
        for jobid, seq in stages - wanted_stages:
            self.pool.call(protocol.STOP, {"jobid": jobid, "seq": seq})
        for rec in list(self.records.values()):
            if rec.rsa_state not in HOLDING or (rec.jobid, rec.gen) in holders:
                continue
            if rec.rsa_state is S.REQUESTED:
                continue  # its hold was (re)sent: the pool makes it
            why = None if rec.rsa_state is S.TEARDOWN else "the RSA pool restarted without this RAM disk"
            self.apply(rec.jobid, E.HolderEnded(time.time(), rec.gen, why))

    def keep_list(self):
        """Holders whose RAM disks must survive a pool shutdown (restart)."""
        out = []
        for rec in self.records.values():
            env = rec.env
            if rec.rsa_state in KEEP_STATES and env is not None and env.out_on_ramdisk and rec.output_home is not True:
                out.append({"jobid": rec.jobid, "gen": rec.gen})
        return out
