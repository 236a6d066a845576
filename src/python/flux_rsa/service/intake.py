"""Job events in: from the jobtap plugin (``rsa.job-event``, jobs that
mention rsa) and, at load, from the job-manager journal, replaying what
happened while the service was away; the journal is closed once it has
caught up, so a job without rsa costs nothing.  Either may tell an event
twice: the Tracker and the core ignore what they have seen.
"""

import time

import flux.job
import flux.kvs
from flux.eventlog import EventLogEvent
from flux.job import JournalConsumer

from flux_rsa.service.jobs import ended_from_eventlog

#: the job events the service follows (Tracker.feed)
JOB_EVENTS = (
    "submit",
    "priority",
    "flux-restart",
    "alloc",
    "rsa-ready",
    "start",
    "finish",
    "exception",
    "clean",
)
#: events of RSA jobs that change the queue the on-deck rule looks at
QUEUE_CHANGES = frozenset(
    {"submit", "priority", "alloc", "clean", "flux-restart", "exception"}
)
#: of those, the ones that change it only if the job is within its head
JOINS = frozenset({"submit", "priority"})


class Journal(JournalConsumer):
    """The job-manager journal, only the events in JOB_EVENTS."""

    @property
    def request_payload(self):
        return {"full": self.full, "allow": {name: 1 for name in JOB_EVENTS}}


def eventlog_entries(value):
    """The entries of an eventlog as flux.kvs.get returns it: text (one
    JSON object a line), or the one object of a one-line eventlog."""
    if isinstance(value, bytes):
        value = value.decode()
    if isinstance(value, str):
        return [EventLogEvent(line) for line in value.splitlines() if line.strip()]
    if isinstance(value, dict):
        return [EventLogEvent(value)]
    return []


class Intake:
    """Feeds job events to the Tracker and their core events to the
    service (``sink``), which provides:

    * ``records``: jobid -> Record;
    * ``admit(facts, t)``: a new job that mentions rsa;
    * ``apply(jobid, event)``: a core event for a job's record;
    * ``arm_plan()``: the queue in front of the RSA jobs changed;
    * ``behind(facts)``: the job is behind the queue's head as last read
      (its joining the queue changes nothing a pass sees);
    * ``resume(rec, now)``: after the replay, ask again what was in flight;
    * ``caught_up()``: the replay is over;
    * ``pool_entry(jobid, entry)``: True when the entry was the pool
      job's (then it is the pool keeper's, not ours);
    * ``metrics``: told when each event arrived.
    """

    def __init__(self, h, log, tracker, sink):
        self.h = h
        self.log = log
        self.tracker = tracker
        self.sink = sink
        self.journal = None

    def start(self):
        self.journal = Journal(self.h, full=True, include_sentinel=True)
        self.journal.start()
        self.journal.set_callback(self.on_journal)

    def stop(self):
        if self.journal is not None:
            self.journal.stop()

    def on_journal(self, entry):
        if entry is None:
            return  # the journal closed (below)
        self.sink.metrics.arrived()
        try:
            if entry.is_empty():
                self.replay_done()
                self.journal.stop()  # from now on the plugin tells
                self.journal = None
                return
            jobid = int(entry.jobid)
            if self.sink.pool_entry(jobid, entry):
                return
            self.feed(
                jobid, entry.name, entry.timestamp, entry.context or {}, entry.jobspec
            )
        except Exception as exc:  # never let one entry kill the module
            self.log.error(f"rsa: journal entry {entry}: {exc!r}")

    def on_job_event(self, payload):
        """An event of a job that mentions rsa, from the jobtap plugin."""
        self.sink.metrics.arrived()
        if payload.get("name") not in JOB_EVENTS:
            raise ValueError(
                f"job-event {payload.get('name')!r}: expected one of {', '.join(JOB_EVENTS)}"
            )
        self.feed(
            int(payload["id"]),
            payload["name"],
            float(payload["timestamp"]),
            payload.get("context") or {},
            payload.get("jobspec"),
        )

    def feed(self, jobid, name, t, context, jobspec=None):
        fed = self.tracker.feed(jobid, name, t, context, jobspec)
        if name in QUEUE_CHANGES and not (
            name in JOINS and fed.facts and self.sink.behind(fed.facts)
        ):
            self.sink.arm_plan()
        if fed.new:
            self.sink.admit(fed.facts, t)
        events = self.ended(jobid) if fed.unsure else fed.events
        for ev in events:
            self.sink.apply(jobid, ev)

    def ended(self, jobid):
        """Core events for a job that went inactive, from its eventlog
        (those its record has seen already are ignored by the core)."""
        rec = self.sink.records.get(jobid)
        if rec is None or rec.final:
            return []
        return ended_from_eventlog(self.eventlog(jobid))

    def replay_done(self):
        """The journal caught up: settle jobs that ended while we were away
        and ask again whatever was in flight."""
        now = time.time()
        records = self.sink.records
        for jobid, rec in list(records.items()):
            if rec.final:
                continue
            if not self.tracker.active(jobid):
                for ev in self.ended(jobid):
                    self.sink.apply(jobid, ev)
            self.sink.resume(records[jobid], now)
        self.sink.caught_up()

    def eventlog(self, jobid):
        try:
            value = flux.kvs.get(self.h, flux.job.JobID(jobid).kvs + ".eventlog")
        except (OSError, FileNotFoundError):
            return []
        return eventlog_entries(value)
