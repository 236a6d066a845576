"""Holder subjobs: one per RSA reservation generation.

The holder's life is the RAM disk's life.  Its notifications go out in
this order, each once: ``holder-alloc`` (when its R is known),
``holder-start``, ``ramdisk-built`` (the ``built`` line of the RAM-disk
command), ``holder-end`` (after ``clean``: capacity is free again).

A holder that ended without destroying its RAM disk (killed by a signal,
or its command failed to remove it) would keep the memory Fluxion now
counts as free: the agent first runs a sweep on its first node, then sends
``holder-end`` (not when that node is down: nothing can run there).

``keep()`` (pool shutdown with ``keep``) ends the holder with SIGALRM: the
RAM-disk command marks the RAM disk kept and exits without destroying it;
``holder-end`` then carries ``kept: PATH``.  A holder may also *adopt* a
kept RAM disk (``adopt``): it runs on that RAM disk's node and takes it
over instead of building one.

A simulated holder (a test-execution job) makes nothing: it reports
``ramdisk-built`` with the path it would have made as soon as it starts,
and ends when it is canceled (or killed, to keep it).
"""

import json
import os
import signal

import flux.constants
import flux.job
from flux.hostlist import Hostlist

from flux_rsa.pool import jgf, jobspecs, protocol
from flux_rsa.pool.subjob import Subjob, _ignore
from flux_rsa.ramdisk import signals

CANCEL_REASON = "flux-rsa: reservation released"
KEEP_REASON = "flux-rsa: pool shut down, RAM disk kept"


class Holder(Subjob):
    def __init__(self, agent, jobspec, jobid, gen, adopt=None, adopt_rank=None,
                 adopt_granules=0, port=None, secret=None):
        self.key = (jobid, gen)
        self.port = port  # first brick's port, when the RAM disk spans nodes
        self.secret = secret
        self.sent = set()
        self.path = None
        self.reported = None  # the volume the RAM-disk command reported
        self.asked = False
        self.keeping = False
        self.kept = None  # path, once the RAM-disk command said it kept it
        self.adopt = adopt
        self.adopt_rank = adopt_rank
        self.adopt_granules = adopt_granules
        self.sweeper = None
        self.sweep_skipped = None
        self.queued = False  # the scheduler has it (its priority event)
        # an adopting holder carries a reservation over: first in the queue,
        # so granules lent to it on a drained node go to it and no other
        urgency = None if adopt is None else flux.constants.FLUX_JOB_URGENCY_EXPEDITE
        super().__init__(agent, jobspec, urgency=urgency)

    @property
    def nodes(self):
        return list(Hostlist(self.R["execution"]["nodelist"])) if self.R else []

    @property
    def granted(self):
        if not self.R:
            return 0
        return sum(jgf.R_granules(self.R).values()) * self.agent.policy.granule

    def granted_by_rank(self):
        return jgf.R_granules(self.R) if self.R else {}

    @property
    def state(self):
        if self.ended:
            return "ended"
        if self.path:
            return "built"
        if self.started:
            return "started"
        return "allocated" if self.R else "pending"

    def volume(self):
        """What compute nodes are told to attach the RAM disk (as its
        command reported it), with ``same_path`` when they mount nothing
        but see it where the RSA nodes do (the site's means); None in
        simulation (nothing to attach)."""
        if self.simulated or self.reported is None:
            return None
        mounted = "servers" in self.reported or self.agent.policy.exported
        return {**self.reported, "name": jobspecs.ramdisk_name(*self.key),
                "same_path": not mounted}

    def release(self):
        """The service asked for this holder to go."""
        self.asked = True
        self.cancel(CANCEL_REASON)

    def waits_to_adopt_on(self, rank):
        """Queued, not yet allocated, adopting a RAM disk on ``rank``."""
        return (self.adopt is not None and self.adopt_rank == rank and self.queued
                and self.R is None and not self.ended)

    def keep(self):
        """End this holder keeping its RAM disk (pool shutdown)."""
        self.asked = self.keeping = True
        if self.simulated:
            self.cancel(KEEP_REASON)  # nothing to keep but the name
            return
        if self.jobid is not None:
            flux.job.kill_async(self.h, self.jobid, signals.KEEP).then(self._guard, _ignore)

    def on_event(self, name):
        if self.adopt is None:
            return
        if name == "priority":  # the scheduler has it now
            self.queued = True
            self.agent.nodes.lend(self.key, self.adopt_rank, self.adopt_granules)
        elif name in ("alloc", "clean"):
            self.agent.nodes.unlend(self.key)

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

    def done(self):
        """holder-end was sent: nothing more will happen."""
        return protocol.HOLDER_END in self.sent

    def clean_end(self):
        """The RAM-disk command ended normally (or never started)."""
        if self.simulated:
            return self.asked
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
            code in (-sig, 128 + sig) for sig in (signal.SIGTERM, signals.KEEP))

    def error(self):
        """holder-end's error: None only for a clean, asked-for end."""
        why = self.failure()
        swept = ""
        if self.sweeper is not None:
            swept = ("; its leftover RAM disk was removed by a sweep" if self.sweeper.failure() is None
                     else f"; removing its leftover RAM disk failed: {self.sweeper.failure()}")
        if self.sweep_skipped:
            swept += f"; {self.sweep_skipped}"
        if self.lost_rank() is not None:
            return (f"holder {why}; the RAM disk and its data there are lost to this "
                    f"reservation{swept}")
        if self.asked:
            if self.keeping and not self.simulated and self.path and self.kept is None:
                return f"keeping the RAM disk {self.path} failed: {why or 'it was not kept'}{swept}"
            if self.clean_end() or self._swept():
                return None  # nothing is left of it, as asked
            return (why or "the RAM disk was not destroyed cleanly") + swept
        if why and self.exception and self.exception.startswith("cancel"):
            return (f"holder {self.name} was canceled outside flux-rsa ({why}); "
                    "its RAM disk is destroyed and its capacity free")
        if why:
            return f"holder {self.name} failed: {why}{swept}"
        return f"holder {self.name} ended by itself; its RAM disk is destroyed"

    def _swept(self):
        """A sweep removed what it left behind."""
        return self.sweeper is not None and self.sweeper.failure() is None

    def kept_path(self):
        """holder-end's ``kept``: the RAM disk left for a later pool, or None."""
        if not self.keeping:
            return None
        if self.simulated:
            return self.path
        return self.kept

    def update(self):
        jobid, gen = self.key
        if self.done():
            return
        if self.R and self._once(protocol.HOLDER_ALLOC):
            self.agent.notify(protocol.HOLDER_ALLOC, jobid=jobid, gen=gen, nodes=self.nodes,
                              granted=self.granted)
        if self.started and protocol.HOLDER_ALLOC in self.sent and self._once(protocol.HOLDER_START):
            self.agent.notify(protocol.HOLDER_START, jobid=jobid, gen=gen)
        if self.simulated and self.started and self.path is None:
            self.path = self.adopt or os.path.join(self.agent.policy.ramdisk_root,
                                                   jobspecs.ramdisk_name(jobid, gen))
        if self.path and protocol.HOLDER_START in self.sent and self._once(protocol.RAMDISK_BUILT):
            self.agent.adopted(self)
            self.agent.notify(protocol.RAMDISK_BUILT, jobid=jobid, gen=gen, path=self.path,
                              volume=self.volume())
        if not self.ended:
            return
        if self._needs_sweep() and self.sweeper is None and self.sweep_skipped is None:
            # every node of the holder: a RAM disk over several nodes has a
            # brick server and tmpfs on each (a failed task ends the job at
            # once, and the shell kills the other tasks mid-build)
            ranks = set(jgf.hosts_by_rank(self.R))
            down = {r for r in ranks if r in self.agent.nodes.down or r == self.lost_rank()}
            if down:
                hosts = ",".join(self.agent.hosts.get(r, str(r)) for r in sorted(down))
                self.sweep_skipped = (f"its node {hosts} is down, so nothing could remove "
                                      "what is left there (a later pool's start-up sweep does)")
            if ranks - down:
                gone = os.path.basename(self.path) if self.path else jobspecs.ramdisk_name(*self.key)
                js = jobspecs.sweep(self.agent.via, self.agent.policy,
                                    self.agent.environment, ranks=ranks - down, gone=gone)
                self.sweeper = Sweeper(self.agent, js, self.update)
                return
        if self.sweeper is not None and not self.sweeper.ended:
            return
        error = self.error()
        self.sent.add(protocol.HOLDER_END)
        if self.adopt is not None and not self.keeping and self.adopt in self.agent.kept:
            # cancelled before it took its kept RAM disk over: nobody holds
            # that RAM disk any more, remove it
            self.agent.discard_kept(self.adopt)
        self.agent.notify(protocol.HOLDER_END, jobid=jobid, gen=gen, error=error,
                          kept=self.kept_path())
        self.agent.forget(self)

    def _needs_sweep(self):
        """It may have left its RAM disk (or part of one) behind, and did
        not keep it.  One that failed before it said "built" may have
        started building."""
        if self.simulated or not self.started or self.kept is not None:
            return False
        return self.lost_rank() is not None or not self.clean_end()

    def _once(self, name):
        if name in self.sent:
            return False
        self.sent.add(name)
        return True

    def describe(self):
        jobid, gen = self.key
        return {"jobid": jobid, "gen": gen, "state": self.state, "nodes": self.nodes,
                "granted": self.granted, "ramdisk": self.path, "adopt": self.adopt,
                "subjob": self.jobid, "error": self.error() if self.ended else None}


class Sweeper(Subjob):
    """A sweep on one node after a holder died without cleaning up."""

    def __init__(self, agent, jobspec, then):
        self.then = then
        super().__init__(agent, jobspec)

    def update(self):
        if self.ended:
            self.then()
