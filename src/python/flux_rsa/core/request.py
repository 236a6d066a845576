"""A job's RSA request: ``attributes.system.rsa`` checked for shape and type.

Only what can be checked without the file system lives here (the submit-time
validator adds existence and permission checks).  Every refusal names the
key, the value and what would be accepted.
"""

from flux_rsa.core.record import Request
from flux_rsa.core.units import parse_duration, parse_size

#: keys a user may set, and what each accepts (for messages and docs)
KEYS = {
    "data_in": "an absolute path to a directory to stage in",
    "data_out": "an absolute path to a directory to stage out to",
    "stage_in": '"copy", "tar", or the absolute path of an executable script',
    "stage_out": '"copy", "tar", or the absolute path of an executable script',
    "delay": 'seconds or a duration such as "5m" before inputs are dropped',
    "capacity": 'a RAM-disk size such as "16G"',
    "on_late": '"ignore" (start on data_in) or "wait" (hold the job for its inputs)',
    "verify": '"size" or "checksum"',
}

MAX_PATH = 4096


class BadRequest(ValueError):
    pass


def _path(key, value):
    if not isinstance(value, str):
        raise BadRequest(f"rsa.{key}: {value!r} is not a path ({KEYS[key]})")
    if not value.startswith("/"):
        raise BadRequest(f"rsa.{key}: {value!r} is not absolute ({KEYS[key]})")
    if len(value) > MAX_PATH or "\0" in value:
        raise BadRequest(f"rsa.{key}: path too long or contains NUL ({KEYS[key]})")
    normal = "/" + "/".join(p for p in value.split("/") if p not in ("", "."))
    if "/../" in normal + "/":
        raise BadRequest(f"rsa.{key}: {value!r} contains '..' ({KEYS[key]})")
    return normal


def _method(key, value):
    if value in (None, "copy"):
        return None
    if value == "tar":
        return "tar"
    return _path(key, value)


def _choice(key, value, choices):
    if value not in choices:
        raise BadRequest(f"rsa.{key}: {value!r} is not allowed ({KEYS[key]})")
    return value


def parse_request(attrs):
    """Request from ``attributes.system.rsa`` (None: the job asks for nothing)."""
    if attrs is None:
        return Request()
    if not isinstance(attrs, dict):
        raise BadRequest(
            f"rsa: {attrs!r} is not a table of settings "
            "(use e.g. --setattr=rsa.data_in=/abs/dir --setattr=rsa.data_out=/abs/dir)"
        )
    unknown = sorted(set(attrs) - set(KEYS))
    if unknown:
        raise BadRequest(f"rsa.{unknown[0]}: unknown key (known keys: {', '.join(KEYS)})")
    get = attrs.get
    data_in = _path("data_in", get("data_in")) if get("data_in") is not None else None
    data_out = _path("data_out", get("data_out")) if get("data_out") is not None else None
    if data_in and data_out:
        if data_out == data_in or data_out.startswith(data_in.rstrip("/") + "/"):
            raise BadRequest(
                f"rsa.data_out: {data_out!r} is inside rsa.data_in {data_in!r} "
                "(stage out to a directory outside the inputs)"
            )
    try:
        delay = parse_duration(get("delay"), "rsa.delay") if get("delay") is not None else None
        capacity = parse_size(get("capacity"), "rsa.capacity") if get("capacity") is not None else None
    except ValueError as exc:
        raise BadRequest(str(exc)) from None
    if capacity == 0:
        raise BadRequest("rsa.capacity: 0 is not a usable RAM-disk size (ask for e.g. \"16G\")")
    stage_in = _method("stage_in", get("stage_in"))
    stage_out = _method("stage_out", get("stage_out"))
    if (stage_in or stage_out) and not (data_in or data_out):
        raise BadRequest("rsa.stage_in/stage_out: set rsa.data_in or rsa.data_out too (the directories the script works on)")
    return Request(
        data_in=data_in,
        data_out=data_out,
        stage_in=stage_in,
        stage_out=stage_out,
        delay=delay,
        capacity=capacity,
        on_late=_choice("on_late", get("on_late"), ("ignore", "wait")) if get("on_late") is not None else None,
        verify=_choice("verify", get("verify", "size"), ("size", "checksum")),
    )
