"""Jobs waiting for other jobs' outputs (``--dependency=afterstaged:JOBID``).

The jobtap plugin asks ``rsa.afterstaged {id}`` for a job that another one
depends on; the answer waits until ``core.outputs.after_staged`` has a
verdict on that job's record: ``{ok: true}`` (the dependency goes) or
``{ok: false, why}`` (the dependent job gets an exception naming it).
When the waiting job (``for``) will read that job's outputs from its RAM
disk (``service.handoff``), the answer comes as soon as they are final
there: ``{ok: true, handoff: true}``.
"""

import collections
import errno

from flux_rsa.core.outputs import after_staged

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

    def replayed(self, records):
        """The journal caught up: a job still without a record has none."""
        for jobid in [j for j in self.waiting if j not in records]:
            for answer, _ in self.waiting.pop(jobid):
                answer(OSError(errno.ENOENT, NO_RECORD))
