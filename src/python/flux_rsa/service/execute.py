"""Carry out the core's actions.  One small function per action kind; each
is idempotent on the receiving side, so re-sending after a restart is safe.
"""

import errno

from flux_rsa.core import actions as A

URGENCY_EXPEDITE = 31  # highest urgency the instance owner may set


class Executor:
    def __init__(self, h, log, pool, timers, active):
        self.h = h
        self.log = log
        self.pool = pool
        self.timers = timers  # timers(jobid, name, seconds)
        self.active = active  # active(jobid) -> bool
        self.table = {
            A.RequestCapacity: self.request_capacity,
            A.CancelHolder: self.cancel_holder,
            A.StartStage: self.start_stage,
            A.StopStage: self.stop_stage,
            A.PurgeInput: self.purge_input,
            A.ReplyStart: self.reply_start,
            A.StartTimer: self.start_timer,
            A.LockIn: self.lock_in,
            A.PostEvent: self.post_event,
        }

    def run(self, action):
        try:
            self.table[type(action)](action)
        except OSError as exc:
            self.log.error(f"rsa: job {action.jobid}: {type(action).__name__}: {exc}")

    # --- the pool ---

    def request_capacity(self, a):
        self.pool.call("hold", {"jobid": a.jobid, "gen": a.gen, "need": a.need, "userid": a.userid})

    def cancel_holder(self, a):
        self.pool.call("cancel", {"jobid": a.jobid, "gen": a.gen})

    def start_stage(self, a):
        self.pool.call(
            "stage",
            {
                "jobid": a.jobid,
                "seq": a.seq,
                "direction": a.direction,
                "src": a.src,
                "dst": a.dst,
                "method": a.method,
                "userid": a.userid,
                "verify": a.verify,
                "nodes": list(a.nodes),
            },
        )

    def stop_stage(self, a):
        self.pool.call("stop", {"jobid": a.jobid, "seq": a.seq})

    def purge_input(self, a):
        self.pool.call(
            "purge",
            {"jobid": a.jobid, "path": a.path, "data_in": a.data_in, "userid": a.userid, "nodes": list(a.nodes)},
        )

    # --- job-manager ---

    def reply_start(self, a):
        payload = {"id": a.jobid, "env": a.env.to_dict() if a.env is not None else None}
        self._jobmanager("job-manager.rsa.answer", payload, quiet=(errno.EINVAL,))

    def lock_in(self, a):
        self._jobmanager("job-manager.urgency", {"id": a.jobid, "urgency": URGENCY_EXPEDITE})

    def post_event(self, a):
        if self.active(a.jobid):
            self._jobmanager("job-manager.rsa.post", {"id": a.jobid, "name": a.name, "context": a.context})

    def post_state(self, rec):
        """Mirror an rsa-state change into the job's eventlog/annotations."""
        if not self.active(rec.jobid):
            return
        context = {"state": rec.rsa_state.value, "nodes": list(rec.nodes)}
        if rec.error:
            context["error"] = rec.error
        self._jobmanager("job-manager.rsa.post", {"id": rec.jobid, "name": "state", "context": context})

    def _jobmanager(self, topic, payload, quiet=()):
        future = self.h.rpc(topic, payload)

        def answered(f):
            try:
                f.get()
            except OSError as exc:
                if exc.errno not in quiet and exc.errno != errno.ENOENT:
                    self.log.warning(f"rsa: {topic} {payload.get('id')}: {exc.strerror or exc}")

        future.then(answered)

    # --- time ---

    def start_timer(self, a):
        self.timers(a.jobid, a.name, a.seconds)
