"""Records in the KVS: ``rsa.jobs.<jobid>`` holds one record as JSON.

Writes are batched: the service marks records dirty and ``flush`` commits
them in one transaction; a record is the truth after a restart.
"""

import flux.kvs

from flux_rsa.core import Record

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
    def __init__(self, h, log):
        self.h = h
        self.log = log
        self.dirty = {}
        self.removed = set()
        self.inflight = 0
        self.drained = None  # a new drained set to write

    def save_drained(self, drained):
        self.drained = dict(drained)

    def save(self, rec):
        self.dirty[rec.jobid] = rec
        self.removed.discard(rec.jobid)

    def remove(self, jobid):
        self.dirty.pop(jobid, None)
        self.removed.add(jobid)

    def pending(self):
        return bool(self.dirty or self.removed or self.drained is not None)

    def _txn(self):
        txn = flux.kvs.KVSTxn(self.h)
        if self.drained is not None:
            txn.put(DRAINED, self.drained)
            self.drained = None
        for jobid, rec in self.dirty.items():
            txn.put(key(jobid), rec.to_dict())
        for jobid in self.removed:
            txn.unlink(key(jobid))
        count = len(self.dirty) + len(self.removed)
        self.dirty, self.removed = {}, set()
        return txn, count

    def flush_sync(self):
        """Commit what changed and wait for it."""
        if self.pending():
            txn, _ = self._txn()
            txn.commit()

    def flush(self, then):
        """Commit what changed, then call ``then()`` (at once if nothing did)."""
        if not self.pending():
            then()
            return
        txn, count = self._txn()
        future = txn.commit_async()
        self.inflight += 1

        def committed(f):
            self.inflight -= 1
            try:
                f.get()
            except OSError as exc:
                self.log.error(f"rsa: saving {count} record(s) to the KVS failed: {exc}")
            then()

        future.then(committed)
