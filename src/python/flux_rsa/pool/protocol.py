"""The wire between the service (parent instance) and the pool agent.

Requests go from the service to ``rsa-pool.<method>`` on the parent broker
rank where the agent registered (``rank`` in ``pool-ready`` and in the KVS
key ``rsa.pool``).  Every method answers at once; outcomes come back later
as notifications: RPCs from the agent to the topic given at launch
(default ``rsa.pool-event``, rank 0) whose payload is ``{"kind": NAME,
"pool": POOL_JOBID, ...fields}``.  doc/pool.md lists every payload.
No Flux, no I/O.
"""

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
METHODS = (HOLD, CANCEL, STAGE, STOP, PURGE, LIST, STATUS, SHUTDOWN)

# notifications the agent sends
POOL_READY = "pool-ready"
HOLDER_ALLOC = "holder-alloc"
HOLDER_START = "holder-start"
RAMDISK_BUILT = "ramdisk-built"
HOLDER_END = "holder-end"
STAGE_PROGRESS = "stage-progress"
STAGE_END = "stage-end"
PURGE_END = "purge-end"
NOTIFICATIONS = (POOL_READY, HOLDER_ALLOC, HOLDER_START, RAMDISK_BUILT,
                 HOLDER_END, STAGE_PROGRESS, STAGE_END, PURGE_END)

#: required request fields and their types, per method
FIELDS = {
    HOLD: {"jobid": int, "gen": int, "need": int, "userid": int},
    CANCEL: {"jobid": int, "gen": int},
    STAGE: {"jobid": int, "seq": int, "direction": str, "src": str, "dst": str,
            "method": (str, type(None)), "userid": int, "verify": str, "nodes": list},
    STOP: {"jobid": int, "seq": int},
    PURGE: {"jobid": int, "path": str, "data_in": (str, type(None)), "userid": int,
            "nodes": list},
    LIST: {},
    STATUS: {},
    SHUTDOWN: {},
}


class BadRequest(ValueError):
    pass


def topic(method):
    return f"{SERVICE}.{method}"


def check(method, payload):
    """The request payload, checked: raises BadRequest naming the field."""
    if method not in FIELDS:
        raise BadRequest(f"{topic(method)}: unknown method (known: {', '.join(METHODS)})")
    if payload is None:
        payload = {}
    if not isinstance(payload, dict):
        raise BadRequest(f"{topic(method)}: payload must be a JSON object")
    for name, kind in FIELDS[method].items():
        if name not in payload:
            raise BadRequest(f"{topic(method)}: missing field {name!r}")
        value = payload[name]
        if isinstance(value, bool) or not isinstance(value, kind):
            want = getattr(kind, "__name__", None) or " or ".join(k.__name__ for k in kind)
            raise BadRequest(f"{topic(method)}: {name}={value!r} must be {want}")
    if method == STAGE:
        if payload["direction"] not in ("in", "out"):
            raise BadRequest(f"{topic(method)}: direction={payload['direction']!r} must be \"in\" or \"out\"")
        if payload["verify"] not in ("size", "checksum", "none"):
            raise BadRequest(f"{topic(method)}: verify={payload['verify']!r} must be size or checksum")
    if method in (STAGE, PURGE) and not payload["nodes"]:
        raise BadRequest(f"{topic(method)}: nodes is empty (give the holder's nodes from holder-alloc)")
    if method == HOLD and payload["need"] <= 0:
        raise BadRequest(f"{topic(method)}: need={payload['need']} must be more than 0 bytes")
    return payload


# --- agent side: notification payloads --------------------------------------


def notification(name, pool, **fields):
    if name not in NOTIFICATIONS:
        raise ValueError(f"unknown notification {name!r}")
    return {"kind": name, "pool": pool, **fields}


def progress_fields(line):
    """The stager's progress JSON reduced to the fields the core keeps."""
    keys = ("bytes_done", "bytes_total", "files_done", "files_total", "rate")
    return {k: line.get(k, 0) for k in keys} | {"phase": line.get("phase")}
