"""Binding a request that acts as a job's owner to what that owner signed.

Through ``flux-imp run rsa`` the instance owner asks the entry point to read
and write users' data as them (``stage``) and to measure a user's directory
(``measure``).  The instance owner is not believed about whose data, or
which: such a request carries the job's signed request, J (``RSA_J``, as
job-ingest stored it), and the entry point acts only when

* J's signature is valid, checked by flux-security as ``flux-imp exec``
  checks it before it runs a job (same configuration, same mechanisms, same
  maximum age), and J was signed by ``RSA_OWNER``;
* the jobspec inside asks for exactly this: ``attributes.system.rsa``, read
  as the service reads it (``core.request.parse_request``), names the
  request's data directory (``data_in`` for a stage-in or a measure,
  ``data_out`` for a stage-out) and its stage method (copy, tar, or the
  user's script).

So the instance owner can stage a user's data only where and how that user
asked, as flux-imp lets it run only the jobs users signed.  One source
besides ``data_in`` is taken for a stage-in: the output area of another
RAM disk of the same owner (the workflow hand-off: that job's ``data_out``
is this one's ``data_in``), checked by the stage itself (``ops._stage``:
its marker names ``RSA_OWNER``) before it reads it as that owner.  (Like flux-imp
exec, this does not stop a J from being used again for the same paths.)

``check()`` and ``environment()`` are pure; ``unwrap()`` calls
flux-security.
"""

import base64
import importlib.util
import json
import os

from flux_rsa.privileged import trust
from flux_rsa.privileged.variables import PREFIX, Refused, producer_area, stage_mode

#: operations that act on a user's paths as that user: they need RSA_J
OPS = ("stage", "measure")


def check(request, payload, signer):
    """Raise Refused unless the jobspec ``payload`` (bytes), signed by uid
    ``signer``, asks for what ``request`` does."""
    owner = request["OWNER"]
    if signer != owner:
        raise Refused(
            f"{PREFIX}J is signed by uid {signer}, not by {PREFIX}OWNER={owner}: "
            "acting as a user needs a job request that user signed"
        )
    try:
        jobspec = json.loads(payload)
        attrs = jobspec["attributes"]["system"].get("rsa")
    except (ValueError, TypeError, KeyError, AttributeError):
        raise Refused(
            f"{PREFIX}J does not hold a jobspec (signed payload is not one)"
        ) from None
    from flux_rsa.core.request import (  # jsonschema: when needed
        BadRequest,
        parse_request,
    )

    try:
        asked = parse_request(attrs)
    except BadRequest as exc:
        raise Refused(
            f"{PREFIX}J: its job request is not one the service takes: {exc}"
        ) from None
    if request.op == "measure":
        key, var = "data_in", "PATH"
    elif request["DIRECTION"] == "in":
        key, var = "data_in", "SRC"
    else:
        key, var = "data_out", "DST"
    want, path = getattr(asked, key), request[var]
    if var == "SRC" and producer_area(request["ROOT"], path):
        want = want and path  # the owner's own RAM disk (checked by the stage)
    if want is None:
        raise Refused(
            f"{PREFIX}J: uid {owner}'s job sets no rsa.{key}: nothing of theirs to "
            f"{'measure' if request.op == 'measure' else 'stage'}"
        )
    if path != want:
        raise Refused(
            f"{PREFIX}{var}={path!r}: not the rsa.{key} {want!r} uid {owner} signed "
            f"in {PREFIX}J"
        )
    if request.op == "stage":
        step = "stage_in" if request["DIRECTION"] == "in" else "stage_out"
        method, mode = getattr(asked, step), request["MODE"]
        script = request.get(
            "SCRIPT"
        )  # set exactly when mode is script (variables.parse)
        if mode != stage_mode(request["DIRECTION"], method) or (
            script and script != method
        ):
            raise Refused(
                f"{PREFIX}MODE={mode}"
                + (f" {PREFIX}SCRIPT={script!r}" if script else "")
                + f": not the rsa.{step} {method or 'copy'!r} uid {owner} signed "
                f"in {PREFIX}J"
            )


def unwrap(j, config=None):
    """(payload, signer) of the signed ``j``, checked by flux-security with
    the configuration flux-imp uses (``config``: another one's file
    pattern); Refused if it is not valid.  Root imports flux's bindings
    only from directories only root can change."""
    spec = importlib.util.find_spec("flux")
    if spec is None or not spec.submodule_search_locations:
        raise Refused(
            f"cannot check {PREFIX}J: flux-core's Python package is not beside "
            "flux_rsa (install flux-rsa into flux-core's Python directory)"
        )
    for where in spec.submodule_search_locations:
        where = os.path.abspath(where)
        for package in (where, os.path.join(os.path.dirname(where), "_flux")):
            if os.path.isdir(package):
                trust.secure_installed(package, "flux-core's Python package")
    try:
        from flux.security import SecurityContext
    except ImportError as exc:
        raise Refused(
            f"cannot check {PREFIX}J: flux-security's Python bindings are missing "
            f"({exc}): flux-core must be built --with-flux-security"
        ) from None
    try:
        context = SecurityContext(config)
    except OSError as exc:
        raise Refused(
            f"cannot check {PREFIX}J: flux-security's configuration: " f"{_why(exc)}"
        ) from None
    try:
        payload, signer = context.sign_unwrap(j.encode())
    except OSError as exc:
        raise Refused(f"{PREFIX}J: not a valid signature: {_why(exc)}") from None
    return bytes(payload), signer


def _why(exc):
    """flux-security's message (its bindings give bytes)."""
    why = exc.strerror or str(exc)
    return why.decode(errors="replace") if isinstance(why, bytes) else why


def environment(j):
    """The environment of the job whose signed request is ``j``, as its
    owner submitted it (Flux keeps it in J alone), for a stage script.
    Its signature is not checked here: through the IMP ``verify()`` has
    checked this J; a direct caller is trusted.  {} without J or one in it."""
    try:
        payload = base64.b64decode(j.split(".")[1], validate=True)
        env = json.loads(payload)["attributes"]["system"].get("environment")
    except (AttributeError, LookupError, TypeError, ValueError):  # binascii.Error too
        return {}
    if not isinstance(env, dict):
        return {}
    return {k: v for k, v in env.items() if isinstance(v, str)}


def verify(request, unwrap=unwrap):
    """Raise Refused unless ``request`` (an operation of OPS) carries a J
    that its owner signed asking for it; other operations pass."""
    if request.op not in OPS:
        return
    j = request.get("J")
    if j is None:
        raise Refused(
            f"{PREFIX}J is not set: {PREFIX}OP={request.op} acts as uid "
            f"{request['OWNER']} only with the job request that user signed "
            "(the service sends it; a pool of an older flux-rsa does not)"
        )
    check(request, *unwrap(j))
