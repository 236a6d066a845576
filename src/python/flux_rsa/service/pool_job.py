"""The pool as a job of the instance: keep one RSA pool running
(``PoolKeeper``: use the one that runs after a module reload, launch one
when there is none, launch again with back-off when it ends or is refused,
e.g. when it was submitted before the RSA nodes were online), and stop it
in order when the instance owner asks (``shut_down``)."""

import errno
import os
import time

import flux.job

from flux_rsa.pool import launch, protocol

BACKOFF_MIN, BACKOFF_MAX = 2.0, 60.0


class PoolKeeper:
    def __init__(self, service):
        self.service = service
        self.jobid = None
        self.next_try = 0.0
        self.backoff = BACKOFF_MIN
        self.relaunch = False  # after a pool ended: only RSA nodes that are up
        self.followed = set()  # pool jobs whose eventlog is watched
        self.why = "it exited"  # why the pool job ended, when it has

    def start(self):
        h, log = self.service.h, self.service.log
        jobid = launch.find(h)
        if jobid is None:
            self.tick()
            return
        self.jobid = jobid
        self.follow()
        info = launch.ready_info(h)
        if isinstance(info, dict) and info.get("jobid") == jobid:
            self.service.pool_up(info)
        else:
            log.info(f"rsa: pool {flux.job.JobID(jobid).f58} is starting")

    def tick(self):
        """Launch a pool if none runs and the back-off allows."""
        if self.jobid is not None or time.time() < self.next_try:
            return
        try:
            self.jobid = launch.launch(
                self.service.h,
                self.service.policy,
                notify_topic=protocol.NOTIFY_TOPIC,
                env=dict(os.environ),
                include_down=not self.relaunch,
            )
            self.service.log.info(
                f"rsa: launched the RSA pool as job {flux.job.JobID(self.jobid).f58}"
            )
            self.follow()
        except (OSError, launch.PoolError) as exc:
            self.retry_later(f"cannot launch the RSA pool: {exc}")

    def ready(self, info):
        self.backoff = BACKOFF_MIN
        self.jobid = info.get("jobid", self.jobid)
        self.follow()

    def follow(self):
        """Watch the pool job's eventlog (the service's journal closes once
        it has caught up)."""
        jobid = self.jobid
        if jobid is None or jobid in self.followed:
            return
        self.followed.add(jobid)

        def on_event(f):
            try:
                ev = f.get_event()
            except OSError:
                return  # the eventlog went away: the job is gone
            if ev is not None:
                self.event(jobid, ev.name, ev.context or {})

        flux.job.event_watch_async(self.service.h, jobid).then(on_event)

    def event(self, jobid, name, context):
        """An event of a pool job (the journal's replay, or its eventlog)."""
        if name == "exception" and context.get("severity") == 0:
            self.why = f"{context.get('type', 'an')} exception" + (
                f": {context['note']}" if context.get("note") else ""
            )
        elif name == "clean":
            self.ended(jobid, self.why)

    def ended(self, jobid, why):
        """The pool job went inactive."""
        if jobid != self.jobid:
            return
        self.jobid = None
        self.relaunch = True
        self.service.pool.down()
        self.retry_later(f"the RSA pool {flux.job.JobID(jobid).f58} ended ({why})")

    def retry_later(self, why):
        self.service.log.warning(f"rsa: {why}; trying again in {self.backoff:.0f}s")
        self.next_try = time.time() + self.backoff
        self.backoff = min(self.backoff * 2, BACKOFF_MAX)


def start_pool(service):
    service.keeper = PoolKeeper(service)
    service.keeper.start()


def shut_down(service, answer):
    """Stop the pool in order (RAM disks destroyed, those with outputs not
    yet home kept), then ``answer(payload or OSError)`` once it ended and
    the compute nodes let go of its image stores."""
    keeper = service.keeper
    jobid = keeper.jobid if keeper is not None else launch.find(service.h)
    if jobid is None:
        answer({"stopped": False})
        return
    service.pool.down()
    if keeper is not None:
        keeper.next_try = float("inf")  # no relaunch: we are shutting down

    def failed(exc):
        answer(OSError(exc.errno or errno.EIO, f"stopping the RSA pool: {exc}"))

    def ended(f):
        try:
            f.get_info()
            service.mounts.leave(lambda: answer({"stopped": True, "jobid": jobid}))
        except OSError as exc:
            failed(exc)

    def stop():
        try:
            keep = service.reconciler.keep_list()
            if keep:
                service.log.info(
                    f"rsa: stopping the pool, keeping {len(keep)} RAM disk(s) with outputs not yet home"
                )
            launch.shutdown_async(service.h, jobid, keep=keep).then(ended)
        except OSError as exc:
            failed(exc)

    # images still mounted by jobs' compute nodes are written back first
    attached = [r for r in service.records.values() if r.image_attached]
    service.mounts.flush(attached, stop)
