"""The workflow hand-off between records (``core.handoff``): links a
consumer to its producer when its wait ends, and keeps each told what it
needs of the other as their records change.

* ``link(a, waiter)``: the afterstaged wait of job ``waiter`` on job ``a``
  may end now because ``waiter`` will read ``a``'s outputs from its RAM
  disk: the consumer gets ``Handoff``, the producer ``ConsumerAdded``.
* ``check(rec)`` (every committed change): a producer's consumers get
  ``ProducerChanged`` when what they know of it changes; a consumer that
  no longer needs its producer's RAM disk is dropped from its consumers.
"""

import collections

import flux.job

from flux_rsa.core import events as E
from flux_rsa.core import handoff


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
        disk (its wait is over)."""
        b = self.records.get(waiter)
        if b is None or b.handoff is not None:
            return b is not None and b.handoff.producer == a.jobid
        area = handoff.source(a, b)
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
            ),
        )
        self.apply(a.jobid, E.ConsumerAdded(t, consumer=waiter))
        self.readers[a.jobid].add(waiter)
        self.check(self.records[a.jobid], t)  # (what it knows of it, now)
        return True

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
            on_ramdisk, verdict = handoff.view(rec)
            if (c.handoff.on_ramdisk, c.handoff.verdict) != (on_ramdisk, verdict):
                self.apply(
                    consumer,
                    E.ProducerChanged(t, on_ramdisk=on_ramdisk, verdict=verdict),
                )
        if not self.readers.get(rec.jobid):
            self.readers.pop(rec.jobid, None)
        if rec.handoff is not None and handoff.served(rec):
            a = self.records.get(rec.handoff.producer)
            if a is not None and rec.jobid in a.consumers:
                self.apply(a.jobid, E.ConsumerGone(t, consumer=rec.jobid))
