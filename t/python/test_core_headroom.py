"""Headroom: data_in measured before a job can go on deck, and what a
measurement changes (test_core_machine.py has the helpers)."""

from test_core_machine import BOTH, job, kinds, run

from flux_rsa.core import Policy
from flux_rsa.core import actions as A
from flux_rsa.core import events as E
from flux_rsa.core.states import Measure
from flux_rsa.core.states import RsaState as S

HEADROOM = Policy.from_config(
    {"proportion": 1, "node-capacity": "64M", "granule": "4M", "headroom": 1.5}
)


def sized_job(attrs=BOTH):
    from flux_rsa.core import settle

    return settle(job(attrs, policy=HEADROOM), E.Event(0.0))


def test_headroom_measures_data_in_before_the_job_can_go_on_deck():
    rec, acts = sized_job()
    assert rec.measure is Measure.ASKED
    assert acts == [A.Measure(7, path="/p/in", userid=1000)]
    # on deck before the size is known: no reservation is asked for yet
    rec, acts = run(rec, E.OnDeck(1))
    assert rec.rsa_state is S.INITIAL and "RequestCapacity" not in kinds(acts)
    rec, acts = run(rec, E.Measured(2, True, 10 * 2**20))
    assert (rec.measure, rec.input_bytes) == (Measure.NONE, 10 * 2**20)
    assert rec.need == 16 * 2**20  # 15 MiB rounded up to whole 4M granules
    assert rec.rsa_state is S.REQUESTED and acts[0] == A.RequestCapacity(
        7, gen=1, need=16 * 2**20, userid=1000
    )


def test_headroom_falls_back_to_the_proportion_rule_when_measuring_fails():
    rec, _ = sized_job()
    rec, acts = run(
        rec, E.Measured(1, False, 0, "rsa.data_in: /p/in: Permission denied")
    )
    assert rec.need == 64 * 2**20 and rec.measure is Measure.NONE
    assert "Permission denied" in rec.error and "proportion rule" in rec.error


def test_an_explicit_capacity_is_never_measured():
    rec, acts = sized_job({**BOTH, "capacity": "8M"})
    assert rec.measure is Measure.NONE and acts == [] and rec.need == 8 * 2**20


def test_a_late_measurement_changes_nothing():
    rec, _ = run(job(), E.Measured(1, True, 2**30))
    assert rec.need == 64 * 2**20
