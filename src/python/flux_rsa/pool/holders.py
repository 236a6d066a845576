"""Holder subjobs: one per RSA reservation generation.

The holder's life is the RAM disk's life.  Its notifications go out in
this order, each once: ``holder-alloc`` (when its R is known),
``holder-start``, ``ramdisk-built`` (the ``built`` line of the RAM-disk
command), ``holder-end`` (after ``clean``: capacity is free again).

A holder that ended without destroying its RAM disk (killed by a signal,
or its command failed to remove it) would keep the memory Fluxion now
counts as free: the agent first runs a sweep on its first node, then sends
``holder-end``.
"""

import json
import signal

from flux.hostlist import Hostlist

from flux_rsa.pool import jgf, jobspecs, protocol
from flux_rsa.pool.subjob import Subjob

CANCEL_REASON = "flux-rsa: reservation released"


class Holder(Subjob):
    def __init__(self, agent, jobspec, jobid, gen):
        self.key = (jobid, gen)
        self.sent = set()
        self.path = None
        self.asked = False
        self.sweeper = None
        super().__init__(agent, jobspec)

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

    def release(self):
        """The service asked for this holder to go."""
        self.asked = True
        self.cancel(CANCEL_REASON)

    def on_stdout(self, line):
        try:
            msg = json.loads(line)
        except ValueError:
            return
        if isinstance(msg, dict) and msg.get("event") == "built":
            self.path = msg.get("path")

    def done(self):
        """holder-end was sent: nothing more will happen."""
        return protocol.HOLDER_END in self.sent

    def clean_end(self):
        """The RAM-disk command ended normally (or never started)."""
        # SIGTERM can only kill a RAM-disk command before it blocks the
        # signal, that is before it built anything (in a spanning holder,
        # a task on another node may still be starting when the first one
        # has built); the job's status is the worst of its tasks', and a
        # task that failed to destroy its RAM disk says so on stderr
        early = self.exit_code() == -signal.SIGTERM and self.stderr is None
        return not self.started or self.tasks_ok() or early

    def error(self):
        """holder-end's error: None only for a clean, asked-for end."""
        why = self.failure()
        swept = ""
        if self.sweeper is not None:
            swept = ("; its leftover RAM disk was removed by a sweep" if self.sweeper.failure() is None
                     else f"; removing its leftover RAM disk failed: {self.sweeper.failure()}")
        if self.asked:
            if self.clean_end():
                return None
            return (why or "the RAM disk was not destroyed cleanly") + swept
        if why and self.exception and self.exception.startswith("cancel"):
            return (f"holder {self.name} was canceled outside flux-rsa ({why}); "
                    "its RAM disk is destroyed and its capacity free")
        if why:
            return f"holder {self.name} failed: {why}{swept}"
        return f"holder {self.name} ended by itself; its RAM disk is destroyed"

    def update(self):
        jobid, gen = self.key
        if self.done():
            return
        if self.R and self._once(protocol.HOLDER_ALLOC):
            self.agent.notify(protocol.HOLDER_ALLOC, jobid=jobid, gen=gen, nodes=self.nodes,
                              granted=self.granted)
        if self.started and protocol.HOLDER_ALLOC in self.sent and self._once(protocol.HOLDER_START):
            self.agent.notify(protocol.HOLDER_START, jobid=jobid, gen=gen)
        if self.path and protocol.HOLDER_START in self.sent and self._once(protocol.RAMDISK_BUILT):
            self.agent.notify(protocol.RAMDISK_BUILT, jobid=jobid, gen=gen, path=self.path)
        if not self.ended:
            return
        if self.path and not self.clean_end() and self.sweeper is None:
            first = min(jgf.hosts_by_rank(self.R))
            js = jobspecs.sweep(self.agent.python, self.agent.policy, self.agent.environment,
                                rank=first)
            self.sweeper = Sweeper(self.agent, js, self.update)
            return
        if self.sweeper is not None and not self.sweeper.ended:
            return
        error = self.error()
        self.sent.add(protocol.HOLDER_END)
        self.agent.notify(protocol.HOLDER_END, jobid=jobid, gen=gen, error=error)
        self.agent.forget(self)

    def _once(self, name):
        if name in self.sent:
            return False
        self.sent.add(name)
        return True

    def describe(self):
        jobid, gen = self.key
        return {"jobid": jobid, "gen": gen, "state": self.state, "nodes": self.nodes,
                "granted": self.granted, "ramdisk": self.path,
                "subjob": self.jobid, "error": self.error() if self.ended else None}


class Sweeper(Subjob):
    """A sweep on one node after a holder died without cleaning up."""

    def __init__(self, agent, jobspec, then):
        self.then = then
        super().__init__(agent, jobspec)

    def update(self):
        if self.ended:
            self.then()
