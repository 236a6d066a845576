"""Find the running pool or launch it (the service does this at load)."""

import os

import flux.job
import flux.kvs


def start_pool(service):
    from flux_rsa.pool import launch

    h, log = service.h, service.log
    jobid = launch.find(h)
    if jobid is not None:
        info = _announced(h)
        if info is not None:
            service.pool_up(info)
        else:
            log.info(f"rsa: pool {flux.job.JobID(jobid).f58} is starting")
        return
    env = dict(os.environ)
    jobid = launch.launch(h, service.policy, notify_topic="rsa.pool-event", env=env)
    log.info(f"rsa: launched the RSA pool as job {flux.job.JobID(jobid).f58}")


def _announced(h):
    """What the running pool's agent announced (parent KVS rsa.pool)."""
    try:
        return flux.kvs.get(h, "rsa.pool")
    except (OSError, FileNotFoundError):
        return None
