"""A RAM disk the compute nodes attach (spanning RSA nodes): attached where
the job runs before it starts, a failed attach, a detach before the outputs
go home (test_core_machine.py has the helpers)."""

from test_core_machine import job, kinds, run

from flux_rsa.core import Policy
from flux_rsa.core import actions as A
from flux_rsa.core import events as E
from flux_rsa.core.states import RsaState as S

SPANNING = Policy.from_config(
    {
        "proportion": 1,
        "node-capacity": "64M",
        "granule": "4M",
        "provider": "glusterfs",
        "mount-root": "/mnt/rsa",
    }
)
VOLUME = {
    "name": "7.1",
    "servers": ["rsa0:24100", "rsa1:24101"],
    "user": "rsa-7-1",
    "secret": "x" * 24,
}


def spanning_ready():
    rec = job(policy=SPANNING)
    rec, _ = run(
        rec,
        E.OnDeck(1),
        E.HolderAllocated(2, 1, ("rsa0", "rsa1"), rec.need),
        E.HolderStarted(3, 1),
        E.RamdiskBuilt(4, 1, "/rd/7.1", VOLUME),
        E.StageEnded(5, 1, True),
    )
    assert rec.rsa_state is S.READY and rec.volume == VOLUME
    return rec


def test_a_spanning_ramdisk_is_attached_where_the_job_runs_before_it_starts():
    rec = spanning_ready()
    assert "Offer" not in kinds(run(rec, E.OnDeck(6))[1])  # no start without the attach
    rec, acts = run(rec, E.Starting(6, ranks=(0, 1)))
    assert kinds(acts) == ["Attach"]
    assert (acts[0].ranks, acts[0].root, acts[0].name, acts[0].volume) == (
        (0, 1),
        "/mnt/rsa",
        "7.1",
        VOLUME,
    )
    rec, acts = run(rec, E.Attached(7, True))
    env = acts[0].env
    assert kinds(acts)[0] == "ReplyStart"
    # the job is told where its compute nodes see it; the stager keeps the RSA side
    assert (env.ramdisk, env.data_in, env.data_out) == (
        "/mnt/rsa/7.1",
        "/mnt/rsa/7.1/in",
        "/mnt/rsa/7.1/out",
    )
    rec, acts = run(rec, E.Finished(8))
    assert kinds(acts) == ["Detach"] and rec.rsa_state is S.INUSE_IN
    assert (acts[0].root, acts[0].name) == ("/mnt/rsa", "7.1")
    rec, acts = run(rec, E.Detached(9, True))
    stage = next(a for a in acts if isinstance(a, A.StartStage))
    assert (stage.direction, stage.src) == ("out", "/rd/7.1/out")
    rec, _ = run(rec, E.StageEnded(10, 2, True), E.HolderEnded(11, 1))
    assert rec.final


def test_a_failed_attach_starts_the_job_on_its_directories():
    rec, acts = run(
        spanning_ready(),
        E.Starting(6, ranks=(0, 1)),
        E.Attached(7, False, "rank 1 (node1): mount failed"),
    )
    reply = next(a for a in acts if isinstance(a, A.ReplyStart))
    assert (reply.env.ramdisk, reply.env.data_in, reply.env.data_out) == (
        None,
        "/p/in",
        "/p/out",
    )
    assert (
        "rank 1 (node1): mount failed" in rec.error
        and "uses its directories" in rec.error
    )
    assert rec.rsa_state is S.TEARDOWN and "Detach" not in kinds(acts)


def test_a_job_cancelled_while_attached_detaches_before_its_outputs_go_home():
    rec, _ = run(spanning_ready(), E.Starting(6, ranks=(0, 1)), E.Attached(7, True))
    rec, acts = run(rec, E.Finished(8))  # a cancelled running job ends like any other
    assert kinds(acts) == ["Detach"]
    rec, acts = run(rec, E.Detached(9, False, "rank 0 (node0): busy"))
    # the outputs are staged out all the same; the leftover mount is said
    assert "StartStage" in kinds(acts) and "rank 0 (node0): busy" in rec.error
