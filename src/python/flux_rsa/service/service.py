"""The RSA service: events of RSA jobs (from the jobtap plugin; from the
job-manager journal only to catch up at load), reads of job-manager's
queue and pool events in, core transitions, actions out.  Records go to
the KVS in batched, asynchronous commits while their actions are sent at
once: a commit can take seconds when job-manager keeps the KVS busy (a
burst of cancels), and no action may wait for it.  After a crash a record
can lag behind what the pool was asked to do; every action is idempotent
and the restart reconciles both ways (orphan holders and stages are
cancelled, in-flight requests are asked again).

This class only wires the rooms, one family of messages each: intake
and jobs (job events from the jobtap plugin), queue (reads of
job-manager's queue), workflow (jobs reading other jobs' outputs:
afterstaged, the hand-off), pool_link (requests to the pool and its
notifications, drained nodes, reconciling after restarts), pool_job (the
pool's job: launch, keep, shut down), compute_nodes (attach and detach on
a job's nodes), records (the KVS, the on-deck index, who sees what),
execute (actions out), reactor (timers, one-answer futures, full
collections), metrics.
"""

import dataclasses
import os
import sys
import time

from flux.constants import FLUX_JOB_STATE_DEPEND as DEPEND
from flux.idset import IDset

from flux_rsa.core import BadRequest, IllegalEvent, Policy
from flux_rsa.core import actions as A
from flux_rsa.core import admit
from flux_rsa.core import events as E
from flux_rsa.core import (
    handoff,
    inflight,
    ondeck,
    parse_request,
    process,
    reuse,
    settle,
)
from flux_rsa.core.states import RsaState as S
from flux_rsa.privileged import caller
from flux_rsa.service import pool_job, records
from flux_rsa.service.compute_nodes import Mounts
from flux_rsa.service.execute import Executor, Outbox, PostState
from flux_rsa.service.intake import Intake
from flux_rsa.service.jobs import Tracker
from flux_rsa.service.metrics import Metrics
from flux_rsa.service.pool_link import Drains, PoolEvents, PoolLink, Reconciler
from flux_rsa.service.queue import QueueReader
from flux_rsa.service.reactor import Collector, JobTimers, Timer, timer_event
from flux_rsa.service.workflow import Handoffs, Waiters, Writers

TICK = 2.0  # seconds between on-deck passes when nothing else happens
PLAN_DELAY = 0.05  # on-deck passes are batched: at most one per PLAN_DELAY
#: records are committed at most once per SAVE_DELAY, one commit at a time:
#: each commit rewrites the rsa.jobs directory (one entry per record, up to
#: `keep` + active), and committing it at every turn of the reactor kept the
#: KVS so busy at 2,000 jobs that job-exec's release of finished jobs waited
#: behind it (compute nodes held up to 0.4 s after their job ended)
SAVE_DELAY = 0.2


class Service:
    def __init__(self, h, log, policy: Policy, launch_pool=None):
        self.h = h
        self.log = log
        self.policy = policy
        self.records = records.load(
            h
        )  # jobid -> Record (shared with the pieces: never replaced)
        self.metrics = Metrics()
        self.tracker = Tracker()
        self.store = records.Store(h, log, delay=SAVE_DELAY)
        self.pool = PoolLink(h, log)
        self.drains = Drains(self.pool, self.store, records.load_drained(h))
        self.mounts = Mounts(h, log, self.via, self.withdrawn, lambda: self.policy)
        self.timers = JobTimers(h, log, self.timer_fired)
        self.execute = Executor(
            h,
            log,
            self.pool,
            self.timers.set,
            self.tracker.active,
            self.mounts,
            signed=lambda: self.via().mode == "imp",
        )
        self.execute.deliver = self.withdrawn
        self.outbox = Outbox(
            h, log, self.execute.run, self.metrics, prepare=self.reusing
        )
        self.intake = Intake(h, log, self.tracker, self)
        self.index = records.DeckIndex(self.records)
        self.reader = QueueReader(
            h,
            log,
            self.tracker,
            self.metrics,
            again=self.arm_plan,
            head=ondeck.head(policy),
            extra=self.index.engaged,
        )
        self.reconciler = Reconciler(
            log, self.records, self.pool, self.apply, done=self.arm_flush
        )
        self.pool_events = PoolEvents(log, self)
        self.handoffs = Handoffs(self.records, self.apply)  # workflow hand-off
        self.waiters = Waiters(  # --dependency=afterstaged:JOBID
            log, lambda rec, waiter: self.handoffs.link(rec, waiter, time.time())
        )
        self.writers = Writers(h, log)  # data_out still being written, for the plugin
        self.launch_pool = launch_pool
        self.keeper = None  # PoolKeeper, set by launch_pool
        self.starts = {}  # start requests for jobs not seen yet: jobid -> ranks
        self.replayed = False
        self.plan_timer = Timer(h, log, "on-deck pass", self.plan, after=PLAN_DELAY)
        self.tick_timer = Timer(h, log, "tick", self.tick, after=TICK, every=TICK)
        self.collector = Collector(
            self.metrics
        )  # full garbage collections at quiet ticks

    # --- life cycle ---

    def start(self):
        self.intake.start()
        self.collector.start()
        self.tick_timer.arm()
        if self.launch_pool is not None:
            try:
                self.launch_pool(self)
            except Exception as exc:
                self.log.error(
                    f"rsa: cannot start the RSA pool: {exc!r} (jobs run on persistent storage until it is up)"
                )

    def stop(self):
        for piece in (
            self.tick_timer,
            self.plan_timer,
            self.reader,
            self.outbox,
            self.store.timer,
            self.timers,
            self.intake,
            self.collector,
            self.writers,
        ):
            piece.stop()

    def save_now(self):
        """Commit what is not saved yet and wait for it (module unload)."""
        self.store.flush_sync()

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
            self.index.changed(old, new)
            self.store.save(new)
            self.waiters.check(new)
            self.handoffs.check(new, time.time())
            if self.replayed:
                self.writers.check(new)
            if old is None or new.rsa_state is not old.rsa_state:
                # a job just submitted (INITIAL, nothing happened yet) was
                # annotated by the jobtap plugin before it told us (a memo
                # for each was most of our RPCs in a burst of submissions);
                # one the journal's replay admits is annotated here (after a
                # restart of the instance, annotations are gone)
                announced = old is None and new.rsa_state is S.INITIAL and self.replayed
                if not announced:
                    self.outbox.add([PostState(new.jobid, new)], None)
                if old is not None:  # (an admission: its submit asked, Intake.feed)
                    self.arm_plan()
            elif old is not None and new.handoff != old.handoff:
                self.arm_plan()  # (a consumer linked while its producer runs)
        self.outbox.add(actions, self.metrics.intake)

    def admit(self, facts, t):
        """A new job: a record if it mentions rsa (INELIGIBLE ones too)."""
        if facts.rsa is None or facts.jobid in self.records:
            return
        try:
            request = parse_request(facts.rsa)
            rec = admit(
                facts.jobid,
                facts.userid,
                facts.nnodes,
                request,
                self.policy,
                t,
                one_node=facts.one_node,
            )
        except BadRequest as exc:
            rec = admit(
                facts.jobid,
                facts.userid,
                facts.nnodes,
                parse_request(None),
                self.policy,
                t,
            )
            rec = dataclasses.replace(rec, reason=str(exc))
        rec, actions = settle(rec, E.Event(t))  # e.g. measure data_in for sizing
        self.commit(None, rec, actions)
        for jobid in self.waiters.waited_by(facts.jobid):  # asked before it came
            if jobid in self.records:
                self.waiters.check(self.records[jobid])
        if facts.jobid in self.starts:
            ranks = self.starts.pop(facts.jobid)
            self.apply(facts.jobid, E.Starting(t, ranks=ranks))

    # --- job events (service.intake) ---

    def on_job_event(self, payload):
        self.intake.on_job_event(payload)

    def pool_entry(self, jobid, entry):
        """A journal entry of the pool job goes to the pool keeper."""
        if self.keeper is None or jobid != self.keeper.jobid:
            return False
        self.keeper.event(jobid, entry.name, entry.context or {})
        return True

    def resume(self, rec, now):
        """After the replay: ask again whatever was in flight for ``rec``."""
        again = (
            inflight.reissue(rec) + inflight.unanswered(rec) + inflight.timers(rec, now)
        )
        self.outbox.add(again, now)

    def caught_up(self):
        self.replayed = True
        self.waiters.replayed(self.records)
        self.writers.replayed(self.records)
        self.handoffs.caught_up(self.records)
        self.arm_flush()
        self.arm_plan()

    # --- the pool (service.pool_link, service.pool_job) ---

    def on_pool_event(self, payload):
        self.pool_events.on_event(payload)

    def pool_up(self, info):
        self.pool_events.up(info)

    def shut_down_pool(self, answer):
        """Stop the pool in order; ``answer(payload or OSError)`` once it
        ended (service.pool_job)."""
        pool_job.shut_down(self, answer)

    # --- job-manager asks ---

    def on_start(self, jobid, ranks=""):
        """job-manager asks what to start the job with; ``ranks``: the
        broker ranks it runs on (an idset string)."""
        self.metrics.arrived()
        ranks = tuple(IDset(ranks)) if ranks else ()
        if jobid in self.records:
            self.apply(jobid, E.Starting(time.time(), ranks=ranks))
        else:
            self.starts[jobid] = ranks

    def via(self):
        """How privileged operations run for the current policy."""
        return caller.choose(
            sys.executable,
            self.policy.privilege,
            self.policy.imp,
            os.getuid(),
            self.policy.scripts,
        )

    # --- answers and timers ---

    def withdrawn(self, jobid, event):
        self.metrics.arrived()
        self.apply(jobid, event)
        self.arm_flush()

    def timer_fired(self, action):
        """A core timer (StartTimer) went off."""
        self.apply(action.jobid, timer_event(action, self.metrics.arrived()))

    def tick(self):
        try:
            if self.keeper is not None:
                self.keeper.tick()
            self.trim()
            self.collector.check()
        except Exception as exc:
            self.log.error(f"rsa: tick: {exc!r}")
        self.arm_plan()  # what no hint says: new jobs, priorities, estimates

    # --- on deck ---

    def behind(self, facts):
        """Is the job behind the queue's head as last read?"""
        return self.reader.queue.behind(facts)

    def arm_plan(self):
        """Ask for an on-deck pass soon (passes are batched)."""
        self.plan_timer.arm()

    def plan(self):
        """Read the queue from job-manager; the on-deck pass runs on the
        answer.  Reads are spaced (service.queue): passes asked for
        meanwhile are served by the next read."""
        self.metrics.arrived(message=False)
        if not self.replayed or not self.pool.ready:
            return
        if not any(map(ondeck.waits_to_run, self.records.values())):
            return  # no RSA job waits to run (a machine busy with other jobs)
        asked = self.metrics.intake
        self.reader.read(lambda pending: self.on_deck(pending, asked))

    def on_deck(self, pending, asked):
        """The on-deck pass on the queue as read (``pending``)."""
        self.metrics.intake = asked  # the actions' latency includes the read
        now = time.time()
        rate = self.index.stage_rate(self.policy.stage_rate)
        pending = pending + self.consumers_waiting(pending)
        events = ondeck.plan(
            pending,
            self.index.view(pending),
            self.pool.nodes,
            self.policy,
            now,
            rate,
            self.drains.drained,
        )
        for jobid, ev in events:
            self.apply(jobid, ev)

    def consumers_waiting(self, listed):
        """Consumers held by their dependency on a producer that runs (or
        has just ended), their inputs to come from its RAM disk, and by
        nothing else: for the pass, pending behind every job that is, and
        only beside their producer's RAM disk (``ondeck.Pending.beside``),
        so their RAM disks are made while the producer runs and only the
        copy of its outputs is left for its end."""
        seen = {p.jobid for p in listed}
        out = []
        for rec in self.handoffs.linked():
            facts = self.tracker.jobs.get(rec.jobid)
            if rec.jobid in seen or facts is None or facts.state != DEPEND:
                continue
            if facts.after is None or not facts.after <= {rec.handoff.producer}:
                continue  # it also waits for something else
            seen.add(rec.jobid)
            beside = rec.handoff.node  # (where its copy is fastest)
            out.append(ondeck.Pending(rec.jobid, 0, facts.t_submit, beside=beside))
        return out

    # --- actions out ---

    def arm_flush(self):
        """Send the actions waiting (at the next turn of the reactor)."""
        self.outbox.add((), None)

    def reusing(self, action):
        """Place a consumer's reservation next to its producer's RAM disk
        (the hand-off); with [rsa] reuse: point a stage-in at a staged copy
        of the same data_in on its node, and place a reservation next to
        one."""
        rec = self.records.get(action.jobid)
        if rec is None:
            return action
        if isinstance(action, A.RequestCapacity) and rec.handoff is not None:
            return dataclasses.replace(action, prefer=(rec.handoff.node,))
        if (
            isinstance(action, A.StartStage)
            and rec.handoff is not None
            and action.src == handoff.reads_ramdisk(rec)
            and handoff.across(rec)
        ):
            return dataclasses.replace(action, producer=self.producer_volume(rec))
        if not self.policy.reuse:
            return action
        if (
            isinstance(action, A.StartStage)
            and action.direction == "in"
            and action.method is None
            and action.src == rec.request.data_in
        ):
            return dataclasses.replace(action, replica=reuse.replica(rec, self.records))
        if isinstance(action, A.RequestCapacity):
            return dataclasses.replace(
                action, prefer=tuple(reuse.holders_of(rec, self.records))
            )
        return action

    def producer_volume(self, rec):
        """What a stage-in on another RSA node mounts to read ``rec``'s
        producer's RAM disk (its volume, as compute nodes attach it); None
        when the producer's record is gone (the stage-in then fails, and
        ``rec`` reads data_in once the outputs are home)."""
        a = self.records.get(rec.handoff.producer)
        if a is None or not a.volume or not a.volume.get("servers"):
            return None
        keys = ("servers", "user", "secret", "image")  # (an image: in its node's store)
        return {key: a.volume[key] for key in keys if a.volume.get(key) is not None}

    def trim(self):
        """Keep at most ``keep`` records of ended jobs (oldest go first)."""
        if len(self.records) <= self.policy.keep:
            return  # (the common case, without a look at every record)
        final = [r for r in self.records.values() if r.final]
        excess = len(final) - self.policy.keep
        if excess <= 0:
            return
        final.sort(key=lambda r: r.history[-1].t if r.history else 0)
        for rec in final[:excess]:
            del self.records[rec.jobid]
            self.index.removed(rec.jobid)
            self.store.remove(rec.jobid)

    # --- requests from people ---

    def stats(self):
        """Figures for `flux rsa stats` and the scale benchmark."""
        return self.metrics.stats(self.records, len(self.tracker.jobs))

    def drain(self, host, reason, undrain=False):
        return self.drains.drain(host, reason, undrain)

    def status(self, jobids, userid, owner):
        return records.status(self.records, jobids, userid, owner)

    def when_staged(self, jobid, answer, waiter=None):
        """``answer(payload or OSError)`` once job ``jobid``'s outputs are
        settled, for a job (``waiter``) that depends on them (afterstaged);
        earlier when ``waiter`` reads them from that job's RAM disk."""
        rec = self.records.get(jobid)
        self.waiters.add(jobid, rec, answer, self.replayed, waiter)

    def request(self, jobid, event, userid, owner):
        """A person's request on a job (retry, release, release-input)."""
        records.check_request(self.records.get(jobid), jobid, event, userid, owner)
        self.apply(jobid, event)
        return self.records[jobid].to_dict()
