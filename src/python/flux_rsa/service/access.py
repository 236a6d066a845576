"""Who may see and act on a job's record: its owner, and the instance
owner.  Others are told there is no record (not that it is someone else's).
"""

import errno

import flux.job

from flux_rsa.core import accepts


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
