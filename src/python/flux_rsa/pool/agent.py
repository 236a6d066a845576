"""The pool agent: the pool instance's initial program.

``python3 -m flux_rsa.pool.agent --policy JSON [--notify TOPIC]``

At start-up it loads the memory graph into the pool's Fluxion, sweeps
leftover RAM disks on every pool node (leaving kept ones, which it lists),
opens the PARENT instance through the node-local ``parent-uri``, registers
the ``rsa-pool`` service there (owner-only), records itself in the
parent's KVS (``rsa.pool``) and sends ``pool-ready``.  Then it serves the
methods in ``protocol`` until the pool is stopped.  Every method answers
at once (``drain``/``undrain`` once Fluxion has the change); outcomes are
notifications.

With ``Policy.simulate_rate > 0`` holders, stages and purges are
test-execution jobs (see ``jobspecs``): no process, no mount, no copy.
"""

import argparse
import dataclasses
import errno
import json
import os
import pwd
import secrets
import signal
import sys
import time
from collections import deque

import flux
import flux.constants
import flux.job
import flux.kvs
from flux.conf_builtin import conf_builtin_get
from flux.job import JobID

from flux_rsa.core.config import Policy
from flux_rsa.pool import graph, jgf, jobspecs, protocol
from flux_rsa.pool.holders import Holder, HolderContext
from flux_rsa.pool.nodes import Nodes
from flux_rsa.pool.notifier import Notifier
from flux_rsa.pool.ports import Ports, PortsExhausted, ephemeral_clash
from flux_rsa.pool.stages import Discard, Measure, Purge, SimulatedStage, Stage
from flux_rsa.pool.subjob import Context
from flux_rsa.privileged import caller

#: ended holders, stages and measures remembered for `list` and repeats
KEEP_ENDED = 1000
#: `shutdown`: how long to wait for subjobs to end, then for their
#: notifications to be taken (the service may be busy or gone)
WIND_DOWN_TIMEOUT = 60.0
NOTIFY_GRACE = 5.0
SWEEP_TIMEOUT = 60.0


def log(message):
    print(f"rsa-pool-agent: {message}", file=sys.stderr, flush=True)


class Agent:
    def __init__(self, h, parent, policy, topic, python=sys.executable):
        self.h = h
        self.parent = parent
        self.policy = policy
        self.simulate = policy.simulate_rate > 0
        self.topic = topic
        self.via = caller.choose(python, policy.privilege, policy.imp, os.getuid(),
                                 policy.scripts)
        self.ports = Ports(*policy.port_range())  # of holders spanning nodes
        self.unusable = None  # why privileged operations cannot run here, or None
        self.environment = dict(os.environ)
        self.pool_jobid = int(JobID(h.attr_get("jobid")))
        self.parent_rank = int(parent.attr_get("rank"))
        self.hosts = {}  # pool rank -> host name
        self.nodes = None  # Nodes, once the graph is loaded
        self.ctx = None  # what subjobs see of the agent, once the nodes are known
        self.holder_ctx = None
        self.holders = {}  # (jobid, gen) -> Holder
        self.stages = {}  # (jobid, seq) -> Stage
        self.measures = {}  # (jobid, seq) -> Measure
        self.purges = {}  # jobid -> Purge (running only)
        self.discards = {}  # path -> Discard (running only)
        self.kept = {}  # path -> {jobid, gen, owner, bytes, host, path}
        self.ended = {Holder: deque(), Stage: deque(), SimulatedStage: deque(), Measure: deque()}
        self.notifier = Notifier(parent, topic, self.pool_jobid, log)
        self.watchers = []
        self.stopping = None  # deadline once `shutdown` was asked

    # --- start-up ---

    def start(self):
        t0 = time.monotonic()
        R = graph.load(self.h, self.policy)
        self.hosts = jgf.hosts_by_rank(R)
        self.nodes = Nodes(self.h, self.hosts, self.policy.node_granules, log,
                           self.node_changed)
        self.ctx = Context(self.h, log, self.hosts, self.notify, self.forget)
        self.holder_ctx = HolderContext(self.h, log, self.hosts, self.notify, self.forget,
                                        self.policy, self.nodes, self._sweep_jobspec,
                                        self.adopted, self._gave_up)
        t_graph = time.monotonic() - t0
        if not self.simulate:
            self.unusable = caller.problem(self.via, conf_builtin_get("confdir"),
                                           pwd.getpwuid(os.getuid()).pw_name)
        if self.unusable:
            log(f"RAM disks cannot be made: {self.unusable}; RSA jobs use their directories")
        elif not self.simulate:
            self.sweep()
            self._check_ports()
        self.nodes.watch()
        self.parent.service_register(protocol.SERVICE).get()
        w = self.parent.msg_watcher_create(self._request, flux.constants.FLUX_MSGTYPE_REQUEST,
                                           f"{protocol.SERVICE}.*")
        w.start()
        self.watchers.append(w)
        for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
            sw = self.h.signal_watcher_create(signum, self._signal)
            sw.start()
            self.watchers.append(sw)
        info = self.ready_info()
        flux.kvs.put(self.parent, protocol.KVS_KEY, info)
        flux.kvs.commit(self.parent)
        self.notify(protocol.POOL_READY, **info)
        log(f"ready on parent rank {self.parent_rank}: nodes {info['nodes']}, graph loaded in "
            f"{t_graph:.2f}s, start-up {time.monotonic() - t0:.2f}s"
            + (f", SIMULATING at {self.policy.simulate_rate} bytes/s" if self.simulate else "")
            + (f", {len(self.kept)} kept RAM disk(s)" if self.kept else ""))

    def _check_ports(self):
        """Say so when the servers' ports may be taken by connections."""
        if not jobspecs.ports_needed(self.policy, len(self.hosts)):
            return  # no holder here runs servers
        try:
            with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
                ephemeral = tuple(int(x) for x in f.read().split())
        except (OSError, ValueError):
            return
        why = ephemeral_clash(*self.policy.port_range(), ephemeral)
        if why:
            log(f"warning: {why}")

    def ready_info(self):
        p = self.policy
        return {"jobid": self.pool_jobid, "rank": self.parent_rank,
                "nodes": [self.hosts[r] for r in sorted(self.hosts)],
                "node_capacity": p.node_granules * p.granule, "granule": p.granule,
                "pool_cores": p.pool_cores, "provider": p.provider,
                "ramdisk_root": p.ramdisk_root, "service": protocol.SERVICE,
                "notify": self.topic, "uri": self.h.attr_get("local-uri"),
                "simulate_rate": p.simulate_rate, "privilege": self.privilege()}

    def privilege(self):
        """How privileged operations run here, and why they cannot (or None)."""
        return {**self.via.describe(), "error": self.unusable}

    def sweep(self):
        """Remove RAM disks a crashed pool left behind, on every node, and
        learn the kept ones."""
        js = jobspecs.sweep(self.via, self.policy, self.environment, nodes=len(self.hosts),
                            report_kept=True)
        jobid = flux.job.submit(self.h, js)
        try:
            result = flux.job.result_async(self.h, jobid).wait_for(SWEEP_TIMEOUT).get_info()
        except OSError as exc:
            log(f"sweep job {JobID(jobid).f58} did not end in {SWEEP_TIMEOUT:.0f}s ({exc}); "
                "going on without it")
            flux.job.cancel_async(self.h, jobid)
            return
        R = flux.job.job_info_lookup(self.h, jobid, keys=["R"]).get_decode()["R"]
        by_task = sorted(jgf.hosts_by_rank(R).items())  # task i on the i-th node
        out = flux.job.job_output(self.h, jobid, labelio=True)
        parts = {}  # RAM disk path -> {index: part} of those over several nodes
        for line in (out.stdout + out.stderr).splitlines():
            task, _, text = line.partition(": ")
            kept = _json(text)
            if kept and kept.get("event") == "kept" and task.isdigit():
                # the node the marker names (the holder learnt it from the
                # pool's R), else the node the sweep found it on
                rank, host = by_task[int(task)]
                ranks = {name: r for r, name in self.hosts.items()}
                if kept.get("host") in ranks:
                    rank, host = ranks[kept["host"]], kept["host"]
                entry = {"jobid": kept.get("jobid"), "gen": kept.get("gen"),
                         "owner": kept.get("owner"), "bytes": kept.get("bytes") or 0,
                         "host": host, "rank": rank, "path": kept["path"]}
                if kept.get("part_of"):
                    parts.setdefault(kept["part_of"], {})[kept.get("index")] = {
                        **entry, "of": kept.get("parts")}
                elif kept["path"] not in self.kept:  # (else seen from another node)
                    self.kept[kept["path"]] = entry
            else:
                log(f"sweep: {text}")
        for path, found in parts.items():
            self._kept_over_nodes(path, found)
        for path, kept in sorted(self.kept.items()):
            where = ",".join(p["host"] for p in kept.get("parts", [])) or kept["host"]
            log(f"kept RAM disk {path} on {where} (job {kept['jobid']}, {kept['bytes']} "
                "bytes): adopt or discard it")
        if result.returncode != 0:
            log(f"sweep job {JobID(jobid).f58} exited with {result.returncode}: some leftover "
                f"RAM disks under {self.policy.ramdisk_root} may remain (see above)")

    def _kept_over_nodes(self, path, found):
        """The kept RAM disk ``path`` over several nodes, from its parts
        (``found``: index -> part): listed with every node in order when
        all are there; else its parts are removed (a node rebooted and its
        share is gone: what is left cannot be read whole)."""
        whole = self.kept.get(path)
        count = next(iter(found.values()))["of"]
        if whole is not None and sorted(found) == list(range(count)):
            ordered = [found[i] for i in range(count)]
            whole.update(parts=ordered, bytes=sum(part["bytes"] for part in ordered))
            return
        log(f"kept RAM disk {path}: only parts {sorted(found)} of {count} (and "
            f"{'its' if whole else 'no'} namespace) are left: discarding them")
        self.kept[path] = {**next(iter(found.values())), "path": path,
                           "parts": list(found.values()), "broken": True}
        self.discard_kept(path)

    def stop(self):
        """Leave the parent tidy: no service, no stale KVS record."""
        try:
            self.parent.service_unregister(protocol.SERVICE).get()
            if flux.kvs.get(self.parent, protocol.KVS_KEY).get("jobid") == self.pool_jobid:
                flux.kvs.put_unlink(self.parent, protocol.KVS_KEY)
                flux.kvs.commit(self.parent)
        except (OSError, AttributeError) as exc:
            log(f"leaving the parent: {exc}")

    # --- plumbing ---

    def notify(self, name, **fields):
        self.notifier.send(name, **fields)

    def forget(self, subjob):
        """A subjob ended: keep holders, stages and measures a while for
        `list` and repeated requests."""
        if isinstance(subjob, Purge):
            self.purges.pop(subjob.key, None)
            return
        if isinstance(subjob, Discard):
            self.discards.pop(subjob.key, None)
            if subjob.failure() is None:
                self.kept.pop(subjob.key, None)
            return
        if isinstance(subjob, Holder):
            self.ports.give(subjob.key)
        table = {Holder: self.holders, Stage: self.stages, SimulatedStage: self.stages,
                 Measure: self.measures}[type(subjob)]
        ended = self.ended[type(subjob)]
        ended.append(subjob.key)
        while len(ended) > KEEP_ENDED:
            table.pop(ended.popleft(), None)

    def adopted(self, path):
        """A holder took over the kept RAM disk ``path`` (ramdisk-built is
        going out)."""
        self.kept.pop(path, None)

    def _gave_up(self, path):
        """An adopting holder ended before it took its kept RAM disk over:
        nobody holds that RAM disk any more, remove it."""
        if path in self.kept:
            self.discard_kept(path)

    def _sweep_jobspec(self, ranks, gone):
        return jobspecs.sweep(self.via, self.policy, self.environment, ranks=ranks, gone=gone)

    def discard_kept(self, path):
        """Remove a kept RAM disk an adopting holder gave up before taking it."""
        try:
            self.do_discard(None, {"path": path})
        except protocol.BadRequest as exc:
            log(f"kept RAM disk {path} left in place: {exc}")

    def node_changed(self, rank, down):
        host = self.hosts[rank]
        if down:
            held = sorted(f"{h.key[0]}.{h.key[1]}" for h in self.holders.values()
                          if not h.done() and rank in h.granted_by_rank())
            log(f"RSA node {host} (pool rank {rank}) is down; holders there: {held or 'none'}")
        else:
            log(f"RSA node {host} (pool rank {rank}) is up again")
        self.notify(protocol.NODE_STATE, host=host, rank=rank, state="down" if down else "up")

    def _signal(self, handle, *args):
        log("stopping")
        handle.reactor_stop()

    def active(self):
        return [j for table in (self.holders, self.stages, self.measures, self.purges,
                                self.discards)
                for j in table.values() if not j.done()]

    def _wind_down(self, *args):
        """Stop once every subjob ended and its notification went out."""
        try:
            now = time.monotonic()
            busy = self.active()
            if busy and now < self.stopping:
                return
            if busy:
                log(f"shutdown: {len(busy)} subjob(s) still active after "
                    f"{WIND_DOWN_TIMEOUT:.0f}s")
            elif self.notifier.pending() and now < self.stopping:
                self.stopping = min(self.stopping, now + NOTIFY_GRACE)
                return
            if self.notifier.pending():
                log(f"shutdown: {self.notifier.pending()} notification(s) not taken by "
                    f"{self.topic}")
            self.h.reactor_stop()
        except Exception as exc:
            log(f"shutdown: {exc!r}")
            self.h.reactor_stop()

    def _request(self, handle, watcher, msg, arg):
        try:
            method = msg.topic.split(".", 1)[1]
            try:
                payload = msg.payload
            except (TypeError, ValueError):
                payload = None
            payload = protocol.check(method, payload)
            result = getattr(self, f"do_{method}")(msg, payload)
            if result is not None:
                self.parent.respond(msg, result)
        except (protocol.BadRequest, jobspecs.Unfit) as exc:
            self._error(msg, errno.EINVAL, str(exc))
        except Exception as exc:  # an escaped exception would stop the agent
            log(f"{msg.topic}: {exc!r}")
            self._error(msg, errno.EPROTO, f"{msg.topic}: internal error in the pool agent: {exc!r}")

    def _error(self, msg, errnum, text):
        try:
            self.parent.respond_error(msg, errnum, text)
        except OSError as exc:
            log(f"cannot answer {msg.topic}: {exc}")

    # --- methods ---

    def do_shutdown(self, msg, p):
        if self.stopping is not None:
            return {}  # the first shutdown's keep list counts
        keep = {(k["jobid"], k["gen"]) for k in p["keep"]}
        log("shutdown asked: releasing every holder and stage"
            + (f", keeping the RAM disks of {len(keep)} holder(s)" if keep else ""))
        self.stopping = time.monotonic() + WIND_DOWN_TIMEOUT
        for job in self.active():
            if isinstance(job, Holder):
                if job.ended:
                    continue
                if job.key in keep and job.path:
                    job.keep()
                else:
                    if job.key in keep:
                        log(f"holder {job.key[0]}.{job.key[1]} has no RAM disk yet: nothing to "
                            "keep, releasing it")
                    job.release()
            elif isinstance(job, Stage):
                job.stop()
            elif isinstance(job, Measure):
                job.stop("pool shutting down")
            else:
                job.cancel("flux-rsa: pool shutting down")
        timer = self.h.timer_watcher_create(0.1, self._wind_down, repeat=0.2)
        timer.start()
        self.watchers.append(timer)
        return {}

    def _refuse_if_stopping(self):
        if self.stopping is not None:
            raise protocol.BadRequest("the pool is shutting down (rsa-pool.shutdown); "
                                      "send the request to the next pool")

    def _cannot(self, what):
        return f"{what}: {self.unusable}"

    def do_hold(self, msg, p):
        key = (p["jobid"], p["gen"])
        holder = self.holders.get(key)
        if holder is None and self.unusable:
            self.notify(protocol.HOLDER_END, jobid=key[0], gen=key[1],
                        error=self._cannot("no RAM disk can be made"), kept=None)
        elif holder is None:
            self._refuse_if_stopping()
            if p["adopt"] is not None:
                self.holders[key] = self._adopting_holder(p)
            else:
                self._refuse_over_kept(p)
                nodes, _ = jobspecs.layout(p["need"], self.policy, len(self.hosts))
                port, secret = self._serving(key, nodes)
                js = jobspecs.holder(self.via, self.policy, p["jobid"], p["gen"], p["need"],
                                     p["userid"], len(self.hosts), self.environment,
                                     rank=self._preferred_rank(p), port=port, secret=secret)
                self.holders[key] = Holder(self.holder_ctx, js, *key, port=port, secret=secret)
        elif holder.done():
            self.notify(protocol.HOLDER_END, jobid=key[0], gen=key[1], error=holder.error(),
                        kept=holder.kept_path())
        return {}

    def _serving(self, key, nodes):
        """The first of the ports a new holder over ``nodes`` RSA nodes
        takes, and its volume secret (each None when it needs none)."""
        count = jobspecs.ports_needed(self.policy, nodes)
        if self.simulate or not count:
            return None, None
        try:
            port = self.ports.take(key, count)
        except PortsExhausted as exc:
            raise protocol.BadRequest(f"{protocol.topic(protocol.HOLD)}: {exc}") from None
        secret = secrets.token_urlsafe(24) if jobspecs.needs_secret(self.policy, nodes) else None
        return port, secret

    def _preferred_rank(self, p):
        """The first preferred host where a one-node reservation surely fits
        now (no holder is still waiting for its allocation), else None."""
        nodes, granules = jobspecs.layout(p["need"], self.policy, len(self.hosts))
        live = [h for h in self.holders.values() if not h.done()]
        if nodes != 1 or not p["prefer"] or any(not h.granted_by_rank() for h in live):
            return None
        used = {}
        for h in live:
            for rank, n in h.granted_by_rank().items():
                used[rank] = used.get(rank, 0) + n
        for host in p["prefer"]:
            rank = next((r for r, name in self.hosts.items() if name == host), None)
            if (rank is not None and rank not in self.nodes.drained
                    and self.policy.node_granules - used.get(rank, 0) >= granules):
                return rank
        return None

    def _refuse_over_kept(self, p):
        path = os.path.join(self.policy.ramdisk_root, jobspecs.ramdisk_name(p["jobid"], p["gen"]))
        if path in self.kept:
            raise protocol.BadRequest(
                f"{protocol.topic(protocol.HOLD)}: {path} is a kept RAM disk of job "
                f"{p['jobid']} gen {p['gen']}: adopt it (adopt={path!r}) or discard it first")

    def _adopting_holder(self, p):
        path = p["adopt"].rstrip("/")
        where = f"{protocol.topic(protocol.HOLD)}: adopt={path!r}"
        if self.simulate:  # nothing was kept for real: place it as any holder
            js = jobspecs.holder(self.via, self.policy, p["jobid"], p["gen"], p["need"],
                                 p["userid"], len(self.hosts), self.environment)
            return Holder(self.holder_ctx, js, p["jobid"], p["gen"], adopt=path)
        kept = self.kept.get(path)
        if kept is None:
            owner = [h for h in self.holders.values()
                     if not h.done() and path in (h.path, h.adopt)]
            if owner:
                jobid, gen = owner[0].key
                raise protocol.BadRequest(f"{where} is held by holder {jobid}.{gen} already")
            known = ", ".join(sorted(self.kept)) or "none"
            raise protocol.BadRequest(f"{where} is not a kept RAM disk on this pool's nodes "
                                      f"(kept: {known}); hold without adopt for a new one")
        if kept["jobid"] != p["jobid"]:
            raise protocol.BadRequest(f"{where} was kept for job {kept['jobid']}, not job "
                                      f"{p['jobid']}")
        if kept["owner"] != p["userid"]:
            raise protocol.BadRequest(f"{where} belongs to uid {kept['owner']}, not userid "
                                      f"{p['userid']}")
        busy = [h for h in self.holders.values() if not h.done() and h.adopt == path]
        if busy:
            jobid, gen = busy[0].key
            raise protocol.BadRequest(f"{where} is being adopted by holder {jobid}.{gen}")
        parts = kept.get("parts") or [kept]
        down = [part["host"] for part in parts if part["rank"] in self.nodes.down]
        if down:
            raise protocol.BadRequest(f"{where} is on {','.join(down)}, which is down")
        ranks = [part["rank"] for part in parts]
        granules = jobspecs.adopt_granules(p["need"], kept["bytes"], self.policy, len(parts))
        port, secret = self._serving((p["jobid"], p["gen"]), len(parts))
        js = jobspecs.holder(self.via, self.policy, p["jobid"], p["gen"], p["need"],
                             p["userid"], len(self.hosts), self.environment, adopt=path,
                             adopt_ranks=ranks, adopt_bytes=kept["bytes"], port=port,
                             secret=secret)
        # a drained node lends its granules to a one-node adoption only
        return Holder(self.holder_ctx, js, p["jobid"], p["gen"], adopt=path,
                      adopt_rank=ranks[0] if len(ranks) == 1 else None,
                      adopt_granules=granules, port=port, secret=secret)

    def do_cancel(self, msg, p):
        key = (p["jobid"], p["gen"])
        holder = self.holders.get(key)
        if holder is None or holder.done():
            error = holder.error() if holder else None
            kept = holder.kept_path() if holder else None
            self.notify(protocol.HOLDER_END, jobid=key[0], gen=key[1], error=error, kept=kept)
        elif not holder.ended:
            holder.release()
        return {}  # else: it is being swept; its holder-end follows

    def do_stage(self, msg, p):
        rank = self.nodes.rank_of(p["nodes"][0], "nodes[0]")
        key = (p["jobid"], p["seq"])
        stage = self.stages.get(key)
        if stage is None and self.unusable:
            self.notify(protocol.STAGE_END, jobid=key[0], seq=key[1], ok=False,
                        error=self._cannot("cannot stage"), reused=None)
        elif stage is None:
            self._refuse_if_stopping()
            if self.simulate:
                seconds = p["size"] / self.policy.simulate_rate
                self.stages[key] = SimulatedStage(self.ctx, *key, seconds)
                return {}
            js = jobspecs.stage(self.via, self.policy, p, rank, self.environment,
                                self.policy.stage_workers)
            self.stages[key] = Stage(self.ctx, js, *key)
        elif stage.ended:
            self.notify(protocol.STAGE_END, **stage.end_fields())
        return {}

    def do_stop(self, msg, p):
        key = (p["jobid"], p["seq"])
        stage = self.stages.get(key)
        if stage is None:
            self.notify(protocol.STAGE_END, jobid=key[0], seq=key[1], ok=False, error="stopped",
                        reused=None)
        elif stage.ended:
            self.notify(protocol.STAGE_END, **stage.end_fields())
        else:
            stage.stop()
        return {}

    def do_purge(self, msg, p):
        rank = self.nodes.rank_of(p["nodes"][0], "nodes[0]")
        if self.simulate:  # nothing was staged for real: done at once
            self.notify(protocol.PURGE_END, jobid=p["jobid"], ok=True, error=None)
            return {}
        if self.unusable:
            self.notify(protocol.PURGE_END, jobid=p["jobid"], ok=False,
                        error=self._cannot("cannot drop the inputs"))
        elif p["jobid"] not in self.purges:
            self._refuse_if_stopping()
            js = jobspecs.purge(self.via, self.policy, p, rank, self.environment)
            self.purges[p["jobid"]] = Purge(self.ctx, js, p["jobid"])
        return {}

    def do_measure(self, msg, p):
        key = (p["jobid"], p["seq"])
        if self.simulate:
            self.notify(protocol.MEASURE_END, jobid=key[0], seq=key[1], ok=True, bytes=0,
                        files=0, error=None)
            return {}
        measure = self.measures.get(key)
        if measure is None and self.unusable:
            self.notify(protocol.MEASURE_END, jobid=key[0], seq=key[1], ok=False, bytes=0,
                        files=0, error=self._cannot("cannot measure"))
        elif measure is None:
            self._refuse_if_stopping()
            js = jobspecs.measure(self.via, p, self.environment)
            self.measures[key] = Measure(self.ctx, js, *key)
        elif measure.ended:
            self.notify(protocol.MEASURE_END, jobid=key[0], seq=key[1], **measure.outcome())
        return {}

    def do_discard(self, msg, p):
        path = p["path"].rstrip("/")
        where = f"{protocol.topic(protocol.DISCARD)}: path={path!r}"
        held = [h for h in self.holders.values() if not h.done() and path in (h.path, h.adopt)]
        if held:
            jobid, gen = held[0].key
            raise protocol.BadRequest(f"{where} is held by holder {jobid}.{gen}: cancel that "
                                      "holder instead")
        if os.path.dirname(path) != self.policy.ramdisk_root.rstrip("/"):
            raise protocol.BadRequest(f"{where} is not a RAM disk under "
                                      f"{self.policy.ramdisk_root} ([rsa] ramdisk-root)")
        kept = self.kept.get(path)
        if kept is None or self.simulate:
            self.kept.pop(path, None)  # unknown or already gone: nothing to do
            self.notify(protocol.DISCARD_END, path=path, ok=True, error=None)
        elif self.unusable:
            self.notify(protocol.DISCARD_END, path=path, ok=False,
                        error=self._cannot("cannot remove it"))
        elif path not in self.discards:
            self._refuse_if_stopping()
            # every node holding a part of it that is up (its parts there go too)
            ranks = sorted({part["rank"] for part in kept.get("parts") or [kept]}
                           - set(self.nodes.down))
            if not ranks:
                raise protocol.BadRequest(f"{where} is on {kept['host']}, which is down")
            js = jobspecs.discard(self.via, self.policy, path, ranks, self.environment)
            self.discards[path] = Discard(self.ctx, js, path)
        return {}

    def do_drain(self, msg, p):
        rank = self.nodes.rank_of(p["host"])
        adopting = [(h.key, h.adopt_granules) for h in self.holders.values()
                    if h.waits_to_adopt_on(rank)]
        self.nodes.drain(rank, p["reason"], lambda error: self._answer(msg, error), adopting)
        return None

    def do_undrain(self, msg, p):
        rank = self.nodes.rank_of(p["host"])
        self.nodes.undrain(rank, lambda error: self._answer(msg, error))
        return None

    def _answer(self, msg, error):
        if error is None:
            try:
                self.parent.respond(msg, {})
            except OSError as exc:
                log(f"cannot answer {msg.topic}: {exc}")
        else:
            log(f"{msg.topic}: {error}")
            self._error(msg, errno.EPROTO, f"{msg.topic}: {error}")

    def do_list(self, msg, p):
        """What runs now (ended holders and stages are not listed), and the
        kept RAM disks nobody adopted yet."""
        adopting = {h.adopt: h.key for h in self.holders.values()
                    if h.adopt is not None and not h.done()}
        kept = []
        for path, k in sorted(self.kept.items()):
            if k.get("broken"):
                continue  # being discarded: nothing to adopt
            key = adopting.get(path)
            kept.append({"jobid": k["jobid"], "gen": k["gen"], "host": k["host"], "path": path,
                         "bytes": k["bytes"], "owner": k["owner"],
                         "hosts": [part["host"] for part in k.get("parts", [])] or [k["host"]],
                         "adopting": None if key is None else {"jobid": key[0], "gen": key[1]}})
        return {"holders": [h.describe() for h in self.holders.values() if not h.done()],
                "stages": [s.describe() for s in self.stages.values() if not s.ended],
                "measures": [m.describe() for m in self.measures.values() if not m.ended],
                "kept": kept}

    def do_status(self, msg, p):
        future = self.h.rpc(f"{graph.RESOURCE}.find",
                            {"criteria": "sched-now=allocated", "format": "jgf"}, nodeid=0)
        future.then(self._status_found, msg)
        return None

    def _status_found(self, future, msg):
        try:
            used = jgf.granules_by_rank((future.get().get("R") or {}).get("graph"))
            self.parent.respond(msg, self.status(used))
        except Exception as exc:
            log(f"status: {exc!r}")
            self._error(msg, errno.EPROTO, f"status: asking Fluxion failed: {exc}")

    def status(self, used):
        g = self.policy.granule
        nodes = []
        for rank in sorted(self.hosts):
            total = self.policy.node_granules * g
            reserved = used.get(rank, 0) * g
            holders = [{"jobid": h.key[0], "gen": h.key[1], "bytes": n * g}
                       for h in self.holders.values() if not h.done()
                       for r, n in h.granted_by_rank().items() if r == rank]
            nodes.append({"host": self.hosts[rank], "rank": rank, "total": total,
                          "reserved": reserved, "free": total - reserved, "holders": holders,
                          **self.nodes.describe(rank)})
        return {"nodes": nodes, "granule": g, "notifications_pending": self.notifier.pending(),
                "simulate_rate": self.policy.simulate_rate, "provider": self.policy.provider,
                "privilege": self.privilege()}


def _json(text):
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python3 -m flux_rsa.pool.agent",
                                description="flux-rsa pool agent (the pool's initial program)")
    p.add_argument("--policy", required=True, help="the site Policy as JSON")
    p.add_argument("--notify", default=protocol.NOTIFY_TOPIC,
                   help="topic of notifications on the parent (default %(default)s)")
    return p.parse_args(argv)


def policy_from_json(text):
    values = json.loads(text)
    names = {f.name for f in dataclasses.fields(Policy)}
    return Policy(**{k: v for k, v in values.items() if k in names})


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    policy = policy_from_json(args.policy)
    h = flux.Flux()
    try:
        uri = h.attr_get("parent-uri")
    except OSError:
        uri = None
    if not uri:
        log("no parent-uri: the agent must be the initial program of the pool instance "
            "(started by flux_rsa.pool.launch)")
        return 1
    parent = flux.Flux(uri)
    parent.set_reactor(h.get_reactor())  # one reactor serves both instances
    agent = Agent(h, parent, policy, args.notify)
    try:
        agent.start()
    except (graph.GraphError, OSError, ValueError) as exc:
        log(f"cannot start: {exc}")
        return 1
    try:
        h.reactor_run()
    finally:
        agent.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
