"""The table row by row: the thesis's scenarios and their races."""

import pytest

from flux_rsa.core import IllegalEvent, Policy, accepts
from flux_rsa.core import actions as A
from flux_rsa.core import admit
from flux_rsa.core import events as E
from flux_rsa.core import outputs as Out
from flux_rsa.core import parse_request, process
from flux_rsa.core.states import JobState as J
from flux_rsa.core.states import RsaState as S

POLICY = Policy.from_config(
    {"proportion": 1, "node-capacity": "64M", "granule": "4M", "delay": 30}
)
NO_RETRY = Policy.from_config(
    {"proportion": 1, "node-capacity": "64M", "granule": "4M", "stage-retries": 0}
)
BOTH = {"data_in": "/p/in", "data_out": "/p/out"}


def job(attrs=BOTH, nnodes=1, policy=POLICY):
    return admit(7, 1000, nnodes, parse_request(attrs), policy, 0.0)


def run(rec, *events, deadlines=False):
    """Apply events in order; return the record and every action asked for
    (without the deadline timers every in-flight state sets, unless asked)."""
    out = []
    for i, ev in enumerate(events, start=1):
        rec, acts = process(
            rec, ev if ev.t else type(ev)(**{**ev.__dict__, "t": float(i)})
        )
        out.extend(
            a
            for a in acts
            if deadlines or not (isinstance(a, A.StartTimer) and a.name == "timeout")
        )
    return rec, out


def kinds(actions):
    return [type(a).__name__ for a in actions]


def booted(rec, gen=1):
    return run(
        rec,
        E.OnDeck(1),
        E.HolderAllocated(2, gen, ("rsa0",), rec.need),
        E.HolderStarted(3, gen),
        E.RamdiskBuilt(4, gen, "/rd/7"),
    )


def test_job_without_attributes_is_ineligible_and_untouched():
    rec = job({})
    assert (
        rec.rsa_state is S.INELIGIBLE
        and rec.reason == "no rsa.data_in, rsa.data_out or rsa.capacity"
    )
    rec, acts = run(rec, E.OnDeck(1), E.Starting(2))
    assert kinds(acts) == ["ReplyStart"] and acts[0].env.ramdisk is None
    rec, acts = run(rec, E.Finished(3))
    assert acts == [] and rec.final


def test_job_below_the_minimum_is_ineligible_and_uses_its_directories():
    policy = Policy.from_config({"min-nodes": 4})
    rec = job(nnodes=2, policy=policy)
    assert rec.rsa_state is S.INELIGIBLE
    assert "2 node(s)" in rec.reason and "minimum" in rec.reason
    rec, acts = run(rec, E.OnDeck(1), E.Starting(2))
    env = acts[0].env
    assert (env.ramdisk, env.data_in, env.data_out) == (None, "/p/in", "/p/out")
    assert kinds(acts) == ["ReplyStart"]


def test_thesis_happy_path_stages_in_then_out_then_tears_down():
    rec, acts = booted(job())
    assert rec.rsa_state is S.STAGING_IN
    stage = acts[-1]
    assert (stage.direction, stage.src, stage.dst) == ("in", "/p/in", "/rd/7/in")
    rec, acts = run(rec, E.StageEnded(5, 1, True))
    assert rec.rsa_state is S.READY and "LockIn" in kinds(acts)
    rec, acts = run(rec, E.Starting(6))
    env = acts[0].env
    assert (env.ramdisk, env.data_in, env.data_out, env.staged_in) == (
        "/rd/7",
        "/rd/7/in",
        "/rd/7/out",
        True,
    )
    assert rec.rsa_state is S.INUSE_IN
    assert [a.seconds for a in acts if isinstance(a, A.StartTimer)] == [30]
    rec, acts = run(rec, E.InputReleased(7, why="delay"))
    assert rec.rsa_state is S.INUSE_OUT and kinds(acts)[0] == "PurgeInput"
    rec, acts = run(rec, E.Finished(8))
    out = acts[0]
    assert rec.rsa_state is S.STAGING_OUT and (out.src, out.dst) == (
        "/rd/7/out",
        "/p/out",
    )
    rec, acts = run(rec, E.StageEnded(9, 2, True))
    assert rec.rsa_state is S.TEARDOWN and rec.output_home is True
    assert kinds(acts) == ["PostEvent", "CancelHolder"]
    rec, acts = run(rec, E.HolderEnded(10, 1))
    assert rec.rsa_state is S.DESTROYED and rec.final and acts == []
    assert list(rec.times()) == [
        s.value
        for s in (
            S.INITIAL,
            S.REQUESTED,
            S.ASSIGNED,
            S.BOOTING,
            S.BOOTED,
            S.STAGING_IN,
            S.READY,
            S.INUSE_IN,
            S.INUSE_OUT,
            S.STAGING_OUT,
            S.TEARDOWN,
            S.DESTROYED,
        )
    ]


def test_demoted_during_stage_in_stops_releases_and_restages_when_on_deck_again():
    rec, _ = booted(job())
    rec, acts = run(rec, E.Demoted(5), E.Revoke(6))
    assert (rec.job_state, rec.rsa_state) == (J.DEMOTED, S.STOPPING)
    assert kinds(acts) == ["StopStage"]
    rec, acts = run(rec, E.StageEnded(7, 1, False, error="killed"))
    assert rec.rsa_state is S.TEARDOWN and kinds(acts) == ["CancelHolder"]
    rec, acts = run(rec, E.HolderEnded(8, 1))
    assert rec.rsa_state is S.INITIAL and rec.nodes == () and rec.ramdisk is None
    rec, acts = run(rec, E.OnDeck(9))
    assert rec.rsa_state is S.REQUESTED and acts[0].gen == 2
    rec, acts = run(
        rec,
        E.HolderAllocated(10, 2, ("rsa1",), rec.need),
        E.HolderStarted(11, 2),
        E.RamdiskBuilt(12, 2, "/rd/7b"),
    )
    assert rec.rsa_state is S.STAGING_IN and rec.restages == 1


def test_demoted_job_keeps_its_data_until_revoked():
    rec, _ = booted(job())
    rec, _ = run(rec, E.StageEnded(5, 1, True), E.Demoted(6))
    assert (rec.job_state, rec.rsa_state) == (J.DEMOTED, S.READY)
    rec, acts = run(rec, E.OnDeck(7))
    assert rec.rsa_state is S.READY and acts == []  # no restage


def test_late_holder_events_after_a_cancel_are_absorbed():
    rec, _ = run(job(), E.OnDeck(1), E.Demoted(2), E.Revoke(3))
    assert rec.rsa_state is S.TEARDOWN
    rec, acts = run(
        rec,
        E.HolderAllocated(4, 1, ("rsa0",), 1),
        E.HolderStarted(5, 1),
        E.RamdiskBuilt(6, 1, "/rd/x"),
    )
    assert rec.rsa_state is S.TEARDOWN and acts == []
    rec, _ = run(rec, E.HolderEnded(7, 1))
    assert rec.rsa_state is S.INITIAL


def test_stale_completions_of_an_old_generation_are_ignored():
    rec, _ = booted(job())
    before = rec
    rec, acts = run(rec, E.StageEnded(5, 99, True), E.HolderEnded(6, 0))
    assert rec == before and acts == []


def test_job_that_starts_during_stage_in_reads_data_in_and_writes_to_the_ramdisk():
    rec, _ = booted(job())
    rec, acts = run(rec, E.Starting(5))
    env = acts[0].env
    assert env.data_in == "/p/in" and env.data_out == "/rd/7/out" and not env.staged_in
    assert rec.rsa_state is S.STOPPING and kinds(acts) == ["ReplyStart", "StopStage"]
    rec, acts = run(rec, E.StageEnded(6, 1, False))
    assert rec.rsa_state is S.INUSE_OUT and kinds(acts) == ["PurgeInput"]


def test_job_that_starts_before_any_ramdisk_gets_persistent_storage_and_releases():
    rec, _ = run(job(), E.OnDeck(1))
    rec, acts = run(rec, E.Starting(2))
    env = acts[0].env
    assert (env.ramdisk, env.data_in, env.data_out) == (None, "/p/in", "/p/out")
    assert rec.rsa_state is S.TEARDOWN and kinds(acts) == ["ReplyStart", "CancelHolder"]


def test_on_late_wait_holds_the_start_until_staged():
    rec, _ = booted(job({**BOTH, "on_late": "wait"}))
    rec, acts = run(rec, E.Starting(5))
    assert kinds(acts) == ["StartTimer"] and rec.start_pending
    rec, acts = run(rec, E.StageEnded(6, 1, True))
    reply = [a for a in acts if isinstance(a, A.ReplyStart)][0]
    assert reply.env.staged_in and rec.rsa_state is S.INUSE_IN


def test_on_late_wait_gives_up_after_the_timeout():
    rec, _ = booted(job({**BOTH, "on_late": "wait"}))
    rec, _ = run(rec, E.Starting(5))
    rec, acts = run(rec, E.LateTimeout(6))
    assert kinds(acts) == ["ReplyStart", "StopStage"] and not acts[0].env.staged_in
    assert "uses data_in directly" in rec.error


def test_a_stage_in_script_defaults_to_waiting():
    rec = job({**BOTH, "stage_in": "/p/unpack.sh"})
    assert rec.request.on_late == "wait"


def test_a_stage_script_quiet_for_script_quiet_is_said_to_be():
    """Its progress readings say how long it has printed and written
    nothing; from ``[rsa] script-quiet`` on, the record says which script
    and for how long (``flux rsa status`` shows it); a copy never is."""
    from flux_rsa.core.record import Progress

    policy = Policy.from_config({"proportion": 1, "script-quiet": "2m"})
    rec = job({**BOTH, "stage_in": "/p/unpack.sh"}, policy=policy)
    rec, acts = booted(rec)
    (stage,) = [a for a in acts if isinstance(a, A.StartStage)]
    assert rec.rsa_state is S.STAGING_IN
    for quiet, said in ((0, None), (119, None), (120, ("/p/unpack.sh", 120))):
        rec, _ = run(rec, E.StageProgress(9, stage.seq, Progress(quiet=quiet)))
        assert rec.quiet_script() == said
    rec, _ = run(rec, E.StageEnded(10, stage.seq, True))
    assert rec.rsa_state is S.READY and rec.quiet_script() is None
    copy, acts = booted(job(BOTH, policy=policy))
    (stage,) = [a for a in acts if isinstance(a, A.StartStage)]
    copy, _ = run(copy, E.StageProgress(9, stage.seq, Progress(quiet=999)))
    assert copy.quiet_script() is None


SCRATCH = {"capacity": "16M"}


def test_capacity_alone_gives_a_scratch_ramdisk_nothing_staged_either_way():
    rec = job(SCRATCH)
    assert (
        rec.rsa_state is S.INITIAL
        and rec.need == 16 << 20
        and rec.request.on_late == "wait"
    )
    rec, acts = booted(rec)
    assert rec.rsa_state is S.READY and not any(
        isinstance(a, A.StartStage) for a in acts
    )
    rec, acts = run(rec, E.Starting(5))
    env = [a for a in acts if isinstance(a, A.ReplyStart)][0].env
    assert (env.ramdisk, env.data_in, env.data_out, env.scratch) == (
        "/rd/7",
        None,
        None,
        True,
    )
    assert rec.rsa_state is S.INUSE_OUT and kinds(acts) == ["StartTimer", "ReplyStart"]
    rec, acts = run(rec, E.Finished(6))
    assert rec.rsa_state is S.TEARDOWN and kinds(acts) == ["CancelHolder"]
    rec, acts = run(rec, E.HolderEnded(7, 1))
    assert rec.final and rec.output_home is None and acts == []
    assert "STAGING_IN" not in rec.times() and "STAGING_OUT" not in rec.times()


def test_a_scratch_job_held_for_its_ramdisk_starts_without_one_after_the_timeout():
    rec, _ = run(job(SCRATCH), E.OnDeck(1))
    rec, acts = run(rec, E.Starting(2))
    assert kinds(acts) == ["StartTimer"] and rec.start_pending
    rec, acts = run(rec, E.LateTimeout(3))
    assert acts[0].env.ramdisk is None and "RSA_RAMDISK unset" in rec.error
    assert rec.rsa_state is S.TEARDOWN


def test_failed_stage_out_holds_the_ramdisk_until_retry():
    rec, _ = booted(job(policy=NO_RETRY))
    rec, _ = run(rec, E.StageEnded(5, 1, True), E.Starting(6), E.Finished(7))
    rec, acts = run(rec, E.StageEnded(8, 2, False, error="/p/out: Permission denied"))
    assert rec.rsa_state is S.HELD and rec.output_home is False
    assert kinds(acts) == ["PostEvent"] and "CancelHolder" not in kinds(acts)
    assert acts[0].context["ramdisk"] == "/rd/7/out"
    rec, acts = run(rec, E.Retry(9))
    assert rec.rsa_state is S.STAGING_OUT and acts[0].seq == 3 and rec.error is None
    rec, acts = run(rec, E.StageEnded(10, 3, True))
    assert rec.rsa_state is S.TEARDOWN and rec.output_home


def test_where_the_outputs_stand_for_wait_and_afterstaged():
    rec, _ = booted(job(policy=NO_RETRY))
    rec, _ = run(rec, E.StageEnded(5, 1, True), E.Starting(6))
    assert Out.outputs(rec) == (Out.MOVING, None) and Out.after_staged(rec) is None
    rec, _ = run(rec, E.Finished(7))
    assert Out.outputs(rec)[0] == Out.MOVING and Out.after_staged(rec) is None
    held, _ = run(rec, E.StageEnded(8, 2, False, error="/p/out: Permission denied"))
    assert (
        Out.outputs(held) == (Out.HELD, "/p/out: Permission denied")
        and Out.after_staged(held) is None
    )
    gone, _ = run(held, E.Release(9), E.HolderEnded(10, 1))
    assert Out.outputs(gone)[0] == Out.LOST
    assert (
        Out.after_staged(gone)
        == "its outputs were never staged out (/p/out: Permission denied)"
    )
    home, _ = run(rec, E.StageEnded(8, 2, True))
    assert Out.outputs(home)[0] == Out.MOVING  # outputs home, RAM disk not yet gone
    home, _ = run(home, E.HolderEnded(9, 1))
    assert (
        Out.outputs(home) == (Out.HOME, "outputs staged out to /p/out")
        and Out.after_staged(home) is True
    )
    never, _ = run(job(), E.OnDeck(1), E.Canceled(2), E.HolderEnded(3, 1))
    assert (
        Out.outputs(never)[0] == Out.NONE
        and Out.after_staged(never) == "it never ran: it has no outputs"
    )
    plain, _ = run(job({}), E.Starting(1))
    assert (
        Out.outputs(plain)[0] == Out.NONE and Out.after_staged(plain) is None
    )  # still running
    plain, _ = run(plain, E.Finished(2))
    assert Out.after_staged(plain) is True


def test_a_stage_out_writes_into_data_out_from_the_job_end_until_the_outputs_settle():
    """What the jobtap plugin is told: a job reading that directory then
    would read a part of the outputs."""
    rec, _ = booted(job(policy=NO_RETRY))
    rec, _ = run(rec, E.StageEnded(5, 1, True), E.Starting(6))
    assert Out.writing_into(rec) is None  # still running: nothing is written there yet
    rec, _ = run(rec, E.Finished(7))
    assert Out.writing_into(rec) == "/p/out"
    held, _ = run(rec, E.StageEnded(8, 2, False, error="/p/out: Permission denied"))
    assert Out.writing_into(held) == "/p/out"  # a retry would write there again
    lost, _ = run(held, E.Release(9), E.HolderEnded(10, 1))
    assert Out.writing_into(lost) is None
    home, _ = run(rec, E.StageEnded(8, 2, True), E.HolderEnded(9, 1))
    assert Out.writing_into(home) is None
    plain, _ = run(job({}), E.Starting(1), E.Finished(2))
    assert Out.writing_into(plain) is None


def test_release_gives_up_a_held_ramdisk_explicitly():
    rec, _ = booted(job(policy=NO_RETRY))
    rec, _ = run(
        rec,
        E.StageEnded(5, 1, True),
        E.Starting(6),
        E.Finished(7),
        E.StageEnded(8, 2, False),
    )
    rec, acts = run(rec, E.Release(9))
    assert rec.rsa_state is S.TEARDOWN and kinds(acts) == ["PostEvent", "CancelHolder"]


def test_retry_is_refused_outside_held():
    rec, _ = booted(job())
    assert not accepts(rec, E.Retry(5))
    with pytest.raises(IllegalEvent, match="Retry is not allowed in ONDECK/STAGING_IN"):
        process(rec, E.Retry(5))


@pytest.mark.parametrize(
    "steps, state",
    [
        (0, S.INITIAL),
        (1, S.REQUESTED),
        (2, S.ASSIGNED),
        (3, S.BOOTING),
        (4, S.STAGING_IN),
        (5, S.READY),
    ],
)
def test_cancel_while_pending_cleans_up_from_every_state(steps, state):
    rec = job()
    events = [
        E.OnDeck(1),
        E.HolderAllocated(2, 1, ("rsa0",), 1),
        E.HolderStarted(3, 1),
        E.RamdiskBuilt(4, 1, "/rd/7"),
        E.StageEnded(5, 1, True),
    ]
    rec, _ = run(rec, *events[:steps]) if steps else (rec, [])
    assert rec.rsa_state is state
    rec, acts = run(rec, E.Canceled(10))
    for _ in range(3):  # the pool answers whatever was asked
        replies = []
        for act in acts:
            if isinstance(act, A.StopStage):
                replies.append(E.StageEnded(11, act.seq, False))
            if isinstance(act, A.CancelHolder):
                replies.append(E.HolderEnded(12, act.gen))
        rec, acts = run(rec, *replies) if replies else (rec, [])
    assert rec.final and rec.job_state is J.CANCELED


def test_ramdisk_lost_with_output_is_reported_not_hidden():
    rec, _ = booted(job())
    rec, _ = run(rec, E.StageEnded(5, 1, True), E.Starting(6))
    rec, acts = run(rec, E.HolderEnded(7, 1, error="rsa0 went down"))
    assert rec.rsa_state is S.DESTROYED and rec.output_home is False
    assert (
        "RAM disk lost before its outputs were staged out: rsa0 went down" == rec.error
    )
    assert acts[0].name == "error"


def test_fallback_start_reported_by_the_eventlog_wins():
    """job-manager gave up waiting for the service and started the job on
    persistent storage: the RAM disk is given back, nothing is staged out."""
    from flux_rsa.core import Env

    rec, _ = booted(job())
    rec, _ = run(rec, E.StageEnded(5, 1, True), E.Starting(6))
    rec, acts = run(rec, E.Started(7, Env(data_in="/p/in", data_out="/p/out")))
    assert rec.rsa_state is S.TEARDOWN and kinds(acts) == ["CancelHolder"]
    rec, acts = run(rec, E.Finished(8))
    assert acts == []


def test_record_round_trips_through_json():
    import json

    rec, _ = booted(job())
    rec, _ = run(rec, E.StageEnded(5, 1, True), E.Starting(6))
    again = type(rec).from_dict(json.loads(json.dumps(rec.to_dict())))
    assert again == rec


def test_a_failed_stage_in_is_retried_after_a_back_off_then_gives_up():
    rec, _ = booted(job())
    rec, acts = run(rec, E.StageEnded(5, 1, False, error="killed"))
    assert rec.rsa_state is S.ABORTED and rec.retry_pending
    assert [(a.name, a.seconds) for a in acts if isinstance(a, A.StartTimer)] == [
        ("retry", 5.0)
    ]
    rec, acts = run(rec, E.RetryStage(6))
    assert (
        rec.rsa_state is S.STAGING_IN and acts[0].seq == 2
    )  # resumes: same paths, new stage
    for n, (seq, backoff) in enumerate(((2, 10.0), (3, 20.0)), start=7):
        rec, acts = run(rec, E.StageEnded(n, seq, False, error="killed"))
        assert [a.seconds for a in acts if isinstance(a, A.StartTimer)] == [backoff]
        rec, _ = run(rec, E.RetryStage(n + 0.5))
    rec, acts = run(
        rec,
        E.StageEnded(20, 4, False, error="flux-rsa-stage: /p/in/x: Permission denied"),
    )
    assert rec.rsa_state is S.ABORTED and rec.failed and not rec.retry_pending
    assert (
        rec.error
        == "flux-rsa-stage: /p/in/x: Permission denied (stage-in failed 4 times: the job uses data_in directly)"
    )


def test_a_failed_stage_out_is_retried_and_held_when_retries_run_out():
    rec, _ = booted(job())
    rec, _ = run(rec, E.StageEnded(5, 1, True), E.Starting(6), E.Finished(7))
    seq = rec.stage_seq
    for i in range(3):
        rec, acts = run(
            rec, E.StageEnded(10 + i, seq, False, error="/p/out: Read-only file system")
        )
        assert (
            rec.rsa_state is S.HELD
            and rec.retry_pending
            and "CancelHolder" not in kinds(acts)
        )
        rec, acts = run(rec, E.RetryStage(10.5 + i))
        assert rec.rsa_state is S.STAGING_OUT
        seq = rec.stage_seq
    rec, acts = run(
        rec, E.StageEnded(20, seq, False, error="/p/out: Read-only file system")
    )
    assert (
        rec.rsa_state is S.HELD
        and not rec.retry_pending
        and "held" in [a.name for a in acts if isinstance(a, A.PostEvent)]
    )
    rec, acts = run(rec, E.RetryStage(21))  # a stray timer does nothing
    assert rec.rsa_state is S.HELD
    rec, acts = run(rec, E.Retry(22))  # the user fixed it
    assert rec.rsa_state is S.STAGING_OUT and rec.attempts == 0


def test_a_holder_reported_alive_after_its_end_is_cancelled_again():
    rec, _ = run(job(), E.OnDeck(1), E.Canceled(2))
    rec, _ = run(rec, E.HolderEnded(3, 1))
    assert rec.rsa_state is S.DESTROYED and rec.final
    rec, acts = run(rec, E.RamdiskBuilt(4, 1, "/rd/late"))
    assert rec.rsa_state is S.DESTROYED and [
        (type(a).__name__, a.gen) for a in acts
    ] == [("CancelHolder", 1)]
    rec, acts = run(rec, E.HolderEnded(5, 1))
    assert rec.final and acts == []


def test_a_holder_of_an_earlier_reservation_is_cancelled():
    rec, _ = run(
        job(), E.OnDeck(1), E.Demoted(2), E.Revoke(3), E.HolderEnded(4, 1), E.OnDeck(5)
    )
    assert rec.gen == 2 and rec.rsa_state is S.REQUESTED
    rec, acts = run(rec, E.HolderAllocated(6, 1, ("rsa0",), 1))
    assert rec.rsa_state is S.REQUESTED and [
        (type(a).__name__, a.gen) for a in acts
    ] == [("CancelHolder", 1)]
