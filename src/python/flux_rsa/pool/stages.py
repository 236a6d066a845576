"""Stage, purge, measure and discard subjobs.

A stage runs the stager on the holder's first node; its progress JSON lines
become ``stage-progress`` (at most one a second; the newest wins) and its
end ``stage-end {ok, error}`` with the stager's last stderr line or the
Flux exception.  A purge runs ``flux_rsa.ramdisk purge`` there and ends in
``purge-end``.  A measure runs ``flux_rsa.stage.measure`` as the job owner
on any pool node and ends in ``measure-end {ok, bytes, files, error}``.  A
discard runs ``flux_rsa.ramdisk discard`` on a kept RAM disk's node and
ends in ``discard-end {path, ok, error}``.

Each kind names its end notification (``END``), its fields
(``end_fields``), those of one that never ran (``nothing_ran``) and why
none can run where privileged operations cannot (``CANNOT``): the agent
serves every request for one the same way (``work.Work.serve``).
"""

import json
import time

from flux_rsa.pool import protocol
from flux_rsa.pool.subjob import Subjob

STOP_REASON = "flux-rsa: stage stopped"
PROGRESS_INTERVAL = 1.0


class Reporting(Subjob):
    """A subjob whose end is one notification (its class's ``END``, with
    ``end_fields()``), told once; then the agent is told it ended."""

    def __init__(self, ctx, jobspec):
        self.end_sent = False
        super().__init__(ctx, jobspec)

    def update(self):
        if self.ended and not self.end_sent:
            self.end_sent = True
            self.ctx.notify(self.END, **self.end_fields())
            self.ctx.ended(self)


class StageReport:
    """What a stage of either kind says: stage-end's fields, `list`'s entry."""

    END = protocol.STAGE_END
    CANNOT = "cannot stage"

    @staticmethod
    def nothing_ran(key, error):
        jobid, seq = key
        return {"jobid": jobid, "seq": seq, "ok": False, "error": error, "reused": None}

    def end_fields(self):
        ok, error = self.outcome()
        jobid, seq = self.key
        return {
            "jobid": jobid,
            "seq": seq,
            "ok": ok,
            "error": error,
            "reused": self.reused,
        }

    def describe(self):
        jobid, seq = self.key
        ok, error = self.outcome() if self.ended else (None, None)
        return {
            "jobid": jobid,
            "seq": seq,
            "state": self.state,
            "subjob": self.subjob_id,
            "progress": self.progress,
            "ok": ok,
            "error": error,
        }


class Stage(Reporting, StageReport):
    def __init__(self, ctx, jobspec, jobid, seq):
        self.key = (jobid, seq)
        self.stopped = False
        self.progress = None
        self.sent_progress = None
        self.last_sent = 0.0
        self.timer = None
        self.reused = None  # the replica the stager copied from, if any
        super().__init__(ctx, jobspec)

    @property
    def state(self):
        if self.ended:
            return "ended"
        return "running" if self.started else "pending"

    @property
    def subjob_id(self):
        return self.jobid

    def stop(self):
        self.stopped = True
        self.cancel(STOP_REASON)

    def outcome(self):
        """(ok, error) for stage-end."""
        why = self.failure()
        if why is None:
            return True, None
        return False, "stopped" if self.stopped else why

    def on_stdout(self, line):
        try:
            msg = json.loads(line)
        except ValueError:
            return
        if isinstance(msg, dict) and isinstance(msg.get("reused"), str):
            self.reused = msg["reused"]
        if isinstance(msg, dict) and "bytes_done" in msg:
            self.progress = protocol.progress_fields(msg)
            self._send_progress()

    def _send_progress(self, *args):
        if (
            self.end_sent
            or self.progress is None
            or self.progress == self.sent_progress
        ):
            return
        wait = self.last_sent + PROGRESS_INTERVAL - time.monotonic()
        if wait > 0:
            if self.timer is None:
                self.timer = self.h.timer_watcher_create(wait, self._timer)
                self.timer.start()
            return
        self.last_sent = time.monotonic()
        self.sent_progress = self.progress
        jobid, seq = self.key
        self.ctx.notify(
            protocol.STAGE_PROGRESS, jobid=jobid, seq=seq, progress=self.progress
        )

    def _timer(self, *args):
        try:
            self.timer.stop()
            self.timer = None
            self._send_progress()
        except Exception as exc:
            self.ctx.log(f"{self.name}: {exc!r}")

    def update(self):
        if self.ended and self.timer is not None:
            self.timer.stop()
            self.timer = None
        super().update()


class SimulatedStage(StageReport):
    """Simulation (``simulate-rate``): a stage is a timer of size / rate
    seconds in the agent, not a subjob.  Capacity stays real (holders are
    Fluxion jobs); a stage never was capacity-scheduled, and modeling it as
    a timer keeps the pool's own overhead out of benchmarks run on a
    machine far smaller than the RSA nodes they model."""

    def __init__(self, ctx, jobid, seq, seconds):
        self.ctx = ctx
        self.key = (jobid, seq)
        self.reused = None
        self.progress = None
        self.stopped = False
        self.ended = False
        self.subjob_id = None  # no subjob
        self.timer = ctx.h.timer_watcher_create(max(0.0, seconds), self._done)
        self.timer.start()

    @property
    def state(self):
        return "ended" if self.ended else "running"

    def done(self):
        return self.ended

    def stop(self):
        self.stopped = True
        self._done()

    def outcome(self):
        return (False, "stopped") if self.stopped else (True, None)

    def _done(self, *args):
        if self.ended:
            return
        self.ended = True
        self.timer.stop()
        self.ctx.notify(self.END, **self.end_fields())
        self.ctx.ended(self)


class PlainEnd(Reporting):
    """A subjob whose end says whether it worked: ``{FIELD: key, ok, error}``."""

    def __init__(self, ctx, jobspec, key):
        self.key = key
        super().__init__(ctx, jobspec)

    @classmethod
    def nothing_ran(cls, key, error=None):
        return {cls.FIELD: key, "ok": error is None, "error": error}

    def end_fields(self):
        return self.nothing_ran(self.key, self.failure())


class Purge(PlainEnd):
    END = protocol.PURGE_END
    FIELD = "jobid"
    CANNOT = "cannot drop the inputs"


class Measure(Reporting):
    END = protocol.MEASURE_END
    CANNOT = "cannot measure"

    def __init__(self, ctx, jobspec, jobid, seq):
        self.key = (jobid, seq)
        self.result = None
        self.stopped = None  # why it was stopped
        super().__init__(ctx, jobspec)

    @staticmethod
    def nothing_ran(key, error=None):
        jobid, seq = key
        return {
            "jobid": jobid,
            "seq": seq,
            "ok": error is None,
            "bytes": 0,
            "files": 0,
            "error": error,
        }

    @property
    def state(self):
        if self.ended:
            return "ended"
        return "running" if self.started else "pending"

    def stop(self, why):
        self.stopped = why
        self.cancel(f"flux-rsa: {why}")

    def on_stdout(self, line):
        try:
            msg = json.loads(line)
        except ValueError:
            return
        if isinstance(msg, dict) and isinstance(msg.get("bytes"), int):
            self.result = msg

    def outcome(self):
        """measure-end's fields but the key."""
        why = self.failure()
        if why is None and self.result is None:
            why = f"{self.name} printed no result"
        if why is not None:
            return {"ok": False, "bytes": 0, "files": 0, "error": self.stopped or why}
        return {
            "ok": True,
            "bytes": self.result["bytes"],
            "files": self.result.get("files", 0),
            "error": None,
        }

    def end_fields(self):
        jobid, seq = self.key
        return {"jobid": jobid, "seq": seq, **self.outcome()}

    def describe(self):
        jobid, seq = self.key
        return {"jobid": jobid, "seq": seq, "state": self.state, "subjob": self.jobid}


class Discard(PlainEnd):
    """Removes a kept RAM disk (its key is the path); the agent forgets
    that RAM disk when it is gone."""

    END = protocol.DISCARD_END
    FIELD = "path"
    CANNOT = "cannot remove it"
