"""Holder subjobs: one per RSA reservation generation.

The holder's life is the RAM disk's life.  A Holder gathers the facts of
its job (its R, that it started, the RAM-disk command's ``built`` and
``kept`` lines, that it ended) and ``holdertable`` turns them into its
notifications, each once and in order: ``holder-alloc``,
``holder-start``, ``ramdisk-built``, ``holder-end`` (after ``clean``:
capacity is free again).

A holder that ended without destroying its RAM disk (killed by a signal,
or its command failed to remove it) would keep the memory Fluxion now
counts as free: a sweep runs on its nodes first, then ``holder-end`` goes
out (not on a node that is down: nothing can run there).

``keep()`` (pool shutdown with ``keep``) ends the holder with SIGALRM: the
RAM-disk command marks the RAM disk kept and exits without destroying it;
``holder-end`` then carries ``kept: PATH``.  A holder may also *adopt* a
kept RAM disk (``adopt``): it runs on that RAM disk's node and takes it
over instead of building one.

A simulated holder (a test-execution job) makes nothing: it reports
``ramdisk-built`` with the path it would have made as soon as it starts,
and ends when it is canceled (or killed, to keep it).

A holder sees of the agent only its ``HolderContext``.
"""

import dataclasses
import enum
import json
import os
import signal

import flux.constants
import flux.job
from flux.hostlist import Hostlist

from flux_rsa.pool import holdertable, jgf, jobspecs, protocol
from flux_rsa.pool.holdertable import State
from flux_rsa.pool.subjob import Context, Subjob, _ignore
from flux_rsa.ramdisk import signals

CANCEL_REASON = "flux-rsa: reservation released"
KEEP_REASON = "flux-rsa: pool shut down, RAM disk kept"
#: `list`'s holder states (a holder being swept has ended)
LISTED = {
    State.PENDING: "pending",
    State.ALLOCATED: "allocated",
    State.STARTED: "started",
    State.BUILT: "built",
    State.SWEEPING: "ended",
    State.ENDED: "ended",
}


class Asked(enum.Enum):
    """What the service asked of a holder."""

    RELEASE = "release"  # go, destroying the RAM disk
    KEEP = "keep"  # go, keeping the RAM disk for a later pool (shutdown)


@dataclasses.dataclass(frozen=True)
class HolderContext(Context):
    """A holder's part of the agent, besides a subjob's."""

    policy: object  # the site Policy (granule, ramdisk_root, exported)
    nodes: object  # Nodes: lend, unlend, down
    sweep_jobspec: object  # sweep_jobspec(ranks, gone): a sweep on those pool ranks
    took_over: object  # took_over(path): it holds the kept RAM disk path now
    gave_up: object  # gave_up(path): it ended before taking path over


class Holder(Subjob):
    END = protocol.HOLDER_END
    CANNOT = "no RAM disk can be made"

    def __init__(
        self,
        ctx,
        jobspec,
        jobid,
        gen,
        adopt=None,
        adopt_rank=None,
        adopt_granules=0,
        port=None,
        secret=None,
    ):
        self.key = (jobid, gen)
        self.state = State.PENDING  # what the service was told (holdertable)
        self.asked = None  # Asked, once the service asked it to go
        self.port = port  # first brick's port, when the RAM disk spans nodes
        self.secret = secret
        self.path = None  # the RAM disk, once the RAM-disk command built it
        self.reported = None  # the volume the RAM-disk command reported
        self.kept = None  # path, once the RAM-disk command said it kept it
        self.adopt = adopt
        self.adopt_rank = adopt_rank
        self.adopt_granules = adopt_granules
        self.sweeper = None
        self.unreachable = None  # why a sweep could not run on some node
        self.queued = False  # the scheduler has it (its priority event)
        # an adopting holder carries a reservation over: first in the queue,
        # so granules lent to it on a drained node go to it and no other
        urgency = None if adopt is None else flux.constants.FLUX_JOB_URGENCY_EXPEDITE
        super().__init__(ctx, jobspec, urgency=urgency)

    @staticmethod
    def nothing_ran(key, error=None):
        """holder-end's fields for a holder that never ran."""
        jobid, gen = key
        return {"jobid": jobid, "gen": gen, "error": error, "kept": None}

    def end_fields(self):
        """holder-end's fields (told again to a repeated hold or cancel)."""
        jobid, gen = self.key
        return {
            "jobid": jobid,
            "gen": gen,
            "error": self.error(),
            "kept": self.kept_path(),
        }

    def done(self):
        """holder-end was sent: nothing more will happen."""
        return self.state is State.ENDED

    # --- facts ---

    @property
    def nodes(self):
        return list(Hostlist(self.R["execution"]["nodelist"])) if self.R else []

    @property
    def granted(self):
        if not self.R:
            return 0
        return sum(jgf.R_granules(self.R).values()) * self.ctx.policy.granule

    def granted_by_rank(self):
        return jgf.R_granules(self.R) if self.R else {}

    def volume(self):
        """What compute nodes are told to attach the RAM disk (as its
        command reported it), with ``same_path`` when they mount nothing
        but see it where the RSA nodes do (the site's means); None in
        simulation (nothing to attach)."""
        if self.simulated or self.reported is None:
            return None
        mounted = "servers" in self.reported or self.ctx.policy.exported
        return {
            **self.reported,
            "name": jobspecs.ramdisk_name(*self.key),
            "same_path": not mounted,
        }

    def waits_to_adopt_on(self, rank):
        """Queued, not yet allocated, adopting a RAM disk on ``rank``."""
        return (
            self.adopt is not None
            and self.adopt_rank == rank
            and self.queued
            and self.R is None
            and not self.ended
        )

    def on_event(self, name):
        if name == "start" and self.simulated and self.path is None:
            # it makes nothing: its RAM disk is where it would have made one
            self.path = self.adopt or os.path.join(
                self.ctx.policy.ramdisk_root, jobspecs.ramdisk_name(*self.key)
            )
        if self.adopt is None:
            return
        if name == "priority":  # the scheduler has it now
            self.queued = True
            self.ctx.nodes.lend(self.key, self.adopt_rank, self.adopt_granules)
        elif name in ("alloc", "clean"):
            self.ctx.nodes.unlend(self.key)

    def on_stdout(self, line):
        try:
            msg = json.loads(line)
        except ValueError:
            return
        if not isinstance(msg, dict):
            return
        if msg.get("event") == "built":
            self.path = msg.get("path")
            self.reported = msg.get("volume")
        elif msg.get("event") == "kept":
            self.kept = msg.get("path")

    def update(self):
        holdertable.advance(self)

    # --- what the service asks ---

    def release(self):
        """The service asked for this holder to go."""
        if self.asked is None:  # (a keep asked before stands)
            self.asked = Asked.RELEASE
        self.cancel(CANCEL_REASON)

    def keep(self):
        """End this holder keeping its RAM disk (pool shutdown)."""
        self.asked = Asked.KEEP
        if self.simulated:
            self.cancel(KEEP_REASON)  # nothing to keep but the name
            return
        if self.jobid is not None:
            flux.job.kill_async(self.h, self.jobid, signals.KEEP).then(
                self._guard, _ignore
            )

    # --- how it ended ---

    def clean_end(self):
        """The RAM-disk command ended normally (or never started)."""
        if self.simulated:
            return self.asked is not None
        return not self.started or self.tasks_ok() or self._stopped_early()

    def _stopped_early(self):
        """A stop or keep signal killed the RAM-disk command before it
        blocked the signals, that is before it built anything; a task that
        failed to destroy or keep its RAM disk says so on stderr.  Told
        only for a holder of one task: a job's status is the worst of its
        tasks' by number (the shell's 128+N, or -N), so SIGTERM (15) on one
        node hides SIGKILL (9) on another, where the shell killed the task
        mid-build (a cancel in BOOTING)."""
        if len(self.nodes) > 1:
            return False
        code = self.exit_code()
        return self.stderr is None and any(
            code in (-sig, 128 + sig) for sig in (signal.SIGTERM, signals.KEEP)
        )

    def leftovers(self):
        """It may have left its RAM disk (or part of one) behind, and did
        not keep it.  One that failed before it said "built" may have
        started building."""
        if self.simulated or not self.started or self.kept is not None:
            return False
        return self.lost_rank() is not None or not self.clean_end()

    def _ranks(self):
        return set(jgf.hosts_by_rank(self.R))

    def _unreachable_ranks(self):
        lost = self.lost_rank()
        return {r for r in self._ranks() if r in self.ctx.nodes.down or r == lost}

    def reachable(self):
        """The pool ranks of its nodes a sweep can run on: every node of
        the holder, since a RAM disk over several nodes has a brick server
        and tmpfs on each (a failed task ends the job at once, and the
        shell kills the other tasks mid-build), but those down."""
        return self._ranks() - self._unreachable_ranks()

    def error(self):
        """holder-end's error: None only for a clean, asked-for end."""
        why = self.failure()
        swept = ""
        if self.sweeper is not None:
            swept = (
                "; its leftover RAM disk was removed by a sweep"
                if self.sweeper.failure() is None
                else f"; removing its leftover RAM disk failed: {self.sweeper.failure()}"
            )
        if self.unreachable:
            swept += f"; {self.unreachable}"
        if self.lost_rank() is not None:
            return (
                f"holder {why}; the RAM disk and its data there are lost to this "
                f"reservation{swept}"
            )
        if self.asked is not None:
            if (
                self.asked is Asked.KEEP
                and not self.simulated
                and self.path
                and self.kept is None
            ):
                return f"keeping the RAM disk {self.path} failed: {why or 'it was not kept'}{swept}"
            if self.clean_end() or self._swept():
                return None  # nothing is left of it, as asked
            return (why or "the RAM disk was not destroyed cleanly") + swept
        if why and self.exception and self.exception.startswith("cancel"):
            return (
                f"holder {self.name} was canceled outside flux-rsa ({why}); "
                "its RAM disk is destroyed and its capacity free"
            )
        if why:
            return f"holder {self.name} failed: {why}{swept}"
        return f"holder {self.name} ended by itself; its RAM disk is destroyed"

    def _swept(self):
        """A sweep removed what it left behind."""
        return self.sweeper is not None and self.sweeper.failure() is None

    def kept_path(self):
        """holder-end's ``kept``: the RAM disk left for a later pool, or None."""
        if self.asked is not Asked.KEEP:
            return None
        if self.simulated:
            return self.path
        return self.kept

    # --- the table's steps ---

    def tell(self, kind, **fields):
        jobid, gen = self.key
        self.ctx.notify(kind, jobid=jobid, gen=gen, **fields)

    def take_over_kept(self):
        if self.adopt is not None:
            self.ctx.took_over(self.adopt)

    def note_unreachable(self):
        down = self._unreachable_ranks()
        if down:
            hosts = ",".join(self.ctx.hosts.get(r, str(r)) for r in sorted(down))
            self.unreachable = (
                f"its node {hosts} is down, so nothing could remove "
                "what is left there (a later pool's start-up sweep does)"
            )

    def sweep(self):
        gone = (
            os.path.basename(self.path)
            if self.path
            else jobspecs.ramdisk_name(*self.key)
        )
        js = self.ctx.sweep_jobspec(self.reachable(), gone)
        self.sweeper = Sweeper(self.ctx, js, self.update)

    def give_up_kept(self):
        if self.adopt is not None and self.asked is not Asked.KEEP:
            self.ctx.gave_up(self.adopt)

    def forget(self):
        self.ctx.ended(self)

    def describe(self):
        jobid, gen = self.key
        return {
            "jobid": jobid,
            "gen": gen,
            "state": LISTED[self.state],
            "nodes": self.nodes,
            "granted": self.granted,
            "ramdisk": self.path,
            "adopt": self.adopt,
            "subjob": self.jobid,
            "error": self.error() if self.ended else None,
        }


class Sweeper(Subjob):
    """A sweep on a holder's nodes after it died without cleaning up."""

    def __init__(self, ctx, jobspec, then):
        self.then = then
        super().__init__(ctx, jobspec)

    def update(self):
        if self.ended:
            self.then()
