"""One-answer futures let go of their answer at once (service.reactor),
under a real Flux instance with Python's collector off, as the service
runs between its quiet-tick full collections: an RPC's callback, what it
closes over, and a KVS commit's records are freed as soon as the answer
is handled, not at the next full collection."""

import dataclasses
import errno
import gc
import tempfile
import weakref

import pytest
from fake_reactor import Log
from test_pool_helpers import Instance, requires_flux

pytestmark = requires_flux


@pytest.fixture(scope="module")
def h():
    import flux

    with tempfile.TemporaryDirectory(prefix="rsa-answers-") as workdir:
        instance = Instance(workdir)
        try:
            yield flux.Flux(instance.uri)
        finally:
            assert instance.stop() == 0, instance.output()


@pytest.fixture
def no_collector():
    gc.collect()
    gc.disable()
    yield
    gc.enable()


class Kept:
    """What a callback closes over (the service's records, its payloads)."""


def ask(h, topic, answers, kept):
    from flux_rsa.service.reactor import on_answer

    mine = Kept()
    kept.append(weakref.ref(mine))

    def answered(f):
        try:
            answers.append(("ok", f.get(), mine))
        except OSError as exc:
            answers.append(("error", exc.errno, mine))

    on_answer(h.rpc(topic, {}), answered)


def test_answered_rpcs_free_their_callbacks_at_once(h, no_collector):
    answers, kept = [], []
    for _ in range(20):
        ask(h, "broker.ping", answers, kept)
    h.reactor_run()
    assert [kind for kind, _, _ in answers] == ["ok"] * 20
    answers.clear()
    assert [ref() for ref in kept] == [None] * 20


def test_an_rpc_answered_with_an_error_is_freed_too(h, no_collector):
    answers, kept = [], []
    ask(h, "rsa-answers-test.no-such-service", answers, kept)
    h.reactor_run()
    assert [(kind, err) for kind, err, _ in answers] == [("error", errno.ENOSYS)]
    answers.clear()
    assert kept[0]() is None


def test_a_committed_batch_of_records_is_written_and_freed(h, no_collector):
    import flux.kvs

    from flux_rsa.core import Policy, admit, parse_request
    from flux_rsa.core.states import RsaState
    from flux_rsa.service import records

    policy = Policy.from_config(
        {"proportion": 1, "node-capacity": "64M", "granule": "4M"}
    )
    st = records.Store(h, Log())
    refs = []
    for jobid in (101, 102):
        rec = admit(jobid, 1000, 1, parse_request({"data_out": "/out"}), policy, 0.0)
        rec = dataclasses.replace(rec, rsa_state=RsaState.REQUESTED, gen=1)
        st.save(rec)
        refs.append(weakref.ref(rec))
        del rec
    done = []
    st.flush(lambda: done.append(True))
    h.reactor_run()
    assert done == [True]
    assert flux.kvs.get(h, records.key(101))["jobid"] == 101
    assert sorted(records.load(h)) == [101, 102]
    assert [ref() for ref in refs] == [None, None]
