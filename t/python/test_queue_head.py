"""An on-deck pass costs the same however long the queue: it reads the
queue's head, and sees only the records of the jobs read plus the engaged
ones (holding capacity or on deck).  These tests show it decides as the
pass over every record and the whole queue did."""

import dataclasses
import types

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flux_rsa.core import Policy, admit, ondeck, parse_request
from flux_rsa.core.ondeck import Pending, engaged, head, plan
from flux_rsa.core.record import Progress, Transition
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
    }
)
NODES = ["rsa0", "rsa1"]
MB = 2**20
STATES = [
    (J.PENDING, S.INITIAL),
    (J.ONDECK, S.READY),
    (J.ONDECK, S.STAGING_IN),
    (J.DEMOTED, S.READY),
    (J.DEMOTED, S.INITIAL),
    (J.RUNNING, S.INUSE_IN),
    (J.FINISHED, S.STAGING_OUT),
    (J.FINISHED, S.DESTROYED),
    (J.ONDECK, S.REQUESTED),
    (J.ONDECK, S.INITIAL),
    (J.ONDECK, S.DESTROYED),
]


def record(jobid, size_mb, states, node):
    req = parse_request(
        {"data_in": "/in", "data_out": "/out", "capacity": f"{size_mb}M"}
    )
    rec = admit(jobid, 1000, 1, req, POLICY, 0.0)
    job_state, rsa_state = states
    holds = rsa_state not in (S.INITIAL, S.DESTROYED, S.REQUESTED)
    return dataclasses.replace(
        rec,
        job_state=job_state,
        rsa_state=rsa_state,
        nodes=(node,) if holds else (),
        granted=rec.need if holds else 0,
    )


jobs = st.lists(
    st.tuples(
        st.sampled_from([4, 8, 16, 40]),
        st.sampled_from(STATES),
        st.sampled_from(NODES),
        st.booleans(),
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(
    jobs,
    st.integers(min_value=6, max_value=40),
    st.integers(min_value=0, max_value=20),
    st.randoms(use_true_random=False),
)
def test_the_pass_over_the_head_and_the_engaged_records_decides_as_the_whole(
    specs, cut, others, rng
):
    # the queue: our pending jobs and non-RSA ones, mixed; a read stops
    # after ``cut`` >= 2 x ondeck-depth of them (head() reads 4 x, 1024 at
    # least); records of jobs that are not pending are in no queue
    recs = {
        j: record(j, size, states, node)
        for j, (size, states, node, _) in enumerate(specs, start=1)
    }
    order = [j for j in recs if recs[j].job_state in (J.PENDING, J.ONDECK, J.DEMOTED)]
    order += list(range(1000, 1000 + others))  # non-RSA jobs among ours
    rng.shuffle(order)
    queue = [Pending(j, priority=16, t_submit=float(i)) for i, j in enumerate(order)]
    whole = plan(queue, recs, NODES, POLICY, now=1.0)
    read = queue[:cut]
    if len(read) < len(
        queue
    ):  # truncated: the engaged jobs of ours behind the head are added
        read = read + [
            p for p in queue[cut:] if p.jobid in recs and engaged(recs[p.jobid])
        ]
    seen = {p.jobid for p in read} | {j for j, r in recs.items() if engaged(r)}
    part = plan(read, {j: recs[j] for j in seen if j in recs}, NODES, POLICY, now=1.0)
    assert part == whole


def test_the_head_covers_the_depth_rule():
    assert head(POLICY) >= 1024
    deep = Policy.from_config({"ondeck-depth": 1000})
    assert head(deep) >= 1.5 * 1000


def listed(jobid, state=8, priority=16, t_submit=1.0):
    return {"id": jobid, "state": state, "priority": priority, "t_submit": t_submit}


def ours(tracker, jobid, t):
    tracker.feed(
        jobid,
        "submit",
        t,
        {"userid": 1000},
        {"attributes": {"system": {"rsa": {"data_in": "/in"}}}, "resources": []},
    )
    tracker.feed(jobid, "priority", t, {"priority": 16})


def test_a_truncated_read_keeps_our_engaged_jobs_behind_the_head():
    pytest.importorskip(
        "flux", reason="the service's queue reader uses Flux's constants"
    )
    from flux_rsa.service.jobs import Tracker
    from flux_rsa.service.queue import Queue

    tr = Tracker()
    for j in (1, 2, 3):
        ours(tr, j, float(j))
    queue = Queue(tr, head=2)
    queue.read([listed(1), listed(7)])  # stopped at 2: more jobs behind
    assert [p.jobid for p in queue.pending(extra={3})] == [1, 7, 3]
    queue.read([listed(1)])  # the whole queue: 3 is not placed yet
    assert [p.jobid for p in queue.pending(extra={3})] == [1]


def test_the_stage_rate_kept_from_changes_is_the_one_read_from_every_record():
    recs = {}
    kept = []
    for j in range(1, 30):
        rec = record(j, 8, (J.ONDECK, S.READY), "rsa0")
        t = 10.0 * j
        hist = (
            Transition(t, J.ONDECK, S.STAGING_IN),
            Transition(t + 1 + j % 5, J.ONDECK, S.READY),
        )
        rec = dataclasses.replace(
            rec, history=hist, progress=Progress(bytes_total=j * MB)
        )
        recs[j] = rec
        if ondeck.sample(rec) is not None:
            kept.append(ondeck.sample(rec))
    assert ondeck.median_rate(kept[-ondeck.RECENT :], 1.0) == ondeck.stage_rate(
        recs, 1.0
    )


def test_a_pass_has_work_only_for_rsa_jobs_before_their_run():
    from flux_rsa.core.ondeck import waits_to_run

    assert waits_to_run(record(1, 8, (J.PENDING, S.INITIAL), "rsa0"))
    assert waits_to_run(record(2, 8, (J.DEMOTED, S.READY), "rsa0"))
    assert not waits_to_run(record(3, 8, (J.RUNNING, S.INUSE_IN), "rsa0"))
    assert not waits_to_run(
        dataclasses.replace(
            record(4, 8, (J.PENDING, S.INITIAL), "rsa0"), rsa_state=S.INELIGIBLE
        )
    )


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from([8, 16, 24]), st.floats(0, 100)),
        min_size=1,
        max_size=30,
    ),
    st.integers(min_value=1, max_value=30),
    st.sampled_from([8, 16, 24]),
    st.floats(0, 200),
)
def test_a_job_judged_behind_the_head_is_not_in_the_next_read(
    queued, cut, priority, t_submit
):
    # the skipped pass is safe: a job that joins the queue (or whose
    # priority comes) behind a full read would not be in the next read
    pytest.importorskip(
        "flux", reason="the service's queue reader uses Flux's constants"
    )
    from flux_rsa.core.ondeck import queue_order
    from flux_rsa.service.jobs import Tracker
    from flux_rsa.service.queue import Queue

    pending = queue_order(Pending(j, p, t) for j, (p, t) in enumerate(queued, start=1))
    queue = Queue(Tracker(), head=cut)
    queue.read(
        [
            listed(p.jobid, priority=p.priority, t_submit=p.t_submit)
            for p in pending[:cut]
        ]
    )
    new = Pending(1000, priority, t_submit)
    facts = types.SimpleNamespace(jobid=new.jobid, priority=priority, t_submit=t_submit)
    if queue.behind(facts):
        assert new not in queue_order(pending + [new])[:cut]


def test_only_a_full_read_of_pending_jobs_puts_a_job_behind_it():
    pytest.importorskip(
        "flux", reason="the service's queue reader uses Flux's constants"
    )
    from flux_rsa.service.jobs import Tracker
    from flux_rsa.service.queue import Queue

    def facts(jobid, priority=16, t_submit=9.0):
        return types.SimpleNamespace(jobid=jobid, priority=priority, t_submit=t_submit)

    queue = Queue(Tracker(), head=2)
    assert not queue.behind(facts(3))  # nothing read yet
    queue.read([listed(1, t_submit=1.0), listed(2, t_submit=2.0)])
    assert queue.behind(facts(3))
    assert queue.behind(facts(3, priority=None))  # judged when its priority comes
    assert not queue.behind(facts(3, priority=20))  # more urgent: it goes in front
    assert not queue.behind(
        facts(2, priority=8)
    )  # it was read: the head changes without it
    queue.read([listed(1, t_submit=1.0)])  # the whole queue
    assert not queue.behind(facts(3))
    queue.read([listed(1, t_submit=1.0), listed(5, state=16)])  # head jobs, one running
    assert not queue.behind(facts(3))
