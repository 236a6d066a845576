"""The site's ``[rsa]`` configuration, checked, with the thesis's knobs.

``Policy.from_config(table)`` refuses a bad table with one message naming
the key, the value and what is accepted.  Nothing here reads a file.
"""

import dataclasses
import functools
import math
import posixpath
from dataclasses import dataclass

import jsonschema

from flux_rsa.core import paths as job_paths
from flux_rsa.core import providercaps, spread
from flux_rsa.core.units import parse_duration, parse_size

SIZE = {"type": ["string", "integer"], "description": 'a size such as "16G"'}
DURATION = {"type": ["string", "number"], "description": 'a duration such as "5m"'}
SCRIPT = {
    "type": "string",
    "pattern": "^/",
    "description": "the absolute path of a site script (owned by root, not writable by others)",
}
#: the steps of provider ``command``: its site scripts, required first
COMMAND_STEPS = providercaps.COMMAND_STEPS

SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "proportion": {
            "type": "integer",
            "minimum": 1,
            "description": "compute nodes per RSA node",
        },
        "min-nodes": {
            "type": "integer",
            "minimum": 1,
            "description": "smallest job (nodes) that gets a RAM disk",
        },
        "delay": DURATION,
        "on-late": {"enum": ["ignore", "wait"], "description": '"ignore" or "wait"'},
        "paths": {
            "enum": list(job_paths.SITE_MODES),
            "description": '"auto" (bind where job shells may make a user namespace, '
            'else env), "bind" or "env"',
        },
        "late-timeout": DURATION,
        "lock-in": {"type": "boolean", "description": "true or false"},
        "lookahead": DURATION,
        "ondeck-depth": {
            "type": "integer",
            "minimum": 1,
            "description": "pending jobs looked at without estimates",
        },
        "keep-demoted": {"type": "boolean", "description": "true or false"},
        "headroom": {
            "type": "number",
            "minimum": 0,
            "maximum": 1000,
            "description": "0 (off) or the factor applied to the size of data_in, such as 1.5",
        },
        "reuse": {"type": "boolean", "description": "true or false"},
        "stage-rate": SIZE,
        "node-capacity": SIZE,
        "granule": SIZE,
        "span-fill": {
            "type": "number",
            "minimum": 0,
            "exclusiveMaximum": 1,
            "description": "0 (no headroom) or the share of a RAM disk over several RSA "
            "nodes every job can fill, such as 0.95",
        },
        "provider": {
            "enum": list(providercaps.PROVIDERS),
            "description": " or ".join(
                f'"{name}" ({caps.summary})'
                for name, caps in providercaps.PROVIDERS.items()
            ),
        },
        "attach": {
            "enum": ["export", "site"],
            "description": '"export" (compute nodes mount each RAM disk over the '
            'network) or "site" (the site shows ramdisk-root on compute '
            "nodes under the same path; flux-rsa only checks)",
        },
        "command-create": SCRIPT,
        "command-destroy": SCRIPT,
        "command-attach": SCRIPT,
        "command-detach": SCRIPT,
        "command-spans": {"type": "boolean", "description": "true or false"},
        "mount-root": {
            "type": "string",
            "pattern": "^/",
            "description": "an absolute directory on compute nodes",
        },
        "fs-host": {
            "type": "string",
            "pattern": "^[A-Za-z0-9._-]*(\\{host\\}[A-Za-z0-9._-]*)?$",
            "description": 'the address of an RSA node\'s file-system server, "{host}" '
            'standing for its name (e.g. "{host}-ib0")',
        },
        "fs-ports": {
            "type": "string",
            "pattern": "^[0-9]+-[0-9]+$",
            "description": 'a range of TCP ports such as "24100-24999"',
        },
        "privilege": {
            "enum": ["auto", "direct", "imp"],
            "description": '"auto", "direct" or "imp" (through flux-imp run rsa)',
        },
        "ramdisk-root": {
            "type": "string",
            "pattern": "^/",
            "description": "an absolute directory on the RSA nodes",
        },
        "property": {
            "type": "string",
            "minLength": 1,
            "description": "the resource property of RSA nodes",
        },
        "queue": {
            "type": "string",
            "minLength": 1,
            "description": "the name of the queue of the RSA nodes",
        },
        "stage-workers": {
            "type": "integer",
            "minimum": 0,
            "description": "copy workers per RSA node (0: one per core)",
        },
        "pool-cores": {
            "type": "integer",
            "minimum": 2,
            "description": "virtual cores per RSA node in the pool",
        },
        "keep": {
            "type": "integer",
            "minimum": 0,
            "description": "records of ended jobs kept for `flux rsa status`",
        },
        "simulate-rate": SIZE,
        "stage-retries": {
            "type": "integer",
            "minimum": 0,
            "description": "a number of retries (0: none)",
        },
        "retry-backoff": DURATION,
        "stage-timeout": DURATION,
        "holder-timeout": DURATION,
        "start-timeout": DURATION,
        "max-hold": DURATION,
        "handoff-keep": DURATION,
        "script-quiet": DURATION,
        "image-writeback": SIZE,
    },
}


_ALIAS = {"property": "node_property"}


class BadConfig(ValueError):
    pass


@dataclass(frozen=True)
class Policy:
    proportion: int = 128  # thesis PROPORTION
    min_nodes: int = 1
    delay: float = 300.0  # thesis DEFAULT_DELAY
    on_late: str = "ignore"  # thesis behaviour: start on data_in
    paths: str = "auto"  # rsa.paths of jobs that do not say (core.paths)
    userns: bool = True  # may job shells here make a user namespace? (the service looks; not an [rsa] key)
    late_timeout: float = 600.0
    lock_in: bool = True
    lookahead: float = 900.0
    ondeck_depth: int = 8
    keep_demoted: bool = (
        True  # a demoted job keeps its data until the capacity is needed
    )
    headroom: float = (
        0.0  # >0: capacity = size of data_in x headroom (when rsa.capacity is unset)
    )
    reuse: bool = False  # stage-in copies a same-owner, unchanged data_in already staged on the node
    stage_rate: int = 200 * 2**20  # bytes/s assumed until stage-ins are measured
    node_capacity: int = 4 * 2**30
    granule: int = 2**30
    span_fill: float = (
        spread.FILL
    )  # a RAM disk over several nodes holds this share surely
    provider: str = "tmpfs"
    attach: str = "export"  # how compute nodes reach RAM disks (see SCHEMA)
    mount_root: str = ""  # where compute nodes attach RAM disks ("": ramdisk_root)
    fs_host: str = "{host}"  # how clients reach an RSA node's file-system server
    fs_ports: str = "24100-24999"  # ports for file-system servers, a block per holder
    command_create: str = ""  # provider command: the site's scripts for each step
    command_destroy: str = ""
    command_attach: str = (
        ""  # "": compute nodes reach the RAM disk by the site's own means
    )
    command_detach: str = ""
    command_spans: bool = True  # provider command: may one RAM disk span RSA nodes?
    privilege: str = "auto"  # how the pool runs what needs root (privileged.caller)
    imp: str = ""  # the instance's [exec] imp (not an [rsa] key)
    pool_nodes: int = 0  # the pool's RSA nodes, once known (not an [rsa] key)
    ramdisk_root: str = "/var/lib/flux-rsa"
    node_property: str = "rsa"  # config key: property
    queue: str = ""  # the queue the pool is submitted to ("": the default queue)
    stage_workers: int = 0
    pool_cores: int = 64
    keep: int = 1000
    simulate_rate: int = 0  # bytes/s: >0 simulates RAM disks and staging (benchmarks)
    stage_retries: int = 3
    retry_backoff: float = 5.0
    stage_timeout: float = 6 * 3600.0
    holder_timeout: float = 600.0
    start_timeout: float = 60.0  # read by the jobtap plugin (not the service)
    max_hold: float = 1200.0  # read by the jobtap plugin (not the service)
    handoff_keep: float = 600.0  # a producer's RAM disk kept for its readers, once home
    script_quiet: float = 300.0  # a stage script this long quiet is said to be (status)
    #: the most a compute node keeps unwritten of a job's image (0: the
    #: kernel's own limits); the rest goes to the RSA node while the job
    #: runs, so that its end (after its nodes are given back) has at most
    #: this much to write
    image_writeback: int = providercaps.IMAGE_WRITEBACK

    @classmethod
    def from_config(cls, table, imp="", userns=True):
        """The policy of an ``[rsa]`` table; ``imp`` is the instance's
        ``[exec] imp`` (the IMP privileged operations may go through);
        ``userns`` says whether job shells may make a user namespace here
        (what ``[rsa] paths = "auto"`` follows)."""
        table = {} if table is None else table
        error = jsonschema.exceptions.best_match(_checker().iter_errors(table))
        if error is not None:
            raise BadConfig(_message(error))
        values = {}
        for key, value in table.items():
            name = _ALIAS.get(key, key.replace("-", "_"))
            if SCHEMA["properties"][key] is SIZE:
                value = _checked(parse_size, value, key)
            elif SCHEMA["properties"][key] is DURATION:
                value = _checked(parse_duration, value, key)
            values[name] = value
        policy = cls(**values, imp=imp or "", userns=bool(userns))
        if policy.granule <= 0:
            raise BadConfig(
                f"[rsa] granule: {table.get('granule')!r} must be larger than 0 (e.g. \"1G\")"
            )
        low, _, high = policy.fs_ports.partition("-")
        if not 0 < int(low) <= int(high) < 65536:
            raise BadConfig(
                f"[rsa] fs-ports: {policy.fs_ports!r} must be LOW-HIGH with "
                "0 < LOW <= HIGH < 65536"
            )
        _check_provider_keys(policy, table)
        if policy.node_capacity < policy.granule:
            raise BadConfig(
                f"[rsa] node-capacity: {table.get('node-capacity', policy.node_capacity)!r} is smaller "
                f"than one granule ({policy.granule} bytes); raise node-capacity or lower granule"
            )
        return policy

    # --- per job ---

    def limits(self):
        from flux_rsa.core.record import Limits

        return Limits(
            late_timeout=self.late_timeout,
            lock_in=self.lock_in,
            stage_retries=self.stage_retries,
            retry_backoff=self.retry_backoff,
            stage_timeout=self.stage_timeout,
            holder_timeout=self.holder_timeout,
            headroom=self.headroom,
            granule=self.granule,
            most=self.largest(self.pool_nodes) if self.pool_nodes else 0,
            mount_root=self.mount_root,
            handoff_keep=self.handoff_keep,
            script_quiet=self.script_quiet,
        )

    def ineligible(self, nnodes, request):
        """Why a job gets no RAM disk, or None when it does."""
        if not request.wants_rsa:
            return "no rsa.data_in, rsa.data_out or rsa.capacity"
        if nnodes < self.min_nodes:
            return f"job has {nnodes} node(s); the site's minimum for a RAM disk is {self.min_nodes}"
        return None

    def resolve(self, request):
        """The request with the site's defaults filled in."""
        on_late = request.on_late
        if on_late is None:
            # a stage-in script may unpack or pre-process: never start on
            # half of it; a scratch job has nothing to use but its RAM disk
            script = request.stage_in not in (None, "tar")
            on_late = "wait" if script or request.scratch else self.on_late
        delay = self.delay if request.delay is None else request.delay
        paths = job_paths.resolve(
            request.paths, self.paths, self.userns, request.data_in, request.data_out
        )
        return dataclasses.replace(request, on_late=on_late, delay=delay, paths=paths)

    @property
    def default_paths(self):
        """rsa.paths of a job that does not say (paths it can show)."""
        return job_paths.resolve(None, self.paths, self.userns, "/in", "/out")

    @property
    def caps(self):
        """What the provider can do (core.providercaps)."""
        return providercaps.caps(self.provider)

    @property
    def spans(self):
        """Can one RAM disk span several RSA nodes with this provider?"""
        return self.caps.spans_with(self)

    @property
    def exported(self):
        """Do compute nodes mount RAM disks over the network?"""
        return self.caps.exported(self)

    @property
    def images(self):
        """May a one-node RAM disk be a file-system image that its job's one
        compute node mounts itself (the provider of one-node RAM disks makes
        them, and exports RAM disks to compute nodes)?"""
        one = providercaps.caps(self.caps.one_node or self.provider)
        return one.images and one.exported(self) and self.simulate_rate == 0

    def image_for(self, request, one_node):
        """Is the RAM disk of a job with ``request``, which runs on one
        compute node (``one_node``) or maybe several, made of images (one
        per compute node)?  A job on one node gets one unless it asks for a
        shared file system; a job on several only when it asks for
        per-node ones (rsa.fs=per-node, checked at submit to give -N)."""
        if not self.images or request.fs == "shared":
            return False
        return one_node or request.fs == "per-node"

    @property
    def scripts(self):
        """Provider command's site scripts that are set: {step: path}."""
        return {
            step: getattr(self, f"command_{step}")
            for step in COMMAND_STEPS
            if getattr(self, f"command_{step}")
        }

    @property
    def node_bytes(self):
        """The most one RSA node holds for RAM disks (whole granules)."""
        return self.node_granules * self.granule

    def need(self, nnodes, request):
        """Bytes of RAM disk to reserve, in whole granules (at least one).
        A default (no rsa.capacity) larger than the pool can hold is
        clamped by the core (``Limits.most``, or the on-deck pass's TooBig
        when the pool was not known yet); rsa.capacity above it is refused
        at submit."""
        if request.capacity is not None:
            want = request.capacity
        else:
            want = nnodes * self.node_capacity / self.proportion
        return max(1, math.ceil(want / self.granule)) * self.granule

    def layout(self, need, nodes):
        """(RSA nodes, granules charged on each) of a reservation of
        ``need`` bytes over at most ``nodes`` RSA nodes: one node when it
        fits one, else the fewest whose equal shares fit with the headroom
        the provider's placement needs (core.spread).  None when it cannot
        fit."""
        return spread.layout(
            need,
            self.granule,
            self.node_granules,
            self.spread_by,
            nodes if self.spans else 1,
        )

    def largest(self, nodes):
        """The most bytes one reservation can be over ``nodes`` RSA nodes."""
        return spread.largest(
            self.granule, self.node_granules, self.spread_by, nodes if self.spans else 1
        )

    @property
    def spread_by(self):
        """How a RAM disk over several nodes places its files, as
        ``core.spread`` counts its headroom: (piece, fill); None when it
        gets none (the provider balances its nodes itself, or span-fill
        is 0)."""
        if not self.caps.piece or not self.span_fill:
            return None
        return self.caps.piece, self.span_fill

    def port_range(self):
        low, _, high = self.fs_ports.partition("-")
        return int(low), int(high)

    def sizes_from_input(self, request):
        """True when the reservation is sized from the measured data_in."""
        return (
            self.headroom > 0
            and request.capacity is None
            and request.data_in is not None
        )

    def granules(self, nbytes):
        return math.ceil(nbytes / self.granule)

    @property
    def node_granules(self):
        return self.node_capacity // self.granule


def _check_provider_keys(policy, table):
    """A provider's own keys (its prefix, e.g. command-) mean nothing to the
    others; it needs some of them, some come in pairs, and a script's path
    must be plain."""
    caps = policy.caps
    for other in providercaps.PROVIDERS.values():
        if other is caps or not other.config_prefix:
            continue
        given = [key for key in table if key.startswith(other.config_prefix)]
        if given:
            raise BadConfig(
                f'[rsa] {given[0]}: only used with provider = "{other.name}" '
                f"(provider is {policy.provider!r}): remove it or set provider = "
                f'"{other.name}"'
            )
    for key in caps.config_needs:
        if not table.get(key):
            raise BadConfig(
                f'[rsa] provider = "{policy.provider}" needs {key} (the absolute '
                "path of the site's script for that step; see flux-config-rsa(5))"
            )
    for first, second in caps.config_together:
        if bool(table.get(first)) != bool(table.get(second)):
            have, lack = (first, second) if table.get(first) else (second, first)
            raise BadConfig(
                f"[rsa] {have} needs {lack} too (compute nodes that "
                f"{have.rpartition('-')[2]} the RAM disk must also "
                f"{lack.rpartition('-')[2]} it), or remove {have}"
            )
    for key, value in table.items():
        if SCHEMA["properties"].get(key) is SCRIPT and (
            posixpath.normpath(value) != value or value.startswith("//")
        ):
            raise BadConfig(
                f"[rsa] {key}: {value!r} is not a plain absolute path (no "
                f"'.', '..', '//' or trailing '/'; e.g. {posixpath.normpath(value)!r})"
            )


def _checked(parse, value, key):
    try:
        return parse(value, f"[rsa] {key}")
    except ValueError as exc:
        raise BadConfig(str(exc)) from None


@functools.cache
def _checker():
    """One validator for SCHEMA, built on first use: jsonschema.validate()
    would check the schema itself again on every call (17 ms, most of the
    job-ingest validator's cost per job with rsa.capacity)."""
    return jsonschema.validators.validator_for(SCHEMA)(SCHEMA)


def _message(exc):
    path = list(exc.absolute_path)
    if exc.validator == "additionalProperties":
        known = ", ".join(SCHEMA["properties"])
        extra = sorted(set(exc.instance) - set(SCHEMA["properties"]))
        return f"[rsa] {extra[0]}: unknown key (known keys: {known})"
    if not path:
        return f"[rsa]: {exc.message}"
    key = path[0]
    what = SCHEMA["properties"].get(key, {}).get("description", "")
    return f"[rsa] {key}: {exc.instance!r} is not valid (use {what})"
