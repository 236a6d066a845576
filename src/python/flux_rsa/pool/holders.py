"""Holder subjobs: one per RSA reservation generation.

The holder's life is the RAM disk's life.  Its notifications go out in
this order, each once: ``holder-alloc`` (when its R is known),
``holder-start``, ``ramdisk-built`` (the ``built`` line of the RAM-disk
command), ``holder-end`` (after ``clean``: capacity is free again).
"""

import json
import signal

from flux.hostlist import Hostlist

from flux_rsa.pool import jgf, protocol
from flux_rsa.pool.subjob import Subjob

CANCEL_REASON = "flux-rsa: reservation released"


class Holder(Subjob):
    def __init__(self, agent, jobspec, jobid, gen):
        self.key = (jobid, gen)
        self.sent = set()
        self.path = None
        self.asked = False
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

    def error(self):
        """holder-end's error: None only for a clean, asked-for end."""
        why = self.failure()
        if self.asked:
            # SIGTERM can only kill the RAM-disk command before it blocks
            # the signal, that is before it built anything
            early = self.exit_code() == -signal.SIGTERM and not self.path
            if not self.started or self.tasks_ok() or early:
                return None
            return why or "the RAM disk was not destroyed cleanly"
        if why and self.exception and self.exception.startswith("cancel"):
            return (f"holder {self.name} was canceled outside flux-rsa ({why}); "
                    "its RAM disk is destroyed and its capacity free")
        return why or f"holder {self.name} ended by itself; its RAM disk is destroyed"

    def update(self):
        jobid, gen = self.key
        if protocol.HOLDER_END in self.sent:
            return
        if self.R and self._once(protocol.HOLDER_ALLOC):
            self.agent.notify(protocol.HOLDER_ALLOC, jobid=jobid, gen=gen, nodes=self.nodes,
                              granted=self.granted)
        if self.started and protocol.HOLDER_ALLOC in self.sent and self._once(protocol.HOLDER_START):
            self.agent.notify(protocol.HOLDER_START, jobid=jobid, gen=gen)
        if self.path and protocol.HOLDER_START in self.sent and self._once(protocol.RAMDISK_BUILT):
            self.agent.notify(protocol.RAMDISK_BUILT, jobid=jobid, gen=gen, path=self.path)
        if self.ended and self._once(protocol.HOLDER_END):
            self.agent.notify(protocol.HOLDER_END, jobid=jobid, gen=gen, error=self.error())
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
