"""Jobs that read other jobs' outputs: the answers to the jobtap plugin's
``rsa.afterstaged`` (``Waiters``: a job's outputs are settled, or final on
its RAM disk for a consumer that reads them there), the workflow hand-off
between a consumer and its producer (``Handoffs``, on ``core.handoff``),
and the table of ended jobs whose stage-out may still write into their
``data_out``, sent to the plugin (``Writers``).
"""


import collections
import errno

import flux.job

from flux_rsa.core import events as E
from flux_rsa.core import handoff
from flux_rsa.core.outputs import after_staged, writing_into
from flux_rsa.service.reactor import Timer, on_answer

# --- Waiting for a job's outputs (afterstaged) -------------------------------
# Jobs waiting for other jobs' outputs (``--dependency=afterstaged:JOBID``).
#
# The jobtap plugin asks ``rsa.afterstaged {id}`` for a job that another one
# depends on; the answer waits until ``core.outputs.after_staged`` has a
# verdict on that job's record: ``{ok: true}`` (the dependency goes) or
# ``{ok: false, why}`` (the dependent job gets an exception naming it). When
# the waiting job (``for``) will read that job's outputs from its RAM disk
# (``Handoffs`` below), the answer comes as soon as they are final there:
# ``{ok: true, handoff: true}``.

NO_RECORD = (
    "the RSA has no record of it (records of ended jobs are kept up to [rsa] keep)"
)


class Waiters:
    def __init__(self, log, handoff=lambda rec, waiter: False):
        self.log = log
        #: jobid -> [(answer, the waiting job's id or None)]
        self.waiting = collections.defaultdict(list)
        #: handoff(rec, waiter) -> True when waiter reads rec's outputs
        #: from its RAM disk from now on (its wait is over)
        self.handoff = handoff

    def add(self, jobid, rec, answer, replayed, waiter=None):
        """``answer(payload)`` once the outputs of job ``jobid`` (record
        ``rec``, None when there is none) are settled, or at once when they
        are.  Without a record once the journal has been replayed, the
        answer is ENOENT."""
        if rec is None and replayed:
            answer(OSError(errno.ENOENT, NO_RECORD))
            return
        self.waiting[jobid].append((answer, waiter))
        if rec is not None:
            self.check(rec)

    def check(self, rec):
        """A record changed: answer those waiting on it, if it is settled
        (or for them, final on its RAM disk)."""
        waiting = self.waiting.pop(rec.jobid, None)
        if not waiting:
            return
        verdict = after_staged(rec)
        if verdict is None:
            early = [
                (a, w) for a, w in waiting if w is not None and self.handoff(rec, w)
            ]
            if rec.jobid in self.waiting:  # (added while linking)
                waiting += self.waiting.pop(rec.jobid)
            rest = [(a, w) for a, w in waiting if (a, w) not in early]
            if rest:
                self.waiting[rec.jobid] = rest
            self._send(rec, early, {"ok": True, "handoff": True})
            return
        payload = {"ok": True} if verdict is True else {"ok": False, "why": verdict}
        self._send(rec, waiting, payload)

    def _send(self, rec, waiting, payload):
        for answer, _ in waiting:
            try:
                answer(payload)
            except Exception as exc:  # one bad answer must not stop the others
                self.log.error(f"rsa: afterstaged answer for job {rec.jobid}: {exc!r}")

    def waited_by(self, waiter):
        """The jobs whose outputs job ``waiter`` waits for."""
        return [
            j for j, waits in self.waiting.items() if any(w == waiter for _, w in waits)
        ]

    def replayed(self, records):
        """The journal caught up: a job still without a record has none."""
        for jobid in [j for j in self.waiting if j not in records]:
            for answer, _ in self.waiting.pop(jobid):
                answer(OSError(errno.ENOENT, NO_RECORD))


# --- The hand-off ------------------------------------------------------------
# The workflow hand-off between records (``core.handoff``): links a consumer
# to its producer when its wait ends, and keeps each told what it needs of
# the other as their records change.
#
# * ``link(a, waiter)``: the afterstaged wait of job ``waiter`` on job ``a``
#   may end now because ``waiter`` will read ``a``'s outputs from its RAM
#   disk: the consumer gets ``Handoff``, the producer ``ConsumerAdded``.
#   While ``a``'s outputs are still being written there (its job runs, or
#   its compute nodes still hold its RAM disk), the same link is made and
#   the wait goes on until they are final.
# * ``linked()``: those consumers, for the on-deck pass to place early
#   (a consumer linked while its producer runs is still waiting).
# * ``check(rec)`` (every committed change): a producer's consumers get
#   ``ProducerChanged`` when what they know of it changes; a consumer that
#   no longer needs its producer's RAM disk is dropped from its consumers.


class Handoffs:
    def __init__(self, records, apply):
        self.records = records
        self.apply = apply  # apply(jobid, event)
        #: producer -> the jobs told what becomes of it: every consumer until
        #: it ends, also one that no longer needs the producer's RAM disk
        #: (placed elsewhere, it waits for the outputs to be home)
        self.readers = collections.defaultdict(set)

    def caught_up(self, records):
        """After a restart: who reads whom, from the records."""
        self.readers.clear()
        for rec in records.values():
            if rec.handoff is not None and not rec.final:
                self.readers[rec.handoff.producer].add(rec.jobid)

    def link(self, a, waiter, t):
        """True when job ``waiter`` now reads ``a``'s outputs from its RAM
        disk (its wait is over).  While ``a``'s outputs are still being
        written there, ``waiter`` is linked already (its RAM disk is made
        meanwhile) but waits on."""
        b = self.records.get(waiter)
        if b is None:
            return False
        if b.handoff is not None:
            return b.handoff.producer == a.jobid and handoff.sealed(a)
        writing = not handoff.sealed(a)
        area = handoff.source(a, b, early=writing)
        if area is None:
            return False
        name = flux.job.JobID(a.jobid).f58
        # the consumer first: a producer's consumer without a hand-off is
        # dropped as soon as the producer's record is checked
        remote = bool(a.volume and a.volume.get("servers"))
        self.apply(
            waiter,
            E.Handoff(
                t,
                producer=a.jobid,
                name=name,
                area=area,
                node=a.nodes[0],
                remote=remote,
                writing=writing,
            ),
        )
        self.apply(a.jobid, E.ConsumerAdded(t, consumer=waiter))
        self.readers[a.jobid].add(waiter)
        self.check(self.records[a.jobid], t)  # (what it knows of it, now)
        return not writing

    def linked(self):
        """The consumers that will read their producer's RAM disk."""
        for consumers in self.readers.values():
            for jobid in consumers:
                c = self.records.get(jobid)
                if c is not None and handoff.may_read_ramdisk(c):
                    yield c

    def check(self, rec, t):
        for consumer in sorted(
            set(self.readers.get(rec.jobid, ())) | set(rec.consumers)
        ):
            c = self.records.get(consumer)
            if c is None or c.handoff is None or c.handoff.producer != rec.jobid:
                self.readers[rec.jobid].discard(consumer)
                if consumer in rec.consumers:
                    self.apply(rec.jobid, E.ConsumerGone(t, consumer=consumer))
                continue
            if c.final:
                self.readers[rec.jobid].discard(consumer)
                continue
            on_ramdisk, verdict, writing = handoff.view(rec)
            h = c.handoff
            if (h.on_ramdisk, h.verdict, h.writing) != (on_ramdisk, verdict, writing):
                self.apply(
                    consumer,
                    E.ProducerChanged(
                        t, on_ramdisk=on_ramdisk, verdict=verdict, writing=writing
                    ),
                )
        if not self.readers.get(rec.jobid):
            self.readers.pop(rec.jobid, None)
        if rec.handoff is not None and handoff.served(rec):
            a = self.records.get(rec.handoff.producer)
            if a is not None and rec.jobid in a.consumers:
                self.apply(a.jobid, E.ConsumerGone(t, consumer=rec.jobid))


# --- Outputs still being written ---------------------------------------------
# Which ended jobs' stage-outs may still be writing into their data_out, for
# the jobtap plugin (``job-manager.rsa.writers``): a job submitted then with
# one of those directories as its ``rsa.data_in`` waits for those outputs to
# be home, as under ``afterstaged``, instead of reading a part.
#
# The table is small (jobs between their end and their outputs home) and is
# sent whole, at most once per reactor turn, whenever it changes, and once
# the journal has been replayed.


class Writers:
    def __init__(self, h, log):
        self.h = h
        self.log = log
        self.table = {}  # jobid -> data_out
        self.timer = Timer(h, log, "writers", self.send)

    def check(self, rec):
        """A record changed: keep the table, send it when it changed."""
        path = writing_into(rec)
        if self.table.get(rec.jobid) != path:
            if path is None:
                del self.table[rec.jobid]
            else:
                self.table[rec.jobid] = path
            self.timer.arm()

    def replayed(self, records):
        for rec in records.values():
            path = writing_into(rec)
            if path is not None:
                self.table[rec.jobid] = path
        self.timer.arm()

    def send(self):
        payload = {"writers": {str(jobid): path for jobid, path in self.table.items()}}

        def answered(f):
            try:
                f.get()
            except OSError as exc:
                self.log.warning(f"rsa: job-manager.rsa.writers: {exc.strerror or exc}")

        on_answer(self.h.rpc("job-manager.rsa.writers", payload), answered)

    def stop(self):
        self.timer.stop()
