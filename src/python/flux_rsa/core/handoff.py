"""The workflow hand-off: a job whose inputs are another job's outputs
reads them from that job's RAM disk.

A *producer* A is an RSA job whose outputs are on its RAM disk; a
*consumer* B is a job of the same owner whose ``rsa.data_in`` is A's
``rsa.data_out`` (or a directory inside it) and that waits for A's
outputs (``afterstaged``, said or implied: see the jobtap plugin's
``afterstaged.c``).  Once A's job has ended its outputs on the RAM disk
are final: B's wait ends then, not when A's stage-out is done, and B's
stage-in copies from A's RAM disk while A's stage-out copies the same
files to ``data_out``.  Final means also that A's compute nodes have let
go of its RAM disk (an image holds its last writes only then).  B is
linked to A earlier, while A's outputs are still being written there
(``writing``): B, still waiting, is then put on deck (placed beside A,
its RAM disk made), and only its stage-in waits for them to be final.
A's RAM disk stays (its capacity held, in the KEPT state once its
outputs are home) until every consumer has its inputs, bounded by
``[rsa] handoff-keep``.  A consumer placed on another RSA node reads
A's RAM disk there through its volume (a RAM disk served to compute
nodes).  A consumer that cannot read A's RAM disk (placed on
another RSA node than a RAM disk only its node sees, or lost) waits
until A's outputs are home and reads ``data_in`` as any job does; if they
never come home it never starts on a part of them.

Pure: questions about records, answered from records.
"""

from flux_rsa.core.outputs import after_staged
from flux_rsa.core.record import OUT_AREA
from flux_rsa.core.states import LET_GO, JobState, RsaState

S = RsaState

#: a producer's outputs are on its RAM disk, final, in these states once
#: its job has ended (before its stage-out, during it, held, or kept)
SEALED = frozenset({S.INUSE_IN, S.INUSE_OUT, S.ABORTED, S.STAGING_OUT, S.HELD, S.KEPT})


def _inside(path, top):
    return path == top or path.startswith(top.rstrip("/") + "/")


def _outputs_there(a):
    return a.ramdisk is not None and a.env is not None and a.env.out_on_ramdisk


def sealed(a):
    """A's job has ended, its compute nodes have let go of its RAM disk
    (an image's last writes are in it), and its outputs, final, are there."""
    return (
        a.job_state is JobState.FINISHED
        and a.rsa_state in SEALED
        and a.mount in LET_GO
        and _outputs_there(a)
    )


def writing(a):
    """A's outputs are still being written on its RAM disk: its job runs
    with its output area there, or has ended and its compute nodes still
    hold the RAM disk.  They will be final there (``sealed``) next."""
    if not _outputs_there(a):
        return False
    if a.job_state is JobState.RUNNING:
        return a.rsa_state in (S.INUSE_IN, S.INUSE_OUT)
    return (
        a.job_state is JobState.FINISHED
        and a.rsa_state in SEALED
        and a.mount not in LET_GO
    )


def source(a, b, early=False):
    """The directory on A's RAM disk holding what B will find at its
    data_in, when B may receive it from there (``early``: will, once A's
    outputs, still being written, are final); else None.  Only copies
    qualify: A's stage-out and B's stage-in both plain copies (a script
    or tar would make data_out or data_in something other than A's output
    area), the same owner, B not opted out."""
    ra, rb = a.request, b.request
    if a.jobid == b.jobid or a.userid != b.userid:
        return None
    if rb.handoff == "off" or rb.stage_in is not None or ra.stage_out is not None:
        return None
    if (
        rb.data_in is None
        or ra.data_out is None
        or not _inside(rb.data_in, ra.data_out)
    ):
        return None
    if not (writing(a) if early else sealed(a)) or not a.nodes:
        return None
    if len((a.volume or {}).get("images") or ()) > 1:
        return None  # its outputs are spread over its nodes' images: data_out has them whole
    rel = rb.data_in[len(ra.data_out.rstrip("/")) :]
    return a.area(OUT_AREA) + rel.rstrip("/") if rel.strip("/") else a.area(OUT_AREA)


def view(a):
    """(on_ramdisk, verdict, writing): what a consumer needs to know of
    producer A (``a`` None: the producer's record is gone)."""
    if a is None:
        return False, "the RSA has no record of it any more", False
    verdict = True if a.output_home is True else after_staged(a)
    return sealed(a), verdict, writing(a)


def across(b):
    """B's reservation is on another RSA node than its producer's RAM disk."""
    return bool(b.nodes) and b.nodes[0] != b.handoff.node


def reads_ramdisk(b):
    """The producer's RAM disk directory B's stage-in copies from, or None
    (no hand-off, lost, a stage from it failed, or B placed on another RSA
    node than a RAM disk only its own node sees).  From another RSA node
    the stage-in mounts the producer's volume (``remote``) and reads it
    there, as the producer's compute nodes did."""
    h = b.handoff
    if h is None or not h.on_ramdisk or h.failed or not b.nodes:
        return None
    return h.area if h.remote or not across(b) else None


def may_read_ramdisk(b):
    """B is to read its producer's RAM disk: it can, or will once its
    reservation is placed (next to it, ``service.workflow``) or its
    producer's outputs are final."""
    h = b.handoff
    if h is None or not (h.on_ramdisk or h.writing) or h.failed:
        return False
    return h.remote or not across(b)


def inputs_whole(b):
    """B may stage in now: from its producer's RAM disk, or from data_in
    once the producer's outputs are home (or B is no consumer at all)."""
    return (
        b.handoff is None or reads_ramdisk(b) is not None or b.handoff.verdict is True
    )


def never_whole(b):
    """Why B's inputs will never be whole (its producer's outputs were
    never staged out and its RAM disk is gone), or None."""
    h = b.handoff
    if h is None or not isinstance(h.verdict, str):
        return None
    if reads_ramdisk(b) is not None or (b.env is not None and b.env.staged_in):
        return None
    return h.verdict


def served(b):
    """B no longer needs its producer's RAM disk: it has its inputs, cannot
    read it, or will never run."""
    if b.handoff is None:
        return True
    if b.job_state in (JobState.FINISHED, JobState.CANCELED) or b.failed:
        return True
    if b.handoff.failed or not (b.handoff.on_ramdisk or b.handoff.writing):
        return True
    if across(b) and not b.handoff.remote:
        return True  # placed where it cannot read it: it reads data_in once home
    return any(t.rsa_state is S.READY for t in b.history) or (
        b.env is not None and b.env.staged_in
    )
