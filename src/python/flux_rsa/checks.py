"""Submit-time checks of a job's RSA request: its shape (core.request),
the RSA pool's size, and the file system as the submitting user would see
it (used by the job-ingest validator; runs without Flux)."""

from dataclasses import dataclass

from flux_rsa.access import EXEC, READ, WRITE, Who, look, shown
from flux_rsa.core import BadRequest, Policy, parse_request
from flux_rsa.core.request import show
from flux_rsa.core.units import format_size


@dataclass(frozen=True)
class Pool:
    """How much RAM disk the instance's RSA nodes can ever give one job."""

    policy: Policy
    nodes: int  # RSA nodes (up or not)

    @property
    def node_bytes(self):
        return self.policy.node_granules * self.policy.granule

    @property
    def largest(self):
        return self.policy.largest(self.nodes)


def _too_big(attrs, req, pool):
    if pool is None or req.capacity is None:
        return None
    if pool.policy.layout(req.capacity, pool.nodes) is not None:
        return None
    if not pool.policy.spans:
        return (
            f"rsa.capacity: {show(attrs['capacity'])} is more than one RSA node holds "
            f"({format_size(pool.node_bytes)}), and this site's RAM disks cannot span nodes "
            f'([rsa] provider = "{pool.policy.provider}"): ask for at most '
            f"{format_size(pool.node_bytes)}"
        )
    less = (
        ", less the headroom of a RAM disk over several nodes"
        if pool.policy.spread_by
        else ""
    )
    return (
        f"rsa.capacity: {show(attrs['capacity'])} is more than the RSA pool can ever hold "
        f"(at most {format_size(pool.largest)}: {pool.nodes} RSA node(s) x "
        f"{format_size(pool.node_bytes)}{less})"
    )


def check_request(attrs, userid, pool=None, who=None):
    """The first thing wrong with a job's rsa attributes, as one line, or
    None.  ``pool`` (a Pool), when known, bounds rsa.capacity; ``who``
    (an access.Who of ``userid``) saves looking the user up."""
    try:
        req = parse_request(attrs)
    except BadRequest as exc:
        return str(exc)
    if not req.wants_rsa:
        return None
    why = _too_big(attrs, req, pool)
    if why:
        return why
    who = who or Who(userid)
    checks = [
        (
            "data_in",
            req.data_in,
            "dir",
            READ | EXEC,
            "an existing directory you can read",
        ),
        (
            "data_out",
            req.data_out,
            "dir",
            WRITE | EXEC,
            "an existing directory you can write",
        ),
    ]
    for key in ("stage_in", "stage_out"):
        script = getattr(req, key)
        if script not in (None, "tar"):
            checks.append(
                (key, script, "file", READ | EXEC, "an executable script you can read")
            )
    real = {}
    for key, path, kind, want, fix in checks:
        if path is None:
            continue
        real[key], why = look(path, who, kind, want)
        if why:
            return f"rsa.{key}: {why} (must be {fix})"
    if req.data_in and req.data_out:
        real_in, real_out = real["data_in"], real["data_out"]
        if real_out == real_in or real_out.startswith(real_in.rstrip("/") + "/"):
            return (
                f"rsa.data_out: {shown(req.data_out)} is inside rsa.data_in {shown(req.data_in)} "
                "once links are followed (stage out to a directory outside the inputs)"
            )
    return None
