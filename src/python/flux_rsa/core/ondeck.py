"""Which pending jobs are on deck: the RSA's look-ahead (thesis 3.2.1).

A pending job is on deck when it is expected to start soon: its estimated
start (``sched.t_estimate`` from the scheduler) is inside the look-ahead
window, or - when the scheduler gives it no estimate - it is among the
first ``ondeck_depth`` pending jobs in priority order.  Candidates are taken
in expected start order and each must fit the RAM-disk capacity left;
the walk stops at the first one that does not fit, so a later, smaller
job never starves an earlier one (Slurm's burst-buffer rule).

Pure: the caller passes the queue, the records, the pool's nodes and "now".
"""

from dataclasses import dataclass
from typing import Optional

from flux_rsa.core import events as E
from flux_rsa.core.states import HOLDING, JobState, RsaState

J, S = JobState, RsaState


@dataclass(frozen=True)
class Pending:
    """A pending job as the scheduler sees it."""

    jobid: int
    priority: int
    t_submit: float
    t_estimate: Optional[float] = None


def queue_order(pending):
    """job-manager's order: priority high to low, then submit order."""
    return sorted(pending, key=lambda p: (-p.priority, p.t_submit, p.jobid))


class Ledger:
    """Free granules per RSA node, first-fit, as the pool will place them."""

    def __init__(self, nodes, policy):
        self.policy = policy
        self.free = {node: policy.node_granules for node in nodes}

    def take(self, need, nodes=()):
        """Reserve ``need`` bytes (on ``nodes`` if already placed); False if
        it does not fit."""
        want = self.policy.granules(need)
        if nodes:
            share = -(-want // len(nodes))
            for node in nodes:
                if node in self.free:
                    self.free[node] -= min(share, want)
                    want -= min(share, want)
            return True
        per_node = self.policy.node_granules
        if want <= per_node:
            for node, free in self.free.items():
                if free >= want:
                    self.free[node] -= want
                    return True
            return False
        # spread over whole free nodes
        whole = [n for n, f in self.free.items() if f == per_node]
        count = -(-want // per_node)
        if len(whole) < count:
            return False
        for node in whole[:count]:
            self.free[node] = 0
        return True


def _holds(rec):
    return rec.rsa_state in HOLDING


def select(pending, records, nodes, policy, now):
    """The jobids that should be on deck now."""
    order = queue_order(pending)
    position = {p.jobid: i for i, p in enumerate(order)}

    def candidate(p):
        rec = records.get(p.jobid)
        if rec is None or rec.rsa_state is S.INELIGIBLE or rec.failed:
            return False
        if p.t_estimate is not None:
            return p.t_estimate - now <= policy.lookahead
        return position[p.jobid] < policy.ondeck_depth

    def start_key(p):
        t = p.t_estimate if p.t_estimate is not None else now
        return (max(t, now), position[p.jobid])

    candidates = sorted((p for p in order if candidate(p)), key=start_key)
    chosen = {p.jobid for p in candidates}
    ledger = Ledger(nodes, policy)
    # capacity held by jobs that are not candidates (running, staging out,
    # demoted and still tearing down) is not available
    for rec in records.values():
        if _holds(rec) and rec.jobid not in chosen:
            ledger.take(rec.granted or rec.need, rec.nodes)
    ondeck = set()
    for p in candidates:
        rec = records[p.jobid]
        if _holds(rec) and rec.rsa_state is not S.TEARDOWN:
            ledger.take(rec.granted or rec.need, rec.nodes)
            ondeck.add(p.jobid)
            continue
        if not ledger.take(rec.need):
            break
        ondeck.add(p.jobid)
    return ondeck


def plan(pending, records, nodes, policy, now):
    """Core events that move jobs on or off deck: [(jobid, event)]."""
    ondeck = select(pending, records, nodes, policy, now)
    pending_ids = {p.jobid for p in pending}
    out = []
    for jobid in sorted(records):
        rec = records[jobid]
        if rec.job_state in (J.PENDING, J.DEMOTED) and jobid in ondeck:
            out.append((jobid, E.OnDeck(now)))
        elif rec.job_state is J.ONDECK and (jobid not in ondeck or jobid not in pending_ids):
            if jobid in pending_ids:
                out += [(jobid, E.Demoted(now)), (jobid, E.Revoke(now))]
        elif rec.job_state is J.DEMOTED and not rec.revoked and jobid not in ondeck:
            out.append((jobid, E.Revoke(now)))
    return out
