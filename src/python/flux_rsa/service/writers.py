"""Which ended jobs' stage-outs may still be writing into their data_out,
for the jobtap plugin (``job-manager.rsa.writers``): a job submitted then
with one of those directories as its ``rsa.data_in`` waits for those
outputs to be home, as under ``afterstaged``, instead of reading a part.

The table is small (jobs between their end and their outputs home) and is
sent whole, at most once per reactor turn, whenever it changes, and once
the journal has been replayed.
"""

from flux_rsa.core.outputs import writing_into
from flux_rsa.service.answers import on_answer
from flux_rsa.service.timers import Timer


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
