"""Records to the KVS (service.records), with a stand-in KVS: changes are
committed in batches, one commit at a time; a commit that fails is logged
and made again, and the record lands; a newer change is never overwritten
by the retry of an older one."""

import dataclasses
import errno

import pytest
import test_pool_helpers  # noqa: F401  (puts Flux's Python bindings on the path)
from fake_reactor import FakeReactor, Log

store = pytest.importorskip(
    "flux_rsa.service.records",
    reason="Flux's Python bindings are missing: no service tests",
)

from flux_rsa.core import Policy, admit, parse_request  # noqa: E402
from flux_rsa.core.states import JobState, RsaState  # noqa: E402

DELAY = 0.2


class Future:
    def __init__(self, kvs, ops):
        self.kvs, self.ops = kvs, ops
        self.callback = None
        self.error = None

    def then(self, callback):
        self.callback = callback

    def get(self):
        if self.error is not None:
            raise self.error
        return None


class FakeKVS:
    """Commits wait until the test answers them (``answer``)."""

    def __init__(self):
        self.data = {}
        self.out = []  # futures not answered yet

    def txn(self, h):
        kvs = self

        class Txn:
            def __init__(self):
                self.ops = []

            def put(self, key, value):
                self.ops.append((key, value))

            def unlink(self, key):
                self.ops.append((key, None))

            def commit_async(self):
                f = Future(kvs, self.ops)
                kvs.out.append(f)
                return f

            def commit(self):
                kvs.apply(self.ops)

        return Txn()

    def apply(self, ops):
        for key, value in ops:
            if value is None:
                self.data.pop(key, None)
            else:
                self.data[key] = value

    def answer(self, ok=True):
        f = self.out.pop(0)
        if ok:
            self.apply(f.ops)
        else:
            f.error = OSError(errno.EIO, "Input/output error")
        f.callback(f)


def fresh(jobid, t=0.0):
    """A record just admitted: nothing happened to it yet."""
    policy = Policy.from_config(
        {"proportion": 1, "node-capacity": "64M", "granule": "4M"}
    )
    return admit(jobid, 1000, 1, parse_request({"data_out": "/out"}), policy, t)


def record(jobid, t=0.0):
    """A record that asked for capacity: the KVS must have it."""
    return dataclasses.replace(fresh(jobid, t), rsa_state=RsaState.REQUESTED, gen=1)


def make():
    reactor, log, kvs = FakeReactor(), Log(), FakeKVS()
    return reactor, log, kvs, store.Store(reactor, log, delay=DELAY, txn=kvs.txn)


def test_changes_are_committed_together_after_the_delay():
    reactor, _, kvs, st = make()
    st.save(record(1))
    st.save(record(2))
    reactor.advance(DELAY / 2)
    assert kvs.out == []
    reactor.advance(DELAY)
    assert len(kvs.out) == 1
    kvs.answer()
    assert sorted(kvs.data) == ["rsa.jobs.1", "rsa.jobs.2"]
    assert not st.pending()


def test_a_failed_commit_is_logged_retried_and_the_record_lands():
    reactor, log, kvs, st = make()
    rec = record(1)
    st.save(rec)
    reactor.advance(DELAY)
    kvs.answer(ok=False)
    assert kvs.data == {}
    assert [level for level, _ in log.lines] == ["error"]
    assert (
        "saving 1 record(s) to the KVS failed" in log.lines[0][1]
        and "trying again" in log.lines[0][1]
    )
    assert st.pending()  # still dirty
    reactor.advance(DELAY)  # tried again without any other change
    assert len(kvs.out) == 1
    kvs.answer()
    assert kvs.data == {"rsa.jobs.1": rec.to_dict()}
    assert not st.pending()


def test_the_retry_never_overwrites_a_newer_change():
    reactor, _, kvs, st = make()
    st.save(record(1, t=1.0))
    st.save(record(2, t=1.0))
    st.save_drained({"rsa0": "old"})
    reactor.advance(DELAY)
    newer = record(1, t=2.0)
    st.save(newer)  # while the first commit is out
    st.remove(2)
    st.save_drained({"rsa1": "new"})
    kvs.answer(ok=False)
    reactor.advance(DELAY)
    kvs.answer()
    assert kvs.data == {"rsa.jobs.1": newer.to_dict(), "rsa.drained": {"rsa1": "new"}}


def test_one_commit_at_a_time():
    reactor, _, kvs, st = make()
    st.save(record(1))
    reactor.advance(DELAY)
    st.save(record(2))
    reactor.advance(DELAY * 3)
    assert len(kvs.out) == 1  # the second batch waits for the first
    kvs.answer()
    reactor.advance(DELAY)
    assert len(kvs.out) == 1
    kvs.answer()
    assert sorted(kvs.data) == ["rsa.jobs.1", "rsa.jobs.2"]


def test_flush_sync_writes_what_is_left_at_once():
    reactor, _, kvs, st = make()
    st.save(record(3))
    st.flush_sync()
    assert sorted(kvs.data) == ["rsa.jobs.3"]
    reactor.advance(DELAY)
    assert kvs.out == []  # nothing left to commit


def test_a_fresh_record_is_not_written_until_something_happens_to_it():
    reactor, _, kvs, st = make()
    rec = fresh(1)
    st.save(rec)
    reactor.advance(2 * DELAY)
    assert kvs.out == [] and not st.pending()
    # its first step (a reservation asked for) is written
    st.save(dataclasses.replace(rec, rsa_state=RsaState.REQUESTED, gen=1))
    reactor.advance(2 * DELAY)
    kvs.answer()
    assert kvs.data["rsa.jobs.1"]["rsa_state"] == "REQUESTED"


def test_a_job_that_ends_in_initial_is_written():
    # the replay after a restart shows no ended job: its record must be kept
    reactor, _, kvs, st = make()
    st.save(dataclasses.replace(fresh(2), job_state=JobState.CANCELED))
    reactor.advance(2 * DELAY)
    kvs.answer()
    assert kvs.data["rsa.jobs.2"]["job_state"] == "CANCELED"


def test_a_record_reset_to_initial_after_a_reservation_is_written():
    # DESTROYED -> INITIAL (demoted, then on deck again): it held a RAM
    # disk (gen 1), and the KVS must not keep the older state
    reactor, _, kvs, st = make()
    st.save(dataclasses.replace(fresh(3), gen=1))
    reactor.advance(2 * DELAY)
    kvs.answer()
    assert kvs.data["rsa.jobs.3"]["gen"] == 1
