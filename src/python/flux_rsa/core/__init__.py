"""The pure core of flux-rsa: records, events, actions and the table that
joins them.  No Flux, no clock, no files: the service feeds it.

The names below are loaded on first use (PEP 562): a process that needs
one module of the core (the privileged entry point, on every compute node
and for every attach) does not pay for the whole of it."""

import importlib

_WHERE = {
    "BadConfig": "config",
    "Policy": "config",
    "IllegalEvent": "machine",
    "accepts": "machine",
    "admit": "machine",
    "process": "machine",
    "settle": "machine",
    "Env": "record",
    "Progress": "record",
    "Record": "record",
    "Request": "record",
    "BadRequest": "request",
    "parse_request": "request",
    "JobState": "states",
    "RsaState": "states",
}

__all__ = sorted(_WHERE)


def __getattr__(name):
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
