"""Which staged copy of data_in a stage-in may start from (core.reuse)."""

import dataclasses

from flux_rsa.core import Policy, admit
from flux_rsa.core import events as E
from flux_rsa.core import parse_request, process
from flux_rsa.core.record import Env
from flux_rsa.core.reuse import holders_of, replica
from flux_rsa.core.states import RsaState as S

POLICY = Policy.from_config(
    {"proportion": 1, "node-capacity": "64M", "granule": "4M", "reuse": True}
)


def staged(jobid, userid=1000, data_in="/p/in", node="rsa0", **attrs):
    rec = admit(
        jobid,
        userid,
        1,
        parse_request({"data_in": data_in, "data_out": "/p/out", **attrs}),
        POLICY,
        0.0,
    )
    for ev in (
        E.OnDeck(1),
        E.HolderAllocated(2, 1, (node,), rec.need),
        E.HolderStarted(3, 1),
        E.RamdiskBuilt(4, 1, f"/rd/{jobid}"),
        E.StageEnded(5, 1, True),
    ):
        rec, _ = process(rec, ev)
    return rec


def fresh(jobid, node="rsa0", **kw):
    rec = staged(jobid, node=node, **kw)
    return dataclasses.replace(rec, rsa_state=S.BOOTED, ramdisk=f"/rd/{jobid}")


def test_a_staged_job_of_the_same_owner_on_the_node_is_a_replica():
    donor = staged(1)
    assert donor.rsa_state is S.READY
    me = fresh(2)
    assert replica(me, {1: donor, 2: me}) == "/rd/1/in"
    assert holders_of(me, {1: donor, 2: me}) == ["rsa0"]


def test_no_replica_from_another_owner_path_or_node():
    me = fresh(2)
    for donor in (
        staged(1, userid=1001),
        staged(1, data_in="/p/other"),
        staged(1, node="rsa1"),
    ):
        assert replica(me, {1: donor, 2: me}) is None
    assert holders_of(me, {1: staged(1, userid=1001), 2: me}) == []


def test_no_replica_once_the_inputs_are_dropped_or_torn_down():
    donor = staged(1)
    me = fresh(2)
    for state in (S.INUSE_OUT, S.TEARDOWN, S.DESTROYED, S.STAGING_IN):
        gone = dataclasses.replace(donor, rsa_state=state)
        assert replica(me, {1: gone, 2: me}) is None


def test_a_stage_in_script_result_is_no_replica():
    donor = staged(1, stage_in="/bin/true")
    assert replica(fresh(2), {1: donor}) is None


def test_the_record_says_its_inputs_were_reused():
    rec = fresh(2)
    rec = dataclasses.replace(rec, rsa_state=S.STAGING_IN, stage_seq=2)
    rec, acts = process(rec, E.StageEnded(6, 2, True, None, "/rd/1/in"))
    assert rec.rsa_state is S.READY and rec.reused == "/rd/1/in"
    assert any(
        getattr(a, "name", None) == "staged-in" and a.context["reused"] == "/rd/1/in"
        for a in acts
    )


def ended_image(stage_out=None):
    """A one-node image whose job ended, its stage-out running."""
    donor = staged(1, **({"stage_out": stage_out} if stage_out else {}))
    return dataclasses.replace(
        donor,
        rsa_state=S.STAGING_OUT,
        volume={"provider": "tmpfs", "image": "1.img", "store": True},
        stage_dir="out",
        env=Env(
            ramdisk="/mnt/1", data_in="/mnt/1/in", data_out="/mnt/1/out", staged_in=True
        ),
    )


def test_an_image_is_a_replica_only_while_no_one_writes_it():
    me = fresh(2)
    running = dataclasses.replace(ended_image(), rsa_state=S.INUSE_IN, stage_dir=None)
    assert replica(me, {1: running, 2: me}) is None  # its job is the writer
    assert replica(me, {1: ended_image(), 2: me}) == "/rd/1/in"  # read-only
    scripted = ended_image(stage_out="/bin/true")  # a script holds it read-write
    assert replica(me, {1: scripted, 2: me}) is None
    assert holders_of(me, {1: scripted, 2: me}) == []
    held = dataclasses.replace(scripted, rsa_state=S.HELD, stage_dir=None)
    assert replica(me, {1: held, 2: me}) == "/rd/1/in"
