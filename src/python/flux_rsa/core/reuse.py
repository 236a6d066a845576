"""Reuse of staged inputs (the cache-affinity idea, seed 003; LSF's data
cache): a job whose ``data_in`` is already on an RSA node, staged for
another job of the same owner, copies it from that RAM disk instead of
reading persistent storage again.

Pure: which staged copy (a *replica*) a stage-in may start from.  The
stager still compares the replica with ``data_in`` (names, types, sizes,
modes, mtimes, as ``rsync -a`` does) and reads ``data_in`` itself when they
differ, so a replica is only ever a faster source of the same bytes.
"""

from flux_rsa.core.record import IN_AREA
from flux_rsa.core.states import Mount, RsaState

S = RsaState

#: the donor's staged inputs are on its RAM disk in these states
INPUTS_PRESENT = frozenset({S.READY, S.INUSE_IN})
#: after the job ended, until its RAM disk is torn down
AFTER_END = frozenset({S.STAGING_OUT, S.HELD})


def has_inputs(rec):
    """True while ``rec``'s RAM disk holds a complete staged copy of data_in
    that another stage may read.  An image is read only once its job has
    ended and its compute node let go of it: only one writer at a time,
    and the job (or its start, any moment) is that writer; so is a user's
    stage-out script while it runs (the built-in stage-out only reads)."""
    if rec.ramdisk is None or rec.request.stage_in is not None:
        return False  # a stage-in script's result is not a copy of data_in
    if rec.volume is not None and rec.volume.get("image") is not None:
        if rec.rsa_state not in AFTER_END or rec.mount is not Mount.NONE:
            return False
        if rec.stage_dir == "out" and rec.request.stage_out is not None:
            return False  # (a stage-out script holds its image read-write)
        if len(rec.volume.get("images") or ()) > 1:
            return False  # (a copy in each node's image: the stage-in reads data_in)
    if rec.rsa_state in INPUTS_PRESENT:
        return True
    if rec.rsa_state in AFTER_END:
        staged = rec.env is not None and rec.env.staged_in
        return staged and all(t.rsa_state is not S.INUSE_OUT for t in rec.history)
    return False


def donors(rec, records):
    """Other jobs of the same owner whose RAM disks hold ``rec``'s data_in,
    in jobid order (none for a job with a stage-in script)."""
    if rec.request.data_in is None or rec.request.stage_in is not None:
        return []
    return [
        o
        for o in sorted(records.values(), key=lambda r: r.jobid)
        if o.jobid != rec.jobid
        and o.userid == rec.userid
        and o.nodes
        and o.request.data_in == rec.request.data_in
        and has_inputs(o)
    ]


def replica(rec, records):
    """The IN area of a donor's RAM disk on ``rec``'s first node (None: copy
    from data_in)."""
    here = [o for o in donors(rec, records) if rec.nodes and o.nodes[0] == rec.nodes[0]]
    return f"{here[0].ramdisk}/{IN_AREA}" if here else None


def holders_of(rec, records):
    """RSA nodes that hold a staged copy of ``rec``'s data_in (for placing
    its reservation next to it)."""
    return sorted({o.nodes[0] for o in donors(rec, records)})
