"""The pool agent: the pool instance's initial program.

``python3 -m flux_rsa.pool.agent --policy JSON [--notify TOPIC]``

At start-up it loads the memory graph into the pool's Fluxion, sweeps
leftover RAM disks on every pool node, opens the PARENT instance through
the node-local ``parent-uri``, registers the ``rsa-pool`` service there
(owner-only), records itself in the parent's KVS (``rsa.pool``) and sends
``pool-ready``.  Then it serves the methods in ``protocol`` until the pool
is stopped.  Every method answers at once; outcomes are notifications.
"""

import argparse
import dataclasses
import errno
import json
import os
import signal
import sys
import time
from collections import deque

import flux
import flux.constants
import flux.job
import flux.kvs
from flux.job import JobID

from flux_rsa.core.config import Policy
from flux_rsa.pool import graph, jgf, jobspecs, protocol
from flux_rsa.pool.holders import Holder
from flux_rsa.pool.notifier import Notifier
from flux_rsa.pool.stages import Purge, Stage

#: ended holders and stages remembered for `list` and repeated requests
KEEP_ENDED = 1000
#: `shutdown`: how long to wait for subjobs to end, then for their
#: notifications to be taken (the service may be busy or gone)
DRAIN_TIMEOUT = 60.0
NOTIFY_GRACE = 5.0
SWEEP_TIMEOUT = 60.0


def log(message):
    print(f"rsa-pool-agent: {message}", file=sys.stderr, flush=True)


class Agent:
    def __init__(self, h, parent, policy, topic, python=sys.executable):
        self.h = h
        self.parent = parent
        self.policy = policy
        self.topic = topic
        self.python = python
        self.environment = dict(os.environ)
        self.log = log
        self.pool_jobid = int(JobID(h.attr_get("jobid")))
        self.parent_rank = int(parent.attr_get("rank"))
        self.hosts = {}  # pool rank -> host name
        self.holders = {}  # (jobid, gen) -> Holder
        self.stages = {}  # (jobid, seq) -> Stage
        self.purges = {}  # jobid -> Purge (running only)
        self.ended = {Holder: deque(), Stage: deque()}
        self.notifier = Notifier(parent, topic, self.pool_jobid, log)
        self.watchers = []
        self.draining = None  # deadline once `shutdown` was asked

    # --- start-up ---

    def start(self):
        t0 = time.monotonic()
        R = graph.load(self.h, self.policy)
        self.hosts = jgf.hosts_by_rank(R)
        t_graph = time.monotonic() - t0
        self.sweep()
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
            f"{t_graph:.2f}s, start-up {time.monotonic() - t0:.2f}s")

    def ready_info(self):
        p = self.policy
        return {"jobid": self.pool_jobid, "rank": self.parent_rank,
                "nodes": [self.hosts[r] for r in sorted(self.hosts)],
                "node_capacity": p.node_granules * p.granule, "granule": p.granule,
                "pool_cores": p.pool_cores, "provider": p.provider,
                "ramdisk_root": p.ramdisk_root, "service": protocol.SERVICE,
                "notify": self.topic, "uri": self.h.attr_get("local-uri")}

    def sweep(self):
        """Remove RAM disks a crashed pool left behind, on every node."""
        js = jobspecs.sweep(self.python, self.policy, self.environment, nodes=len(self.hosts))
        jobid = flux.job.submit(self.h, js)
        try:
            result = flux.job.result_async(self.h, jobid).wait_for(SWEEP_TIMEOUT).get_info()
        except OSError as exc:
            log(f"sweep job {JobID(jobid).f58} did not end in {SWEEP_TIMEOUT:.0f}s ({exc}); "
                "going on without it")
            flux.job.cancel_async(self.h, jobid)
            return
        out = flux.job.job_output(self.h, jobid)
        for line in (out.stdout + out.stderr).splitlines():
            log(f"sweep: {line}")
        if result.returncode != 0:
            log(f"sweep job {JobID(jobid).f58} exited with {result.returncode}: some leftover "
                f"RAM disks under {self.policy.ramdisk_root} may remain (see above)")

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
        """A holder or stage ended: keep it a while for `list` and repeats."""
        if isinstance(subjob, Purge):
            self.purges.pop(subjob.key, None)
            return
        table = self.holders if isinstance(subjob, Holder) else self.stages
        ended = self.ended[type(subjob)]
        ended.append(subjob.key)
        while len(ended) > KEEP_ENDED:
            table.pop(ended.popleft(), None)

    def _signal(self, handle, *args):
        log("stopping")
        handle.reactor_stop()

    def active(self):
        return [j for table in (self.holders, self.stages, self.purges)
                for j in table.values() if not j.done()]

    def _drain(self, *args):
        """Stop once every subjob ended and its notification went out."""
        try:
            now = time.monotonic()
            busy = self.active()
            if busy and now < self.draining:
                return
            if busy:
                log(f"shutdown: {len(busy)} subjob(s) still active after {DRAIN_TIMEOUT:.0f}s")
            elif self.notifier.pending() and now < self.draining:
                self.draining = min(self.draining, now + NOTIFY_GRACE)
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
        if self.draining is None:
            log("shutdown asked: releasing every holder and stage")
            self.draining = time.monotonic() + DRAIN_TIMEOUT
            for job in self.active():
                if isinstance(job, Holder):
                    if not job.ended:
                        job.release()
                elif isinstance(job, Stage):
                    job.stop()
                else:
                    job.cancel("flux-rsa: pool shutting down")
            timer = self.h.timer_watcher_create(0.1, self._drain, repeat=0.2)
            timer.start()
            self.watchers.append(timer)
        return {}

    def _refuse_if_draining(self):
        if self.draining is not None:
            raise protocol.BadRequest("the pool is shutting down (rsa-pool.shutdown); "
                                      "send the request to the next pool")

    def do_hold(self, msg, p):
        key = (p["jobid"], p["gen"])
        holder = self.holders.get(key)
        if holder is None:
            self._refuse_if_draining()
            js = jobspecs.holder(self.python, self.policy, p["jobid"], p["gen"], p["need"],
                                 p["userid"], len(self.hosts), self.environment)
            self.holders[key] = Holder(self, js, *key)
        elif holder.done():
            self.notify(protocol.HOLDER_END, jobid=key[0], gen=key[1], error=holder.error())
        return {}

    def do_cancel(self, msg, p):
        key = (p["jobid"], p["gen"])
        holder = self.holders.get(key)
        if holder is None or holder.done():
            error = holder.error() if holder else None
            self.notify(protocol.HOLDER_END, jobid=key[0], gen=key[1], error=error)
        elif not holder.ended:
            holder.release()
        return {}  # else: it is being swept; its holder-end follows

    def do_stage(self, msg, p):
        rank = self._rank_of(p["nodes"][0])
        key = (p["jobid"], p["seq"])
        stage = self.stages.get(key)
        if stage is None:
            self._refuse_if_draining()
            js = jobspecs.stage(self.python, p, rank, self.environment, self.policy.stage_workers)
            self.stages[key] = Stage(self, js, *key)
        elif stage.ended:
            ok, error = stage.outcome()
            self.notify(protocol.STAGE_END, jobid=key[0], seq=key[1], ok=ok, error=error)
        return {}

    def do_stop(self, msg, p):
        key = (p["jobid"], p["seq"])
        stage = self.stages.get(key)
        if stage is None or stage.ended:
            ok, error = stage.outcome() if stage else (False, "stopped")
            self.notify(protocol.STAGE_END, jobid=key[0], seq=key[1], ok=ok, error=error)
        else:
            stage.stop()
        return {}

    def do_purge(self, msg, p):
        rank = self._rank_of(p["nodes"][0])
        if p["jobid"] not in self.purges:
            self._refuse_if_draining()
            js = jobspecs.purge(self.python, p, rank, self.environment)
            self.purges[p["jobid"]] = Purge(self, js, p["jobid"])
        return {}

    def do_list(self, msg, p):
        """What runs now (ended holders and stages are not listed)."""
        return {"holders": [h.describe() for h in self.holders.values() if not h.done()],
                "stages": [s.describe() for s in self.stages.values() if not s.ended]}

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
                          "reserved": reserved, "free": total - reserved, "holders": holders})
        return {"nodes": nodes, "granule": g, "notifications_pending": self.notifier.pending()}

    def _rank_of(self, host):
        for rank, name in self.hosts.items():
            if name == host:
                return rank
        raise protocol.BadRequest(
            f"nodes[0]={host!r} is not a pool node (pool nodes: "
            f"{', '.join(self.hosts[r] for r in sorted(self.hosts))}); give the holder's nodes "
            "from holder-alloc")


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
