"""The queue the on-deck rule looks at, read from job-list.

The on-deck pass needs the jobs without rsa and the scheduler's estimates:
job-list lists the pending (SCHED) jobs in queue order (priority, then
submit time) with their priority and annotations, and stops at the number
asked for.  (job-manager.list does not: it lists the jobs of its alloc
queue in order, then the other active jobs in hash order, and Fluxion
asks job-manager for every pending job at once, so under Fluxion its
first jobs are any active jobs.)  A read asks for the queue's head only
(core.ondeck.head: what the on-deck rule can reach), so it costs the same
however long the queue; our jobs the pass must see behind the head
(core.ondeck.engaged) are added from what the Tracker knows, which also
corrects what job-list, following the journal, has not heard yet.  Reads
are spaced too: at least QUERY_GAP apart, and far enough apart that
handling them takes the service at most QUERY_DUTY of the time.
"""

import time

from flux.constants import FLUX_JOB_STATE_SCHED

from flux_rsa.core.ondeck import Pending, queue_key
from flux_rsa.service.reactor import Timer, on_answer

QUERY_GAP = 0.05
QUERY_DUTY = 0.1
#: what a read asks job-list for each pending job (besides its id)
ATTRS = ["state", "priority", "t_submit", "annotations"]


def request(head):
    """job-list.list for the first ``head`` pending (SCHED) jobs of every
    user, in one answer: not flux.job.job_list, whose streamed answer is a
    message per job."""
    return {
        "max_entries": head,
        "attrs": ATTRS,
        "since": 0.0,
        "constraint": {"and": [{"states": [FLUX_JOB_STATE_SCHED]}]},
    }


class Queue:
    """The pending jobs as the on-deck rule sees them: those job-list
    listed in SCHED at the last read (``read``: the first ``head`` of the
    queue, with id, state, priority, t_submit and annotations), the
    jobs the Tracker follows (those that mention rsa) as it knows them now:
    a message of the plugin can arrive after the read was answered, so one
    of ours it said is allocated is not pending, whatever the read says; one
    the read does not list yet waits for the next read, unless the read
    stopped at ``head`` jobs: then a pending job of ours the pass must see
    (``extra``) is behind them."""

    def __init__(self, tracker, head):
        self.tracker = tracker
        self.head = head  # jobs asked for in a read (job-list max_entries)
        self.listed = {}  # jobid -> Pending, as of the last read
        self.truncated = False  # the last read stopped at head jobs
        self.last = None  # queue_key of the last job read when all were pending

    def read(self, jobs):
        self.listed = {}
        self.truncated = len(jobs) >= self.head
        for job in jobs:
            if job.get("state") == FLUX_JOB_STATE_SCHED:
                estimate = ((job.get("annotations") or {}).get("sched") or {}).get(
                    "t_estimate"
                )
                jobid = int(job["id"])
                self.listed[jobid] = Pending(
                    jobid, job.get("priority", 0), job.get("t_submit", 0.0), estimate
                )
        full = self.truncated and len(self.listed) == len(jobs)
        self.last = max(map(queue_key, self.listed.values())) if full else None

    def behind(self, facts):
        """Is this job of ours behind every job of the last read, which were
        all pending (``head`` of them)?  Then a pass would not see it: its
        submit or priority need not ask for one.  A job with no priority
        yet is judged when its priority comes."""
        if self.last is None or facts.jobid in self.listed:
            return False
        if facts.priority is None:
            return True
        return (
            queue_key(Pending(facts.jobid, facts.priority, facts.t_submit)) > self.last
        )

    def pending(self, extra=()):
        out = []
        for jobid, p in self.listed.items():
            facts = self.tracker.jobs.get(jobid)
            if facts is None:
                out.append(p)
            elif facts.pending:
                out.append(Pending(jobid, facts.priority, facts.t_submit, p.t_estimate))
        if self.truncated:
            for jobid in extra:
                facts = self.tracker.jobs.get(jobid)
                if jobid not in self.listed and facts is not None and facts.pending:
                    out.append(Pending(jobid, facts.priority, facts.t_submit))
        return out


class QueueReader:
    """Reads of the queue, spaced.  ``read(then)`` reads it and calls
    ``then(pending)`` with the answer; asked while a read is out, or too
    soon after the last one, it calls ``again()`` once the next read may
    start instead (the caller asks then)."""

    def __init__(self, h, log, tracker, metrics, again, head, extra):
        self.h = h
        self.log = log
        self.queue = Queue(tracker, head)
        self.extra = (
            extra  # jobids of ours the pass must see behind the head (a live set)
        )
        self.metrics = metrics
        self.again = again
        self.reading = False  # a read is out
        self.wanted = False  # a read was asked for while it was out
        self.next_read = 0.0  # monotonic time the next read may start
        self.later = Timer(h, log, "queue read", again, after=QUERY_GAP)

    def stop(self):
        self.later.stop()

    def read(self, then):
        if self.reading:
            self.wanted = True
            return
        wait = self.next_read - time.monotonic()
        if wait > 0:
            self.later.arm(wait)
            return
        self.reading, self.wanted = True, False
        sent = time.monotonic()

        def listed(f):
            self.reading = False
            begun = time.monotonic()
            try:
                self.queue.read(f.get()["jobs"])
                then(self.queue.pending(self.extra))
            except (OSError, KeyError, TypeError) as exc:
                self.log.warning(f"rsa: reading the queue from job-manager: {exc!r}")
            except Exception as exc:
                self.log.error(f"rsa: on-deck pass: {exc!r}")
            done = time.monotonic()
            self.metrics.read(done - sent, done - begun)
            self.next_read = done + max(QUERY_GAP, (done - begun) / QUERY_DUTY)
            if self.wanted:
                self.again()

        on_answer(self.h.rpc("job-list.list", request(self.queue.head)), listed)
