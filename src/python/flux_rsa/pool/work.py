"""The subjobs the service asked the pool for, one table per kind.

``hold``, ``stage``, ``measure``, ``purge`` and ``discard`` each start a
subjob (``holders.py``, ``stages.py``) and are served alike (``serve``):

* where privileged operations cannot run (``unusable``), the subjob's end
  is told at once, failed, saying why;
* a new request starts the subjob (refused while the pool shuts down);
* a request repeated after its subjob ended has that end told again (the
  service may have missed it); one repeated while it runs waits for it.

Ended holders, stages and measures are remembered a while (``KEEP_ENDED``)
for `list` and repeated requests; purges and discards only while they run.
``cancel`` and ``stop`` end a holder or stage early.  In simulation
(``Policy.simulate_rate > 0``) a stage is a timer, and a measure, purge or
discard ends at once: nothing was made for real.
"""

import os
import secrets
from collections import deque

from flux_rsa.pool import jobspecs, protocol
from flux_rsa.pool.holders import Holder, HolderContext
from flux_rsa.pool.ports import PortsExhausted
from flux_rsa.pool.stages import Discard, Measure, Purge, SimulatedStage, Stage
from flux_rsa.pool.subjob import Context

#: ended holders, stages and measures remembered for `list` and repeats
KEEP_ENDED = 1000


class Work:
    def __init__(
        self,
        h,
        log,
        hosts,
        notify,
        policy,
        via,
        environment,
        nodes,
        ports,
        kept,
        unusable=None,
    ):
        self.log = log
        self.hosts = hosts  # pool rank -> host name
        self.notify = notify
        self.policy = policy
        self.simulate = policy.simulate_rate > 0
        self.via = via
        self.environment = environment
        self.nodes = nodes
        self.ports = ports  # of holders spanning nodes
        self.kept = kept
        self.unusable = unusable  # why privileged operations cannot run here, or None
        self.closed = False  # the pool is shutting down: nothing new starts
        self.holders = {}  # (jobid, gen) -> Holder
        self.stages = {}  # (jobid, seq) -> Stage or SimulatedStage
        self.measures = {}  # (jobid, seq) -> Measure
        self.purges = {}  # jobid -> Purge (running only)
        self.discards = {}  # path -> Discard (running only)
        self._tables = {
            Holder: self.holders,
            Stage: self.stages,
            SimulatedStage: self.stages,
            Measure: self.measures,
            Purge: self.purges,
            Discard: self.discards,
        }
        self._ended = {
            Holder: deque(),
            Stage: deque(),
            SimulatedStage: deque(),
            Measure: deque(),
        }  # keys, oldest first
        self.ctx = Context(h, log, hosts, notify, self.forget)
        self.holder_ctx = HolderContext(
            h,
            log,
            hosts,
            notify,
            self.forget,
            policy,
            nodes,
            self._sweep_jobspec,
            kept.took_over,
            self._gave_up,
        )

    # --- the one pattern ---

    def serve(self, kind, key, new):
        """A request for the subjob of ``kind`` (its class) under ``key``;
        ``new()`` makes one (it may refuse with BadRequest)."""
        table = self._tables[kind]
        job = table.get(key)
        if job is None and self.unusable:
            self.notify(
                kind.END, **kind.nothing_ran(key, f"{kind.CANNOT}: {self.unusable}")
            )
        elif job is None:
            if self.closed:
                raise protocol.BadRequest(
                    "the pool is shutting down (rsa-pool.shutdown); "
                    "send the request to the next pool"
                )
            table[key] = new()
        elif job.done():
            self.notify(kind.END, **job.end_fields())
        return {}

    def forget(self, job):
        """``job`` told its end: a holder's ports are free, a discarded RAM
        disk is no longer kept."""
        if isinstance(job, Holder):
            self.ports.give(job.key)
        if isinstance(job, Discard) and job.failure() is None:
            self.kept.forget(job.key)
        table, ended = self._tables[type(job)], self._ended.get(type(job))
        if ended is None:  # a table of running subjobs only
            table.pop(job.key, None)
            return
        ended.append(job.key)
        while len(ended) > KEEP_ENDED:
            table.pop(ended.popleft(), None)

    def active(self):
        return [
            j
            for table in (
                self.holders,
                self.stages,
                self.measures,
                self.purges,
                self.discards,
            )
            for j in table.values()
            if not j.done()
        ]

    def live_holders(self):
        return [h for h in self.holders.values() if not h.done()]

    # --- holders ---

    def hold(self, msg, p):
        key = (p["jobid"], p["gen"])
        return self.serve(Holder, key, lambda: self._new_holder(key, p))

    def _new_holder(self, key, p):
        if p["adopt"] is not None:
            return self._adopting_holder(p)
        self.kept.refuse_over(*key)
        nodes, _ = jobspecs.layout(p["need"], self.policy, len(self.hosts))
        images = p["images"] if nodes == 1 and self.policy.images else 0
        port, secret = (None, None) if images else self._serving(key, nodes)
        js = self._holder_jobspec(
            p,
            rank=self._preferred_rank(p),
            port=port,
            secret=secret,
            images=images,
        )
        return Holder(self.holder_ctx, js, *key, port=port, secret=secret)

    def _serving(self, key, nodes):
        """The first of the ports a new holder over ``nodes`` RSA nodes
        takes, and its volume secret (each None when it needs none)."""
        count = jobspecs.ports_needed(self.policy, nodes)
        if self.simulate or not count:
            return None, None
        try:
            port = self.ports.take(key, count)
        except PortsExhausted as exc:
            raise protocol.BadRequest(
                f"{protocol.topic(protocol.HOLD)}: {exc}"
            ) from None
        secret = (
            secrets.token_urlsafe(24)
            if jobspecs.needs_secret(self.policy, nodes)
            else None
        )
        return port, secret

    def _preferred_rank(self, p):
        """The first preferred host where a one-node reservation surely fits
        now (no holder is still waiting for its allocation), else None."""
        nodes, granules = jobspecs.layout(p["need"], self.policy, len(self.hosts))
        live = self.live_holders()
        if nodes != 1 or not p["prefer"] or any(not h.granted_by_rank() for h in live):
            return None
        used = {}
        for h in live:
            for rank, n in h.granted_by_rank().items():
                used[rank] = used.get(rank, 0) + n
        for host in p["prefer"]:
            rank = next((r for r, name in self.hosts.items() if name == host), None)
            if (
                rank is not None
                and rank not in self.nodes.drained
                and self.policy.node_granules - used.get(rank, 0) >= granules
            ):
                return rank
        return None

    def _adopting_holder(self, p):
        path = p["adopt"].rstrip("/")
        if self.simulate:  # nothing was kept for real: place it as any holder
            js = self._holder_jobspec(
                p,
            )
            return Holder(self.holder_ctx, js, p["jobid"], p["gen"], adopt=path)
        kept = self.kept.for_adoption(path, p, self.live_holders(), self.nodes.down)
        parts = self.kept.parts(kept)
        ranks = [part["rank"] for part in parts]
        granules = jobspecs.adopt_granules(
            p["need"], kept["bytes"], self.policy, len(parts)
        )
        port, secret = (
            (None, None)
            if kept.get("image")  # served by its node's store
            else self._serving((p["jobid"], p["gen"]), len(parts))
        )
        js = self._holder_jobspec(
            p,
            adopt=path,
            adopt_ranks=ranks,
            adopt_bytes=kept["bytes"],
            port=port,
            secret=secret,
        )
        # a drained node lends its granules to a one-node adoption only
        return Holder(
            self.holder_ctx,
            js,
            p["jobid"],
            p["gen"],
            adopt=path,
            adopt_rank=ranks[0] if len(ranks) == 1 else None,
            adopt_granules=granules,
            port=port,
            secret=secret,
        )

    def _holder_jobspec(self, p, **more):
        """The holder subjob for hold request ``p`` (``more``: where and
        how, jobspecs.holder)."""
        return jobspecs.holder(
            self.via,
            self.policy,
            p["jobid"],
            p["gen"],
            p["need"],
            p["userid"],
            len(self.hosts),
            self.environment,
            **more,
        )

    def _sweep_jobspec(self, ranks, gone):
        return jobspecs.sweep(
            self.via, self.policy, self.environment, ranks=ranks, gone=gone
        )

    def _gave_up(self, path):
        """An adopting holder ended before it took its kept RAM disk over:
        nobody holds that RAM disk any more, remove it."""
        if path in self.kept:
            self.discard_kept(path)

    def cancel(self, msg, p):
        key = (p["jobid"], p["gen"])
        holder = self.holders.get(key)
        if holder is None:
            self.notify(Holder.END, **Holder.nothing_ran(key))
        elif holder.done():
            self.notify(Holder.END, **holder.end_fields())
        elif not holder.ended:
            holder.release()
        return {}  # else: it is being swept; its holder-end follows

    # --- stages, measures, purges ---

    def stage(self, msg, p):
        rank = self.nodes.rank_of(p["nodes"][0], "nodes[0]")
        key = (p["jobid"], p["seq"])
        return self.serve(Stage, key, lambda: self._new_stage(key, p, rank))

    def _new_stage(self, key, p, rank):
        if self.simulate:
            return SimulatedStage(self.ctx, *key, p["size"] / self.policy.simulate_rate)
        js = jobspecs.stage(
            self.via, self.policy, p, rank, self.environment, self.policy.stage_workers
        )
        return Stage(self.ctx, js, *key)

    def stop(self, msg, p):
        key = (p["jobid"], p["seq"])
        stage = self.stages.get(key)
        if stage is None:
            self.notify(Stage.END, **Stage.nothing_ran(key, "stopped"))
        elif stage.ended:
            self.notify(Stage.END, **stage.end_fields())
        else:
            stage.stop()
        return {}

    def measure(self, msg, p):
        key = (p["jobid"], p["seq"])
        if self.simulate:
            self.notify(Measure.END, **Measure.nothing_ran(key))
            return {}
        return self.serve(Measure, key, lambda: self._new_measure(key, p))

    def _new_measure(self, key, p):
        return Measure(self.ctx, jobspecs.measure(self.via, p, self.environment), *key)

    def purge(self, msg, p):
        rank = self.nodes.rank_of(p["nodes"][0], "nodes[0]")
        if self.simulate:  # nothing was staged for real: done at once
            self.notify(Purge.END, **Purge.nothing_ran(p["jobid"]))
            return {}
        return self.serve(Purge, p["jobid"], lambda: self._new_purge(p, rank))

    def _new_purge(self, p, rank):
        js = jobspecs.purge(self.via, self.policy, p, rank, self.environment)
        return Purge(self.ctx, js, p["jobid"])

    # --- kept RAM disks ---

    def discard(self, msg, p):
        path = p["path"].rstrip("/")
        where = f"{protocol.topic(protocol.DISCARD)}: path={path!r}"
        held = [h for h in self.live_holders() if path in (h.path, h.adopt)]
        if held:
            jobid, gen = held[0].key
            raise protocol.BadRequest(
                f"{where} is held by holder {jobid}.{gen}: cancel that "
                "holder instead"
            )
        if os.path.dirname(path) != self.policy.ramdisk_root.rstrip("/"):
            raise protocol.BadRequest(
                f"{where} is not a RAM disk under "
                f"{self.policy.ramdisk_root} ([rsa] ramdisk-root)"
            )
        kept = self.kept.get(path)
        if kept is None or self.simulate:
            self.kept.forget(path)  # unknown or already gone: nothing to do
            self.notify(Discard.END, **Discard.nothing_ran(path))
            return {}
        return self.serve(Discard, path, lambda: self._new_discard(path, kept, where))

    def _new_discard(self, path, kept, where):
        # every node holding a part of it that is up (its parts there go too)
        ranks = sorted(
            {part["rank"] for part in self.kept.parts(kept)} - set(self.nodes.down)
        )
        if not ranks:
            raise protocol.BadRequest(f"{where} is on {kept['host']}, which is down")
        js = jobspecs.discard(self.via, self.policy, path, ranks, self.environment)
        return Discard(self.ctx, js, path)

    def discard_kept(self, path):
        """Remove a kept RAM disk nobody will adopt."""
        try:
            self.discard(None, {"path": path})
        except protocol.BadRequest as exc:
            self.log(f"kept RAM disk {path} left in place: {exc}")

    # --- shutdown ---

    def end_all(self, keep):
        """The pool shuts down: nothing new starts, every subjob is asked to
        end; the holders in ``keep`` (keys) that built a RAM disk keep it."""
        self.closed = True
        for job in self.active():
            if isinstance(job, Holder):
                if job.ended:
                    continue
                if job.key in keep and job.path:
                    job.keep()
                else:
                    if job.key in keep:
                        self.log(
                            f"holder {job.key[0]}.{job.key[1]} has no RAM disk yet: "
                            "nothing to keep, releasing it"
                        )
                    job.release()
            elif isinstance(job, (Stage, SimulatedStage)):
                job.stop()
            elif isinstance(job, Measure):
                job.stop("pool shutting down")
            else:
                job.cancel("flux-rsa: pool shutting down")


def listing(work, kept):
    """The answer of `list` (doc/pool.md): what runs now (ended holders
    and stages are not listed), and the kept RAM disks nobody adopted yet."""
    holders = work.live_holders()
    adopting = {h.adopt: h.key for h in holders if h.adopt is not None}
    return {
        "holders": [h.describe() for h in holders],
        "stages": [s.describe() for s in work.stages.values() if not s.ended],
        "measures": [m.describe() for m in work.measures.values() if not m.ended],
        "kept": kept.listing(adopting),
    }
