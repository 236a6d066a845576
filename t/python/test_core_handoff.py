"""The workflow hand-off in the core: which job may read which RAM disk,
what a consumer waits for, and how long a producer's RAM disk stays."""

import dataclasses

import pytest
from test_core_table import run

from flux_rsa.core import Policy
from flux_rsa.core import actions as A
from flux_rsa.core import admit
from flux_rsa.core import events as E
from flux_rsa.core import handoff, parse_request
from flux_rsa.core.states import Mount
from flux_rsa.core.states import RsaState as S

POLICY = Policy.from_config(
    {"proportion": 1, "node-capacity": "64M", "granule": "4M", "handoff-keep": "5m"}
)


def running_producer(data_out="/p/step1", userid=1000, stage_out=None):
    """Job 7: runs on RSA node rsa0, writing to its output area."""
    attrs = {"data_out": data_out, "on_late": "wait"}
    if stage_out:
        attrs["stage_out"] = stage_out
    rec = admit(7, userid, 1, parse_request(attrs), POLICY, 0.0)
    return run(
        rec,
        E.OnDeck(1),
        E.HolderAllocated(2, 1, ("rsa0",), 4 << 20),
        E.HolderStarted(3, 1),
        E.RamdiskBuilt(4, 1, "/rd/7.1"),
        E.Starting(5, ranks=(0,)),
    )[0]


def producer(data_out="/p/step1", userid=1000, stage_out=None):
    """Job 7 once it has ended."""
    return run(running_producer(data_out, userid, stage_out), E.Finished(6))[0]


def consumer(data_in="/p/step1", userid=1000, **more):
    attrs = {"data_in": data_in, "data_out": "/p/step2", **more}
    return admit(9, userid, 1, parse_request(attrs), POLICY, 0.0)


def test_a_consumer_reads_the_output_area_of_its_producer_once_it_has_ended():
    a = producer()
    assert a.rsa_state is S.STAGING_OUT and handoff.sealed(a)
    assert handoff.source(a, consumer()) == "/rd/7.1/out"
    assert handoff.source(a, consumer("/p/step1/part")) == "/rd/7.1/out/part"


def test_no_hand_off_across_owners_scripts_opt_out_or_other_directories():
    a = producer()
    assert handoff.source(a, consumer(userid=1001)) is None
    assert handoff.source(a, consumer(handoff="off")) is None
    assert handoff.source(a, consumer(stage_in="tar")) is None
    assert handoff.source(a, consumer("/p/step10")) is None
    assert handoff.source(producer(stage_out="tar"), consumer()) is None


def linked(remote=False):
    b = run(
        consumer(),
        E.Handoff(
            7, producer=7, name="f7", area="/rd/7.1/out", node="rsa0", remote=remote
        ),
    )[0]
    return b


def placed(node, remote=False):
    """A linked consumer whose reservation was allocated on ``node``."""
    return run(
        linked(remote),
        E.OnDeck(8),
        E.HolderAllocated(9, 1, (node,), 4 << 20),
        E.HolderStarted(10, 1),
    )[0]


def test_a_consumer_placed_beside_the_producer_stages_from_its_ramdisk():
    b, acts = run(placed("rsa0"), E.RamdiskBuilt(11, 1, "/rd/9.1"))
    [stage] = [a for a in acts if isinstance(a, A.StartStage)]
    assert stage.src == "/rd/7.1/out" and stage.dst == "/rd/9.1/in"


def test_placed_elsewhere_it_waits_for_the_outputs_home_then_reads_data_in():
    b = run(placed("rsa1"), E.RamdiskBuilt(11, 1, "/rd/9.1"))[0]
    assert b.rsa_state is S.BOOTED  # not a part of data_in
    b, acts = run(b, E.ProducerChanged(12, on_ramdisk=True, verdict=True))
    [stage] = [a for a in acts if isinstance(a, A.StartStage)]
    assert b.rsa_state is S.STAGING_IN and stage.src == "/p/step1"


def test_placed_elsewhere_it_reads_a_producer_served_as_a_volume_there():
    assert handoff.may_read_ramdisk(linked(remote=True))
    b = placed("rsa1", remote=True)
    assert not handoff.served(b)  # the producer's RAM disk stays for it
    b, acts = run(b, E.RamdiskBuilt(11, 1, "/rd/9.1"))
    [stage] = [a for a in acts if isinstance(a, A.StartStage)]
    assert b.rsa_state is S.STAGING_IN and stage.src == "/rd/7.1/out"
    assert handoff.across(b)
    b, acts = run(b, E.StageEnded(12, b.stage_seq, True))
    [posted] = [a for a in acts if isinstance(a, A.PostEvent)]
    assert posted.context["handoff"] == "f7" and handoff.served(b)


def test_a_remote_producer_lost_sends_a_consumer_elsewhere_to_data_in():
    b = run(
        placed("rsa1", remote=True),
        E.ProducerChanged(11, on_ramdisk=False, verdict=None),
        E.RamdiskBuilt(12, 1, "/rd/9.1"),
    )[0]
    assert b.rsa_state is S.BOOTED and handoff.served(b)
    b, acts = run(b, E.ProducerChanged(13, on_ramdisk=False, verdict=True))
    [stage] = [a for a in acts if isinstance(a, A.StartStage)]
    assert stage.src == "/p/step1"


def test_flux_rsa_status_says_where_a_consumer_will_read_its_inputs():
    pytest.importorskip(
        "flux",
        reason="no Flux (flux-core not installed): `flux rsa status` needs flux.util",
    )
    from flux_rsa.cli import views

    def note(remote, node):
        return views.RsaJob(placed(node, remote).to_dict()).note

    assert note(False, "rsa0") == "inputs from f7's RAM disk, when staged"
    assert note(True, "rsa1") == "inputs from f7's RAM disk, when staged"
    assert note(False, "rsa1") == "inputs from data_in once f7's outputs are home"


def test_a_starting_consumer_is_held_and_never_given_a_part_of_data_in():
    b, acts = run(linked(), E.Starting(8, ranks=(1,)))
    assert not any(isinstance(a, A.ReplyStart) for a in acts)
    b, acts = run(b, E.LateTimeout(9))
    assert not b.failed  # the late timer does not send it to data_in


def test_outputs_that_never_come_home_end_the_consumer_with_an_exception():
    b, acts = run(
        linked(), E.ProducerChanged(8, on_ramdisk=False, verdict="released without")
    )
    [exc] = [a for a in acts if isinstance(a, A.RaiseException)]
    assert exc.type == "dependency" and "f7" in exc.note and b.failed


def test_a_failed_stage_from_the_producer_falls_back_to_data_in_without_a_try_lost():
    b = run(placed("rsa0"), E.RamdiskBuilt(11, 1, "/rd/9.1"))[0]
    b, _ = run(b, E.StageEnded(12, 1, False, error="gone"))
    assert b.rsa_state is S.ABORTED and b.handoff.failed and b.attempts == 0
    assert not handoff.inputs_whole(b)  # until the producer's outputs are home


def test_a_producer_with_readers_is_kept_after_its_outputs_are_home():
    a = run(producer(), E.ConsumerAdded(7, consumer=9))[0]
    a, acts = run(a, E.StageEnded(8, a.stage_seq, True))
    assert a.rsa_state is S.KEPT and a.output_home is True
    [timer] = [t for t in acts if isinstance(t, A.StartTimer)]
    assert timer.seconds == 300.0  # handoff-keep
    a, acts = run(a, E.ConsumerGone(9, consumer=9))
    assert a.rsa_state is S.TEARDOWN and any(
        isinstance(x, A.CancelHolder) for x in acts
    )


def test_handoff_keep_over_the_kept_ramdisk_goes():
    a = run(producer(), E.ConsumerAdded(7, consumer=9))[0]
    a = run(a, E.StageEnded(8, a.stage_seq, True))[0]
    a, acts = run(a, E.Timeout(400, state="KEPT", since=a.state_since))
    assert a.rsa_state is S.TEARDOWN


def test_without_readers_a_producer_goes_as_before():
    a = producer()
    a, _ = run(a, E.StageEnded(8, a.stage_seq, True))
    assert a.rsa_state is S.TEARDOWN


def test_a_consumer_is_linked_while_its_producer_runs_and_stages_in_once_it_ended():
    a = running_producer()
    assert handoff.writing(a) and not handoff.sealed(a)
    assert handoff.source(a, consumer()) is None  # not final yet
    assert handoff.source(a, consumer(), early=True) == "/rd/7.1/out"
    assert handoff.view(a) == (False, None, True)
    b = run(
        consumer(),
        E.Handoff(
            7, producer=7, name="f7", area="/rd/7.1/out", node="rsa0", writing=True
        ),
    )[0]
    assert not handoff.served(b)  # the producer's RAM disk must stay for it
    assert handoff.may_read_ramdisk(b)
    # its RAM disk is made while the producer runs; its stage-in waits
    b, acts = run(
        b,
        E.OnDeck(8),
        E.HolderAllocated(9, 1, ("rsa0",), 4 << 20),
        E.HolderStarted(10, 1),
        E.RamdiskBuilt(11, 1, "/rd/9.1"),
    )
    assert b.rsa_state is S.BOOTED
    assert not any(isinstance(x, A.StartStage) for x in acts)
    b, acts = run(b, E.Starting(12, ranks=(1,)))
    assert not any(isinstance(x, A.ReplyStart) for x in acts)  # never on a part
    ended = run(a, E.Finished(13))[0]
    # an image's last writes reach it as its compute nodes let go of it
    letting_go = dataclasses.replace(ended, mount=Mount.DETACHING)
    assert handoff.writing(letting_go) and not handoff.sealed(letting_go)
    assert handoff.source(letting_go, consumer()) is None
    on_ramdisk, verdict, writing = handoff.view(ended)
    assert on_ramdisk and not writing
    b, acts = run(
        b,
        E.ProducerChanged(14, on_ramdisk=on_ramdisk, verdict=verdict, writing=writing),
    )
    [stage] = [x for x in acts if isinstance(x, A.StartStage)]
    assert b.rsa_state is S.STAGING_IN and stage.src == "/rd/7.1/out"


def test_a_producer_that_ends_without_its_ramdisk_sends_an_early_consumer_to_data_in():
    b = run(
        consumer(),
        E.Handoff(
            7, producer=7, name="f7", area="/rd/7.1/out", node="rsa0", writing=True
        ),
        E.OnDeck(8),
        E.HolderAllocated(9, 1, ("rsa0",), 4 << 20),
        E.HolderStarted(10, 1),
        E.RamdiskBuilt(11, 1, "/rd/9.1"),
        # its RAM disk lost as it ended: outputs not final anywhere yet
        E.ProducerChanged(12, on_ramdisk=False, verdict=None, writing=False),
    )[0]
    assert b.rsa_state is S.BOOTED and handoff.served(b)
    b, acts = run(b, E.ProducerChanged(13, on_ramdisk=False, verdict=True))
    [stage] = [x for x in acts if isinstance(x, A.StartStage)]
    assert stage.src == "/p/step1"
