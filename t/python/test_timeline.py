"""flux rsa timeline's data, from records made by the core (no Flux)."""

import pytest

from flux_rsa.cli import timeline
from flux_rsa.core import Policy, admit
from flux_rsa.core import events as E
from flux_rsa.core import parse_request, process
from flux_rsa.core.record import Record

POLICY = Policy.from_config(
    {"proportion": 1, "node-capacity": "64M", "granule": "4M", "stage-retries": 0}
)
MB = 1 << 20


def record(jobid, t0, held=False):
    """A job's record through its life, events one second apart from t0."""
    rec = admit(
        jobid,
        1000,
        1,
        parse_request({"data_in": "/p/in", "data_out": "/p/out", "capacity": "16M"}),
        POLICY,
        t0,
    )
    events = [
        E.OnDeck(t0 + 1),
        E.HolderAllocated(t0 + 2, 1, ("rsa0",), 16 * MB),
        E.HolderStarted(t0 + 3, 1),
        E.RamdiskBuilt(t0 + 4, 1, "/rd"),
        E.StageEnded(t0 + 5, 1, True),
        E.Starting(t0 + 6),
        E.Finished(t0 + 7),
    ]
    if held:
        events += [
            E.StageEnded(t0 + 8, 2, False, error="no room"),
            E.Release(t0 + 9),
            E.HolderEnded(t0 + 10, 1),
        ]
    else:
        events += [E.StageEnded(t0 + 8, 2, True), E.HolderEnded(t0 + 9, 1)]
    for ev in events:
        rec, _ = process(rec, ev)
    return rec.to_dict()


def test_each_phase_spans_its_transitions():
    pic = timeline.data([record(1, 100.0)], now=1000.0)
    row = pic["jobs"][0]
    assert [(s["phase"], s["start"], s["end"]) for s in row["segments"]] == [
        ("pending", 100.0, 102.0),
        ("building", 102.0, 104.0),
        ("staging-in", 104.0, 105.0),
        ("on-deck", 105.0, 106.0),
        ("running", 106.0, 107.0),
        ("staging-out", 107.0, 108.0),
        ("teardown", 108.0, 109.0),
    ]
    assert row["ramdisk"] == [{"start": 102.0, "end": 109.0, "bytes": 16 * MB}]
    assert (pic["t0"], pic["t1"]) == (100.0, 109.0)


def test_capacity_adds_up_and_a_held_stage_out_shows():
    pic = timeline.data([record(1, 100.0), record(2, 103.0, held=True)], now=1000.0)
    assert [(s["t"], s["bytes"] // MB) for s in pic["capacity"]] == [
        (102.0, 16),
        (105.0, 32),
        (109.0, 16),
        (113.0, 0),
    ]
    phases = [s["phase"] for s in pic["jobs"][1]["segments"]]
    assert phases[-3:] == ["staging-out", "held", "teardown"]


def test_an_active_job_lasts_until_now_and_since_drops_old_jobs():
    rec = admit(3, 1000, 1, parse_request({"capacity": "8M"}), POLICY, 500.0)
    rec, _ = process(rec, E.OnDeck(501.0))
    pic = timeline.data([record(1, 100.0), rec.to_dict()], since=200.0, now=600.0)
    assert [r["jobid"] for r in pic["jobs"]] == [3]
    assert pic["jobs"][0]["segments"] == [
        {"phase": "pending", "start": 500.0, "end": 600.0}
    ]


def test_status_rows_read_final_and_times_from_the_record():
    pytest.importorskip(
        "flux",
        reason="no Flux (flux-core not installed): `flux rsa status` needs flux.util",
    )
    from flux_rsa.cli import views

    done = record(1, 100.0)
    row = views.RsaJob(done)
    assert row.final and row.at_rest and row.final == Record.from_dict(done).final
    assert (
        row.t_submit,
        row.t.REQUESTED,
        row.t.STAGING_OUT,
        row.t.DESTROYED,
        row.t.HELD,
    ) == (100.0, "1.0", "7.0", "9.0", "-")
    detaching = views.RsaJob(
        {**done, "mount": "detaching", "mount_path": "/mnt/rsa/1.1"}
    )
    assert not detaching.final
    assert [j.id for j in views.select([row, detaching])] == [detaching.id]
