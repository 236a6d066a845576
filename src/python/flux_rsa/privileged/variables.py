"""What the privileged entry point is asked to do: the operation and its
``RSA_*`` variables, checked.  Pure: no files, no Flux, no clock.

``flux-imp run rsa`` passes no arguments, only the environment variables
the site allows (``RSA_*``) plus ``FLUX_JOB_ID``, ``FLUX_JOB_USERID`` and
``FLUX_OWNER_USERID`` (the caller's uid).  So every operation and argument
travels in an ``RSA_*`` variable, and ``parse()`` accepts exactly the
variables of one operation from ``OPS``, each of its kind (values.py), or
raises ``Refused`` with one line naming the variable, its value and the fix.

RAM-disk paths are spelt exactly: ``ROOT/NAME`` (a RAM disk),
``ROOT/NAME/in`` or ``ROOT/NAME/out`` (its areas), with ROOT the
``RSA_ROOT`` of the request and NAME a RAM disk's name (``JOBID.GEN``).
Nothing else is ever acted on as root.

Provider ``command`` runs the site's scripts as root.  Their paths are
variables too (``RSA_COMMAND_CREATE`` ...), but ``parse()`` accepts them
only from a ``trusted`` caller (a pool run by root, which could run any
script anyway); through ``flux-imp`` they come from the site's root-owned
``[rsa]`` table alone (``trust.scripts``).
"""

import os
from dataclasses import dataclass, field

from flux_rsa.core import providercaps
from flux_rsa.core.areas import IN_AREA, OUT_AREA
from flux_rsa.privileged.values import (
    NAME,
    Refused,
    exact_path,
    flag,
    fs_host,
    host,
    hosts,
    job_request,
    name,
    number,
    one_of,
    path,
    positive,
    secret,
    servers,
)

PREFIX = "RSA_"
PROVIDERS = tuple(providercaps.PROVIDERS)
MODES = ("copy", "tar", "untar", "script")
VERIFY = ("size", "checksum", "none")


def stage_mode(direction, method):
    """The stager mode (one of MODES) of a job's stage ``method`` (None:
    copy, "tar", or a script's path) in ``direction`` ("in" or "out")."""
    if method is None:
        return "copy"
    if method == "tar":
        return "untar" if direction == "in" else "tar"
    return "script"


# --- the operations ------------------------------------------------------


@dataclass(frozen=True)
class Spec:
    """An operation's variables: name (without RSA_) -> kind."""

    required: dict
    optional: dict = field(default_factory=dict)
    #: does it act for a job owner (RSA_OWNER, never uid 0 unless the
    #: instance owner is root)?
    for_owner: bool = False
    what: str = ""
    #: the steps of provider command whose site script it may run
    #: (RSA_COMMAND_<STEP>, from a trusted caller only)
    scripts: tuple = ()


def script_var(step):
    """The variable (without RSA_) naming the site script of ``step``."""
    return f"COMMAND_{step.upper()}"


OPS = {
    "hold": Spec(
        {
            "ROOT": exact_path,
            "NAME": name,
            "SIZE": positive,
            "OWNER": number,
            "PROVIDER": one_of(PROVIDERS),
        },
        {
            "JOBID": number,
            "GEN": number,
            "ADOPT": exact_path,
            "TASK_RANK": number,
            "HOST": host,
            # a RAM disk over several RSA nodes (provider glusterfs): the holder's
            # nodes, the first brick's port (brick i: PORT + i), the volume's secret;
            # provider command: the nodes and the first of its ports
            "NODES": hosts,
            "PORT": positive,
            "SECRET": secret,
            "FS_HOST": fs_host,
            # a one-node RAM disk made of file-system images in the node's
            # store, one per compute node of the job, and the most a compute
            # node keeps unwritten of one ([rsa] image-writeback)
            "IMAGE": number,
            "WRITEBACK": number,
        },
        for_owner=True,
        scripts=("create", "destroy"),
        what="build (or adopt) the RAM disk ROOT/NAME, keep it until signalled, destroy or keep it",
    ),
    "attach": Spec(
        # OWNER: whose RAM disk the job must be given (its marker is checked)
        {
            "ROOT": exact_path,
            "NAME": name,
            "RANK": number,
            "PROVIDER": one_of(PROVIDERS),
            "OWNER": number,
        },
        # a volume compute nodes mount: its servers and login; the site's
        # scripts: the RAM disk's nodes, its path there, the job, its ports
        {
            "USER": name,
            "SERVERS": servers,
            "SECRET": secret,
            "NODES": hosts,
            "SOURCE": exact_path,
            "JOBID": number,
            "PORT": positive,
            # an image (its file in the store the login reaches), mounted here
            "IMAGE": name,
            "STORE": flag,
            "WRITEBACK": number,
            # this compute node's name (who holds the image, for everyone to see)
            "HOST": host,
        },
        scripts=("attach", "detach"),
        what="attach the job's RAM disk at ROOT/NAME on this compute node (and check it is)",
    ),
    "detach": Spec(
        {"ROOT": exact_path, "NAME": name, "RANK": number},
        # LEAVE: the pool stopped for good: leave its stores too (PROVIDER's
        # clients of them) once no image uses them
        {"HOST": host, "LEAVE": flag, "PROVIDER": one_of(PROVIDERS)},
        scripts=("detach",),
        what="unmount the job's RAM disk at ROOT/NAME on this compute node",
    ),
    "purge": Spec(
        {"ROOT": exact_path, "PATH": exact_path},
        {"LINK": path},
        what="drop the staged inputs ROOT/NAME/in, leave a link to LINK",
    ),
    "discard": Spec(
        {"ROOT": exact_path, "PATH": exact_path},
        scripts=("destroy",),
        what="remove the kept RAM disk ROOT/NAME",
    ),
    "sweep": Spec(
        {"ROOT": exact_path},
        {"REPORT_KEPT": flag, "GONE": name},
        scripts=("destroy",),
        what="remove RAM disks under ROOT whose holder is gone (GONE: the RAM "
        "disk of a holder job that ended, whose process is ended too)",
    ),
    "stage": Spec(
        {
            "ROOT": exact_path,
            "DIRECTION": one_of(("in", "out")),
            "MODE": one_of(MODES),
            "SRC": path,
            "DST": path,
            "OWNER": number,
        },
        {
            "SCRIPT": path,
            "VERIFY": one_of(VERIFY),
            "WORKERS": number,
            "REPLICA": exact_path,
            # a stage script's FLUX_JOB_ID (its environment is the job's, from J)
            "JOBID": number,
            # SRC is another RAM disk of the owner on another RSA node (the
            # hand-off): its volume, mounted read-only for the stage-in
            "PRODUCER_SERVERS": servers,
            "PRODUCER_USER": name,
            "PRODUCER_SECRET": secret,
            # ... and the producer's image in that node's store, when it is one
            "PRODUCER_IMAGE": name,
            # the job's signed request: through the IMP, what binds the rest to its owner
            "J": job_request,
            # the compute nodes lost with the RAM disk's images mounted: their
            # holds on them are broken, the images checked, then read
            "RECLAIM": hosts,
            # this RSA node's name (who reads an image, for everyone to see)
            "HOST": host,
        },
        for_owner=True,
        what="copy between a RAM disk area and a data directory, as the job owner",
    ),
    "measure": Spec(
        {"PATH": path, "OWNER": number},
        {"J": job_request},
        for_owner=True,
        what="size and file count of PATH, as the job owner",
    ),
    "check": Spec(
        {},
        scripts=providercaps.COMMAND_STEPS,
        what="answer, to show the IMP runs this entry point (and the site's scripts "
        "are fit to run)",
    ),
    "flush": Spec(
        {"ROOT": exact_path, "NAME": name},
        what="write back what this compute node holds of the job's image at ROOT/NAME",
    ),
    "store": Spec(
        {
            "ROOT": exact_path,
            "SIZE": positive,
            "PORT": positive,
            "SECRET": secret,
            "PROVIDER": one_of(PROVIDERS),
        },
        {"HOST": host, "FS_HOST": fs_host},
        what="serve this RSA node's image store until signalled",
    ),
    "serve": Spec(
        {},
        what="carry out the attach and detach requests read from stdin (one JSON line "
        "each, checked as if each came alone) until it closes",
    ),
    "leave": Spec(
        {"ROOT": exact_path, "PROVIDER": one_of(PROVIDERS)},
        what="unmount this compute node's clients of RSA nodes' image stores "
        "that no attached image uses",
    ),
}


@dataclass(frozen=True)
class Request:
    op: str
    values: dict  # variable name (without RSA_) -> checked value

    def get(self, var, default=None):
        return self.values.get(var, default)

    def __getitem__(self, var):
        return self.values[var]


def parse(environ, instance_owner, trusted=False):
    """The Request in ``environ`` (a mapping of environment variables), for
    an instance owned by uid ``instance_owner``.  Only ``RSA_*`` variables
    are read; each must belong to the operation.  The paths of site scripts
    are accepted only from a ``trusted`` caller."""
    given = {k[len(PREFIX) :]: v for k, v in environ.items() if k.startswith(PREFIX)}
    op = given.pop("OP", None)
    if op is None:
        raise Refused(f"{PREFIX}OP is not set (give one of: {', '.join(OPS)})")
    spec = OPS.get(op)
    if spec is None:
        raise Refused(
            f"{PREFIX}OP={op!r}: not an operation of this entry point "
            f"(known: {', '.join(OPS)})"
        )
    scripts = {script_var(step): exact_path for step in spec.scripts}
    kinds = {**spec.required, **spec.optional, **(scripts if trusted else {})}
    for var in sorted(given):
        if var in scripts and not trusted:
            raise Refused(
                f"{PREFIX}{var}: the site's scripts are read from the [rsa] table of "
                "its root-owned configuration, never taken from a request (remove "
                f"{PREFIX}{var})"
            )
        if var not in kinds:
            known = ", ".join(PREFIX + v for v in kinds) or "none"
            raise Refused(
                f"{PREFIX}{var}: not a variable of {PREFIX}OP={op} (its variables: {known})"
            )
    missing = [v for v in spec.required if v not in given]
    if missing:
        raise Refused(
            f"{PREFIX}{missing[0]} is not set ({PREFIX}OP={op} needs "
            f"{', '.join(PREFIX + v for v in spec.required)})"
        )
    values = {var: kinds[var](PREFIX + var, value) for var, value in given.items()}
    request = Request(op, values)
    if spec.for_owner:
        _check_owner(request, instance_owner)
    _CHECKS.get(op, lambda r: None)(request)
    return request


def _check_owner(request, instance_owner):
    if request["OWNER"] == 0 and instance_owner != 0:
        raise Refused(
            f"{PREFIX}OWNER=0: refusing to act as root for a job (root may own jobs "
            f"only in an instance run by root; this one is run by uid {instance_owner})"
        )


# --- where RAM-disk paths may lie ---------------------------------------


def ramdisk_of(root, value, var, areas=()):
    """The RAM disk (ROOT/NAME) of ``value``, which must be ROOT/NAME or,
    when ``areas`` are given, ROOT/NAME/AREA for one of them."""
    rel = value[len(root) :] if value.startswith(root.rstrip("/") + "/") else None
    parts = rel.lstrip("/").split("/") if rel else []
    ok = (len(parts) == 1 and not areas) or (len(parts) == 2 and parts[1] in areas)
    if not ok or not NAME.match(parts[0]):
        shape = f"{root}/NAME" + (f"/{'|'.join(areas)}" if areas else "")
        raise Refused(
            f"{PREFIX}{var}={value!r}: not a RAM-disk path under {PREFIX}ROOT "
            f"(must be {shape}, NAME like 1234.1)"
        )
    return os.path.join(root, parts[0])


def _provider_vars(r, provider, kind, common=()):
    """Refuse a request that lacks a variable its provider needs (providercaps:
    ``kind``, "hold_vars" or "attach_vars"), has one of another provider's,
    or has only part of a group that comes together."""
    caps = providercaps.caps(provider)
    needs, may = getattr(caps, kind)
    missing = [v for v in needs if r.get(v) is None]
    if missing:
        raise Refused(
            f"{PREFIX}PROVIDER={provider} needs {PREFIX}{missing[0]} (and "
            f"{', '.join(PREFIX + v for v in needs)})"
        )
    for var in sorted(providercaps.all_vars(kind) - set(common)):
        if r.get(var) is not None and var not in needs + may:
            users = [
                c.name
                for c in providercaps.PROVIDERS.values()
                if var in getattr(c, kind)[0] + getattr(c, kind)[1]
            ]
            raise Refused(
                f"{PREFIX}{var} is only for {PREFIX}PROVIDER={' or '.join(users)} "
                f"(this is {provider})"
            )
    if kind == "attach_vars":
        for group in caps.attach_together:
            given = [v for v in group if r.get(v) is not None]
            if given and len(given) != len(group):
                lack = next(v for v in group if r.get(v) is None)
                raise Refused(
                    f"{PREFIX}{given[0]} needs {PREFIX}{lack} (and "
                    f"{', '.join(PREFIX + v for v in group)}, or none of them)"
                )


def _check_store(r):
    if not providercaps.caps(r["PROVIDER"]).images:
        raise Refused(
            f"{PREFIX}PROVIDER={r['PROVIDER']} keeps no image store (only "
            f"{', '.join(c.name for c in providercaps.PROVIDERS.values() if c.images)})"
        )


def _check_hold(r):
    provider = r["PROVIDER"]
    _provider_vars(r, provider, "hold_vars", common=("TASK_RANK",))
    caps = providercaps.caps(provider)
    nodes = r.get("NODES") or ("",)
    if r.get("TASK_RANK", 0) >= len(nodes):
        raise Refused(
            f"{PREFIX}TASK_RANK={r['TASK_RANK']}: the holder has "
            f"{len(nodes)} node(s) ({PREFIX}NODES)"
        )
    if (r.get("PORT") is None) != (r.get("SECRET") is None) and caps.secret:
        raise Refused(
            f"{PREFIX}PORT and {PREFIX}SECRET come together (a served RAM disk's "
            "first port and its login)"
        )
    ports = caps.ports(len(nodes), True) if caps.ports else 0
    if r.get("PORT") is not None and r["PORT"] + ports > 65536:
        raise Refused(f"{PREFIX}PORT={r['PORT']}: its {ports} ports run past 65535")
    if r.get("ADOPT") is not None:
        if not caps.keeps:
            raise Refused(
                f"{PREFIX}ADOPT: a {provider} RAM disk cannot be adopted (it is not kept)"
            )
        ramdisk_of(r["ROOT"], r["ADOPT"], "ADOPT")
        if r.get("JOBID") is None:
            raise Refused(
                f"{PREFIX}ADOPT needs {PREFIX}JOBID (whose kept RAM disk it is)"
            )


def _check_attach(r):
    _provider_vars(r, r["PROVIDER"], "attach_vars")
    if (r.get("IMAGE") is not None or r.get("STORE")) and r.get("SERVERS") is None:
        raise Refused(
            f"{PREFIX}IMAGE and {PREFIX}STORE need the store's login ({PREFIX}SERVERS, "
            f"{PREFIX}USER, {PREFIX}SECRET)"
        )
    source = r.get("SOURCE")
    if source is not None and os.path.basename(source) != r["NAME"]:
        raise Refused(
            f"{PREFIX}SOURCE={source!r}: not the RAM disk {PREFIX}NAME={r['NAME']!r} "
            "(must be its path on the RSA nodes, ending in /NAME)"
        )


def _check_purge(r):
    ramdisk_of(r["ROOT"], r["PATH"], "PATH", areas=(IN_AREA,))


def _check_discard(r):
    ramdisk_of(r["ROOT"], r["PATH"], "PATH")


def producer_area(root, src):
    """For a stage-in from another RAM disk (the workflow hand-off): the
    RAM disk (ROOT/NAME) whose output area holds ``src``; None when
    ``src`` is not under ROOT."""
    if not src.startswith(root.rstrip("/") + "/"):
        return None
    exact_path(PREFIX + "SRC", src)
    top = "/".join(src[len(root.rstrip("/")) :].lstrip("/").split("/")[:2])
    return ramdisk_of(root, f"{root.rstrip('/')}/{top}", "SRC", areas=(OUT_AREA,))


def _check_stage(r):
    side = "DST" if r["DIRECTION"] == "in" else "SRC"
    area = IN_AREA if r["DIRECTION"] == "in" else OUT_AREA
    exact_path(PREFIX + side, r[side])
    ramdisk_of(r["ROOT"], r[side], side, areas=(area,))
    producer = r["DIRECTION"] == "in" and producer_area(r["ROOT"], r["SRC"])
    volume = [
        r.get(f"PRODUCER_{key}") is not None for key in ("SERVERS", "USER", "SECRET")
    ]
    if r.get("PRODUCER_IMAGE") is not None and not all(volume):
        raise Refused(
            f"{PREFIX}PRODUCER_IMAGE needs the producer's store login "
            f"({PREFIX}PRODUCER_SERVERS, _USER and _SECRET)"
        )
    if any(volume) and not (all(volume) and producer and r["MODE"] == "copy"):
        raise Refused(
            f"{PREFIX}PRODUCER_SERVERS, _USER and _SECRET come together, and only for "
            f"a copy stage-in whose {PREFIX}SRC is another RAM disk's output area"
        )
    if r["MODE"] == "script" and r.get("SCRIPT") is None:
        raise Refused(
            f"{PREFIX}MODE=script needs {PREFIX}SCRIPT (the user's stage script)"
        )
    if r["MODE"] != "script" and r.get("SCRIPT") is not None:
        raise Refused(
            f"{PREFIX}SCRIPT is only for {PREFIX}MODE=script (this is {r['MODE']})"
        )
    if r.get("REPLICA") is not None:
        if r["DIRECTION"] != "in" or r["MODE"] != "copy":
            raise Refused(f"{PREFIX}REPLICA is only for a copy stage-in")
        ramdisk_of(r["ROOT"], r["REPLICA"], "REPLICA", areas=(IN_AREA,))


_CHECKS = {
    "hold": _check_hold,
    "attach": _check_attach,
    "purge": _check_purge,
    "discard": _check_discard,
    "stage": _check_stage,
    "store": _check_store,
    "leave": _check_store,
}


def environment(op, **values):
    """The ``RSA_*`` variables of a request (the caller's side): values
    that are None are left out, booleans become 0/1."""
    env = {f"{PREFIX}OP": op}
    for var, value in values.items():
        if value is None:
            continue
        if isinstance(value, bool):
            value = int(value)
        env[f"{PREFIX}{var.upper()}"] = str(value)
    return env
