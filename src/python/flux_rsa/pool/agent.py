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

The agent is start-up and routing: what the methods do lives in its parts,
``work`` (the subjobs: holders, stages, measures, purges, discards; the
answer of ``list``), ``kept`` (the RAM disks an earlier pool kept) and
``nodes`` (up, down, drained; each node's part of the answer of
``status``).

With ``Policy.simulate_rate > 0`` holders, stages and purges are
test-execution jobs (see ``jobspecs``): no process, no mount, no copy.
"""

import argparse
import dataclasses
import errno
import json
import os
import pwd
import signal
import sys
import time

import flux
import flux.constants
import flux.job
import flux.kvs
from flux.conf_builtin import conf_builtin_get
from flux.job import JobID

from flux_rsa.core.config import Policy
from flux_rsa.pool import graph, jgf, jobspecs, protocol
from flux_rsa.pool.kept import Kept
from flux_rsa.pool.nodes import Nodes, capacity
from flux_rsa.pool.notifier import Notifier
from flux_rsa.pool.ports import Ports, ephemeral_clash
from flux_rsa.pool.stores import Stores
from flux_rsa.pool.subjob import Context
from flux_rsa.pool.work import Work, listing
from flux_rsa.privileged import caller

#: `shutdown`: how long to wait for subjobs to end, then for their
#: notifications to be taken (the service may be busy or gone)
WIND_DOWN_TIMEOUT = 60.0
NOTIFY_GRACE = 5.0
SWEEP_TIMEOUT = 60.0
#: start-up waits at most this long for every node's image store to serve
STORES_TIMEOUT = 30.0


def log(message):
    print(f"rsa-pool-agent: {message}", file=sys.stderr, flush=True)


class Agent:
    def __init__(self, h, parent, policy, topic, python=sys.executable):
        self.h = h
        self.parent = parent
        self.policy = policy
        self.simulate = policy.simulate_rate > 0
        self.topic = topic
        self.via = caller.choose(
            python, policy.privilege, policy.imp, os.getuid(), policy.scripts
        )
        self.unusable = None  # why privileged operations cannot run here, or None
        self.environment = dict(os.environ)
        self.pool_jobid = int(JobID(h.attr_get("jobid")))
        self.parent_rank = int(parent.attr_get("rank"))
        self.hosts = {}  # pool rank -> host name
        self.nodes = None  # Nodes, once the graph is loaded
        self.kept = Kept(policy.ramdisk_root, log)
        self.work = None  # Work, once the nodes are known
        self.notifier = Notifier(parent, topic, self.pool_jobid, log)
        self.watchers = []
        self.stopping = None  # deadline once `shutdown` was asked
        self.stores = None  # Stores: every node's image store, when images are made
        self.methods = {}  # protocol method -> its handler(msg, payload)

    # --- start-up ---

    def start(self):
        t0 = time.monotonic()
        R = graph.load(self.h, self.policy)
        self.hosts = jgf.hosts_by_rank(R)
        self.nodes = Nodes(
            self.h, self.hosts, self.policy.node_granules, log, self.node_changed
        )
        t_graph = time.monotonic() - t0
        if not self.simulate:
            self.unusable = caller.problem(
                self.via, conf_builtin_get("confdir"), pwd.getpwuid(os.getuid()).pw_name
            )
        ports = Ports(*self.policy.port_range())
        self.work = Work(
            self.h,
            log,
            self.hosts,
            self.notify,
            self.policy,
            self.via,
            self.environment,
            self.nodes,
            ports,
            self.kept,
            self.unusable,
        )
        self.methods = self.routes()
        if self.unusable:
            log(
                f"RAM disks cannot be made: {self.unusable}; RSA jobs use their directories"
            )
        elif not self.simulate:
            self.sweep()
            self._check_ports()
            if self.policy.images:
                self.serve_stores(ports)
        self.nodes.watch()
        self.parent.service_register(protocol.SERVICE).get()
        w = self.parent.msg_watcher_create(
            self._request, flux.constants.FLUX_MSGTYPE_REQUEST, f"{protocol.SERVICE}.*"
        )
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
        log(
            f"ready on parent rank {self.parent_rank}: nodes {info['nodes']}, graph loaded in "
            f"{t_graph:.2f}s, start-up {time.monotonic() - t0:.2f}s"
            + (
                f", SIMULATING at {self.policy.simulate_rate} bytes/s"
                if self.simulate
                else ""
            )
            + (f", {len(self.kept)} kept RAM disk(s)" if self.kept else "")
        )

    def serve_stores(self, ports):
        """Start every node's image store and wait (bounded) until each
        serves; one that does not is logged and shown in ``pool-ready``."""
        ctx = Context(self.h, log, self.hosts, self.notify, lambda job: None)
        self.stores = Stores(
            ctx, self.via, self.policy, self.environment, self.hosts, ports
        )

        def check(*args):
            if self.stores.settled():
                self.h.reactor_stop()

        poll = self.h.timer_watcher_create(0.0, check, repeat=0.05)
        give_up = self.h.timer_watcher_create(
            STORES_TIMEOUT, lambda *a: self.h.reactor_stop()
        )
        poll.start()
        give_up.start()
        self.h.reactor_run()
        poll.stop()
        give_up.stop()
        for host, why in sorted(self.stores.problems().items()):
            log(f"image store of {host} does not serve: {why}")

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
        return {
            "jobid": self.pool_jobid,
            "rank": self.parent_rank,
            "nodes": [self.hosts[r] for r in sorted(self.hosts)],
            "node_capacity": p.node_granules * p.granule,
            "granule": p.granule,
            "pool_cores": p.pool_cores,
            "provider": p.provider,
            "ramdisk_root": p.ramdisk_root,
            "service": protocol.SERVICE,
            "notify": self.topic,
            "uri": self.h.attr_get("local-uri"),
            "simulate_rate": p.simulate_rate,
            "privilege": self.privilege(),
            # RSA nodes whose image store does not serve, and why
            "stores": self.stores.problems() if self.stores is not None else {},
        }

    def privilege(self):
        """How privileged operations run here, and why they cannot (or None)."""
        return {**self.via.describe(), "error": self.unusable}

    def sweep(self):
        """Remove RAM disks a crashed pool left behind, on every node, and
        learn the kept ones."""
        js = jobspecs.sweep(
            self.via,
            self.policy,
            self.environment,
            nodes=len(self.hosts),
            report_kept=True,
        )
        jobid = flux.job.submit(self.h, js)
        try:
            result = (
                flux.job.result_async(self.h, jobid).wait_for(SWEEP_TIMEOUT).get_info()
            )
        except OSError as exc:
            log(
                f"sweep job {JobID(jobid).f58} did not end in {SWEEP_TIMEOUT:.0f}s ({exc}); "
                "going on without it"
            )
            flux.job.cancel_async(self.h, jobid)
            return
        R = flux.job.job_info_lookup(self.h, jobid, keys=["R"]).get_decode()["R"]
        by_task = sorted(jgf.hosts_by_rank(R).items())  # task i on the i-th node
        out = flux.job.job_output(self.h, jobid, labelio=True)
        self.kept.learn(
            (out.stdout + out.stderr).splitlines(),
            by_task,
            self.hosts,
            self.work.discard_kept,
        )
        if result.returncode != 0:
            log(
                f"sweep job {JobID(jobid).f58} exited with {result.returncode}: some leftover "
                f"RAM disks under {self.policy.ramdisk_root} may remain (see above)"
            )

    def stop(self):
        """Leave the parent tidy: no service, no stale KVS record."""
        try:
            self.parent.service_unregister(protocol.SERVICE).get()
            if (
                flux.kvs.get(self.parent, protocol.KVS_KEY).get("jobid")
                == self.pool_jobid
            ):
                flux.kvs.put_unlink(self.parent, protocol.KVS_KEY)
                flux.kvs.commit(self.parent)
        except (OSError, AttributeError) as exc:
            log(f"leaving the parent: {exc}")

    # --- routing ---

    def routes(self):
        """Each method's handler: ``handler(msg, payload)`` answers with
        what it returns, or later when it returns None."""
        w = self.work
        return {
            protocol.HOLD: w.hold,
            protocol.CANCEL: w.cancel,
            protocol.STAGE: w.stage,
            protocol.STOP: w.stop,
            protocol.PURGE: w.purge,
            protocol.MEASURE: w.measure,
            protocol.DISCARD: w.discard,
            protocol.LIST: self.do_list,
            protocol.STATUS: self.do_status,
            protocol.SHUTDOWN: self.do_shutdown,
            protocol.DRAIN: self.do_drain,
            protocol.UNDRAIN: self.do_undrain,
        }

    def notify(self, name, **fields):
        self.notifier.send(name, **fields)

    def node_changed(self, rank, down):
        host = self.hosts[rank]
        if down:
            held = sorted(
                f"{h.key[0]}.{h.key[1]}"
                for h in self.work.live_holders()
                if rank in h.granted_by_rank()
            )
            log(
                f"RSA node {host} (pool rank {rank}) is down; holders there: {held or 'none'}"
            )
        else:
            log(f"RSA node {host} (pool rank {rank}) is up again")
        self.notify(
            protocol.NODE_STATE, host=host, rank=rank, state="down" if down else "up"
        )

    def _signal(self, handle, *args):
        log("stopping")
        handle.reactor_stop()

    def _request(self, handle, watcher, msg, arg):
        try:
            method = msg.topic.split(".", 1)[1]
            try:
                payload = msg.payload
            except (TypeError, ValueError):
                payload = None
            payload = protocol.check(method, payload)
            result = self.methods[method](msg, payload)
            if result is not None:
                self.parent.respond(msg, result)
        except (protocol.BadRequest, jobspecs.Unfit) as exc:
            self._error(msg, errno.EINVAL, str(exc))
        except Exception as exc:  # an escaped exception would stop the agent
            log(f"{msg.topic}: {exc!r}")
            self._error(
                msg,
                errno.EPROTO,
                f"{msg.topic}: internal error in the pool agent: {exc!r}",
            )

    def _error(self, msg, errnum, text):
        try:
            self.parent.respond_error(msg, errnum, text)
        except OSError as exc:
            log(f"cannot answer {msg.topic}: {exc}")

    def _answer(self, msg, error):
        if error is None:
            try:
                self.parent.respond(msg, {})
            except OSError as exc:
                log(f"cannot answer {msg.topic}: {exc}")
        else:
            log(f"{msg.topic}: {error}")
            self._error(msg, errno.EPROTO, f"{msg.topic}: {error}")

    # --- the methods the agent answers itself ---

    def do_shutdown(self, msg, p):
        if self.stopping is not None:
            return {}  # the first shutdown's keep list counts
        keep = {(k["jobid"], k["gen"]) for k in p["keep"]}
        log(
            "shutdown asked: releasing every holder and stage"
            + (f", keeping the RAM disks of {len(keep)} holder(s)" if keep else "")
        )
        self.stopping = time.monotonic() + WIND_DOWN_TIMEOUT
        self.work.end_all(keep)
        timer = self.h.timer_watcher_create(0.1, self._wind_down, repeat=0.2)
        timer.start()
        self.watchers.append(timer)
        return {}

    def _wind_down(self, *args):
        """Stop once every subjob ended and its notification went out; the
        image stores last, when no holder is left to use them."""
        try:
            now = time.monotonic()
            busy = self.work.active()
            if busy and now < self.stopping:
                return
            if self.stores is not None and self.stores.active():
                self.stores.stop()  # (no holder left, or none will end now)
                if now < self.stopping:
                    return
            if busy:
                log(
                    f"shutdown: {len(busy)} subjob(s) still active after "
                    f"{WIND_DOWN_TIMEOUT:.0f}s"
                )
            elif self.notifier.pending() and now < self.stopping:
                self.stopping = min(self.stopping, now + NOTIFY_GRACE)
                return
            if self.notifier.pending():
                log(
                    f"shutdown: {self.notifier.pending()} notification(s) not taken by "
                    f"{self.topic}"
                )
            self.h.reactor_stop()
        except Exception as exc:
            log(f"shutdown: {exc!r}")
            self.h.reactor_stop()

    def do_drain(self, msg, p):
        rank = self.nodes.rank_of(p["host"])
        adopting = [
            (h.key, h.adopt_granules)
            for h in self.work.holders.values()
            if h.waits_to_adopt_on(rank)
        ]
        self.nodes.drain(
            rank, p["reason"], lambda error: self._answer(msg, error), adopting
        )
        return None

    def do_undrain(self, msg, p):
        rank = self.nodes.rank_of(p["host"])
        self.nodes.undrain(rank, lambda error: self._answer(msg, error))
        return None

    def do_list(self, msg, p):
        return listing(self.work, self.kept)

    def do_status(self, msg, p):
        future = self.h.rpc(
            f"{graph.RESOURCE}.find",
            {"criteria": "sched-now=allocated", "format": "jgf"},
            nodeid=0,
        )
        future.then(self._status_found, msg)
        return None

    def _status_found(self, future, msg):
        try:
            used = jgf.granules_by_rank((future.get().get("R") or {}).get("graph"))
            g = self.policy.granule
            self.parent.respond(
                msg,
                {
                    "nodes": capacity(
                        used,
                        self.policy,
                        self.hosts,
                        self.nodes,
                        self.work.live_holders(),
                    ),
                    "granule": g,
                    "notifications_pending": self.notifier.pending(),
                    "simulate_rate": self.policy.simulate_rate,
                    "provider": self.policy.provider,
                    "privilege": self.privilege(),
                },
            )
        except Exception as exc:
            log(f"status: {exc!r}")
            self._error(msg, errno.EPROTO, f"status: asking Fluxion failed: {exc}")


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="python3 -m flux_rsa.pool.agent",
        description="flux-rsa pool agent (the pool's initial program)",
    )
    p.add_argument("--policy", required=True, help="the site Policy as JSON")
    p.add_argument(
        "--notify",
        default=protocol.NOTIFY_TOPIC,
        help="topic of notifications on the parent (default %(default)s)",
    )
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
        log(
            "no parent-uri: the agent must be the initial program of the pool instance "
            "(started by flux_rsa.pool.launch)"
        )
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
