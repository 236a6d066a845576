"""The wire between the service (parent instance) and the pool agent.

Requests go from the service to ``rsa-pool.<method>`` on the parent broker
rank where the agent registered (``rank`` in ``pool-ready`` and in the KVS
key ``rsa.pool``).  Every method answers at once; outcomes come back later
as notifications: RPCs from the agent to the topic given at launch
(default ``rsa.pool-event``, rank 0) whose payload is ``{"kind": NAME,
"pool": POOL_JOBID, ...fields}``.  doc/pool.md lists every payload.
No Flux, no I/O.
"""

import copy

SERVICE = "rsa-pool"
NOTIFY_TOPIC = "rsa.pool-event"
KVS_KEY = "rsa.pool"
JOB_NAME = "rsa-pool"

# methods the agent serves
HOLD = "hold"
CANCEL = "cancel"
STAGE = "stage"
STOP = "stop"
PURGE = "purge"
LIST = "list"
STATUS = "status"
SHUTDOWN = "shutdown"
DRAIN = "drain"
UNDRAIN = "undrain"
DISCARD = "discard"
MEASURE = "measure"
METHODS = (
    HOLD,
    CANCEL,
    STAGE,
    STOP,
    PURGE,
    LIST,
    STATUS,
    SHUTDOWN,
    DRAIN,
    UNDRAIN,
    DISCARD,
    MEASURE,
)

# notifications the agent sends
POOL_READY = "pool-ready"
HOLDER_ALLOC = "holder-alloc"
HOLDER_START = "holder-start"
RAMDISK_BUILT = "ramdisk-built"
HOLDER_END = "holder-end"
STAGE_PROGRESS = "stage-progress"
STAGE_END = "stage-end"
PURGE_END = "purge-end"
MEASURE_END = "measure-end"
DISCARD_END = "discard-end"
NODE_STATE = "node-state"
NOTIFICATIONS = (
    POOL_READY,
    HOLDER_ALLOC,
    HOLDER_START,
    RAMDISK_BUILT,
    HOLDER_END,
    STAGE_PROGRESS,
    STAGE_END,
    PURGE_END,
    MEASURE_END,
    DISCARD_END,
    NODE_STATE,
)

#: the fields every notification carries besides "kind" and "pool"
NOTIFY_FIELDS = {
    POOL_READY: (
        "jobid",
        "rank",
        "nodes",
        "node_capacity",
        "granule",
        "pool_cores",
        "provider",
        "ramdisk_root",
        "service",
        "notify",
        "uri",
        "simulate_rate",
    ),
    HOLDER_ALLOC: ("jobid", "gen", "nodes", "granted"),
    HOLDER_START: ("jobid", "gen"),
    # volume: what compute nodes mount (servers, user, secret) when the RAM
    # disk spans nodes (provider glusterfs), else null
    RAMDISK_BUILT: ("jobid", "gen", "path", "volume"),
    HOLDER_END: ("jobid", "gen", "error", "kept"),
    STAGE_PROGRESS: ("jobid", "seq", "progress"),
    STAGE_END: ("jobid", "seq", "ok", "error", "reused"),
    PURGE_END: ("jobid", "ok", "error"),
    MEASURE_END: ("jobid", "seq", "ok", "bytes", "files", "error"),
    DISCARD_END: ("path", "ok", "error"),
    NODE_STATE: ("host", "rank", "state"),
}


class Optional:
    """A request field that may be left out: its type(s) and default."""

    def __init__(self, kind, default):
        self.kind = kind
        self.default = default

    def __repr__(self):
        return f"Optional({_name(self.kind)}, default={self.default!r})"


#: request fields and their types, per method; Optional ones may be left out
FIELDS = {
    HOLD: {
        "jobid": int,
        "gen": int,
        "need": int,
        "userid": int,
        # a kept RAM disk of this jobid (from `list`'s kept) to take over
        "adopt": Optional((str, type(None)), None),
        # hosts holding a staged copy of the job's data_in: place it there if it fits
        "prefer": Optional(list, []),
        # file-system images in the RSA node's store, one per compute node of
        # the job (0: none); only for a reservation that fits one RSA node
        "images": Optional(int, 0),
    },
    CANCEL: {"jobid": int, "gen": int},
    STAGE: {
        "jobid": int,
        "seq": int,
        "direction": str,
        "src": str,
        "dst": str,
        "method": (str, type(None)),
        "userid": int,
        "verify": str,
        "nodes": list,
        # bytes expected (a simulated stage lasts size / simulate_rate)
        "size": Optional(int, 0),
        # a staged copy of src on this node to copy from if it still matches src
        "replica": Optional((str, type(None)), None),
        # src is a producer's RAM disk on another RSA node: its volume's
        # servers, user and secret, to mount it there (the hand-off)
        "producer": Optional((dict, type(None)), None),
        # the job's signed request (J): an operation run through the IMP
        # acts as the job's owner only with it (privileged.signed)
        "j": Optional((str, type(None)), None),
        # the compute node lost with the RAM disk's image mounted (its hold
        # is broken, the image checked, before the stage-out reads it)
        "reclaim": Optional((str, type(None)), None),
    },
    STOP: {"jobid": int, "seq": int},
    PURGE: {
        "jobid": int,
        "path": str,
        "data_in": (str, type(None)),
        "userid": int,
        "nodes": list,
    },
    LIST: {},
    STATUS: {},
    # keep: [{jobid, gen}] holders whose RAM disks outlive the pool
    SHUTDOWN: {"keep": Optional(list, [])},
    DRAIN: {"host": str, "reason": Optional(str, "")},
    UNDRAIN: {"host": str},
    DISCARD: {"path": str},
    MEASURE: {
        "jobid": int,
        "seq": int,
        "path": str,
        "userid": int,
        "j": Optional((str, type(None)), None),
    },
}


class BadRequest(ValueError):
    pass


def topic(method):
    return f"{SERVICE}.{method}"


def check(method, payload):
    """The request payload, checked: raises BadRequest naming the field."""
    if method not in FIELDS:
        raise BadRequest(
            f"{topic(method)}: unknown method (known: {', '.join(METHODS)})"
        )
    if payload is None:
        payload = {}
    if not isinstance(payload, dict):
        raise BadRequest(f"{topic(method)}: payload must be a JSON object")
    payload = dict(payload)
    for name, kind in FIELDS[method].items():
        if isinstance(kind, Optional):
            if payload.get(name) is None:
                payload[name] = copy.copy(kind.default)
            kind = kind.kind
        if name not in payload:
            raise BadRequest(f"{topic(method)}: missing field {name!r}")
        value = payload[name]
        if (isinstance(value, bool) and kind is not bool) or not isinstance(
            value, kind
        ):
            raise BadRequest(f"{topic(method)}: {name}={value!r} must be {_name(kind)}")
    if method == STAGE:
        if payload["direction"] not in ("in", "out"):
            raise BadRequest(
                f"{topic(method)}: direction={payload['direction']!r} must be \"in\" or \"out\""
            )
        if payload["verify"] not in ("size", "checksum", "none"):
            raise BadRequest(
                f"{topic(method)}: verify={payload['verify']!r} must be size or checksum"
            )
    if method in (STAGE, PURGE) and not payload["nodes"]:
        raise BadRequest(
            f"{topic(method)}: nodes is empty (give the holder's nodes from holder-alloc)"
        )
    if method == HOLD and payload["need"] <= 0:
        raise BadRequest(
            f"{topic(method)}: need={payload['need']} must be more than 0 bytes"
        )
    if method == STAGE and payload["size"] < 0:
        raise BadRequest(
            f"{topic(method)}: size={payload['size']} must be 0 or more bytes"
        )
    if method == SHUTDOWN:
        payload["keep"] = [_keep_entry(entry) for entry in payload["keep"]]
    if method in (DISCARD, MEASURE) or (
        method == HOLD and payload["adopt"] is not None
    ):
        field = "adopt" if method == HOLD else "path"
        if not payload[field].startswith("/"):
            raise BadRequest(
                f"{topic(method)}: {field}={payload[field]!r} must be an absolute path"
            )
    return payload


def _keep_entry(entry):
    ok = isinstance(entry, dict) and all(
        isinstance(entry.get(k), int) and not isinstance(entry.get(k), bool)
        for k in ("jobid", "gen")
    )
    if not ok:
        raise BadRequest(
            f"{topic(SHUTDOWN)}: keep entry {entry!r} must be "
            '{"jobid": int, "gen": int}'
        )
    return {"jobid": entry["jobid"], "gen": entry["gen"]}


def _name(kind):
    return getattr(kind, "__name__", None) or " or ".join(k.__name__ for k in kind)


# --- agent side: notification payloads --------------------------------------


def notification(name, pool, **fields):
    if name not in NOTIFICATIONS:
        raise ValueError(f"unknown notification {name!r}")
    missing = [f for f in NOTIFY_FIELDS[name] if f not in fields]
    if missing:
        raise ValueError(f"notification {name!r} without {', '.join(missing)}")
    return {"kind": name, "pool": pool, **fields}


def progress_fields(line):
    """The stager's progress JSON reduced to the fields the core keeps."""
    keys = ("bytes_done", "bytes_total", "files_done", "files_total", "rate", "quiet")
    return {k: line.get(k, 0) for k in keys} | {"phase": line.get("phase")}
