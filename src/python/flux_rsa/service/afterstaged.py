"""Jobs waiting for other jobs' outputs (``--dependency=afterstaged:JOBID``).

The jobtap plugin asks ``rsa.afterstaged {id}`` for a job that another one
depends on; the answer waits until ``core.outputs.after_staged`` has a
verdict on that job's record: ``{ok: true}`` (the dependency goes) or
``{ok: false, why}`` (the dependent job gets an exception naming it).
"""

import collections
import errno

from flux_rsa.core.outputs import after_staged

NO_RECORD = (
    "the RSA has no record of it (records of ended jobs are kept up to [rsa] keep)"
)


class Waiters:
    def __init__(self, log):
        self.log = log
        self.waiting = collections.defaultdict(list)  # jobid -> [answer]

    def add(self, jobid, rec, answer, replayed):
        """``answer(payload)`` once the outputs of job ``jobid`` (record
        ``rec``, None when there is none) are settled, or at once when they
        are.  Without a record once the journal has been replayed, the
        answer is ENOENT."""
        if rec is None and replayed:
            answer(OSError(errno.ENOENT, NO_RECORD))
            return
        self.waiting[jobid].append(answer)
        if rec is not None:
            self.check(rec)

    def check(self, rec):
        """A record changed: answer those waiting on it, if it is settled."""
        if rec.jobid not in self.waiting:
            return
        verdict = after_staged(rec)
        if verdict is None:
            return
        payload = {"ok": True} if verdict is True else {"ok": False, "why": verdict}
        for answer in self.waiting.pop(rec.jobid):
            try:
                answer(payload)
            except Exception as exc:  # one bad answer must not stop the others
                self.log.error(f"rsa: afterstaged answer for job {rec.jobid}: {exc!r}")

    def replayed(self, records):
        """The journal caught up: a job still without a record has none."""
        for jobid in [j for j in self.waiting if j not in records]:
            for answer in self.waiting.pop(jobid):
                answer(OSError(errno.ENOENT, NO_RECORD))
