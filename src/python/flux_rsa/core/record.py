"""Values the state machine works on: a job's RSA request and its record.

Everything here is an immutable value; ``machine.process`` returns new ones.
"""

import dataclasses
from dataclasses import dataclass, field
from typing import Optional

#: the RAM disk's layout: inputs and outputs live side by side
from flux_rsa.core.areas import IN_AREA, OUT_AREA  # noqa: F401 (theirs too)
from flux_rsa.core.states import (
    AT_REST,
    ENDED,
    LET_GO,
    JobState,
    Measure,
    Mount,
    Offer,
    RsaState,
)


@dataclass(frozen=True)
class Request:
    """What the user asked for (``attributes.system.rsa``), already validated."""

    data_in: Optional[str] = None
    data_out: Optional[str] = None
    stage_in: Optional[str] = None  # None (copy), "tar", or a script path
    stage_out: Optional[str] = None  # None (copy), "tar", or a script path
    delay: Optional[float] = None  # seconds before inputs are dropped
    capacity: Optional[int] = None  # bytes; None: derived from the job size
    on_late: Optional[str] = None  # "ignore" | "wait"; None: site default
    verify: str = "size"  # "size" | "checksum"
    paths: Optional[str] = None  # "bind" | "env"; None: site default (paths.py)
    handoff: Optional[str] = None  # "off": never read another job's RAM disk
    #: "shared": one file system every node of the job sees (served over the
    #: network); "per-node": each compute node its own (an image); None:
    #: per-node for a job on one node, shared for one on several
    fs: Optional[str] = None

    @property
    def wants_rsa(self):
        return (
            self.data_in is not None
            or self.data_out is not None
            or self.capacity is not None
        )

    @property
    def scratch(self):
        """Only a RAM disk to work in (rsa.capacity alone): nothing staged."""
        return (
            self.capacity is not None and self.data_in is None and self.data_out is None
        )

    @property
    def has_stage_in(self):
        return self.data_in is not None

    @property
    def has_stage_out(self):
        return self.data_out is not None

    def to_dict(self):
        return {k: v for k, v in dataclasses.asdict(self).items() if v is not None}

    @classmethod
    def from_dict(cls, d):
        return cls(
            **{f.name: d[f.name] for f in dataclasses.fields(cls) if f.name in d}
        )


@dataclass(frozen=True)
class Env:
    """What a job is told at start: RSA_RAMDISK, RSA_DATA_IN, RSA_DATA_OUT."""

    ramdisk: Optional[str] = None
    data_in: Optional[str] = None
    data_out: Optional[str] = None
    staged_in: bool = False  # data_in points at staged inputs on the RAM disk
    out_on_ramdisk: bool = False  # data_out points at the RAM disk
    scratch: bool = False  # a RAM disk to work in, nothing staged either way
    #: "bind": the job's own data_in/data_out paths show what is on the RAM
    #: disk (staged_in, out_on_ramdisk), in a mount namespace of the job;
    #: "env": only RSA_* say where; None: nothing of it is on the RAM disk
    paths: Optional[str] = None

    @property
    def on_ramdisk(self):
        """The job works on its RAM disk: staged inputs, output area or scratch."""
        return self.staged_in or self.out_on_ramdisk or self.scratch

    def to_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d):
        return cls(**d)


@dataclass(frozen=True)
class Progress:
    bytes_done: int = 0
    bytes_total: int = 0
    files_done: int = 0
    files_total: int = 0
    rate: float = 0.0
    quiet: float = 0.0  # s a stage script printed nothing, its destination not grown

    def to_dict(self):
        return dataclasses.asdict(self)


@dataclass(frozen=True)
class Limits:
    """The site's bounds for one job, fixed when it is admitted."""

    late_timeout: float = 600.0  # on_late=wait: longest hold at start
    lock_in: bool = True  # protect staged jobs from being pushed back
    stage_retries: int = 3  # failed stages tried again (then ABORTED/HELD)
    retry_backoff: float = 5.0  # seconds before the first retry; doubles
    stage_timeout: float = 6 * 3600.0  # longest stage-in or stage-out
    holder_timeout: float = 600.0  # longest wait for RAM-disk capacity
    headroom: float = 0.0  # >0: the reservation is data_in's size times this
    granule: int = 4 * 2**20  # reservations are whole granules
    most: int = 0  # the most one reservation can hold in the pool (0: not known)
    mount_root: str = (
        ""  # where compute nodes attach the RAM disk ("": as the RSA nodes)
    )
    handoff_keep: float = 600.0  # a producer's RAM disk kept after its outputs are home
    script_quiet: float = 300.0  # a stage script quiet this long is said to be (status)

    def to_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d):
        return cls(
            **{
                f.name: d[f.name]
                for f in dataclasses.fields(cls)
                if f.name in (d or {})
            }
        )


@dataclass(frozen=True)
class Handoff:
    """A consumer's view of the job whose RAM disk holds its inputs (the
    workflow hand-off, ``handoff.py``): where they are, and what the
    service last heard of that job."""

    producer: int  # the jobid whose outputs are this job's inputs
    name: str  # the same, as people write it (f58)
    area: str  # the directory on the producer's RAM disk (as its RSA nodes see it)
    node: str  # the RSA node holding it (a stage-in there reads it directly)
    remote: bool = False  # a stage-in on another RSA node can mount it (a volume)
    on_ramdisk: bool = True  # the producer's RAM disk still holds them
    #: the producer's outputs are still being written there (linked early:
    #: this job's RAM disk is made meanwhile, its stage-in waits)
    writing: bool = False
    verdict: object = None  # after_staged(producer): None, True (home), or why never
    failed: bool = False  # a stage-in from the producer's RAM disk failed

    def to_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d):
        return cls(**d) if d else None


@dataclass(frozen=True)
class Transition:
    t: float
    job_state: JobState
    rsa_state: RsaState

    def to_list(self):
        return [self.t, self.job_state.value, self.rsa_state.value]

    @classmethod
    def from_list(cls, item):
        t, job_state, rsa_state = item
        return cls(t, JobState(job_state), RsaState(rsa_state))


@dataclass(frozen=True)
class Record:
    """One RSA job: the truth the service keeps in the KVS (rsa.jobs.<id>)."""

    jobid: int
    userid: int
    nnodes: int
    request: Request
    need: int = 0  # bytes of RAM disk to reserve
    clamped: int = 0  # >0: the default need, larger than the whole pool holds
    measure: Measure = Measure.NONE  # sizing the reservation from data_in
    input_bytes: Optional[int] = None  # measured size of data_in
    job_state: JobState = JobState.PENDING
    rsa_state: RsaState = RsaState.INITIAL
    reason: Optional[str] = None  # why INELIGIBLE, for `flux rsa status`
    limits: Limits = field(default_factory=Limits)
    revoked: bool = False  # demoted job whose capacity must go back
    start_pending: bool = False  # job-manager waits for our start reply
    offer: Offer = Offer.NONE  # start env offered to job-manager
    started: bool = False  # the job's eventlog shows it was released to run
    env: Optional[Env] = None  # what the job was given at start
    gen: int = 0  # reservation generation: one holder per generation
    nodes: tuple = ()  # RSA nodes of the current holder
    granted: int = 0  # bytes granted to the current holder
    ramdisk: Optional[str] = None  # RAM-disk directory of the current holder
    stage_seq: int = 0  # stage generation: one stage job per value
    stage_dir: Optional[str] = None  # "in" | "out" while a stage runs
    progress: Optional[Progress] = None
    error: Optional[str] = None  # last error, kept for the user
    failed: bool = False  # give up on staging for this job (runs direct)
    attempts: int = 0  # failed tries of the current stage
    retry_pending: bool = False  # a failed stage waits for its retry timer
    state_since: float = 0.0  # when the current rsa-state was entered
    restages: int = 0  # stage-ins started beyond the first
    output_home: Optional[bool] = None  # None until stage-out ends
    reused: Optional[str] = None  # inputs copied from this replica, not data_in
    volume: Optional[
        dict
    ] = None  # what compute nodes need to attach it (None: simulated)
    ranks: tuple = ()  # the job's compute nodes (broker ranks), from its start
    mount: Mount = Mount.NONE  # the RAM disk on the compute nodes
    mount_path: Optional[str] = None  # where the compute nodes attach(ed) it
    handoff: Optional[Handoff] = None  # inputs from another job's RAM disk
    consumers: tuple = ()  # jobs still to read this job's outputs from its RAM disk
    #: the RAM disk is a file-system image its one compute node mounts
    #: (decided at admission; the holder reports in ``volume`` what it built)
    image: bool = False
    #: the compute nodes lost with the image mounted: the stage-out breaks
    #: their hold and checks the image before reading it
    reclaim: Optional[str] = None
    #: the compute nodes that let go of the images (unmounted them): a hold
    #: of theirs still written is stale, and the stage-out breaks it
    let_go: tuple = ()
    #: the compute side's steps: {"attach"|"detach": (start, end or None)}
    mount_times: dict = field(default_factory=dict)
    history: tuple = field(default=())  # Transition values, oldest first

    @property
    def final(self):
        """Nothing is held, in flight or attached, and never will be again:
        the job ended and its RAM disk is gone (or never was)."""
        return (
            self.job_state in ENDED
            and self.rsa_state in AT_REST
            and self.mount in LET_GO
        )

    @property
    def fresh(self):
        """Nothing has happened to it but its admission: INITIAL, it never
        held a RAM disk, its job is pending.  After a restart the journal's
        replay admits such a job again from its submit event, so its record
        needs no copy in the KVS (one write less for every queued job)."""
        return (
            self.rsa_state is RsaState.INITIAL
            and self.gen == 0
            and self.job_state is JobState.PENDING
        )

    def area(self, name):
        """Path of an area (IN_AREA or OUT_AREA) on the current RAM disk,
        as the RSA nodes (the stager) see it."""
        if self.ramdisk is None:
            return None
        return f"{self.ramdisk}/{name}"

    @property
    def job_ramdisk(self):
        """The RAM disk as the job's compute nodes see it: where they attach
        it (``[rsa] mount-root``), else (nothing mounted: the site shows it)
        the RSA nodes' path."""
        if (
            self.ramdisk is None
            or self.volume is None
            or self.volume.get("same_path")
            or not self.limits.mount_root
        ):
            return self.ramdisk
        return f"{self.limits.mount_root.rstrip('/')}/{self.ramdisk.rsplit('/', 1)[-1]}"

    @property
    def images(self):
        """How many images its RAM disk is to be made of (one per compute
        node; 0: it is no image)."""
        return self.nnodes if self.image else 0

    @property
    def image_attached(self):
        """The job's compute node holds its RAM disk's image (mounted, read-write)."""
        return (
            self.mount is Mount.ATTACHED
            and self.volume is not None
            and self.volume.get("image") is not None
        )

    def mount_seconds(self, step):
        """How long the compute side's ``step`` ("attach" or "detach") took,
        or None when it has not ended."""
        start, end = self.mount_times.get(step, (None, None))
        return None if start is None or end is None else end - start

    def job_area(self, name):
        return None if self.ramdisk is None else f"{self.job_ramdisk}/{name}"

    def quiet_script(self):
        """A stage script running quiet for ``[rsa] script-quiet`` or more
        (nothing printed, its destination not grown): (its path, seconds
        quiet), else None."""
        if self.stage_dir is None or self.progress is None:
            return None
        script = (
            self.request.stage_in if self.stage_dir == "in" else self.request.stage_out
        )
        if script in (None, "tar") or self.progress.quiet < self.limits.script_quiet:
            return None
        return script, self.progress.quiet

    def times(self):
        """First time each rsa-state was entered: {state name: t}."""
        out = {}
        for tr in self.history:
            out.setdefault(tr.rsa_state.value, tr.t)
        return out

    def to_dict(self):
        d = {
            "jobid": self.jobid,
            "userid": self.userid,
            "nnodes": self.nnodes,
            "request": self.request.to_dict(),
            "need": self.need,
            "measure": self.measure.value,
            "input_bytes": self.input_bytes,
            "job_state": self.job_state.value,
            "rsa_state": self.rsa_state.value,
            "reason": self.reason,
            "limits": self.limits.to_dict(),
            "revoked": self.revoked,
            "start_pending": self.start_pending,
            "offer": self.offer.value,
            "started": self.started,
            "env": self.env.to_dict() if self.env else None,
            "gen": self.gen,
            "nodes": list(self.nodes),
            "granted": self.granted,
            "ramdisk": self.ramdisk,
            "stage_seq": self.stage_seq,
            "stage_dir": self.stage_dir,
            "progress": self.progress.to_dict() if self.progress else None,
            "error": self.error,
            "failed": self.failed,
            "attempts": self.attempts,
            "retry_pending": self.retry_pending,
            "state_since": self.state_since,
            "restages": self.restages,
            "output_home": self.output_home,
            "reused": self.reused,
            "volume": self.volume,
            "ranks": list(self.ranks),
            "mount": self.mount.value,
            "mount_path": self.mount_path,
            "history": [tr.to_list() for tr in self.history],
        }
        if self.clamped:  # (a default clamped to the pool, only when it was)
            d["clamped"] = self.clamped
        if self.handoff is not None:  # (the hand-off's, only when there is one)
            d["handoff"] = self.handoff.to_dict()
        if self.consumers:
            d["consumers"] = list(self.consumers)
        if self.image:
            d["image"] = True
        if self.reclaim is not None:
            d["reclaim"] = self.reclaim
        if self.let_go:
            d["let_go"] = list(self.let_go)
        if self.mount_times:
            d["mount_times"] = {k: list(v) for k, v in self.mount_times.items()}
        return d

    @classmethod
    def from_dict(cls, d):
        return cls(
            jobid=d["jobid"],
            userid=d["userid"],
            nnodes=d["nnodes"],
            request=Request.from_dict(d["request"]),
            need=d.get("need", 0),
            clamped=d.get("clamped", 0),
            measure=Measure(d.get("measure", "")),
            input_bytes=d.get("input_bytes"),
            job_state=JobState(d["job_state"]),
            rsa_state=RsaState(d["rsa_state"]),
            reason=d.get("reason"),
            limits=Limits.from_dict(d.get("limits")),
            revoked=d.get("revoked", False),
            start_pending=d.get("start_pending", False),
            offer=Offer(d.get("offer", "")),
            started=d.get("started", False),
            env=Env.from_dict(d["env"]) if d.get("env") else None,
            gen=d.get("gen", 0),
            nodes=tuple(d.get("nodes", ())),
            granted=d.get("granted", 0),
            ramdisk=d.get("ramdisk"),
            stage_seq=d.get("stage_seq", 0),
            stage_dir=d.get("stage_dir"),
            progress=Progress(**d["progress"]) if d.get("progress") else None,
            error=d.get("error"),
            failed=d.get("failed", False),
            attempts=d.get("attempts", 0),
            retry_pending=d.get("retry_pending", False),
            state_since=d.get("state_since", 0.0),
            restages=d.get("restages", 0),
            output_home=d.get("output_home"),
            reused=d.get("reused"),
            volume=d.get("volume"),
            ranks=tuple(d.get("ranks", ())),
            mount=Mount(d.get("mount", "")),
            mount_path=d.get("mount_path"),
            handoff=Handoff.from_dict(d.get("handoff")),
            consumers=tuple(d.get("consumers", ())),
            image=d.get("image", False),
            reclaim=d.get("reclaim"),
            let_go=tuple(d.get("let_go", ())),
            mount_times={k: tuple(v) for k, v in (d.get("mount_times") or {}).items()},
            history=tuple(Transition.from_list(x) for x in d.get("history", ())),
        )
