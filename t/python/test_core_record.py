"""Records as the KVS keeps them: one saved by an older flux-rsa (its
sub-machines written as plain strings) loads, reads the same, goes on where
it stopped and is written back unchanged."""

import json

from flux_rsa.core import Record
from flux_rsa.core import actions as A
from flux_rsa.core import events as E
from flux_rsa.core import inflight, process
from flux_rsa.core.record import Limits
from flux_rsa.core.states import JobState as J
from flux_rsa.core.states import Measure, Mount, Offer
from flux_rsa.core.states import RsaState as S

LIMITS = (
    '"limits": {"late_timeout": 600.0, "lock_in": true, "stage_retries": 3, "retry_backoff": 5.0, '
    '"stage_timeout": 21600.0, "holder_timeout": 600.0, "headroom": %s, "granule": 4194304, '
    '"cap": 67108864, "mount_root": ""}'
)
REQUEST = (
    '"request": {"data_in": "/p/in", "data_out": "/p/out", "delay": 300.0, "on_late": "ignore", '
    '"verify": "size"}'
)

#: written by flux-rsa before offer and measure were enums (commit 828cb26):
#: on deck, data_in being measured for sizing
OLD_MEASURING = (
    '{"jobid": 7, "userid": 1000, "nnodes": 1, '
    + REQUEST
    + ', "need": 67108864, "measure": "asked", '
    '"input_bytes": null, "job_state": "ONDECK", "rsa_state": "INITIAL", "reason": null, '
    + LIMITS % "2"
    + ", "
    '"revoked": false, "start_pending": false, "offer": "", "started": false, "env": null, "gen": 0, '
    '"nodes": [], "granted": 0, "ramdisk": null, "stage_seq": 0, "stage_dir": null, "progress": null, '
    '"error": null, "failed": false, "attempts": 0, "retry_pending": false, "state_since": 0.0, '
    '"restages": 0, "output_home": null, "reused": null, "volume": null, "ranks": [], "mount": "", '
    '"mount_path": null, "history": [[0.0, "PENDING", "INITIAL"], [1.0, "ONDECK", "INITIAL"]]}'
)

HISTORY = (
    '[[0.0, "PENDING", "INITIAL"], [1.0, "ONDECK", "INITIAL"], [1.0, "ONDECK", "REQUESTED"], '
    '[2.0, "ONDECK", "ASSIGNED"], [3.0, "ONDECK", "BOOTING"], [4.0, "ONDECK", "BOOTED"], '
    '[4.0, "ONDECK", "STAGING_IN"], [5.0, "ONDECK", "READY"]'
)


def old_staged(job_state, revoked, offer, more_history=""):
    """Staged while pending, its start offered to job-manager (same commit)."""
    return (
        '{"jobid": 8, "userid": 1000, "nnodes": 1, '
        + REQUEST
        + ', "need": 67108864, "measure": "", '
        '"input_bytes": null, "job_state": "%s", "rsa_state": "READY", "reason": null, '
        % job_state
        + LIMITS % "0.0"
        + ', "revoked": %s, "start_pending": false, "offer": "%s", "started": false, '
        '"env": null, "gen": 1, "nodes": ["rsa0"], "granted": 4194304, "ramdisk": "/rd/8", "stage_seq": 1, '
        '"stage_dir": null, "progress": null, "error": null, "failed": false, "attempts": 0, '
        '"retry_pending": false, "state_since": 5.0, "restages": 0, "output_home": null, "reused": null, '
        '"volume": null, "ranks": [], "mount": "", "mount_path": null, "history": '
        % (revoked, offer)
        + HISTORY
        + more_history
        + "]}"
    )


OLD_OFFERED = old_staged("ONDECK", "false", "made")
OLD_WITHDRAWING = old_staged(
    "DEMOTED", "true", "withdrawing", ', [6.0, "DEMOTED", "READY"]'
)


def test_an_old_record_loads_with_its_sub_machines_as_enums_and_saves_unchanged():
    for text in (OLD_MEASURING, OLD_OFFERED, OLD_WITHDRAWING):
        saved = json.loads(text)
        rec = Record.from_dict(saved)
        assert (
            isinstance(rec.offer, Offer)
            and isinstance(rec.measure, Measure)
            and rec.mount is Mount.NONE
        )
        # saved as it was, with the limits added since at their defaults
        # and those dropped since gone (cap, one node for a provider that
        # cannot span them: a default larger than the pool is clamped to
        # what it holds, most, saying so)
        for name in ("handoff_keep", "script_quiet", "most"):
            saved["limits"].setdefault(name, getattr(Limits(), name))
        del saved["limits"]["cap"]
        assert rec.to_dict() == saved
        assert json.loads(json.dumps(rec.to_dict())) == saved


def test_an_old_record_measuring_data_in_goes_on_sizing():
    rec = Record.from_dict(json.loads(OLD_MEASURING))
    assert rec.measure is Measure.ASKED and (rec.job_state, rec.rsa_state) == (
        J.ONDECK,
        S.INITIAL,
    )
    assert inflight.reissue(rec) == [A.Measure(7, path="/p/in", userid=1000)]
    rec, acts = process(rec, E.Measured(2.0, True, nbytes=10 * 2**20))
    assert rec.measure is Measure.NONE and rec.need == 20 * 2**20
    assert (
        rec.rsa_state is S.REQUESTED and [type(a) for a in acts][0] is A.RequestCapacity
    )


def test_an_old_record_with_its_start_offered_starts_with_it():
    rec = Record.from_dict(json.loads(OLD_OFFERED))
    assert rec.offer is Offer.MADE
    assert [type(a) for a in inflight.reissue(rec)] == [A.Offer]
    rec, _ = process(rec, E.OfferTaken(6.0))
    assert (rec.job_state, rec.rsa_state, rec.offer) == (
        J.RUNNING,
        S.INUSE_IN,
        Offer.NONE,
    )
    assert rec.env.staged_in and rec.env.data_in == "/rd/8/in"


def test_an_old_record_withdrawing_its_offer_gives_the_capacity_back_once_withdrawn():
    rec = Record.from_dict(json.loads(OLD_WITHDRAWING))
    assert rec.offer is Offer.WITHDRAWING
    assert inflight.reissue(rec) == [A.Withdraw(8)]
    rec, acts = process(rec, E.Withdrawn(7.0))
    assert (rec.rsa_state, rec.offer) == (S.TEARDOWN, Offer.NONE)
    assert acts[0] == A.CancelHolder(8, gen=1)
