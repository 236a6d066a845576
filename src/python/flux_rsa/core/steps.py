"""The steps a transition row can take: each turns (record, event) into
(record', actions).  Rows in ``table.py`` name them; nothing else mutates a
record.
"""

import dataclasses
import math

from flux_rsa.core import actions as A
from flux_rsa.core import handoff, outputs
from flux_rsa.core.record import IN_AREA, OUT_AREA, Env
from flux_rsa.core.states import (
    BOUNDED,
    RAMDISK_UP,
    JobState,
    Measure,
    Mount,
    Offer,
    RsaState,
)

S = RsaState
J = JobState


def _set(rec, **changes):
    return dataclasses.replace(rec, **changes)


def start_env(rec):
    """What a starting job gets: staged inputs if READY, an output area on
    the RAM disk if one exists, persistent storage otherwise (thesis 3.2.1:
    a job that starts before its stage-in is done reads data_in directly)."""
    req = rec.request
    usable = (
        rec.rsa_state in RAMDISK_UP
        and not rec.revoked
        and rec.mount is not Mount.FAILED
    )
    if not usable or rec.ramdisk is None:
        return Env(data_in=req.data_in, data_out=req.data_out)
    staged = rec.rsa_state is S.READY and req.has_stage_in
    on_ramdisk_out = req.has_stage_out
    if (
        not staged and not on_ramdisk_out and not req.scratch
    ):  # nothing of it is for the job
        return Env(data_in=req.data_in, data_out=req.data_out)
    return Env(
        ramdisk=rec.job_ramdisk,
        data_in=rec.job_area(IN_AREA) if staged else req.data_in,
        data_out=rec.job_area(OUT_AREA) if on_ramdisk_out else None,
        staged_in=staged,
        out_on_ramdisk=on_ramdisk_out,
        scratch=req.scratch,
        paths=req.paths if staged or on_ramdisk_out else None,
    )


# --- the reservation -------------------------------------------------------


def request(rec, ev):
    rec = _set(rec, gen=rec.gen + 1, error=None)
    return ask_capacity(rec, ev)


def ask_capacity(rec, ev):
    """Ask the pool for the current reservation (again, after a restart)."""
    return rec, [
        A.RequestCapacity(
            rec.jobid, gen=rec.gen, need=rec.need, userid=rec.userid, images=rec.images
        )
    ]


def measure(rec, ev):
    """Size the reservation from data_in: ask the pool to measure it."""
    return _set(rec, measure=Measure.ASKED), [
        A.Measure(rec.jobid, path=rec.request.data_in, userid=rec.userid)
    ]


def sized(rec, ev):
    """data_in measured: reserve its size times the headroom (whole granules);
    if it could not be measured, keep the proportional size and say why."""
    from flux_rsa.core.units import format_size

    if not ev.ok:
        error = (
            f"measuring rsa.data_in failed ({ev.error}): reserving "
            f"{format_size(rec.need)} by the proportion rule instead"
        )
        return _set(rec, measure=Measure.NONE, error=error), []
    granule = rec.limits.granule
    need = max(1, math.ceil(ev.nbytes * rec.limits.headroom / granule)) * granule
    return (
        _set(rec, measure=Measure.NONE, need=need, input_bytes=ev.nbytes, clamped=0),
        [],
    )


def cancel_holder(rec, ev):
    return rec, [A.CancelHolder(rec.jobid, gen=rec.gen)]


def take_holder(rec, ev):
    return _set(rec, nodes=tuple(ev.nodes), granted=ev.granted), []


def take_ramdisk(rec, ev):
    return _set(rec, ramdisk=ev.path, volume=ev.volume), []


def forget_holder(rec, ev):
    return _set(rec, nodes=(), granted=0, ramdisk=None, volume=None), []


# --- the RAM disk on the compute nodes -----------------------------------------


def _timed(rec, step, t, end=False):
    """``mount_times`` with ``step`` started at ``t`` (or ended, ``end``)."""
    times = dict(rec.mount_times)
    times[step] = (times.get(step, (t, None))[0], t) if end else (t, None)
    return times


def attach(rec, ev):
    root, _, name = rec.job_ramdisk.rpartition("/")
    return _set(
        rec,
        mount=Mount.ATTACHING,
        mount_path=rec.job_ramdisk,
        mount_times=_timed(rec, "attach", ev.t),
    ), [A.Attach(rec.jobid, ranks=rec.ranks, root=root, name=name, volume=rec.volume)]


def attached(rec, ev):
    """Attached everywhere, or nowhere: the job then uses its directories
    and the note says which node failed."""
    times = _timed(rec, "attach", ev.t, end=True)
    if ev.ok:
        return _set(rec, mount=Mount.ATTACHED, mount_times=times), []
    error = f"the RAM disk could not be attached where the job runs ({ev.error}): it uses its directories"
    return _set(rec, mount=Mount.FAILED, error=error, mount_times=times), [
        A.PostEvent(rec.jobid, "error", {"error": error})
    ]


def detach(rec, ev):
    """The RAM disk may be gone already (its holder lost): the compute nodes
    still let go of their mount."""
    root, _, name = rec.mount_path.rpartition("/")
    times = _timed(rec, "detach", ev.t)
    return _set(rec, mount=Mount.DETACHING, mount_times=times), [
        A.Detach(rec.jobid, ranks=rec.ranks, root=root, name=name)
    ]


def detached(rec, ev):
    """Detached, or not: a node lost with the image mounted is named for the
    stage-out to break its hold (and check the image first); one that is
    up but could not let go keeps it, and the stage-out refuses it."""
    times = _timed(rec, "detach", ev.t, end=True)
    image = rec.volume and rec.volume.get("image")
    let_go = tuple(ev.left) if image else ()
    if ev.ok:
        return (
            _set(
                rec, mount=Mount.NONE, mount_path=None, mount_times=times, let_go=let_go
            ),
            [],
        )
    reclaim = ",".join(ev.lost) if ev.lost and image else None
    return (
        _set(
            rec,
            mount=Mount.NONE,
            mount_path=None,
            error=f"detaching the RAM disk: {ev.error}",
            reclaim=reclaim or rec.reclaim,
            let_go=let_go,
            mount_times=times,
        ),
        [],
    )


def lost(rec, ev):
    """The holder died under us: its RAM disk (and anything on it) is gone.
    A job running on it is told at once (an exception naming why: its
    files there are gone); outputs on it are lost (said loudly);
    otherwise a new reservation is tried, up to stage-retries times,
    before the job uses its directories."""
    error = ev.error or "the RAM-disk holder ended unexpectedly"
    if rec.stage_dir is not None:  # a stage on the lost RAM disk: forget it
        rec, stop = abandon_stage(rec, ev)
        lost_rec, acts = lost(rec, ev)
        return lost_rec, stop + acts
    told = []
    if rec.job_state is J.RUNNING and rec.env is not None and rec.env.on_ramdisk:
        note = f"its RAM disk is gone, and what it read and wrote there: {error}"
        told = [A.RaiseException(rec.jobid, type="rsa", note=note)]
    if outputs.at_risk(rec):
        error = f"RAM disk lost before its outputs were staged out: {error}"
        return _set(rec, error=error, failed=True, output_home=False), [
            A.PostEvent(rec.jobid, "error", {"error": error}),
            *told,
        ]
    attempts = rec.attempts + 1
    failed = attempts > rec.limits.stage_retries
    if failed:
        error = f"{error} ({attempts} times: the job uses its directories directly)"
    return _set(rec, error=error, failed=failed, attempts=attempts), told


def reset(rec, ev):
    """Back to INITIAL after a demotion: a new reservation starts from zero."""
    return (
        _set(rec, nodes=(), granted=0, ramdisk=None, stage_dir=None, progress=None),
        [],
    )


# --- staging ---------------------------------------------------------------


def _stage(rec, direction, src, dst, method, reclaim=None):
    seq = rec.stage_seq + 1
    rec = _set(rec, stage_seq=seq, stage_dir=direction, progress=None)
    return rec, [
        A.StartStage(
            rec.jobid,
            seq=seq,
            direction=direction,
            src=src,
            dst=dst,
            method=method,
            userid=rec.userid,
            verify=rec.request.verify,
            nodes=rec.nodes,
            size=rec.need,
            reclaim=reclaim,
        )
    ]


def stage_in(rec, ev):
    if rec.stage_seq > 0 and any(t.rsa_state is S.STAGING_IN for t in rec.history):
        rec = _set(rec, restages=rec.restages + 1)
    req = rec.request
    src = handoff.reads_ramdisk(rec) or req.data_in  # a producer's RAM disk first
    return _stage(rec, "in", src, rec.area(IN_AREA), req.stage_in)


def stage_out(rec, ev):
    """The outputs home; an image's holds by compute nodes that were lost,
    or that let go of it, are broken first (``reclaim``)."""
    req = rec.request
    hosts = [h for h in (rec.reclaim or "").split(",") if h] + list(rec.let_go)
    reclaim = ",".join(dict.fromkeys(hosts)) or None
    return _stage(rec, "out", rec.area(OUT_AREA), req.data_out, req.stage_out, reclaim)


def stop_stage(rec, ev):
    return rec, [A.StopStage(rec.jobid, seq=rec.stage_seq)]


def progress(rec, ev):
    return _set(rec, progress=ev.progress), []


def stage_over(rec, ev):
    return _set(rec, stage_dir=None), []


def note_error(rec, ev):
    return _set(rec, error=ev.error or "unknown error"), []


def staged_in(rec, ev):
    reused = getattr(ev, "reused", None) or handoff.reads_ramdisk(rec)
    rec = _set(rec, attempts=0, retry_pending=False, reused=reused)
    context = {"ramdisk": rec.ramdisk, "nodes": list(rec.nodes)}
    if reused:
        context["reused"] = reused
    if handoff.reads_ramdisk(rec):
        context["handoff"] = rec.handoff.name
    acts = [A.PostEvent(rec.jobid, "staged-in", context)]
    if rec.limits.lock_in and rec.request.has_stage_in:
        acts.append(A.LockIn(rec.jobid))
    return rec, acts


def home(rec, ev):
    error = None
    if rec.reclaim is not None:
        error = (
            f"{rec.reclaim} was lost with the job's image mounted: the image was checked "
            "(e2fsck) before the outputs were staged out"
        )
    return (
        _set(rec, output_home=True, error=error, attempts=0, retry_pending=False),
        [A.PostEvent(rec.jobid, "staged-out", {"data_out": rec.request.data_out})],
    )


def held(rec, ev):
    return _set(rec, output_home=False), [
        A.PostEvent(
            rec.jobid,
            "held",
            {
                "ramdisk": rec.area(OUT_AREA),
                "nodes": list(rec.nodes),
                "error": rec.error,
            },
        )
    ]


def too_big(rec, ev):
    from flux_rsa.core.units import format_size

    error = (
        f"needs {format_size(rec.need)} of RAM disk; the RSA pool holds at most "
        f"{format_size(ev.largest)}: the job uses its directories directly "
        "(ask for less with rsa.capacity)"
    )
    return _set(rec, failed=True, error=error), []


def clamp(rec, ev):
    """A default reservation (the site's proportion or headroom rule, no
    rsa.capacity) larger than the pool can ever hold (``ev.largest``, as
    the on-deck pass finds it): reserve the most it can, and say so."""
    return _clamp(rec, ev.largest)


def clamp_to_pool(rec, ev):
    """The same, with the most the pool held when the job came."""
    return _clamp(rec, rec.limits.most)


def _clamp(rec, most):
    from flux_rsa.core.units import format_size

    note = (
        f"the default reservation of {format_size(rec.need)} is more than the RSA "
        f"pool can hold: reserving {format_size(most)}, the most it can "
        "(choose a size with rsa.capacity)"
    )
    return _set(rec, need=most, clamped=rec.clamped or rec.need), [
        A.PostEvent(rec.jobid, "error", {"error": note})
    ]


def manual_retry(rec, ev):
    """`flux rsa retry`: a fresh round of attempts."""
    return _set(rec, error=None, output_home=None, attempts=0, retry_pending=False), []


def _failure(rec):
    """Count a failed stage; (record, actions, retry?) with its back-off timer."""
    attempts = rec.attempts + 1
    if attempts > rec.limits.stage_retries:
        return _set(rec, attempts=attempts, retry_pending=False), [], False
    delay = rec.limits.retry_backoff * 2 ** (attempts - 1)
    rec = _set(rec, attempts=attempts, retry_pending=True)
    return rec, [A.StartTimer(rec.jobid, name="retry", seconds=delay)], True


def retry_or_give_up(rec, ev):
    """A failed stage-in: try again after a back-off, or use data_in."""
    rec, acts, again = _failure(rec)
    if not again:
        rec = _set(
            rec,
            failed=True,
            error=f"{rec.error} (stage-in failed {rec.attempts} times: the job uses data_in directly)",
        )
    return rec, acts


def retry_or_hold(rec, ev):
    """A failed stage-out: try again after a back-off; the RAM disk stays."""
    rec, acts, again = _failure(rec)
    rec, held_acts = held(rec, ev) if not again else (_set(rec, output_home=False), [])
    return rec, acts + held_acts


def retry_now(rec, ev):
    return _set(rec, retry_pending=False), []


def auto_retry_out(rec, ev):
    return _set(rec, error=None, output_home=None), []


def abandon_stage(rec, ev):
    """Stop the running stage and ignore whatever it reports later."""
    return _set(rec, stage_seq=rec.stage_seq + 1, stage_dir=None), [
        A.StopStage(rec.jobid, seq=rec.stage_seq)
    ]


def timed_out(rec, ev):
    what = {
        "REQUESTED": "no RAM-disk capacity",
        "ASSIGNED": "the RAM-disk holder did not start",
        "BOOTING": "the RAM disk was not built",
        "STAGING_IN": "stage-in did not finish",
        "STAGING_OUT": "stage-out did not finish",
    }.get(ev.state, ev.state)
    limit = (
        rec.limits.stage_timeout
        if ev.state.startswith("STAGING")
        else rec.limits.holder_timeout
    )
    error = f"{what} within {limit:g}s ([rsa] {'stage' if ev.state.startswith('STAGING') else 'holder'}-timeout)"
    return (
        _set(
            rec,
            error=error,
            failed=True,
            attempts=rec.limits.stage_retries + 1,
            retry_pending=False,
        ),
        [],
    )


def rearm(rec, ev):
    """Still waiting for the pool: ask again and keep the deadline."""
    return rec, [
        A.StartTimer(
            rec.jobid,
            name="timeout",
            seconds=_deadline(rec),
            state=rec.rsa_state.value,
            since=rec.state_since,
        )
    ]


def _deadline(rec):
    if rec.rsa_state in (S.STAGING_IN, S.STAGING_OUT):
        return rec.limits.stage_timeout
    if rec.rsa_state is S.KEPT:
        return rec.limits.handoff_keep
    return rec.limits.holder_timeout


def deadline_timer(rec, t):
    """The timer bounding the state ``rec`` just entered, if any."""
    if rec.rsa_state not in BOUNDED:
        return []
    return [
        A.StartTimer(
            rec.jobid,
            name="timeout",
            seconds=_deadline(rec),
            state=rec.rsa_state.value,
            since=t,
        )
    ]


def released(rec, ev):
    return rec, [A.PostEvent(rec.jobid, "released", {"error": rec.error})]


def purge_input(rec, ev):
    """Drop the inputs: on the RSA node, or on the compute node that holds
    the RAM disk's image now (only it may write it)."""
    on_compute = rec.image_attached
    return rec, [
        A.PurgeInput(
            rec.jobid,
            path=rec.job_area(IN_AREA) if on_compute else rec.area(IN_AREA),
            data_in=rec.request.data_in,
            userid=rec.userid,
            nodes=rec.nodes,
            ranks=rec.ranks if on_compute else (),
        )
    ]


def input_released(rec, ev):
    return rec, [A.PostEvent(rec.jobid, "input-released", {"why": ev.why})]


# --- the compute job -------------------------------------------------------


def reply(rec, ev):
    """Answer job-manager's start request (idempotent: same answer twice)."""
    env = rec.env if rec.env is not None else start_env(rec)
    return _set(rec, env=env, start_pending=False), [A.ReplyStart(rec.jobid, env=env)]


def delay_timer(rec, ev):
    if rec.request.delay is None or not rec.request.has_stage_out:
        return rec, []
    return rec, [A.StartTimer(rec.jobid, name="delay", seconds=rec.request.delay)]


def late_timer(rec, ev):
    return rec, [A.StartTimer(rec.jobid, name="late", seconds=rec.limits.late_timeout)]


def late(rec, ev):
    after = f"{rec.limits.late_timeout:g}s after the job was due to start"
    if rec.request.scratch:
        error = (
            f"RAM disk not ready {after}: the job runs without one (RSA_RAMDISK unset)"
        )
    else:
        error = f"inputs not staged {after}: it uses data_in directly"
    return _set(rec, failed=True, error=error), []


def take_env(rec, ev):
    """The job's own eventlog says what it was given: that is the truth
    (a job that started with our offer keeps its RAM disk)."""
    env = ev.env if ev.env is not None else rec.env
    uses = env is not None and env.on_ramdisk
    return (
        _set(
            rec,
            env=env,
            start_pending=False,
            started=True,
            offer=Offer.NONE,
            revoked=rec.revoked and not uses,
        ),
        [],
    )


def unrevoke(rec, ev):
    return _set(rec, revoked=False), []


def revoke(rec, ev):
    return _set(rec, revoked=True), []


def starting(rec, ev):
    """job-manager holds the job until we answer; on_late=wait may make it
    wait for the inputs, never longer than the site's late timeout."""
    first = not rec.start_pending and rec.env is None
    rec = _set(
        rec,
        start_pending=True,
        revoked=False,
        offer=Offer.NONE,
        ranks=ev.ranks or rec.ranks,
    )
    if first and rec.request.on_late == "wait" and rec.rsa_state is not S.INELIGIBLE:
        return late_timer(rec, ev)
    return rec, []


def ended(rec, ev):
    """The job is over; if it started without our answer it used persistent
    storage (job-manager gave up waiting for the service)."""
    return _set(rec, start_pending=False), []
