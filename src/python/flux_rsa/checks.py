"""Submit-time checks of a job's RSA request against the file system, as
the submitting user would see it (used by the job-ingest validator)."""

import os

from flux_rsa.access import EXEC, READ, WRITE, Who, problem
from flux_rsa.core import BadRequest, parse_request


def check_request(attrs, userid):
    """The first thing wrong with a job's rsa attributes, or None."""
    try:
        req = parse_request(attrs)
    except BadRequest as exc:
        return str(exc)
    if not req.wants_rsa:
        return None
    who = Who(userid)
    checks = [
        ("data_in", req.data_in, "dir", READ | EXEC, "an existing directory you can read"),
        ("data_out", req.data_out, "dir", WRITE | EXEC, "an existing directory you can write"),
    ]
    for key in ("stage_in", "stage_out"):
        script = getattr(req, key)
        if script not in (None, "tar"):
            checks.append((key, script, "file", READ | EXEC, "an executable script you can read"))
    for key, path, kind, want, fix in checks:
        if path is None:
            continue
        why = problem(path, who, kind, want)
        if why:
            return f"rsa.{key}: {why} (must be {fix})"
    if req.data_in and req.data_out:
        real_in, real_out = os.path.realpath(req.data_in), os.path.realpath(req.data_out)
        if real_out == real_in or real_out.startswith(real_in.rstrip("/") + "/"):
            return (
                f"rsa.data_out: {req.data_out} is inside rsa.data_in {req.data_in} "
                "once links are followed (stage out to a directory outside the inputs)"
            )
    return None
