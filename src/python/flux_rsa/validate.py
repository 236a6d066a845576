"""job-ingest validator for RSA jobs: refuse bad ``attributes.system.rsa``
at submit, with one line naming the key, the value and the fix.

    [ingest.validator]
    plugins = ["jobspec", "<python site dir>/flux_rsa/validate.py"]

Paths are judged as the submitting user (job-ingest runs as the instance
owner); rsa.capacity is bounded by the pool: the instance's RSA nodes
(``[rsa] property``) times ``[rsa] node-capacity``.  A worker reads
the pool's size (the config and the resource set: two RPCs, ~5 ms) at most
once a second (POOL_TTL): a burst of submissions shares one reading, and a
change of the instance's RSA nodes or ``[rsa]`` reaches the check within
that second.  The submitting user's groups (the name service: 0.1-0.3 ms
here, more with a directory service) are looked up once a second per user
in the same way; a path the user could read a second ago and cannot now
is refused by the stager anyway, which runs as the user.  So is the whole
check: the same request from the same user (a job array, a scripted burst)
against the same pool, once accepted, is accepted again for a second
without a look; a refused one is judged afresh each time (its user may be
fixing what the refusal names).
"""

import errno
import json
import time

import flux.resource
from flux.job.validator import ValidatorPlugin

from flux_rsa.access import Who
from flux_rsa.checks import Pool, check_request
from flux_rsa.core import BadConfig, Policy

POOL_TTL = 1.0  # s a worker uses one reading of the pool's size
WHO_TTL = 1.0  # s a worker uses one look-up of a user's groups
WHO_KEEP = 1024  # users remembered at most (all forgotten beyond)
CHECK_TTL = 1.0  # s a worker accepts again one user's same request, accepted
CHECK_KEEP = 1024  # answers remembered at most


class Readings:
    """Values read at most once every ``ttl`` seconds, by key; beyond
    ``keep`` keys all are forgotten."""

    def __init__(self, ttl, keep=1):
        self.ttl, self.keep = ttl, keep
        self.seen = {}  # key -> (monotonic time, value) of its last reading

    def __len__(self):
        return len(self.seen)

    def get(self, key, read):
        now = time.monotonic()
        seen = self.seen.get(key)
        if seen is None or now - seen[0] >= self.ttl:
            if len(self.seen) >= self.keep:
                self.seen.clear()
            seen = self.seen[key] = (now, read())
        return seen[1]

    def forget(self, key):
        self.seen.pop(key, None)


class Validator(ValidatorPlugin):
    _pool = _who = _checked = None  # Readings, made on first use

    def pool(self):
        """The pool's size, read at most once every POOL_TTL seconds."""
        if self._pool is None:
            self._pool = Readings(POOL_TTL)
        return self._pool.get(None, self.read_pool)

    def who(self, uid):
        """User ``uid`` and its groups, looked up at most once every WHO_TTL
        seconds."""
        if self._who is None:
            self._who = Readings(WHO_TTL, WHO_KEEP)
        return self._who.get(uid, lambda: Who(uid))

    def check(self, attrs, userid, pool):
        """check_request's answer; an acceptance is reused for CHECK_TTL
        seconds for the same request of the same user against the same pool."""
        if self._checked is None:
            self._checked = Readings(CHECK_TTL, CHECK_KEEP)
        key = (userid, json.dumps(attrs, sort_keys=True), pool)
        why = self._checked.get(
            key, lambda: check_request(attrs, userid, pool=pool, who=self.who(userid))
        )
        if why is not None:
            self._checked.forget(
                key
            )  # judged afresh: the user may be fixing what it names
        return why

    def read_pool(self):
        """The RSA pool's size now, or None when it cannot be told (no or
        bad [rsa] table, no RSA nodes): rsa.capacity is then not bounded here."""
        try:
            policy = Policy.from_config(
                self.flux.conf_get("rsa", default={}, update=True)
            )
            rset = flux.resource.resource_list(self.flux).get().all
            nodes = rset.copy_constraint({"properties": [policy.node_property]}).nnodes
        except (BadConfig, OSError, ValueError, TypeError):
            return None
        return Pool(policy, nodes) if nodes else None

    def validate(self, job):
        try:
            attrs = job.jobspec["attributes"]["system"]["rsa"]
        except (KeyError, TypeError):
            return None
        pool = (
            self.pool()
            if isinstance(attrs, dict) and attrs.get("capacity") is not None
            else None
        )
        why = self.check(attrs, job.userid, pool) or _per_node(attrs, job.jobspec)
        if why:
            return (errno.EINVAL, why)
        return None


def _per_node(attrs, jobspec):
    """Why rsa.fs=per-node cannot be given to this job, or None."""
    if not isinstance(attrs, dict) or attrs.get("fs") != "per-node":
        return None
    from flux_rsa.core.request import BadRequest, parse_request, per_node_problem
    from flux_rsa.service.jobs import count_nodes, fixed_nodes

    try:
        request = parse_request(attrs)
    except BadRequest:
        return None  # (said by check_request)
    nodes = count_nodes(jobspec) if fixed_nodes(jobspec) else None
    return per_node_problem(request, nodes)
