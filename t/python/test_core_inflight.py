"""After a restart: what is asked again, and how the records square with a
restarted pool's listing (``inflight``); which RAM disks hold outputs that
are not home (``outputs.at_risk``)."""

import dataclasses

from flux_rsa.core import Env, Policy
from flux_rsa.core import actions as A
from flux_rsa.core import admit
from flux_rsa.core import events as E
from flux_rsa.core import inflight, outputs, parse_request, process
from flux_rsa.core.states import IN_FLIGHT, OUTPUT_KEPT
from flux_rsa.core.states import RsaState as S

POLICY = Policy.from_config({"proportion": 1, "node-capacity": "64M", "granule": "4M"})
MB = 1 << 20


def job(jobid=7):
    return admit(
        jobid,
        1000,
        1,
        parse_request({"data_in": "/p/in", "data_out": "/p/out"}),
        POLICY,
        0.0,
    )


def run(rec, *events):
    for ev in events:
        rec, _ = process(rec, ev)
    return rec


def staging_out(jobid=7):
    """Ran on its RAM disk, ended: its outputs are being staged out."""
    rec = run(
        job(jobid),
        E.OnDeck(1),
        E.HolderAllocated(2, 1, ("rsa0",), 4 * MB),
        E.HolderStarted(3, 1),
        E.RamdiskBuilt(4, 1, f"/rd/{jobid}"),
        E.StageEnded(5, 1, True),
        E.Starting(6),
    )
    rec = run(rec, E.Started(7, rec.env), E.Finished(8))
    assert rec.rsa_state is S.STAGING_OUT and rec.stage_seq == 2
    return rec


def test_every_in_flight_state_has_the_step_it_waits_for():
    assert set(inflight.AWAITS) == IN_FLIGHT


def test_a_restart_during_stage_out_asks_for_the_same_stage_again():
    rec = staging_out()
    [again] = inflight.reissue(rec)
    assert isinstance(again, A.StartStage)
    assert (again.seq, again.direction, again.src, again.dst) == (
        2,
        "out",
        "/rd/7/out",
        "/p/out",
    )


def test_a_restart_asks_each_in_flight_state_again():
    rec = staging_out()
    expect = {
        S.REQUESTED: A.RequestCapacity(7, gen=1, need=rec.need, userid=1000),
        S.BOOTING: A.RequestCapacity(7, gen=1, need=rec.need, userid=1000),
        S.STOPPING: A.StopStage(7, seq=2),
        S.TEARDOWN: A.CancelHolder(7, gen=1),
    }
    for state, action in expect.items():
        assert inflight.reissue(dataclasses.replace(rec, rsa_state=state)) == [action]
    for state in (S.READY, S.INUSE_IN, S.HELD, S.DESTROYED):
        assert inflight.reissue(dataclasses.replace(rec, rsa_state=state)) == []


def test_outputs_on_a_ramdisk_are_at_risk_until_home():
    rec = staging_out()
    assert outputs.not_home(rec) and outputs.at_risk(rec)
    assert not outputs.at_risk(dataclasses.replace(rec, output_home=True))
    assert not outputs.at_risk(
        dataclasses.replace(rec, env=Env(data_in="/p/in", data_out="/p/out"))
    )
    for state in S:
        assert outputs.at_risk(dataclasses.replace(rec, rsa_state=state)) == (
            state in OUTPUT_KEPT
        )


def test_reconcile_adopts_a_kept_ramdisk_with_outputs_and_discards_the_others():
    out = staging_out(7)
    other = staging_out(8)
    records = {7: out, 8: dataclasses.replace(other, gen=2), 9: run(job(9))}
    listing = {
        "kept": [
            {"jobid": 7, "gen": 1, "path": "/rd/7"},
            {"jobid": 8, "gen": 1, "path": "/rd/8"},
            {"jobid": 9, "gen": 1, "path": "/rd/9"},
            {"jobid": 5, "gen": 1, "path": "/rd/5"},
        ]
    }
    plan = inflight.reconcile(records, listing, 50.0)
    assert [(k["path"], r is not None) for k, r in plan.kept] == [
        ("/rd/7", True),
        ("/rd/8", False),
        ("/rd/9", False),
        ("/rd/5", False),
    ]
    # job 8 (gen 2) has no holder left: it learns its RAM disk is lost; job 7 adopts its own
    assert plan.lost == [
        (8, E.HolderEnded(50.0, 2, "the RSA pool restarted without this RAM disk"))
    ]


def test_reconcile_cancels_orphans_and_learns_what_the_pool_lost():
    tearing = dataclasses.replace(staging_out(3), rsa_state=S.TEARDOWN)
    requested = run(job(4), E.OnDeck(1))
    assert requested.rsa_state is S.REQUESTED
    records = {3: tearing, 4: requested, 7: staging_out(7)}
    listing = {
        "holders": [
            {"jobid": 7, "gen": 1},
            {"jobid": 6, "gen": 1},
            {"jobid": 7, "gen": 0},
        ],
        "stages": [
            {"jobid": 7, "seq": 2},
            {"jobid": 7, "seq": 1},
            {"jobid": 6, "seq": 1},
        ],
        "kept": [{"jobid": 11, "gen": 1, "path": "/rd/11", "adopting": True}],
    }
    plan = inflight.reconcile(records, listing, 9.0)
    assert plan.kept == []
    assert plan.cancel == [(6, 1), (7, 0), (11, 1)]
    assert plan.stop == [(6, 1), (7, 1)]
    # the teardown's holder is gone as asked; the REQUESTED one is being made
    assert plan.lost == [(3, E.HolderEnded(9.0, 1, None))]
