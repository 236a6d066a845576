"""The on-deck rule: look-ahead by estimate or queue position, in start
order, stopping at the first job that does not fit."""

import dataclasses

from flux_rsa.core import Policy, admit, parse_request
from flux_rsa.core import events as E
from flux_rsa.core.ondeck import Pending, plan, select
from flux_rsa.core.states import JobState as J
from flux_rsa.core.states import RsaState as S

POLICY = Policy.from_config({"proportion": 1, "node-capacity": "64M", "granule": "4M", "ondeck-depth": 3, "lookahead": 60})
NODES = ["rsa0", "rsa1"]
MB = 2**20


def records(*specs):
    """specs: (jobid, capacity) -> eligible records."""
    out = {}
    for jobid, capacity in specs:
        req = parse_request({"data_in": "/in", "data_out": "/out", "capacity": capacity})
        out[jobid] = admit(jobid, 1000, 1, req, POLICY, 0.0)
    return out


def queue(*jobids, estimates=None):
    estimates = estimates or {}
    return [Pending(j, priority=100 - i, t_submit=float(i), t_estimate=estimates.get(j)) for i, j in enumerate(jobids)]


def test_without_estimates_the_first_pending_jobs_are_on_deck():
    recs = records((1, "8M"), (2, "8M"), (3, "8M"), (4, "8M"))
    assert select(queue(1, 2, 3, 4), recs, NODES, POLICY, now=0) == {1, 2, 3}


def test_non_rsa_jobs_ahead_in_the_queue_take_positions():
    recs = records((5, "8M"))
    assert select(queue(1, 2, 3, 5), recs, NODES, POLICY, now=0) == set()
    assert select(queue(1, 5, 2, 3), recs, NODES, POLICY, now=0) == {5}


def test_estimates_inside_the_window_put_jobs_on_deck_in_start_order():
    recs = records((1, "8M"), (2, "8M"), (3, "8M"))
    est = {1: 1000.0, 2: 30.0, 3: 59.0}
    assert select(queue(1, 2, 3, estimates=est), recs, NODES, POLICY, now=0) == {2, 3}


def test_the_walk_stops_at_the_first_job_that_does_not_fit():
    # 64M per node: 40M + 40M fill two nodes; the third 40M cannot fit,
    # and the small 8M after it must not jump ahead of it
    recs = records((1, "40M"), (2, "40M"), (3, "40M"), (4, "8M"))
    policy = Policy.from_config({"proportion": 1, "node-capacity": "64M", "granule": "4M", "ondeck-depth": 8})
    assert select(queue(1, 2, 3, 4), recs, NODES, policy, now=0) == {1, 2}


def test_capacity_held_by_running_jobs_is_not_available():
    recs = records((1, "60M"), (2, "60M"), (3, "60M"))
    recs[1] = dataclasses.replace(recs[1], job_state=J.RUNNING, rsa_state=S.INUSE_OUT, nodes=("rsa0",), granted=60 * MB)
    assert select(queue(2, 3), recs, NODES, POLICY, now=0) == {2}


def test_plan_demotes_and_revokes_a_job_that_leaves_the_deck():
    recs = records((1, "8M"), (2, "8M"))
    recs[2] = dataclasses.replace(recs[2], job_state=J.ONDECK)
    events = plan(queue(9, 8, 7, 1, 2), recs, NODES, POLICY, now=5.0)
    assert [(j, type(e).__name__) for j, e in events] == [(2, "Demoted"), (2, "Revoke")]
    events = plan(queue(1, 2), recs, NODES, POLICY, now=6.0)
    assert [(j, type(e)) for j, e in events] == [(1, E.OnDeck)]
