"""Actions out: those the core asked for while a message was handled wait
in the ``Outbox`` and go out together once it is done, each carried out by
the ``Executor``, one small function per action kind.  Each is idempotent
on the receiving side, so re-sending after a restart is safe.
"""


import errno
import time
from dataclasses import dataclass
from typing import Optional

from flux.constants import FLUX_JOB_URGENCY_EXPEDITE

from flux_rsa.core import Record
from flux_rsa.core import actions as A
from flux_rsa.core import events as E
from flux_rsa.core.states import RsaState as S
from flux_rsa.service.pool_link import to_request
from flux_rsa.service.reactor import Timer, on_answer

# --- Waiting to be sent ------------------------------------------------------
# Actions waiting to be sent: those the core asked for while a message was
# handled go out together once it is done (at the next turn of the reactor),
# in the order they were asked for. Records are not waited for: the store
# commits them on its own schedule (service.records).


@dataclass(frozen=True)
class Outgoing:
    action: A.Action  # a core action, or the service's own (execute.PostState)
    intake: Optional[
        float
    ]  # when what caused it arrived; None: not counted in the latency


class Outbox:
    """``prepare(action)`` may amend an action just before it goes
    (``run(action)`` sends it); ``metrics.sent(intake)`` times it."""

    def __init__(self, h, log, run, metrics, prepare=lambda action: action):
        self.run = run
        self.metrics = metrics
        self.prepare = prepare
        self.waiting = []  # Outgoing
        self.timer = Timer(h, log, "flush", self.flush)

    def add(self, actions, intake):
        """Send ``actions`` soon, timed from ``intake`` (None: not timed)."""
        self.waiting.extend(Outgoing(a, intake) for a in actions)
        self.timer.arm()

    def stop(self):
        self.timer.stop()

    def flush(self):
        out, self.waiting = self.waiting, []
        for item in out:
            self.run(self.prepare(item.action))
            if item.intake is not None:
                self.metrics.sent(item.intake)


# --- Carried out -------------------------------------------------------------
# Carry out the core's actions. One small function per action kind; each is
# idempotent on the receiving side, so re-sending after a restart is safe.


@dataclass(frozen=True)
class PostState(A.Action):
    """The service's own action, not the core's: mirror a record's new
    rsa-state into its job (``Executor.post_state``)."""

    record: Record


#: pool actions that act as the job's owner on the user's paths: through
#: the IMP they carry the job's signed request, J (privileged.signed)
SIGNED = (A.StartStage, A.Measure)


def needs_j(action, signed):
    """Does ``action`` carry the job's J: through the IMP (``signed``) when
    it acts as the owner; always for a stage script, whose environment is
    the job's own as J holds it (Flux keeps a job's environment there
    alone)."""
    if isinstance(action, A.StartStage) and action.method not in (None, "tar"):
        return True
    return signed and isinstance(action, SIGNED)


class Executor:
    def __init__(self, h, log, pool, timers, active, mounts=None, signed=lambda: False):
        self.h = h
        self.log = log
        self.pool = pool
        self.mounts = mounts  # compute_nodes.Mounts: the job's compute nodes
        self.timers = timers  # timers(StartTimer action)
        self.active = active  # active(jobid) -> bool
        self.table = {
            A.RequestCapacity: self.pool_action,
            A.CancelHolder: self.pool_action,
            A.StartStage: self.pool_action,
            A.StopStage: self.pool_action,
            A.PurgeInput: self.purge,
            A.Measure: self.pool_action,
            A.ReplyStart: self.reply_start,
            A.StartTimer: self.start_timer,
            A.LockIn: self.lock_in,
            A.PostEvent: self.post_event,
            A.RaiseException: self.raise_exception,
            A.Offer: self.offer,
            A.Withdraw: self.withdraw,
            A.Attach: lambda a: self.mounts.attach(a),
            A.Detach: lambda a: self.mounts.detach(a),
            PostState: lambda a: self.post_state(a.record),
        }
        self.deliver = (
            None  # deliver(jobid, event): Withdrawn answers go back to the core
        )
        self.retries = {}  # jobid -> timer of a withdrawal to ask again
        self.signed = signed  # signed() -> whether SIGNED actions need their J
        #: jobid -> [(method, payload, needs J)] waiting for a J, in order:
        #: a job's pool requests never overtake one another
        self.waiting = {}

    def run(self, action):
        try:
            self.table[type(action)](action)
        except OSError as exc:
            self.log.error(f"rsa: job {action.jobid}: {type(action).__name__}: {exc}")

    # --- the pool ---

    def purge(self, a):
        """The switch's purge: where the job's compute node holds an image
        (only it writes it then), else in the pool."""
        if a.ranks:
            self.mounts.purge(a, a.path.rsplit("/", 2)[0])
        else:
            self.pool_action(a)

    def pool_action(self, a):
        method, payload = to_request(a)
        with_j = needs_j(a, self.signed())
        queue = self.waiting.get(a.jobid)
        if queue is None and not with_j:
            self.pool.call(method, payload)
            return
        if queue is None:
            queue = self.waiting[a.jobid] = []
        queue.append((method, payload, with_j))
        if len(queue) == 1:
            self._send_waiting(a.jobid)

    def _send_waiting(self, jobid):
        """Send the job's waiting requests in order; one needing its J
        waits for the lookup (job-info), then the rest follow."""
        queue = self.waiting[jobid]
        while queue and not queue[0][2]:
            self.pool.call(*queue.pop(0)[:2])
        if not queue:
            del self.waiting[jobid]
            return
        method, payload, _ = queue[0]

        def found(f):
            try:
                payload["j"] = f.get()["J"]
            except (OSError, KeyError) as exc:
                # sent without it: the entry point refuses it, naming RSA_J,
                # and the stage fails as any stage that cannot run
                self.log.error(
                    f"rsa: job {jobid}: reading its signed request (J) for "
                    f"rsa-pool.{method}: {getattr(exc, 'strerror', None) or exc!r}"
                )
            queue[0] = (method, payload, False)
            self._send_waiting(jobid)

        on_answer(
            self.h.rpc("job-info.lookup", {"id": jobid, "keys": ["J"], "flags": 0}),
            found,
        )

    # --- job-manager ---

    def reply_start(self, a):
        payload = {"id": a.jobid, "env": a.env.to_dict() if a.env is not None else None}
        self._jobmanager("job-manager.rsa.answer", payload, quiet=(errno.EINVAL,))

    def offer(self, a):
        payload = {"id": a.jobid, "env": a.env.to_dict()}
        # EINVAL: the job is starting already (it asks rsa.start instead)
        self._jobmanager("job-manager.rsa.offer", payload, quiet=(errno.EINVAL,))

    def withdraw(self, a):
        """Take the offer back; the core waits for the answer before it
        gives the RAM disk away (a job that took the offer runs on it)."""

        def answered(f):
            try:
                ok = bool(f.get().get("withdrawn", True))
            except OSError as exc:
                if exc.errno not in (errno.ENOENT, errno.ENOSYS):
                    self.log.error(
                        f"rsa: job {a.jobid}: withdrawing the start offer: {exc}; asking again in 1s"
                    )
                    w = self.h.timer_watcher_create(1.0, lambda *args: self.withdraw(a))
                    w.start()
                    self.retries[a.jobid] = w  # keep it alive until it fires
                    return
                ok = True  # no such job (gone) or no plugin: nothing was offered
            self.retries.pop(a.jobid, None)
            self.deliver(a.jobid, (E.Withdrawn if ok else E.OfferTaken)(time.time()))

        on_answer(self.h.rpc("job-manager.rsa.withdraw", {"id": a.jobid}), answered)

    def lock_in(self, a):
        self._jobmanager(
            "job-manager.urgency", {"id": a.jobid, "urgency": FLUX_JOB_URGENCY_EXPEDITE}
        )

    def post_event(self, a):
        if self.active(a.jobid):
            self._jobmanager(
                "job-manager.rsa.post",
                {"id": a.jobid, "name": a.name, "context": a.context},
            )

    def raise_exception(self, a):
        if self.active(a.jobid):
            self._jobmanager(
                "job-manager.raise",
                {"id": a.jobid, "severity": 0, "type": a.type, "note": a.note},
            )

    def post_state(self, rec):
        """Mirror an rsa-state change into the job's eventlog (rsa-state) and
        its annotations (user.rsa, a volatile memo: `flux jobs -o {user.rsa.state}`).
        An ineligible job gets the memo only."""
        if not self.active(rec.jobid):
            return
        context = {"state": rec.rsa_state.value, "nodes": list(rec.nodes)}
        if rec.error:
            context["error"] = rec.error
        if rec.rsa_state is not S.INELIGIBLE:
            self._jobmanager(
                "job-manager.rsa.post",
                {"id": rec.jobid, "name": "state", "context": context},
            )
        memo = {"state": rec.rsa_state.value}
        if rec.nodes:
            memo["nodes"] = ",".join(rec.nodes)
        self._jobmanager(
            "job-manager.memo",
            {"id": rec.jobid, "volatile": True, "memo": {"rsa": memo}},
        )

    def _jobmanager(self, topic, payload, quiet=()):
        future = self.h.rpc(topic, payload)

        def answered(f):
            try:
                f.get()
            except OSError as exc:
                if exc.errno not in quiet and exc.errno != errno.ENOENT:
                    self.log.warning(
                        f"rsa: {topic} {payload.get('id')}: {exc.strerror or exc}"
                    )

        on_answer(future, answered)

    # --- time ---

    def start_timer(self, a):
        self.timers(a)
