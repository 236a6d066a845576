"""The service's records (``core.Record``, one per RSA job): kept in the
KVS (``load``, ``Store``: batched commits, a failed one made again),
indexed for the on-deck pass as they change (``DeckIndex``), and shown to
whom may see them (``status``, ``check_request``).
"""


import collections
import errno

import flux.job
import flux.kvs

from flux_rsa.core import Record, accepts, ondeck
from flux_rsa.core.states import RsaState
from flux_rsa.service.reactor import Timer, on_answer

# --- In the KVS --------------------------------------------------------------
# Records in the KVS: ``rsa.jobs.<jobid>`` holds one record as JSON.
#
# Writes are batched: the service marks records dirty and ``flush`` commits
# them in one transaction; a record is the truth after a restart, so a commit
# that fails is made again. A fresh record (``Record.fresh``: just admitted,
# nothing happened yet) is not written: the replay of the journal after a
# restart admits its job again.

DIR = "rsa.jobs"
DRAINED = "rsa.drained"


def key(jobid):
    return f"{DIR}.{jobid}"


def load(h):
    """Every stored record, by jobid."""
    if not flux.kvs.exists(h, DIR):
        return {}
    records = {}
    for name, value in flux.kvs.get_dir(h, DIR).items():
        try:
            rec = Record.from_dict(value)
        except (KeyError, TypeError, ValueError) as exc:
            h.log(3, f"rsa: ignoring unreadable record {key(name)}: {exc}")
            continue
        records[rec.jobid] = rec
    return records


def load_drained(h):
    """RSA nodes the instance owner drained: {host: reason}."""
    try:
        value = flux.kvs.get(h, DRAINED)
    except (OSError, FileNotFoundError):
        return {}
    return dict(value) if isinstance(value, dict) else {}


class Store:
    """Records (and the drained set) waiting to be written.  Changes are
    committed at most once per ``delay`` seconds, one commit at a time
    (armed by every change); a commit that fails leaves what it carried to be written
    again (unless it changed meanwhile) and is tried again ``delay`` later."""

    def __init__(self, h, log, delay=0.0, txn=None):
        self.h = h
        self.log = log
        self.txn = txn or flux.kvs.KVSTxn  # txn(h): a KVS transaction
        self.dirty = {}
        self.removed = set()
        self.inflight = 0
        self.drained = None  # a new drained set to write
        self.timer = Timer(h, log, "saving records", self._timed, after=delay)

    def save_drained(self, drained):
        self.drained = dict(drained)
        self.arm()

    def save(self, rec):
        if rec.fresh:
            return
        self.dirty[rec.jobid] = rec
        self.removed.discard(rec.jobid)
        self.arm()

    def remove(self, jobid):
        self.dirty.pop(jobid, None)
        self.removed.add(jobid)
        self.arm()

    def pending(self):
        return bool(self.dirty or self.removed or self.drained is not None)

    def arm(self):
        """Commit what changed soon (batched)."""
        if self.pending():
            self.timer.arm()

    def _timed(self):
        if self.inflight:
            self.arm()  # one commit at a time: the next batch waits
            return
        self.flush(lambda: None)

    def _take(self):
        """What is to be written, as (dirty, removed, drained); cleared here."""
        batch = (self.dirty, self.removed, self.drained)
        self.dirty, self.removed, self.drained = {}, set(), None
        return batch

    def _txn(self, batch):
        dirty, removed, drained = batch
        txn = self.txn(self.h)
        if drained is not None:
            txn.put(DRAINED, drained)
        for jobid, rec in dirty.items():
            txn.put(key(jobid), rec.to_dict())
        for jobid in removed:
            txn.unlink(key(jobid))
        return txn

    def _failed(self, batch):
        """Keep what a failed commit carried, unless newer changes replace it."""
        dirty, removed, drained = batch
        for jobid, rec in dirty.items():
            if jobid not in self.dirty and jobid not in self.removed:
                self.dirty[jobid] = rec
        for jobid in removed:
            if jobid not in self.dirty:
                self.removed.add(jobid)
        if drained is not None and self.drained is None:
            self.drained = drained

    def flush_sync(self):
        """Commit what changed and wait for it (module unload)."""
        self.timer.stop()
        if self.pending():
            self._txn(self._take()).commit()

    def flush(self, then):
        """Commit what changed, then call ``then()`` (at once if nothing did)."""
        if not self.pending():
            then()
            return
        batch = self._take()
        future = self._txn(batch).commit_async()
        self.inflight += 1

        def committed(f):
            self.inflight -= 1
            try:
                f.get()
            except OSError as exc:
                count = len(batch[0]) + len(batch[1])
                self.log.error(
                    f"rsa: saving {count} record(s) to the KVS failed: {exc}; "
                    f"trying again in {self.timer.after:g}s"
                )
                self._failed(batch)
                self.arm()
            then()

        on_answer(future, committed)


# --- Indexed for the on-deck pass --------------------------------------------
# What an on-deck pass needs besides the queue's head, kept up to date as
# records change, so that a pass costs the same however long the queue and
# however many records: the engaged jobs (core.ondeck.engaged: holding
# capacity or on deck) and the newest measured stage-in rates.


class DeckIndex:
    def __init__(self, records):
        self.records = records  # the service's (jobid -> Record)
        self.engaged = {j for j, r in records.items() if ondeck.engaged(r)}
        samples = (s for s in map(ondeck.sample, records.values()) if s is not None)
        self.samples = collections.deque(ondeck.newest(samples), maxlen=ondeck.RECENT)

    def changed(self, old, new):
        if ondeck.engaged(new):
            self.engaged.add(new.jobid)
        else:
            self.engaged.discard(new.jobid)
        if new.rsa_state is RsaState.READY and (
            old is None or old.rsa_state is not RsaState.READY
        ):
            sample = ondeck.sample(new)
            if sample is not None:
                self.samples.append(sample)

    def removed(self, jobid):
        self.engaged.discard(jobid)

    def stage_rate(self, default):
        """core.ondeck.stage_rate over every record, from the kept samples."""
        return ondeck.median_rate(self.samples, default)

    def view(self, pending):
        """The records a pass over ``pending`` needs: those of the jobs in
        it and the engaged ones (the same decisions as every record)."""
        seen = {p.jobid for p in pending} | self.engaged
        return {j: self.records[j] for j in seen if j in self.records}


# --- Who may see a record ----------------------------------------------------
# Who may see and act on a job's record: its owner, and the instance owner.
# Others are told there is no record (not that it is someone else's).


def visible(rec, userid, owner):
    return owner or rec.userid == userid


def shown(rec):
    """A record as `flux rsa status` shows it: without the secret that lets
    a client mount its RAM disk."""
    d = rec.to_dict()
    if d.get("volume"):
        d["volume"] = {k: v for k, v in d["volume"].items() if k != "secret"}
    return d


def status(records, jobids, userid, owner):
    """The records of ``jobids`` (all when empty) the caller may see."""
    recs = (
        [records[j] for j in jobids if j in records]
        if jobids
        else list(records.values())
    )
    return [shown(r) for r in recs if visible(r, userid, owner)]


def check_request(rec, jobid, event, userid, owner):
    """Raise OSError unless the caller may ask ``event`` of job ``jobid``
    (record ``rec``, None when there is none) and its record accepts it."""
    if rec is None or not visible(rec, userid, owner):
        raise OSError(
            errno.ENOENT,
            f"{flux.job.JobID(jobid).f58}: no RSA record for this job (or not yours)",
        )
    if not accepts(rec, event):
        raise OSError(
            errno.EINVAL,
            f"{flux.job.JobID(jobid).f58}: not possible in {rec.job_state}/{rec.rsa_state}",
        )
