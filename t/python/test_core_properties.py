"""Property tests: random event orders against a simulated world.

The world plays Flux and the pool: it answers every action the core asks
for (holders get allocated, started, built, ended; stages progress and end),
in any order the real system allows, interleaved with job events (on deck,
demoted, revoked, start, finish, cancel), timers and people (retry,
release).  Whatever the order, the invariants of the issue must hold:

* capacity is never given twice: at most one live holder per job;
* every reservation ends released: once the job has ended and the world has
  delivered everything, the record is at rest and no holder is alive;
* a RAM disk holding output is never destroyed before a successful
  stage-out or an explicit release;
* a RAM disk the compute nodes attach (one spanning RSA nodes): the job
  starts on it only once it is attached, and it is detached before the
  stage-out reads it, before it is destroyed and before the record rests.
"""

import dataclasses

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flux_rsa.core import Env, Policy, Progress
from flux_rsa.core import actions as A
from flux_rsa.core import admit
from flux_rsa.core import events as E
from flux_rsa.core import parse_request, process
from flux_rsa.core.states import AT_REST, JobState, RsaState

J, S = JobState, RsaState

POLICY = Policy.from_config({"proportion": 1, "node-capacity": "64M", "granule": "4M"})

REQUESTS = [
    {"data_in": "/p/in", "data_out": "/p/out"},
    {"data_in": "/p/in"},
    {"data_out": "/p/out"},
    {"data_in": "/p/in", "data_out": "/p/out", "on_late": "wait"},
    {
        "data_in": "/p/in",
        "data_out": "/p/out",
        "stage_in": "/p/unpack.sh",
        "stage_out": "tar",
    },
    {"capacity": "8M"},  # scratch only: a RAM disk, nothing staged
    {"capacity": "8M", "on_late": "ignore"},
]


@dataclasses.dataclass
class Holder:
    phases: list  # what the pool will still report, in order
    cancelled: bool = False
    built: bool = False


class World:
    """Flux and the pool, for one job, answering the core's actions."""

    def __init__(self, request, spanning=False):
        self.t = 0.0
        self.spanning = spanning
        self.rec = admit(1, 1000, 1, parse_request(request), POLICY, self.t)
        self.attaching = False  # an Attach the world has not answered
        self.detaching = False
        self.mounted = False  # the RAM disk is mounted on the compute nodes
        self.attach_gen = None  # the reservation whose RAM disk is (being) attached
        self.mount_path = None
        self.holders = {}  # gen -> Holder, live ones only
        self.stages = {}  # seq -> stopping?
        self.timers = set()
        self.reply = None  # env offered and not yet taken by job-manager
        self.started = None  # env the job really started with
        self.starting = False
        self.output_written = False  # job ran with its output on the RAM disk
        self.output_safe = False  # stage-out succeeded or release asked
        self.world_fault = False
        self.replies = 0
        self.staged_ok = set()  # gens whose stage-in succeeded
        self.deadline = None  # (state, since) of the latest deadline timer
        self.offer = None  # env job-manager would start the job with at once
        self.withdrawals = 0  # Withdraw requests job-manager has not answered
        self.took_offer = False
        self.offer_start = None  # env of a start with the offer not yet in the journal

    # --- the core's actions, checked as they come ---

    def run(self, ev):
        self.t += 1.0
        ev = dataclasses.replace(ev, t=self.t)
        self.rec, actions = process(self.rec, ev)
        for act in actions:
            self.take(act)

    def take(self, act):
        if isinstance(act, A.RequestCapacity):
            live = [g for g, h in self.holders.items()]
            assert not live, f"capacity asked twice: gen {act.gen} while {live} live"
            self.holders[act.gen] = Holder(phases=["alloc", "start", "built"])
        elif isinstance(act, A.CancelHolder):
            if self.output_written and not self.output_safe and not self.world_fault:
                raise AssertionError("RAM disk with un-staged output destroyed")
            if self.mounted or self.attaching:
                assert act.gen != self.attach_gen, "RAM disk destroyed while attached"
            holder = self.holders.get(act.gen)
            if holder is not None:
                holder.cancelled = True
        elif isinstance(act, A.StartStage):
            holder = self.holders.get(self.rec.gen)
            assert (
                holder is not None and holder.built and not holder.cancelled
            ), "stage without a RAM disk"
            if act.direction == "out":
                assert (
                    not self.mounted and not self.attaching
                ), "stage-out while compute nodes hold the RAM disk"
            self.stages[act.seq] = False
        elif isinstance(act, A.StopStage):
            if act.seq in self.stages:
                self.stages[act.seq] = True
        elif isinstance(act, A.ReplyStart):
            assert self.starting, "answer without a start request"
            self.replies += 1
            if act.env is not None and act.env.staged_in:
                assert (
                    self.rec.gen in self.staged_ok
                ), "staged inputs offered without a stage-in"
            if self.spanning and act.env is not None and act.env.ramdisk:
                assert (
                    self.mounted and self.mount_path == act.env.ramdisk
                ), "a job started on a RAM disk its nodes have not attached"
            self.reply = act.env if act.env is not None else Env()
        elif isinstance(act, A.Attach):
            holder = self.holders.get(self.rec.gen)
            assert holder is not None and holder.built, "attach without a RAM disk"
            assert act.ranks == (0, 1) and act.volume, act
            self.attaching = True
            self.attach_gen = self.rec.gen
            self.mount_path = f"{act.root}/{act.name}"
        elif isinstance(act, A.Detach):
            assert self.mounted, "detach of what is not attached"
            self.detaching = True
        elif isinstance(act, A.Offer):
            assert (
                not self.spanning
            ), "an offer for a RAM disk the compute nodes must attach"
            assert (
                self.rec.rsa_state is S.READY and act.env.ramdisk
            ), "an offer without staged inputs"
            if self.started is None and not self.starting:
                self.offer = act.env
        elif isinstance(act, A.Withdraw):
            self.withdrawals += 1
        elif isinstance(act, A.StartTimer):
            self.timers.add(act.name)
            if act.name == "timeout":
                self.deadline = (act.state, act.since)

    # --- what can happen next ---

    def choices(self):
        """What may happen next, each with a weight: progress is common,
        faults and reversals rarer, so deep states are reached often."""
        rec, out = self.rec, []
        if rec.job_state in (J.PENDING, J.ONDECK, J.DEMOTED) and not self.starting:
            out += [
                (4, E.OnDeck(0)),
                (1, E.Demoted(0)),
                (1, E.Revoke(0)),
                (1, E.Canceled(0)),
            ]
            if self.offer is not None and self.started is None:
                out.append((3, ("take-offer",)))
            elif self.started is None and self.offer_start is None:
                out.append((2, E.Starting(0, ranks=(0, 1))))
        if self.attaching:
            out += [(6, ("attach-ok",)), (1, ("attach-fail",))]
        if self.detaching:
            out += [(6, ("detached",)), (1, ("detach-fail",))]
        if self.withdrawals:
            out.append((4, ("withdrawn",)))
        if self.offer_start is not None:
            out.append((4, ("offer-start-seen",)))
        if (
            self.starting
            and self.started is None
            and self.offer_start is None
            and rec.job_state is J.RUNNING
        ):
            out.append((1, E.Canceled(0)))  # cancelled during the start hold
            out.append((1, ("fallback",)))  # job-manager gave up waiting
            if self.reply is not None:
                out.append((6, ("take-reply",)))
        if self.started is not None and rec.job_state is J.RUNNING:
            out += [(3, E.Finished(0)), (1, E.InputReleased(0, why="request"))]
            if "delay" in self.timers:
                out.append((2, E.InputReleased(0, why="delay")))
        if "late" in self.timers and rec.start_pending:
            out.append((1, E.LateTimeout(0)))
        for gen, holder in self.holders.items():
            if holder.phases:
                out.append((6, ("holder-next", gen)))
            if holder.cancelled:
                out.append((6, ("holder-end", gen)))
            out.append((1, ("holder-fault", gen)))
        for seq in self.stages:
            out += [
                (2, ("stage-progress", seq)),
                (6, ("stage-ok", seq)),
                (2, ("stage-fail", seq)),
            ]
        if rec.rsa_state is S.HELD:
            out += [(2, E.Retry(0)), (1, E.Release(0))]
        if "retry" in self.timers:
            out.append((3, ("retry-timer",)))
        if self.deadline is not None:
            out.append((1, ("deadline",)))
        return out

    def weighted(self):
        return [choice for weight, choice in self.choices() for _ in range(weight)]

    def apply(self, choice, faults=True):
        rec = self.rec
        if isinstance(choice, E.Event):
            if isinstance(choice, E.Starting):
                self.starting = True
            if isinstance(choice, E.Release):
                self.output_safe = True
            if isinstance(choice, E.Retry):
                pass
            return self.run(choice)
        kind = choice[0]
        if kind in ("attach-ok", "attach-fail"):
            self.attaching = False
            self.mounted = kind == "attach-ok"
            return self.run(
                E.Attached(0, self.mounted, None if self.mounted else "rank 1: boom")
            )
        if kind in ("detached", "detach-fail"):
            self.detaching = self.mounted = False
            ok = kind == "detached"
            return self.run(E.Detached(0, ok, None if ok else "rank 1: still busy"))
        if kind == "retry-timer":
            self.timers.discard("retry")
            return self.run(E.RetryStage(0))
        if kind == "deadline":
            state, since = self.deadline
            self.deadline = None
            return self.run(E.Timeout(0, state, since))
        if kind == "take-offer":  # job-manager starts the job with it
            self.took_offer = True
            self.offer_start, self.offer = self.offer, None
            self.starting = True
            if self.offer_start.out_on_ramdisk:
                self.output_written = True
            return
        if kind == "offer-start-seen":  # its rsa-ready and start reach the service
            env, self.offer_start = self.offer_start, None
            return self._start(env)
        if kind == "withdrawn":
            self.withdrawals -= 1
            ok = not self.took_offer
            self.offer = None
            return self.run(E.Withdrawn(0) if ok else E.OfferTaken(0))
        if kind == "take-reply":
            return self._start(self.reply)
        if kind == "fallback":
            return self._start(
                Env(data_in=rec.request.data_in, data_out=rec.request.data_out)
            )
        gen_or_seq = choice[1]
        if kind == "holder-next":
            holder = self.holders[gen_or_seq]
            phase = holder.phases.pop(0)
            if phase == "alloc":
                return self.run(E.HolderAllocated(0, gen_or_seq, ("rsa0",), rec.need))
            if phase == "start":
                return self.run(E.HolderStarted(0, gen_or_seq))
            holder.built = True
            volume = (
                {
                    "name": f"1.{gen_or_seq}",
                    "servers": ["rsa0:24000"],
                    "user": "u",
                    "secret": "s" * 16,
                }
                if self.spanning
                else None
            )
            return self.run(
                E.RamdiskBuilt(0, gen_or_seq, f"/rd/1.{gen_or_seq}", volume)
            )
        if kind in ("holder-end", "holder-fault"):
            holder = self.holders.pop(gen_or_seq)
            if kind == "holder-fault" and not holder.cancelled:
                self.world_fault = True
            return self.run(
                E.HolderEnded(
                    0, gen_or_seq, error=None if holder.cancelled else "node lost"
                )
            )
        if kind == "stage-progress":
            return self.run(
                E.StageProgress(0, gen_or_seq, Progress(bytes_done=1, bytes_total=2))
            )
        stopping = self.stages.pop(gen_or_seq)
        ok = kind == "stage-ok"
        direction = rec.stage_dir
        if ok and direction == "in" and not stopping:
            self.staged_ok.add(rec.gen)
        if ok and direction == "out":
            self.output_safe = True
        self.run(E.StageEnded(0, gen_or_seq, ok, error=None if ok else "copy failed"))

    def _start(self, env):
        self.started = env
        self.reply = None
        if env.out_on_ramdisk:
            self.output_written = True
        self.run(E.Started(0, env))

    # --- the end: let everything finish well ---

    def drain(self):
        ended = (J.FINISHED, J.CANCELED)
        for _ in range(200):
            rec = self.rec
            if (
                self.reply is not None
                and self.started is None
                and rec.job_state not in ended
            ):
                self._start(self.reply)
                continue
            if rec.job_state is J.RUNNING and self.started is not None:
                self.run(E.Finished(0))
                continue
            pending = [
                c
                for _, c in self.choices()
                if isinstance(c, tuple)
                and c[0]
                in (
                    "holder-next",
                    "holder-end",
                    "stage-ok",
                    "retry-timer",
                    "withdrawn",
                    "offer-start-seen",
                    "attach-ok",
                    "detached",
                )
            ]
            if pending:
                self.apply(pending[0])
                continue
            if rec.rsa_state is S.HELD:
                self.apply(E.Release(0))
                continue
            if rec.job_state not in ended:
                self.run(E.Canceled(0))
                continue
            return
        raise AssertionError("the world never settles")


@settings(
    max_examples=3000, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
@given(request=st.sampled_from(REQUESTS), spanning=st.booleans(), data=st.data())
def test_random_orders_keep_the_invariants(request, spanning, data):
    world = World(request, spanning)
    for _ in range(data.draw(st.integers(min_value=0, max_value=80), label="steps")):
        choices = world.weighted()
        if not choices:
            break
        world.apply(data.draw(st.sampled_from(choices), label="next"))
    world.drain()
    rec = world.rec
    assert rec.final, f"not at rest: {rec.job_state}/{rec.rsa_state}"
    assert rec.rsa_state in AT_REST
    assert not world.holders, "a holder outlived its job"
    assert not world.stages, "a stage outlived its job"
    assert (
        not world.mounted and not world.attaching and not world.detaching
    ), "still attached"
    if world.starting and rec.job_state is J.FINISHED:
        assert (
            world.replies >= 1 or world.started is not None
        ), "start request never answered"
    if world.output_written and not world.world_fault:
        assert world.output_safe, "outputs neither staged out nor released"
