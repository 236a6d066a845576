"""The pure core of flux-rsa: records, events, actions and the table that
joins them.  No Flux, no clock, no files: the service feeds it."""

from flux_rsa.core.config import BadConfig, Policy
from flux_rsa.core.machine import IllegalEvent, accepts, admit, process, settle
from flux_rsa.core.record import Env, Progress, Record, Request
from flux_rsa.core.request import BadRequest, parse_request
from flux_rsa.core.states import JobState, RsaState

__all__ = [
    "BadConfig",
    "BadRequest",
    "Env",
    "IllegalEvent",
    "JobState",
    "Policy",
    "Progress",
    "Record",
    "Request",
    "RsaState",
    "accepts",
    "admit",
    "parse_request",
    "process",
    "settle",
]
