"""Which pending jobs are on deck: the RSA's look-ahead (thesis 3.2.1).

A pending job is a *candidate* when it is expected to start soon: its
estimated start (``sched.t_estimate``) is inside the look-ahead window - a
window widened for jobs whose stage-in will take longer (their size over
the measured stage rate) - or, when the scheduler gives no estimate, when it
is among the first ``ondeck_depth`` pending jobs in priority order.  A job
already on deck stays a candidate until it is clearly out (hysteresis), so
a job at the edge of the window is not staged again and again.

Candidates are taken in expected start order and each must fit the RAM-disk
capacity left.  Capacity held by pending jobs that start later (or have
left the window) can be taken back, latest-starting first; capacity of
running and finished jobs cannot.  The walk stops at the first candidate
that still does not fit, so a later, smaller job never starves an earlier
one (Slurm's burst-buffer rule).  A job that leaves the deck keeps its
staged data until its capacity is actually needed (``keep_demoted``).

A job still waiting for its producer, whose outputs it will copy from
the producer's RAM disk (``Pending.beside``), is taken last, with the
capacity left on its producer's RSA node alone: it never takes capacity
back, and any other job may take its capacity back.

The measured stage rate is the median of the newest complete stage-ins
(``stage_rate``; ``sample`` of one record), kept by the service as records
change.

Pure: the caller passes the queue, the records, the pool's nodes and "now".
"""

import math
import statistics
from dataclasses import dataclass
from typing import Optional

from flux_rsa.core import events as E
from flux_rsa.core.states import HOLDING, PRE_RUN, JobState, Measure, RsaState

J, S = JobState, RsaState

#: an on-deck job stays on deck until it is this much further out
HYSTERESIS = 1.5
#: the queue's first jobs a pass reads, at least: the depth rule needs
#: ondeck_depth x HYSTERESIS of them, and a scheduler gives start estimates
#: only to the jobs it reserves for, near the queue's head (Fluxion: within
#: its queue-depth, 32 by default)
HEAD_MIN = 1024
LATER = math.inf  # start key of a pending job outside the window


@dataclass(frozen=True)
class Pending:
    """A pending job as the scheduler sees it."""

    jobid: int
    priority: int
    t_submit: float
    t_estimate: Optional[float] = None
    #: a job waiting for its producer (the workflow hand-off), taken early
    #: only onto this RSA node, beside its producer's RAM disk
    beside: Optional[str] = None


def queue_key(p):
    """A pending job's place in job-manager's order: priority high to low,
    then submit order."""
    return (-p.priority, p.t_submit, p.jobid)


def queue_order(pending):
    """job-manager's order."""
    return sorted(pending, key=queue_key)


class Ledger:
    """Free granules per RSA node, first-fit, as the pool will place them."""

    def __init__(self, nodes, policy, drained=()):
        self.policy = policy
        self.per_node = policy.node_granules
        self.free = {node: self.per_node for node in nodes}
        self.closed = set(drained)  # drained: no new placements

    def copy(self):
        other = Ledger((), self.policy, self.closed)
        other.free = dict(self.free)
        return other

    def _spread(self, want, nodes, sign):
        share = -(-want // len(nodes))
        for node in nodes:
            if node in self.free:
                part = min(share, want)
                self.free[node] -= sign * part
                want -= part

    def hold(self, rec):
        """Account what ``rec`` holds (placed or about to be)."""
        want = self.policy.granules(rec.granted or rec.need)
        if rec.nodes:
            self._spread(want, rec.nodes, +1)
        else:
            self.take(rec.need)

    def release(self, rec):
        """Give back what ``rec`` holds (a trial revoke)."""
        want = self.policy.granules(rec.granted or rec.need)
        if rec.nodes:
            self._spread(want, rec.nodes, -1)
        else:  # not placed yet: give it back to the emptiest open node
            node = max(
                (n for n in self.free if n not in self.closed),
                key=self.free.get,
                default=None,
            )
            if node is not None:
                self.free[node] += want

    def take_on(self, need, node):
        """Reserve ``need`` bytes on RSA node ``node`` alone; False if it
        does not fit there."""
        shape = self.policy.layout(need, len(self.free))
        if shape is None or shape[0] != 1 or node in self.closed:
            return False
        if self.free.get(node, 0) < shape[1]:
            return False
        self.free[node] -= shape[1]
        return True

    def take(self, need):
        """Reserve ``need`` bytes on open nodes; False if it does not fit.
        A reservation over several nodes (its headroom included:
        ``Policy.layout``) takes whole nodes."""
        shape = self.policy.layout(need, len(self.free))
        if shape is None:
            return False
        count, want = shape
        open_nodes = {n: f for n, f in self.free.items() if n not in self.closed}
        if count == 1:
            for node, free in open_nodes.items():
                if free >= want:
                    self.free[node] -= want
                    return True
            return False
        whole = [n for n, f in open_nodes.items() if f == self.per_node]
        if len(whole) < count:
            return False
        for node in whole[:count]:
            self.free[node] = 0
        return True


def _holds(rec):
    return rec.rsa_state in HOLDING


def head(policy):
    """How many of the queue's first jobs a pass reads."""
    return max(HEAD_MIN, 4 * policy.ondeck_depth)


def waits_to_run(rec):
    """Could an on-deck pass do anything for ``rec``: an RSA job before its run?"""
    return rec.job_state in PRE_RUN and rec.rsa_state is not S.INELIGIBLE


def engaged(rec):
    """Does the on-deck pass need ``rec`` even when its job is not among
    the queue's first jobs read?  Yes if it holds capacity (which the pass
    may count, keep or take back) or is on deck (which it may demote).
    Passing the pass the records of the jobs read plus the engaged ones
    gives the same answer as passing every record."""
    return _holds(rec) or rec.job_state is J.ONDECK


def _reclaimable(rec, pending_ids):
    """Capacity a pending job holds that could be taken back."""
    return (
        rec.jobid in pending_ids
        and rec.job_state in (J.PENDING, J.ONDECK, J.DEMOTED)
        and _holds(rec)
        and rec.rsa_state is not S.TEARDOWN
        and not rec.revoked
    )


def window(rec, policy, rate):
    """Look-ahead for one job: wider when its stage-in takes longer."""
    if rate and rec.need:
        return max(policy.lookahead, 2.0 * rec.need / rate)
    return policy.lookahead


@dataclass
class Decision:
    ondeck: set
    revoke: set
    never: set  # candidates that can never fit the whole pool


def decide(pending, records, nodes, policy, now, rate=0.0, drained=()):
    """The jobs that should be on deck now, and the held capacity to take
    back for them."""
    order = queue_order(pending)
    position = {p.jobid: i for i, p in enumerate(order)}
    pending_ids = set(position)

    def eligible(p):
        rec = records.get(p.jobid)
        return not (
            rec is None
            or rec.rsa_state is S.INELIGIBLE
            or rec.failed
            or not rec.need
            or rec.measure is not Measure.NONE
        )

    def candidate(p):
        if p.beside is not None or not eligible(p):
            return False
        rec = records[p.jobid]
        stay = HYSTERESIS if rec.job_state is J.ONDECK else 1.0
        if p.t_estimate is not None:
            return p.t_estimate - now <= window(rec, policy, rate) * stay
        depth = policy.ondeck_depth
        if rec.job_state is J.ONDECK:
            depth = max(depth + 1, math.ceil(depth * HYSTERESIS))
        return position[p.jobid] < depth

    def start_key(p):
        t = p.t_estimate if p.t_estimate is not None else now
        return (max(t, now), position[p.jobid])

    never = {
        p.jobid
        for p in order
        if candidate(p) and policy.layout(records[p.jobid].need, len(nodes)) is None
    }
    candidates = sorted(
        (p for p in order if candidate(p) and p.jobid not in never), key=start_key
    )
    key = {p.jobid: start_key(p) for p in candidates}
    ledger = Ledger(nodes, policy, drained)
    # fixed: capacity of jobs that are not pending, or already being revoked
    movable = {}
    for rec in records.values():
        if not _holds(rec):
            continue
        if _reclaimable(rec, pending_ids):
            movable[rec.jobid] = rec
        ledger.hold(rec)
    ondeck, revoke = set(), set()
    for p in candidates:
        rec = records[p.jobid]
        if p.jobid in movable:
            movable.pop(p.jobid)  # keeps what it holds
            ondeck.add(p.jobid)
            continue
        if ledger.take(rec.need):
            ondeck.add(p.jobid)
            continue
        # take back capacity from pending holders that start later,
        # latest-starting first (those outside the window first of all)
        later = sorted(
            (r for j, r in movable.items() if key.get(j, (LATER,)) > key[p.jobid]),
            key=lambda r: key.get(r.jobid, (LATER, -position.get(r.jobid, 0))),
            reverse=True,
        )
        trial, freed = ledger.copy(), []
        for victim in later:
            trial.release(victim)
            freed.append(victim.jobid)
            if trial.copy().take(rec.need):
                break
        if not trial.take(rec.need):
            break  # the first that cannot fit: nothing later jumps ahead
        ledger = trial
        for jobid in freed:
            movable.pop(jobid)
            revoke.add(jobid)
        ondeck.add(p.jobid)
    # holders later in the walk keep their place while their capacity is not needed
    for jobid, rec in movable.items():
        if jobid in key:
            ondeck.add(jobid)
    # then jobs waiting for their producer, with what is left beside it:
    # they never take capacity back, and one that does not fit there
    # waits (its copy from another node would be slower)
    for p in order:
        if p.beside is None or p.jobid in revoke or not eligible(p):
            continue
        if p.jobid in movable or ledger.take_on(records[p.jobid].need, p.beside):
            ondeck.add(p.jobid)
    return Decision(ondeck, revoke, never)


def select(pending, records, nodes, policy, now, rate=0.0, drained=()):
    """The jobids that should be on deck now."""
    return decide(pending, records, nodes, policy, now, rate, drained).ondeck


def plan(pending, records, nodes, policy, now, rate=0.0, drained=()):
    """Core events that move jobs on or off deck: [(jobid, event)]."""
    d = decide(pending, records, nodes, policy, now, rate, drained)
    pending_ids = {p.jobid for p in pending}
    out = []
    largest = policy.largest(len(nodes))
    for jobid in sorted(records):
        rec = records[jobid]
        if jobid not in pending_ids:
            continue
        if jobid in d.never:
            out.append((jobid, E.TooBig(now, largest)))
            continue
        if rec.job_state in (J.PENDING, J.DEMOTED) and jobid in d.ondeck:
            out.append((jobid, E.OnDeck(now)))
            continue
        if rec.job_state is J.ONDECK and jobid not in d.ondeck:
            out.append((jobid, E.Demoted(now)))
        if jobid in d.revoke or (
            not policy.keep_demoted
            and jobid not in d.ondeck
            and _holds(rec)
            and not rec.revoked
        ):
            out.append((jobid, E.Revoke(now)))
    return out


# --- How fast stage-in really goes ------------------------------------------
# Measured from the records of finished stage-ins (bytes over the time from
# STAGING_IN to READY): the rate a window is computed with.

RECENT = 20  # stage-ins looked at


def sample(rec):
    """(time READY, bytes/s) of ``rec``'s complete stage-in, or None."""
    if rec.progress is None or not rec.progress.bytes_total:
        return None
    t_in = t_ready = None
    for tr in rec.history:
        if tr.rsa_state is RsaState.STAGING_IN:
            t_in = tr.t
        elif tr.rsa_state is RsaState.READY and t_in is not None:
            t_ready = tr.t
    if t_in is not None and t_ready is not None and t_ready > t_in:
        return (t_ready, rec.progress.bytes_total / (t_ready - t_in))
    return None


def newest(samples):
    """The RECENT newest of ``samples`` [(time, bytes/s)], oldest first."""
    return sorted(samples)[-RECENT:]


def median_rate(samples, default):
    """Median bytes/s of the RECENT newest ``samples``, else ``default``."""
    if not samples:
        return float(default)
    return statistics.median(rate for _, rate in newest(samples))


def stage_rate(records, default):
    """Median bytes/s of the most recent complete stage-ins, else ``default``."""
    return median_rate(
        [s for s in map(sample, records.values()) if s is not None], default
    )
