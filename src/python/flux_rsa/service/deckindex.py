"""What an on-deck pass needs besides the queue's head, kept up to date as
records change, so that a pass costs the same however long the queue and
however many records: the engaged jobs (core.ondeck.engaged: holding
capacity or on deck) and the newest measured stage-in rates."""

import collections

from flux_rsa.core import ondeck, rates
from flux_rsa.core.states import RsaState


class DeckIndex:
    def __init__(self, records):
        self.records = records  # the service's (jobid -> Record)
        self.engaged = {j for j, r in records.items() if ondeck.engaged(r)}
        samples = (s for s in map(rates.sample, records.values()) if s is not None)
        self.samples = collections.deque(rates.newest(samples), maxlen=rates.RECENT)

    def changed(self, old, new):
        if ondeck.engaged(new):
            self.engaged.add(new.jobid)
        else:
            self.engaged.discard(new.jobid)
        if new.rsa_state is RsaState.READY and (
            old is None or old.rsa_state is not RsaState.READY
        ):
            sample = rates.sample(new)
            if sample is not None:
                self.samples.append(sample)

    def removed(self, jobid):
        self.engaged.discard(jobid)

    def stage_rate(self, default):
        """core.rates.stage_rate over every record, from the kept samples."""
        return rates.median_rate(self.samples, default)

    def view(self, pending):
        """The records a pass over ``pending`` needs: those of the jobs in
        it and the engaged ones (the same decisions as every record)."""
        seen = {p.jobid for p in pending} | self.engaged
        return {j: self.records[j] for j in seen if j in self.records}
