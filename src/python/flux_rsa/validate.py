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
is refused by the stager anyway, which runs as the user.
"""

import errno
import time

import flux.resource
from flux.job.validator import ValidatorPlugin

from flux_rsa.access import Who
from flux_rsa.checks import Pool, check_request
from flux_rsa.core import BadConfig, Policy


POOL_TTL = 1.0  # s a worker uses one reading of the pool's size
WHO_TTL = 1.0  # s a worker uses one look-up of a user's groups
WHO_KEEP = 1024  # users remembered at most (all forgotten beyond)


class Validator(ValidatorPlugin):
    _pool_read = None  # (monotonic time, Pool or None) of the last reading
    _who = None  # uid -> (monotonic time, Who) of its last look-up

    def pool(self):
        """The pool's size, read at most once every POOL_TTL seconds."""
        now = time.monotonic()
        if self._pool_read is None or now - self._pool_read[0] >= POOL_TTL:
            self._pool_read = (now, self.read_pool())
        return self._pool_read[1]

    def who(self, uid):
        """User ``uid`` and its groups, looked up at most once every WHO_TTL
        seconds."""
        now = time.monotonic()
        if self._who is None or len(self._who) > WHO_KEEP:
            self._who = {}
        seen = self._who.get(uid)
        if seen is None or now - seen[0] >= WHO_TTL:
            seen = self._who[uid] = (now, Who(uid))
        return seen[1]

    def read_pool(self):
        """The RSA pool's size now, or None when it cannot be told (no or
        bad [rsa] table, no RSA nodes): rsa.capacity is then not bounded here."""
        try:
            policy = Policy.from_config(self.flux.conf_get("rsa", default={}, update=True))
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
        pool = self.pool() if isinstance(attrs, dict) and attrs.get("capacity") is not None else None
        why = check_request(attrs, job.userid, pool=pool, who=self.who(job.userid))
        if why:
            return (errno.EINVAL, why)
        return None
