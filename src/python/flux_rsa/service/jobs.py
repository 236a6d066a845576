"""What the service knows of each active RSA job, and the core events its
job events imply.

Job events are RFC 21 eventlog entries.  The jobtap plugin sends those of
jobs that mention rsa; when the service starts, the job-manager journal
replays what it missed, so an event may arrive twice: feeding one again
changes nothing.  Jobs without rsa are not followed at all: the on-deck
rule reads the rest of the queue from job-manager (``Queue``).  A job that got
resources and ends (``clean``) without its finish heard is *unsure*: only
its eventlog says whether it ran.
"""

from dataclasses import dataclass, field
from typing import Optional

from flux_rsa.core import Env
from flux_rsa.core import events as E
from flux_rsa.core.ondeck import Pending


@dataclass
class JobFacts:
    jobid: int
    userid: int
    t_submit: float
    nnodes: int
    rsa: Optional[object]  # attributes.system.rsa as submitted (any type)
    state: str = "DEPEND"
    priority: Optional[int] = None
    allocated: bool = False
    started: bool = False
    finished: bool = False
    events: list = field(default_factory=list)

    @property
    def pending(self):
        return self.state == "SCHED" and self.priority is not None



def count_nodes(jobspec):
    """Nodes a jobspec asks for (1 when it asks for slots only)."""

    def walk(resources, factor):
        total = 0
        for res in resources or []:
            count = res.get("count", 1)
            if isinstance(count, dict):
                count = count.get("min", 1)
            if res.get("type") == "node":
                total += factor * count
            else:
                total += walk(res.get("with"), factor * count)
        return total

    try:
        return max(1, walk(jobspec.get("resources"), 1))
    except (AttributeError, TypeError):
        return 1


def rsa_attrs(jobspec):
    """attributes.system.rsa, or None when the job does not mention rsa."""
    try:
        return jobspec["attributes"]["system"].get("rsa")
    except (KeyError, TypeError, AttributeError):
        return None


def env_from_context(context):
    """The Env an ``rsa-ready`` event says the job was given."""
    return Env(
        ramdisk=context.get("ramdisk"),
        data_in=context.get("data_in"),
        data_out=context.get("data_out"),
        staged_in=bool(context.get("staged_in")),
        out_on_ramdisk=bool(context.get("out_on_ramdisk")),
        scratch=bool(context.get("scratch")),
    )


#: in feed()'s events: the job ended and only its eventlog says how
UNSURE = "unsure"


class Tracker:
    """Active jobs and the transitions their journal entries imply."""

    def __init__(self):
        self.jobs = {}

    def active(self, jobid):
        return jobid in self.jobs

    def feed(self, jobid, name, t, context, jobspec=None):
        """Apply one journal entry.  Returns (facts, new, events): ``new`` is
        true for a job just submitted; ``events`` are core events for its
        record (if it has one)."""
        facts = self.jobs.get(jobid)
        if name == "submit":
            if facts is None and jobspec is not None and rsa_attrs(jobspec) is not None:
                facts = JobFacts(
                    jobid=jobid,
                    userid=context.get("userid", -1),
                    t_submit=t,
                    nnodes=count_nodes(jobspec),
                    rsa=rsa_attrs(jobspec),
                )
                self.jobs[jobid] = facts
                return facts, True, []
            return facts, False, []
        if facts is None:
            return None, False, []
        events = []
        if name == "priority":
            facts.priority = context.get("priority")
            if facts.state in ("DEPEND", "PRIORITY"):
                facts.state = "SCHED"
        elif name == "flux-restart":
            facts.state = "PRIORITY"
        elif name == "alloc":
            facts.state = "RUN"
            facts.allocated = True
        elif name == "rsa-ready":
            events.append(E.Started(t, env_from_context(context)))
        elif name == "start" and not facts.started:
            facts.started = True
            events.append(E.Started(t))
        elif name == "finish" and not facts.finished:
            facts.finished = True
            facts.state = "CLEANUP"
            events.append(E.Finished(t))
        elif name == "exception" and context.get("severity") == 0:
            if facts.state != "RUN":
                facts.state = "CLEANUP"
        elif name == "clean":
            facts.state = "INACTIVE"
            if not facts.allocated:
                events.append(E.Canceled(t))
            elif not facts.finished:
                events.append(UNSURE)
            del self.jobs[jobid]
        return facts, False, events


#: FLUX_JOB_STATE_SCHED (RFC 21): the job waits for the scheduler
SCHED = 8


class Queue:
    """The pending jobs as the on-deck rule sees them: those job-manager
    listed in SCHED at the last read (``read``: its active jobs with id,
    state, priority, t_submit and annotations), the jobs the Tracker follows
    (those that mention rsa) as it knows them now: a message of the plugin
    can arrive after the read was answered, so one of ours it said is
    allocated is not pending, whatever the read says; one the read does not
    list yet waits for the next read."""

    def __init__(self, tracker):
        self.tracker = tracker
        self.listed = {}  # jobid -> Pending, as of the last read

    def read(self, jobs):
        self.listed = {}
        for job in jobs:
            if job.get("state") == SCHED:
                estimate = ((job.get("annotations") or {}).get("sched") or {}).get("t_estimate")
                jobid = int(job["id"])
                self.listed[jobid] = Pending(jobid, job.get("priority", 0), job.get("t_submit", 0.0), estimate)

    def pending(self):
        out = []
        for jobid, p in self.listed.items():
            facts = self.tracker.jobs.get(jobid)
            if facts is None:
                out.append(p)
            elif facts.pending:
                out.append(Pending(jobid, facts.priority, facts.t_submit, p.t_estimate))
        return out


def ended_from_eventlog(entries):
    """For a job that went inactive while the service was away: the core
    events its eventlog implies."""
    out = []
    for entry in entries:
        name, t = entry.get("name"), entry.get("timestamp", 0.0)
        if name == "rsa-ready":
            out.append(E.Started(t, env_from_context(entry.get("context") or {})))
        elif name == "start":
            out.append(E.Started(t))
        elif name == "finish":
            out.append(E.Finished(t))
    if not any(isinstance(ev, E.Finished) for ev in out):
        t = entries[-1].get("timestamp", 0.0) if entries else 0.0
        out.append(E.Canceled(t) if not any(e.get("name") == "start" for e in entries) else E.Finished(t))
    return out
