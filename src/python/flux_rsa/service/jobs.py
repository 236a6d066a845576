"""What the service knows of each active RSA job, and the core events its
job events imply.

Job events are RFC 21 eventlog entries.  The jobtap plugin sends those of
jobs that mention rsa; when the service starts, the job-manager journal
replays what it missed, so an event may arrive twice: feeding one again
changes nothing.  Jobs without rsa are not followed at all: the on-deck
rule reads the rest of the queue from job-manager (service.queue).  A job
that got resources and ends (``clean``) without its finish heard is
*unsure*: only its eventlog says whether it ran.
"""

from dataclasses import dataclass, field
from typing import NamedTuple, Optional

from flux.constants import FLUX_JOB_STATE_CLEANUP as CLEANUP
from flux.constants import FLUX_JOB_STATE_DEPEND as DEPEND
from flux.constants import FLUX_JOB_STATE_INACTIVE as INACTIVE
from flux.constants import FLUX_JOB_STATE_PRIORITY as PRIORITY
from flux.constants import FLUX_JOB_STATE_RUN as RUN
from flux.constants import FLUX_JOB_STATE_SCHED as SCHED
from flux.job import JobID

from flux_rsa.core import Env
from flux_rsa.core import events as E


@dataclass
class JobFacts:
    jobid: int
    userid: int
    t_submit: float
    nnodes: int
    rsa: Optional[object]  # attributes.system.rsa as submitted (any type)
    one_node: bool = False  # it surely runs on one compute node
    #: the jobs its submitted dependencies wait for (after*), or None when
    #: it also waits for something else (a begin time, a singleton)
    after: Optional[frozenset] = frozenset()
    state: int = DEPEND  # a flux.constants FLUX_JOB_STATE_*
    priority: Optional[int] = None
    allocated: bool = False
    started: bool = False
    finished: bool = False
    events: list = field(default_factory=list)

    @property
    def pending(self):
        return self.state == SCHED and self.priority is not None


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


def fixed_nodes(jobspec):
    """Does the jobspec say how many nodes it runs on (node resources at its
    top), or run on one for sure?"""
    try:
        top = (jobspec.get("resources") or [{}])[0]
    except (AttributeError, IndexError, TypeError):
        return False
    return (isinstance(top, dict) and top.get("type") == "node") or one_node(jobspec)


def one_node(jobspec):
    """Does the jobspec surely run on one node: it asks for one node, or
    for one slot and no node (a slot lies on one node)?"""
    try:
        resources = jobspec.get("resources") or []
    except AttributeError:
        return False

    def count(res):
        c = res.get("count", 1)
        return c.get("min", 1) if isinstance(c, dict) else c

    if len(resources) != 1 or not isinstance(resources[0], dict):
        return False
    top = resources[0]
    if top.get("type") == "node":
        return count(top) == 1
    return top.get("type") == "slot" and count(top) == 1


#: the dependency schemes that wait for another job (RFC 26, and ours)
AFTER = frozenset(
    {"after", "afterany", "afterok", "afternotok", "afterfinish", "afterstaged"}
)


def waits_after(jobspec):
    """The jobs a jobspec's dependencies wait for, or None when one of them
    waits for something else (or cannot be read)."""
    try:
        deps = jobspec["attributes"]["system"].get("dependencies") or []
        if not all(d["scheme"] in AFTER for d in deps):
            return None
        return frozenset(int(JobID(d["value"])) for d in deps)
    except (KeyError, TypeError, AttributeError, ValueError, OSError):
        return None


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
        paths=context.get("paths"),
    )


class Fed(NamedTuple):
    """What one job event told (Tracker.feed)."""

    facts: Optional[JobFacts]  # the job as known now (None: not followed)
    new: bool = False  # the job was just submitted
    events: tuple = ()  # core events for its record (if it has one)
    unsure: bool = (
        False  # it ended and only its eventlog says how (ended_from_eventlog)
    )


class Tracker:
    """Active jobs and the transitions their journal entries imply."""

    def __init__(self):
        self.jobs = {}

    def active(self, jobid):
        return jobid in self.jobs

    def feed(self, jobid, name, t, context, jobspec=None):
        """Apply one job event; what it told (``Fed``)."""
        facts = self.jobs.get(jobid)
        if name == "submit":
            if facts is None and jobspec is not None and rsa_attrs(jobspec) is not None:
                facts = JobFacts(
                    jobid=jobid,
                    userid=context.get("userid", -1),
                    t_submit=t,
                    nnodes=count_nodes(jobspec),
                    rsa=rsa_attrs(jobspec),
                    one_node=one_node(jobspec),
                    after=waits_after(jobspec),
                )
                self.jobs[jobid] = facts
                return Fed(facts, new=True)
            return Fed(facts)
        if facts is None:
            return Fed(None)
        events, unsure = [], False
        if name == "priority":
            facts.priority = context.get("priority")
            if facts.state in (DEPEND, PRIORITY):
                facts.state = SCHED
        elif name == "flux-restart":
            facts.state = PRIORITY
        elif name == "alloc":
            facts.state = RUN
            facts.allocated = True
        elif name == "rsa-ready":
            events.append(E.Started(t, env_from_context(context)))
        elif name == "start" and not facts.started:
            facts.started = True
            events.append(E.Started(t))
        elif name == "finish" and not facts.finished:
            facts.finished = True
            facts.state = CLEANUP
            events.append(E.Finished(t))
        elif name == "exception" and context.get("severity") == 0:
            if facts.state != RUN:
                facts.state = CLEANUP
        elif name == "clean":
            facts.state = INACTIVE
            if not facts.allocated:
                events.append(E.Canceled(t))
            elif not facts.finished:
                unsure = True
            del self.jobs[jobid]
        return Fed(facts, events=tuple(events), unsure=unsure)


def ended_from_eventlog(entries):
    """For a job that went inactive while the service was away: the core
    events its eventlog (``flux.eventlog.EventLogEvent`` entries) implies."""
    out = []
    for entry in entries:
        if entry.name == "rsa-ready":
            out.append(E.Started(entry.timestamp, env_from_context(entry.context)))
        elif entry.name == "start":
            out.append(E.Started(entry.timestamp))
        elif entry.name == "finish":
            out.append(E.Finished(entry.timestamp))
    if not any(isinstance(ev, E.Finished) for ev in out):
        t = entries[-1].timestamp if entries else 0.0
        started = any(entry.name == "start" for entry in entries)
        out.append(E.Finished(t) if started else E.Canceled(t))
    return out
