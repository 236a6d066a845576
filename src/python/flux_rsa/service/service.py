"""The RSA service: events of RSA jobs (from the jobtap plugin; from the
job-manager journal only to catch up at load), reads of job-manager's
queue and pool events in, core transitions, actions out.  Records go to
the KVS in batched, asynchronous commits while their actions are sent at
once: a commit can take seconds when job-manager keeps the KVS busy (a
burst of cancels), and no action may wait for it.  After a crash a record
can lag behind what the pool was asked to do; every action is idempotent
and the restart reconciles both ways (orphan holders and stages are
cancelled, in-flight requests are asked again).
"""

import collections
import dataclasses
import errno
import json
import os
import sys
import time

import flux.job
import flux.kvs
from flux.idset import IDset
from flux.job import JournalConsumer

from flux_rsa.core import BadRequest, IllegalEvent, Policy, accepts, admit, parse_request, process, settle
from flux_rsa.core import events as E
from flux_rsa.core import actions as A
from flux_rsa.core import inflight, ondeck, outputs, rates, reuse
from flux_rsa.core.states import PRE_RUN, RsaState
from flux_rsa.pool import protocol
from flux_rsa.service import store, wire
from flux_rsa.privileged import caller
from flux_rsa.service.afterstaged import Waiters
from flux_rsa.service.execute import Executor
from flux_rsa.service.mounts import Mounts
from flux_rsa.service.jobs import UNSURE, Queue, Tracker, ended_from_eventlog
from flux_rsa.service.pool import PoolLink

S = RsaState
TICK = 2.0  # seconds between on-deck passes when nothing else happens
PLAN_DELAY = 0.05  # on-deck passes are batched: at most one per PLAN_DELAY
#: records are committed at most once per SAVE_DELAY, one commit at a time:
#: each commit rewrites the rsa.jobs directory (one entry per record, up to
#: `keep` + active), and committing it at every turn of the reactor kept the
#: KVS so busy at 2,000 jobs that job-exec's release of finished jobs waited
#: behind it (compute nodes held up to 0.4 s after their job ended)
SAVE_DELAY = 0.2
LATENCY_SAMPLES = 20000
#: events of RSA jobs that change the queue the on-deck rule looks at
QUEUE_CHANGES = frozenset({"submit", "priority", "alloc", "clean", "flux-restart", "exception"})

#: the job events the service follows (Tracker.feed).  The jobtap plugin
#: sends them for jobs that mention rsa (rsa.job-event); the journal,
#: filtered to them, replays what happened while the service was away,
#: and is closed once it has caught up: a job without rsa costs nothing
JOB_EVENTS = ("submit", "priority", "flux-restart", "alloc", "rsa-ready", "start", "finish",
              "exception", "clean")
#: the on-deck pass reads the jobs without rsa and the scheduler's
#: estimates from job-manager (job-manager.list: every active job with its
#: state, priority and annotations, exact when it answers).  A read costs
#: the service (and job-manager about as much) time that grows with the
#: number of active jobs, so reads are spaced: at least QUERY_GAP apart,
#: and far enough apart that handling them takes the service at most
#: QUERY_DUTY of the time
QUERY_GAP = 0.05
QUERY_DUTY = 0.1


class Journal(JournalConsumer):
    """The job-manager journal, only the events in JOB_EVENTS."""

    @property
    def request_payload(self):
        return {"full": self.full, "allow": {name: 1 for name in JOB_EVENTS}}


def memory_kb(field, default=None):
    """VmHWM (peak) or VmRSS (now) of this process, in KiB.  Not
    ru_maxrss: Linux keeps that across execve, so a module started by a
    broker that had grown big would report the broker's size."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return default


def shown(rec):
    """A record as `flux rsa status` shows it: without the secret that lets
    a client mount its RAM disk."""
    d = rec.to_dict()
    if d.get("volume"):
        d["volume"] = {k: v for k, v in d["volume"].items() if k != "secret"}
    return d


def timer_event(action, t):
    """The core event a StartTimer action asked for."""
    if action.name == "delay":
        return E.InputReleased(t, why="delay")
    if action.name == "late":
        return E.LateTimeout(t)
    if action.name == "retry":
        return E.RetryStage(t)
    return E.Timeout(t, action.state, action.since)


class Service:
    def __init__(self, h, log, policy: Policy, launch_pool=None):
        self.h = h
        self.log = log
        self.policy = policy
        self.records = store.load(h)
        self.drained = store.load_drained(h)  # RSA node -> reason
        self.tracker = Tracker()
        self.store = store.Store(h, log)
        self.pool = PoolLink(h, log)
        self.mounts = Mounts(h, log, self.via, self.withdrawn)
        self.execute = Executor(h, log, self.pool, self.set_timer, self.tracker.active, self.mounts)
        self.execute.deliver = self.withdrawn
        self.launch_pool = launch_pool
        self.keeper = None  # PoolKeeper, set by launch_pool
        self.timers = {}
        self.actions = []  # (intake time, action) waiting for their records to be saved
        self.intake = time.time()  # when the message being handled arrived
        self.latency = collections.deque(maxlen=LATENCY_SAMPLES)  # seconds, intake -> action sent
        self.plan_w = h.timer_watcher_create(PLAN_DELAY, self._plan)
        self.plan_armed = False
        self.queue = Queue(self.tracker)
        self.reading = False  # a read is out
        self.plan_again = False  # a pass was asked for while it was out
        self.next_read = 0.0  # monotonic time the next read may start
        self.again_w_armed = False
        self.reads = collections.deque(maxlen=LATENCY_SAMPLES)  # seconds, queue read sent -> pass done
        self.again_w = h.timer_watcher_create(QUERY_GAP, self._again)
        self.starts = {}  # start requests for jobs not seen yet: jobid -> ranks
        self.replayed = False
        self.flush_armed = False
        self.flush_w = h.timer_watcher_create(0.0, self._flush)
        self.save_armed = False
        self.save_w = h.timer_watcher_create(SAVE_DELAY, self._save)
        self.tick_w = h.timer_watcher_create(TICK, self._tick, repeat=TICK)
        self.journal = None
        self.waiters = Waiters(log)  # --dependency=afterstaged:JOBID

    # --- life cycle ---

    def start(self):
        self.journal = Journal(self.h, full=True, include_sentinel=True)
        self.journal.start()
        self.journal.set_callback(self.on_journal)
        self.tick_w.start()
        if self.launch_pool is not None:
            try:
                self.launch_pool(self)
            except Exception as exc:
                self.log.error(f"rsa: cannot start the RSA pool: {exc!r} (jobs run on persistent storage until it is up)")

    def stop(self):
        self.tick_w.stop()
        self.flush_w.stop()
        self.save_w.stop()
        for w in self.timers.values():
            w.stop()
        if self.journal is not None:
            self.journal.stop()

    # --- applying events ---

    def apply(self, jobid, event):
        rec = self.records.get(jobid)
        if rec is None:
            return
        try:
            new, actions = process(rec, event)
        except IllegalEvent as exc:
            self.log.error(f"rsa: {exc} (event dropped)")
            return
        self.commit(rec, new, actions)

    def commit(self, old, new, actions):
        if new != old:
            self.records[new.jobid] = new
            self.store.save(new)
            self.waiters.check(new)
            if old is None or new.rsa_state is not old.rsa_state:
                self.actions.append((self.intake, ("state", new)))
                self.arm_plan()
        self.actions.extend((self.intake, a) for a in actions)
        self.arm_flush()

    def admit(self, facts, t):
        """A new job: a record if it mentions rsa (INELIGIBLE ones too)."""
        if facts.rsa is None or facts.jobid in self.records:
            return
        try:
            request = parse_request(facts.rsa)
            rec = admit(facts.jobid, facts.userid, facts.nnodes, request, self.policy, t)
        except BadRequest as exc:
            rec = admit(facts.jobid, facts.userid, facts.nnodes, parse_request(None), self.policy, t)
            rec = dataclasses.replace(rec, reason=str(exc))
        rec, actions = settle(rec, E.Event(t))  # e.g. measure data_in for sizing
        self.commit(None, rec, actions)
        if facts.jobid in self.starts:
            ranks = self.starts.pop(facts.jobid)
            self.apply(facts.jobid, E.Starting(t, ranks=ranks))

    # --- the journal ---

    def on_journal(self, entry):
        if entry is None:
            return  # the journal closed (below)
        self.intake = time.time()
        try:
            if entry.is_empty():
                self.replay_done()
                self.journal.stop()  # from now on the plugin tells
                self.journal = None
                return
            jobid = int(entry.jobid)
            if self.keeper is not None and jobid == self.keeper.jobid:
                self.pool_job_entry(jobid, entry)
                return
            self.feed(jobid, entry.name, entry.timestamp, entry.context or {}, entry.jobspec)
        except Exception as exc:  # never let one entry kill the module
            self.log.error(f"rsa: journal entry {entry}: {exc!r}")

    def on_job_event(self, payload):
        """An event of a job that mentions rsa, from the jobtap plugin."""
        self.intake = time.time()
        if payload.get("name") not in JOB_EVENTS:
            raise ValueError(f"job-event {payload.get('name')!r}: expected one of {', '.join(JOB_EVENTS)}")
        self.feed(int(payload["id"]), payload["name"], float(payload["timestamp"]),
                  payload.get("context") or {}, payload.get("jobspec"))

    def feed(self, jobid, name, t, context, jobspec=None):
        facts, new, events = self.tracker.feed(jobid, name, t, context, jobspec)
        if name in QUEUE_CHANGES:
            self.arm_plan()
        if new:
            self.admit(facts, t)
        if UNSURE in events:
            events = self.ended(jobid)
        for ev in events:
            self.apply(jobid, ev)

    def ended(self, jobid):
        """Core events for a job that went inactive, from its eventlog
        (those its record has seen already are ignored by the core)."""
        rec = self.records.get(jobid)
        if rec is None or rec.final:
            return []
        return ended_from_eventlog(self._eventlog(jobid))

    def replay_done(self):
        """The journal caught up: settle jobs that ended while we were away
        and ask again whatever was in flight."""
        now = time.time()
        for jobid, rec in list(self.records.items()):
            if rec.final:
                continue
            if not self.tracker.active(jobid):
                for ev in self.ended(jobid):
                    self.apply(jobid, ev)
            rec = self.records[jobid]
            again = inflight.reissue(rec) + inflight.unanswered(rec) + inflight.timers(rec, now)
            self.actions.extend((now, a) for a in again)
        self.replayed = True
        self.waiters.replayed(self.records)
        self.arm_flush()
        self.arm_plan()

    def _eventlog(self, jobid):
        try:
            text = flux.kvs.get(self.h, flux.job.JobID(jobid).kvs + ".eventlog")
        except (OSError, FileNotFoundError):
            return []
        if isinstance(text, (bytes, str)):
            lines = text.decode() if isinstance(text, bytes) else text
            return [json.loads(line) for line in lines.splitlines() if line.strip()]
        return []

    # --- the pool ---

    def on_pool_event(self, payload):
        self.intake = time.time()
        kind = payload.get("kind")
        if kind == protocol.POOL_READY:
            self.pool_up(payload)
            return
        if kind == protocol.PURGE_END and not payload.get("ok"):
            self.log.warning(f"rsa: job {payload.get('jobid')}: dropping inputs failed: {payload.get('error')}")
        elif kind == protocol.NODE_STATE:
            self.log.warning(f"rsa: RSA node {payload.get('host')} is {payload.get('state')}")
        elif kind == protocol.DISCARD_END and not payload.get("ok"):
            self.log.error(f"rsa: removing kept RAM disk {payload.get('path')} failed: {payload.get('error')}")
        if kind == protocol.HOLDER_END and payload.get("kept"):
            # kept through a pool shutdown: the RAM disk lives on, to be
            # adopted by the next pool (reconciled())
            self.log.info(f"rsa: job {payload.get('jobid')}: RAM disk {payload['kept']} kept for the next pool")
            return
        found = wire.event(payload, time.time())
        if found is not None:
            jobid, event = found
            self.apply(int(jobid), event)

    def pool_job_entry(self, jobid, entry):
        self.keeper.event(jobid, entry.name, entry.context or {})

    def pool_up(self, info):
        if self.keeper is not None:
            self.keeper.ready(info)
        self.log.info(f"rsa: pool ready on parent rank {info.get('rank')}: nodes {info.get('nodes')}")
        unusable = (info.get("privilege") or {}).get("error")
        if unusable:
            self.log.error(f"rsa: the RSA pool cannot make RAM disks, RSA jobs use their "
                           f"directories: {unusable}")
        self.pool.up(info)
        for host, reason in self.drained.items():
            self.pool.call(protocol.DRAIN, {"host": host, "reason": reason})
        self.reconcile_pool()
        self.arm_flush()
        self.arm_plan()

    def reconcile_pool(self):
        """Ask the pool what it runs (answer handled in ``reconciled``)."""

        def listed(f):
            try:
                self.reconciled(f.get())
            except OSError as exc:
                self.log.warning(f"rsa: pool list failed: {exc}")
            except Exception as exc:
                self.log.error(f"rsa: reconciling with the pool: {exc!r}")
            self.arm_flush()

        self.pool.rpc(protocol.LIST).then(listed)

    def reconciled(self, listing):
        """Cancel what the pool runs for nobody; adopt the RAM disks kept
        through a restart (or discard them); learn what the pool lost."""
        plan = inflight.reconcile(self.records, listing, time.time())
        for kept, rec in plan.kept:
            if rec is not None:
                self.log.info(f"rsa: adopting the RAM disk {kept['path']} kept for job {rec.jobid}")
                self.pool.call(protocol.HOLD, {"jobid": rec.jobid, "gen": rec.gen, "need": rec.need,
                                               "userid": rec.userid, "adopt": kept["path"]})
            else:
                self.log.info(f"rsa: discarding the kept RAM disk {kept['path']} (nobody needs it)")
                self.pool.call(protocol.DISCARD, {"path": kept["path"]})
        for jobid, gen in plan.cancel:
            self.log.warning(f"rsa: cancelling orphan holder {jobid}.{gen}")
            self.pool.call(protocol.CANCEL, {"jobid": jobid, "gen": gen})
        for jobid, seq in plan.stop:
            self.pool.call(protocol.STOP, {"jobid": jobid, "seq": seq})
        for jobid, event in plan.lost:
            self.apply(jobid, event)

    # --- job-manager asks ---

    def on_start(self, jobid, ranks=""):
        """job-manager asks what to start the job with; ``ranks``: the
        broker ranks it runs on (an idset string)."""
        self.intake = time.time()
        ranks = tuple(IDset(ranks)) if ranks else ()
        if jobid in self.records:
            self.apply(jobid, E.Starting(time.time(), ranks=ranks))
        else:
            self.starts[jobid] = ranks

    def via(self):
        """How privileged operations run for the current policy."""
        return caller.choose(sys.executable, self.policy.privilege, self.policy.imp,
                             os.getuid(), self.policy.scripts)

    # --- timers ---

    def withdrawn(self, jobid, event):
        self.intake = time.time()
        self.apply(jobid, event)
        self.arm_flush()

    def set_timer(self, action):
        """Arm a core timer; one per (job, name): a new one replaces the old."""
        key = (action.jobid, action.name)
        old = self.timers.pop(key, None)
        if old is not None:
            old.stop()

        def fire(handle, watcher, revents, arg):
            self.timers.pop(key, None)
            self.intake = time.time()
            self.apply(action.jobid, timer_event(action, self.intake))

        w = self.h.timer_watcher_create(max(0.0, action.seconds), fire)
        w.start()
        self.timers[key] = w

    # --- on deck ---

    def _tick(self, handle, watcher, revents, arg):
        try:
            if self.keeper is not None:
                self.keeper.tick()
            self.trim()
        except Exception as exc:
            self.log.error(f"rsa: tick: {exc!r}")
        self.arm_plan()  # what no hint says: new jobs, priorities, estimates

    def arm_plan(self):
        """Ask for an on-deck pass soon (passes are batched)."""
        if not self.plan_armed:
            self.plan_armed = True
            self.plan_w.reset(after=PLAN_DELAY)
            self.plan_w.start()

    def _plan(self, handle, watcher, revents, arg):
        self.plan_armed = False
        try:
            self.intake = time.time()
            self.plan()
        except Exception as exc:
            self.log.error(f"rsa: on-deck pass: {exc!r}")

    def plan(self):
        """Read the queue from job-manager; the on-deck pass runs on the
        answer.  Reads are spaced (QUERY_GAP, QUERY_DUTY): passes asked for
        meanwhile are served by the next read."""
        if not self.replayed or not self.pool.ready:
            return
        if not any(r.job_state in PRE_RUN and r.rsa_state is not S.INELIGIBLE for r in self.records.values()):
            return  # no RSA job waits to run (a machine busy with other jobs)
        if self.reading:
            self.plan_again = True
            return
        wait = self.next_read - time.monotonic()
        if wait > 0:
            if not self.again_w_armed:
                self.again_w_armed = True
                self.again_w.reset(after=wait)
                self.again_w.start()
            return
        self.reading, self.plan_again = True, False
        asked, sent = self.intake, time.monotonic()

        def listed(f):
            self.reading = False
            begun = time.monotonic()
            try:
                self.queue.read(f.get()["jobs"])
                self.intake = asked  # the actions' latency includes the read
                now = time.time()
                rate = rates.stage_rate(self.records, self.policy.stage_rate)
                events = ondeck.plan(self.queue.pending(), self.records, self.pool.nodes, self.policy,
                                     now, rate, self.drained)
                for jobid, ev in events:
                    self.apply(jobid, ev)
            except (OSError, KeyError, TypeError) as exc:
                self.log.warning(f"rsa: reading the queue from job-manager: {exc!r}")
            except Exception as exc:
                self.log.error(f"rsa: on-deck pass: {exc!r}")
            done = time.monotonic()
            self.reads.append(done - sent)
            self.next_read = done + max(QUERY_GAP, (done - begun) / QUERY_DUTY)
            if self.plan_again:
                self.arm_plan()

        self.h.rpc("job-manager.list", {"max_entries": 0}).then(listed)

    def _again(self, handle, watcher, revents, arg):
        self.again_w_armed = False
        self.arm_plan()

    # --- save records (batched) and act ---

    def arm_flush(self):
        if not self.flush_armed:
            self.flush_armed = True
            self.flush_w.reset(after=0.0)
            self.flush_w.start()

    def _flush(self, handle, watcher, revents, arg):
        self.flush_armed = False
        try:
            actions, self.actions = self.actions, []
            self.arm_save()
            self._run(actions)
        except Exception as exc:
            self.log.error(f"rsa: flush: {exc!r}")

    def arm_save(self):
        if not self.save_armed and self.store.pending():
            self.save_armed = True
            self.save_w.reset(after=SAVE_DELAY)
            self.save_w.start()

    def _save(self, handle, watcher, revents, arg):
        self.save_armed = False
        try:
            if self.store.inflight:
                self.arm_save()  # one commit at a time: the next batch waits
                return
            self.store.flush(lambda: None)
        except Exception as exc:
            self.log.error(f"rsa: saving records: {exc!r}")

    def save_now(self):
        """Commit what is not saved yet and wait for it (module unload)."""
        self.save_w.stop()
        self.store.flush_sync()

    def _run(self, actions):
        for intake, action in actions:
            if isinstance(action, tuple):
                self.execute.post_state(action[1])
            else:
                self.execute.run(self.reusing(action))
                self.latency.append(time.time() - intake)

    def reusing(self, action):
        """With [rsa] reuse: point a stage-in at a staged copy of the same
        data_in on its node, and place a reservation next to one."""
        rec = self.records.get(action.jobid)
        if not self.policy.reuse or rec is None:
            return action
        if isinstance(action, A.StartStage) and action.direction == "in" and action.method is None:
            return dataclasses.replace(action, replica=reuse.replica(rec, self.records))
        if isinstance(action, A.RequestCapacity):
            return dataclasses.replace(action, prefer=tuple(reuse.holders_of(rec, self.records)))
        return action

    def stats(self):
        """Figures for `flux rsa stats` and the scale benchmark."""
        import resource
        import statistics

        def summary(seconds):
            samples = sorted(seconds)

            def pct(p):
                return samples[min(len(samples) - 1, int(p / 100 * len(samples)))] * 1000 if samples else None

            return {
                "count": len(samples),
                "p50": pct(50),
                "p90": pct(90),
                "p99": pct(99),
                "max": samples[-1] * 1000 if samples else None,
                "mean": statistics.fmean(samples) * 1000 if samples else None,
            }

        usage = resource.getrusage(resource.RUSAGE_SELF)
        states = collections.Counter(r.rsa_state.value for r in self.records.values())
        return {
            "records": len(self.records),
            "states": dict(states),
            "active_jobs": len(self.tracker.jobs),
            "latency_ms": summary(self.latency),
            "queue_read_ms": summary(self.reads),
            "cpu_seconds": usage.ru_utime + usage.ru_stime,
            "maxrss_kb": memory_kb("VmHWM", usage.ru_maxrss),
            "rss_kb": memory_kb("VmRSS"),
            "restages": sum(r.restages for r in self.records.values()),
        }

    def trim(self):
        """Keep at most ``keep`` records of ended jobs (oldest go first)."""
        final = [r for r in self.records.values() if r.final]
        excess = len(final) - self.policy.keep
        if excess <= 0:
            return
        final.sort(key=lambda r: r.history[-1].t if r.history else 0)
        for rec in final[:excess]:
            del self.records[rec.jobid]
            self.store.remove(rec.jobid)

    def keep_list(self):
        """Holders whose RAM disks must survive a pool shutdown (restart)."""
        out = []
        for rec in self.records.values():
            if outputs.at_risk(rec):
                out.append({"jobid": rec.jobid, "gen": rec.gen})
        return out

    # --- requests from people ---

    def drain(self, host, reason, undrain=False):
        """Take an RSA node out of new reservations (or back in)."""
        if self.pool.nodes and host not in self.pool.nodes:
            known = ", ".join(self.pool.nodes)
            raise OSError(errno.EINVAL, f"{host}: not an RSA node of the pool (RSA nodes: {known})")
        if undrain:
            self.drained.pop(host, None)
            self.pool.call(protocol.UNDRAIN, {"host": host})
        else:
            self.drained[host] = reason or "drained by the instance owner"
            self.pool.call(protocol.DRAIN, {"host": host, "reason": self.drained[host]})
        self.store.save_drained(self.drained)
        self.arm_flush()
        return {"drained": dict(self.drained)}


    def visible(self, rec, userid, owner):
        return owner or rec.userid == userid

    def status(self, jobids, userid, owner):
        recs = [self.records[j] for j in jobids if j in self.records] if jobids else list(self.records.values())
        return [shown(r) for r in recs if self.visible(r, userid, owner)]

    def when_staged(self, jobid, answer):
        """``answer(payload or OSError)`` once job ``jobid``'s outputs are
        settled, for a job that depends on them (afterstaged)."""
        self.waiters.add(jobid, self.records.get(jobid), answer, self.replayed)

    def request(self, jobid, event, userid, owner):
        """A person's request on a job (retry, release, release-input)."""
        rec = self.records.get(jobid)
        if rec is None or not self.visible(rec, userid, owner):
            raise OSError(errno.ENOENT, f"{flux.job.JobID(jobid).f58}: no RSA record for this job (or not yours)")
        if not accepts(rec, event):
            raise OSError(
                errno.EINVAL,
                f"{flux.job.JobID(jobid).f58}: not possible in {rec.job_state}/{rec.rsa_state}",
            )
        self.apply(jobid, event)
        return self.records[jobid].to_dict()
