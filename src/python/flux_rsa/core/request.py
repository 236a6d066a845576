"""A job's RSA request: ``attributes.system.rsa`` checked for shape and type.

Two steps, both pure (no Flux, no files):

1. ``SCHEMA``, a JSON schema, fixes the shape: a table, only known keys,
   each value of the right type (paths are absolute strings of bounded
   length, methods are "copy", "tar" or an absolute path, choices are
   enumerated).
2. The values are then read: paths normalised (no "..", NUL or text that
   is not UTF-8), sizes and durations parsed with their units and checked
   against sane bounds, and the keys checked against each other.

The submit-time validator adds what needs the file system and the
instance (existence, permissions of the submitting user, the pool's size).
Every refusal is one line: ``rsa.KEY: VALUE what is wrong (what is
accepted)``.
"""

import json
import math
import re

import jsonschema

from flux_rsa.core.paths import bind_blocker
from flux_rsa.core.record import Request
from flux_rsa.core.units import parse_duration, parse_size

MAX_PATH = 4096  # PATH_MAX on Linux
MAX_DELAY = 30 * 86400  # a delay beyond this is a unit mistake, not a plan
MAX_TEXT = 64  # longest size or duration string worth reading

#: keys a user may set, and what each accepts (for messages and docs)
KEYS = {
    "data_in": "an absolute path to a directory to stage in",
    "data_out": "an absolute path to a directory to stage out to",
    "stage_in": '"copy", "tar", or the absolute path of an executable script',
    "stage_out": '"copy", "tar", or the absolute path of an executable script',
    "delay": 'how long the inputs stay after start: seconds or a duration such as "90s", "5m", "2h", at most "30d"',
    "capacity": 'a RAM-disk size with a unit, such as "512M", "16G" or "2T"; K, M, G, T, P count in powers of 1024',
    "on_late": '"ignore" to start on data_in, or "wait" to hold the job for its inputs',
    "verify": '"size" or "checksum"',
    "paths": (
        "\"bind\" (the job sees the RAM disk at data_in's and data_out's own paths) "
        'or "env" (only RSA_DATA_IN and RSA_DATA_OUT point at it)'
    ),
    "handoff": (
        '"off" (never read data_in from the RAM disk of the job that wrote it; '
        "wait until its outputs are home)"
    ),
    "fs": (
        '"per-node" (each compute node mounts a file system of its own, at memory '
        'speed: the default for a job on one node) or "shared" (one file system '
        "every node of the job sees, over the network: the default on several nodes)"
    ),
}

_PATH = {"type": "string", "minLength": 1, "maxLength": MAX_PATH, "pattern": "^/"}
_METHOD = {
    "type": "string",
    "minLength": 1,
    "maxLength": MAX_PATH,
    "anyOf": [{"enum": ["copy", "tar"]}, {"pattern": "^/"}],
}

#: the shape of ``attributes.system.rsa``
SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "attributes.system.rsa",
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "data_in": _PATH,
        "data_out": _PATH,
        "stage_in": _METHOD,
        "stage_out": _METHOD,
        "delay": {"type": ["number", "string"], "maxLength": MAX_TEXT},
        "capacity": {"type": ["number", "string"], "maxLength": MAX_TEXT},
        "on_late": {"enum": ["ignore", "wait"]},
        "verify": {"enum": ["size", "checksum"]},
        "paths": {"enum": ["bind", "env"]},
        "handoff": {"enum": ["off"]},
        "fs": {"enum": ["shared", "per-node"]},
    },
}

_VALIDATOR = jsonschema.Draft7Validator(SCHEMA)

#: what a value of each key is, for "is not ..." messages
_NOUN = {
    "data_in": "a path",
    "data_out": "a path",
    "stage_in": "a method or a path",
    "stage_out": "a method or a path",
    "delay": "a duration",
    "capacity": "a size",
}

#: when one value breaks several rules, name the most basic one
_RANK = ["type", "enum", "minLength", "maxLength", "pattern", "anyOf"]


class BadRequest(ValueError):
    pass


#: values in messages are shown whole up to this many characters; longer
#: ones keep their beginning and end, with their length
SHOW_LIMIT = 1024


def _elide(text, limit):
    """The first and last ``limit // 2`` characters of a long ``text``."""
    half = limit // 2
    return text[:half], text[-half:]


def show(value, limit=SHOW_LIMIT):
    """A value as one line: strings quoted and escaped (control characters,
    text that is not UTF-8); one longer than ``limit`` characters keeps its
    beginning and end around "..." and says how long it is."""
    if isinstance(value, str):
        if len(value) <= limit:
            return repr(value)
        head, tail = (repr(part) for part in _elide(value, limit))
        if head[0] == tail[-1]:  # the same quotes: one quoted string
            return f"{head[:-1]}...{tail[1:]} ({len(value)} characters)"
        return f"{head}...{tail} ({len(value)} characters)"
    try:
        text = json.dumps(value, ensure_ascii=True, allow_nan=False)
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) > limit:
        head, tail = _elide(text, limit)
        return f"{head}...{tail} ({len(text)} characters)"
    return text


def _key(key):
    """A key as it may appear in a message (unknown keys can be anything)."""
    if isinstance(key, str) and key.isprintable() and len(key) <= SHOW_LIMIT:
        return key
    return show(key)


def _refuse(key, value, why):
    raise BadRequest(f"rsa.{key}: {show(value)} {why} ({KEYS[key]})")


def _order(err):
    top = 0 if not err.path else 1
    key = err.path[0] if err.path else ""
    where = list(KEYS).index(key) if key in KEYS else -1
    rank = _RANK.index(err.validator) if err.validator in _RANK else len(_RANK)
    return (top, where, rank)


def _check_shape(attrs):
    errors = sorted(_VALIDATOR.iter_errors(attrs), key=_order)
    if not errors:
        return
    err = errors[0]
    if not err.path:
        if err.validator == "additionalProperties":
            unknown = sorted((k for k in attrs if k not in KEYS), key=str)
            raise BadRequest(
                f"rsa.{_key(unknown[0])}: unknown key (known keys: {', '.join(KEYS)})"
            )
        raise BadRequest(
            f"rsa: {show(attrs)} is not a table of settings "
            "(use e.g. --setattr=rsa.data_in=/abs/dir --setattr=rsa.data_out=/abs/dir)"
        )
    key, value = err.path[0], err.instance
    if err.validator == "type":
        _refuse(key, value, f"is not {_NOUN.get(key, 'valid')}")
    if err.validator == "minLength":
        _refuse(key, value, "is empty")
    if err.validator == "maxLength":
        most = err.validator_value
        _refuse(key, value, f"is too long: at most {most} characters")
    if err.validator == "pattern":
        _refuse(key, value, "is not absolute")
    if err.validator == "anyOf":
        _refuse(key, value, 'is neither "copy", "tar" nor an absolute path')
    _refuse(key, value, "is not allowed")


def _text_ok(value):
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _path(key, value):
    if "\0" in value:
        _refuse(key, value, "contains a NUL character")
    if not _text_ok(value):
        _refuse(key, value, "is not valid UTF-8 text")
    parts = value.split("/")
    if ".." in parts:
        _refuse(key, value, "contains '..'")
    return "/" + "/".join(p for p in parts if p not in ("", "."))


def _method(key, value):
    if value in (None, "copy"):
        return None
    if value == "tar":
        return "tar"
    return _path(key, value)


_NUMBER = re.compile(r"^\s*[+-]?[0-9]+(\.[0-9]*)?([eE][+-]?[0-9]+)?\s*$")


def _negative(value):
    if isinstance(value, str):
        return value.strip().startswith("-")
    return value < 0


def _delay(value):
    if _negative(value):
        _refuse("delay", value, "is negative")
    try:
        seconds = parse_duration(value, "rsa.delay")
    except ValueError:
        _refuse("delay", value, "is not a duration")
    if not math.isfinite(seconds):
        _refuse("delay", value, "is not a duration")
    if seconds > MAX_DELAY:
        _refuse("delay", value, f"is more than {MAX_DELAY // 86400} days")
    return seconds


def _capacity(value):
    if not isinstance(value, str) or _NUMBER.match(value):
        number = float(value) if isinstance(value, str) else value
        if number == 0:
            _refuse("capacity", value, "is not a usable RAM-disk size")
        if _negative(value):
            _refuse("capacity", value, "is negative")
        _refuse("capacity", value, "has no unit")
    if _negative(value):
        _refuse("capacity", value, "is negative")
    try:
        nbytes = parse_size(value, "rsa.capacity")
    except ValueError:
        _refuse("capacity", value, "is not a size")
    if nbytes == 0:
        _refuse("capacity", value, "is not a usable RAM-disk size")
    return nbytes


def parse_request(attrs):
    """Request from ``attributes.system.rsa`` (None: the job asks for nothing).
    Raises BadRequest, whose text is the one line to show the user."""
    if attrs is None:
        return Request()
    if isinstance(attrs, dict):
        # a known key set to null is a key not set
        attrs = {k: v for k, v in attrs.items() if not (k in KEYS and v is None)}
    _check_shape(attrs)
    get = attrs.get
    data_in = _path("data_in", get("data_in")) if get("data_in") is not None else None
    data_out = (
        _path("data_out", get("data_out")) if get("data_out") is not None else None
    )
    if data_in and data_out:
        if data_out == data_in or data_out.startswith(data_in.rstrip("/") + "/"):
            raise BadRequest(
                f"rsa.data_out: {show(data_out)} is inside rsa.data_in {show(data_in)} "
                "(stage out to a directory outside the inputs)"
            )
    request = Request(
        data_in=data_in,
        data_out=data_out,
        stage_in=_method("stage_in", get("stage_in")),
        stage_out=_method("stage_out", get("stage_out")),
        delay=_delay(get("delay")) if get("delay") is not None else None,
        capacity=_capacity(get("capacity")) if get("capacity") is not None else None,
        on_late=get("on_late"),
        verify=get("verify", "size"),
        paths=get("paths"),
        handoff=get("handoff"),
        fs=get("fs"),
    )
    _check_needs(attrs, request)
    if request.paths == "bind":
        why = bind_blocker(request.data_in, request.data_out)
        if why:
            _refuse("paths", "bind", f"cannot be done: {why}; use rsa.paths=env")
    return request


def per_node_problem(request, nodes):
    """Why ``request`` cannot have a file system on each of its ``nodes``
    compute nodes (None: the job's node count is not fixed), or None.  One
    node is always fine; on several, each node's image is staged by
    copies: one data_in copied into each, every node's outputs merged into
    one data_out (an archive or a script would see one node's files)."""
    if request.fs != "per-node" or nodes == 1:
        return None
    if nodes is None:
        return (
            "rsa.fs: per-node gives each compute node a file system of its own, so the "
            "job must say how many nodes it runs on (flux submit -N NODES)"
        )
    for key in ("stage_in", "stage_out"):
        method = getattr(request, key)
        if method is not None:
            return (
                f"rsa.{key}: {show(method)} cannot stage a job on {nodes} nodes with "
                "rsa.fs=per-node (each node's file system is staged by copies: leave "
                f"rsa.{key} unset, or use rsa.fs=shared)"
            )
    return None


#: keys that only mean something beside others: (ALL or ANY, the keys, why).
#: A key set without them is refused: never silently ignored.
NEEDS = {
    "stage_in": ("all", ("data_in",), "the directory the stage-in works on"),
    "stage_out": ("all", ("data_out",), "the directory the stage-out works on"),
    "delay": (
        "all",
        ("data_in", "data_out"),
        "the staged inputs are dropped after the delay to make room for outputs",
    ),
    "verify": ("any", ("data_in", "data_out"), "it checks what is staged"),
    "on_late": (
        "any",
        ("data_in", "data_out", "capacity"),
        "without them the job gets no RAM disk",
    ),
    "paths": ("any", ("data_in", "data_out"), "they are the paths it is about"),
    "handoff": ("all", ("data_in",), "it says where data_in's contents may come from"),
    "fs": (
        "any",
        ("data_in", "data_out", "capacity"),
        "it says what file system the job's RAM disk is",
    ),
}


def _check_needs(attrs, request):
    for key, (mode, others, why) in NEEDS.items():
        if attrs.get(key) is None:
            continue
        missing = [k for k in others if getattr(request, k) is None]
        if not missing or (mode == "any" and len(missing) < len(others)):
            continue
        if mode == "all":
            named = " and ".join(f"rsa.{k}" for k in missing)
        else:
            named = (
                ", ".join(f"rsa.{k}" for k in missing[:-1]) + f" or rsa.{missing[-1]}"
            )
        raise BadRequest(f"rsa.{key}: {show(attrs[key])} needs {named} too ({why})")
