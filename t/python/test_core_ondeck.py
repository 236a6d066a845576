"""The on-deck rule: look-ahead by estimate or queue position, in start
order, stopping at the first job that does not fit."""

import dataclasses

from flux_rsa.core import Policy, admit, parse_request
from flux_rsa.core.ondeck import Pending, plan, select
from flux_rsa.core.states import JobState as J
from flux_rsa.core.states import RsaState as S

POLICY = Policy.from_config(
    {
        "proportion": 1,
        "node-capacity": "64M",
        "granule": "4M",
        "ondeck-depth": 3,
        "lookahead": 60,
        "provider": "glusterfs",
        "span-fill": 0,  # no headroom: 2 x 64M hold 128M (the tests below that need it add it)
    }
)
NODES = ["rsa0", "rsa1"]
MB = 2**20


def records(*specs):
    """specs: (jobid, capacity) -> eligible records."""
    out = {}
    for jobid, capacity in specs:
        req = parse_request(
            {"data_in": "/in", "data_out": "/out", "capacity": capacity}
        )
        out[jobid] = admit(jobid, 1000, 1, req, POLICY, 0.0)
    return out


def queue(*jobids, estimates=None):
    estimates = estimates or {}
    return [
        Pending(j, priority=100 - i, t_submit=float(i), t_estimate=estimates.get(j))
        for i, j in enumerate(jobids)
    ]


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
    policy = Policy.from_config(
        {"proportion": 1, "node-capacity": "64M", "granule": "4M", "ondeck-depth": 8}
    )
    assert select(queue(1, 2, 3, 4), recs, NODES, policy, now=0) == {1, 2}


def test_capacity_held_by_running_jobs_is_not_available():
    recs = records((1, "60M"), (2, "60M"), (3, "60M"))
    recs[1] = dataclasses.replace(
        recs[1],
        job_state=J.RUNNING,
        rsa_state=S.INUSE_OUT,
        nodes=("rsa0",),
        granted=60 * MB,
    )
    assert select(queue(2, 3), recs, NODES, POLICY, now=0) == {2}


def held(recs, jobid, job_state, node, state=S.READY):
    """Make ``jobid`` hold its capacity on ``node``."""
    recs[jobid] = dataclasses.replace(
        recs[jobid],
        job_state=job_state,
        rsa_state=state,
        nodes=(node,),
        granted=recs[jobid].need,
    )


def kinds(events):
    return [(j, type(e).__name__) for j, e in events]


def test_an_on_deck_job_at_the_edge_stays_on_deck():
    # depth 3: a job already on deck stays while it is within 1.5 x 3 = 5
    recs = records((1, "8M"))
    held(recs, 1, J.ONDECK, "rsa0")
    assert plan(queue(9, 8, 7, 6, 1), recs, NODES, POLICY, now=5.0) == []
    assert kinds(plan(queue(9, 8, 7, 6, 5, 1), recs, NODES, POLICY, now=5.0)) == [
        (1, "Demoted")
    ]


def test_a_pending_job_enters_only_inside_the_window():
    recs = records((1, "8M"))
    assert plan(queue(9, 8, 7, 1), recs, NODES, POLICY, now=5.0) == []
    assert kinds(plan(queue(9, 8, 1), recs, NODES, POLICY, now=5.0)) == [(1, "OnDeck")]


def test_a_demoted_job_keeps_its_data_until_the_capacity_is_needed():
    recs = records((1, "60M"), (2, "60M"))
    held(recs, 1, J.DEMOTED, "rsa0")
    # job 2 fits on rsa1: job 1 keeps its staged data
    assert kinds(plan(queue(2, 9, 8, 7, 6, 5, 1), recs, NODES, POLICY, now=5.0)) == [
        (2, "OnDeck")
    ]
    held(recs, 2, J.ONDECK, "rsa1")
    recs[3] = records((3, "60M"))[3]
    # job 3 needs a node: job 1 (outside the window) gives its capacity back
    assert kinds(plan(queue(2, 3, 9, 8, 7, 6, 1), recs, NODES, POLICY, now=5.0)) == [
        (1, "Revoke"),
        (3, "OnDeck"),
    ]


def test_without_keep_demoted_capacity_goes_back_at_once():
    policy = dataclasses.replace(POLICY, keep_demoted=False)
    recs = records((1, "8M"))
    held(recs, 1, J.ONDECK, "rsa0")
    assert kinds(plan(queue(9, 8, 7, 6, 5, 1), recs, NODES, policy, now=5.0)) == [
        (1, "Demoted"),
        (1, "Revoke"),
    ]


def test_the_latest_starting_holder_is_revoked_first():
    policy = Policy.from_config(
        {"proportion": 1, "node-capacity": "64M", "granule": "4M", "ondeck-depth": 8}
    )
    recs = records((1, "60M"), (2, "60M"), (3, "60M"))
    held(recs, 1, J.ONDECK, "rsa0")
    held(recs, 2, J.ONDECK, "rsa1")
    # an urgent job 3 now starts first: of the two holders, job 2 starts last
    events = plan(queue(3, 1, 2), recs, NODES, policy, now=5.0)
    assert kinds(events) == [(2, "Demoted"), (2, "Revoke"), (3, "OnDeck")]


def test_running_jobs_capacity_is_never_taken_back():
    recs = records((1, "60M"), (2, "60M"), (3, "60M"))
    held(recs, 1, J.RUNNING, "rsa0", S.INUSE_IN)
    held(recs, 2, J.RUNNING, "rsa1", S.INUSE_OUT)
    assert plan(queue(3), recs, NODES, POLICY, now=5.0) == []


def test_a_drained_node_takes_no_new_reservation():
    recs = records((1, "60M"), (2, "60M"))
    assert select(queue(1, 2), recs, NODES, POLICY, now=0, drained={"rsa1"}) == {1}


def test_a_big_job_is_looked_at_earlier_when_its_stage_in_takes_longer():
    recs = records((1, "8M"), (2, "120M"))
    est = {1: 100.0, 2: 100.0}  # both start in 100 s; the window is 60 s
    rate = 1 * MB  # 8M takes 8 s to stage, 120M takes 120 s
    assert select(
        queue(1, 2, estimates=est), recs, NODES, POLICY, now=0, rate=rate
    ) == {2}


def test_the_stage_rate_is_measured_from_finished_stage_ins():
    from flux_rsa.core import Progress
    from flux_rsa.core.ondeck import stage_rate
    from flux_rsa.core.record import Transition

    recs = records((1, "8M"), (2, "8M"))
    assert stage_rate(recs, default=123) == 123.0
    for jobid, seconds in ((1, 2.0), (2, 4.0)):
        history = (
            Transition(10.0, J.ONDECK, S.STAGING_IN),
            Transition(10.0 + seconds, J.ONDECK, S.READY),
        )
        recs[jobid] = dataclasses.replace(
            recs[jobid],
            history=history,
            progress=Progress(bytes_done=8 * MB, bytes_total=8 * MB),
        )
    assert stage_rate(recs, default=123) == (4 * MB + 2 * MB) / 2


def test_a_job_over_two_nodes_needs_room_for_its_headroom_too():
    """With span-fill 0.95, 2 x 64M is charged 2 x 104M (core.spread): it
    never fits nodes of 64M, and takes two whole nodes of 112M."""
    fill = dataclasses.replace(POLICY, span_fill=0.95)
    recs = records((1, "128M"), (2, "8M"))
    events = plan(queue(1, 2), recs, NODES, fill, now=1.0)
    assert kinds(events) == [(1, "TooBig"), (2, "OnDeck")]
    assert events[0][1].largest == 64 * MB
    bigger = dataclasses.replace(fill, node_capacity=112 * MB)
    assert select(queue(1, 2), recs, NODES, bigger, now=0) == {1}


def test_a_job_bigger_than_the_whole_pool_never_blocks_the_queue():
    recs = records((1, "192M"), (2, "8M"))  # two nodes of 64M: 128M at most
    events = plan(queue(1, 2), recs, NODES, POLICY, now=1.0)
    assert kinds(events) == [(1, "TooBig"), (2, "OnDeck")]
    from flux_rsa.core import process

    rec, _ = process(recs[1], events[0][1])
    assert rec.failed and rec.error.startswith(
        "needs 192M of RAM disk; the RSA pool holds at most 128M"
    )


def test_a_default_reservation_bigger_than_the_pool_is_clamped_to_the_most_it_holds():
    """A -N2 job without rsa.capacity at proportion 1 asks for both nodes
    (128M); with span-fill 0.95 on nodes of 64M the pool holds 64M at most
    (one node: two would need their headroom too).  The site's default
    shrinks to that, says so, and the job goes on deck; a size the user
    asked for is never shrunk (test above)."""
    from flux_rsa.core import process

    fill = dataclasses.replace(POLICY, span_fill=0.95)
    req = parse_request({"data_in": "/in", "data_out": "/out"})
    recs = {1: admit(1, 1000, 2, req, fill, 0.0)}
    assert recs[1].need == 128 * MB
    events = plan(queue(1), recs, NODES, fill, now=1.0)
    assert kinds(events) == [(1, "TooBig")]
    rec, actions = process(recs[1], events[0][1])
    assert (rec.need, rec.clamped, rec.failed) == (64 * MB, 128 * MB, False)
    (post,) = actions
    assert (post.name, post.context["error"]) == (
        "error",
        "the default reservation of 128M is more than the RSA pool can hold: "
        "reserving 64M, the most it can (choose a size with rsa.capacity)",
    )
    assert kinds(plan(queue(1), {1: rec}, NODES, fill, now=2.0)) == [(1, "OnDeck")]


def test_a_provider_that_cannot_span_nodes_clamps_a_default_to_one_node():
    from flux_rsa.core import process

    tmpfs = Policy.from_config(
        {"proportion": 1, "node-capacity": "64M", "granule": "4M"}
    )
    req = parse_request({"data_in": "/in"})
    recs = {1: admit(1, 1000, 2, req, tmpfs, 0.0)}
    events = plan(queue(1), recs, NODES, tmpfs, now=1.0)
    rec, _ = process(recs[1], events[0][1])
    assert (rec.need, rec.clamped) == (64 * MB, 128 * MB)


def test_a_default_bigger_than_the_known_pool_is_clamped_when_the_job_comes():
    """Once the service knows the pool (pool_nodes), a job that may start
    before it is ever on deck (held at start, or nodes free) is clamped as
    it is admitted, and says so; a measured size too, once measured."""
    from flux_rsa.core import events as Ev
    from flux_rsa.core import settle

    known = dataclasses.replace(POLICY, span_fill=0.95, pool_nodes=2)
    rec = admit(1, 1000, 2, parse_request({"data_in": "/in"}), known, 0.0)
    rec, actions = settle(rec, Ev.Event(0.0))
    assert (rec.need, rec.clamped, rec.rsa_state) == (64 * MB, 128 * MB, S.INITIAL)
    assert [a.name for a in actions] == ["error"]
    asked = admit(
        2, 1000, 2, parse_request({"data_in": "/in", "capacity": "8M"}), known, 0
    )
    assert settle(asked, Ev.Event(0.0)) == (asked, [])


def holding(rec, node, size, job_state=J.RUNNING, rsa_state=S.INUSE_OUT):
    return dataclasses.replace(
        rec, job_state=job_state, rsa_state=rsa_state, nodes=(node,), granted=size
    )


def test_a_job_waiting_for_its_producer_is_taken_only_beside_it_and_last():
    recs = records((1, "40M"), (2, "4M"), (3, "20M"))
    recs[1] = holding(recs[1], "rsa0", 40 * MB)  # the producer, running
    waiting = Pending(3, priority=0, t_submit=9.0, beside="rsa0")
    # room beside the producer once the pending job 2 is placed: taken
    assert select(queue(2) + [waiting], recs, NODES, POLICY, now=0) == {2, 3}
    # no room beside it (rsa1 has room): it waits
    recs[2] = holding(recs[2], "rsa0", 8 * MB)
    assert select([waiting], recs, NODES, POLICY, now=0) == set()


def test_a_job_waiting_for_its_producer_never_takes_capacity_back_but_gives_it():
    recs = records((1, "40M"), (2, "24M"), (3, "24M"), (4, "64M"))
    recs[1] = holding(recs[1], "rsa0", 40 * MB)  # the producer, running
    recs[4] = holding(recs[4], "rsa1", 64 * MB)  # rsa1 is full
    waiting = Pending(3, priority=0, t_submit=9.0, beside="rsa0")
    # 2, on deck, holds the room beside the producer: 3 does not take it
    held = holding(recs[2], "rsa0", 24 * MB, J.ONDECK, S.BOOTED)
    assert select(queue(2) + [waiting], {**recs, 2: held}, NODES, POLICY, 0) == {2}
    # 3 holds it and the pending 2 needs it: 3 gives it back
    recs[3] = holding(recs[3], "rsa0", 24 * MB, J.ONDECK, S.BOOTED)
    events = plan(queue(2) + [waiting], recs, NODES, POLICY, now=0)
    assert [(j, type(ev).__name__) for j, ev in events] == [
        (2, "OnDeck"),
        (3, "Demoted"),
        (3, "Revoke"),
    ]
