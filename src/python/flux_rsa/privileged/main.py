"""The entry points: the root side run by ``flux-imp run rsa``, the same
operations run directly for a trusted caller, and the pool's side that
starts either.

* ``imp_main(conf_dir)``: the installed ``rsa-imp-run`` (root, through the
  IMP).  The caller is the instance owner; its request is checked
  (``variables.parse``), it may act as a job's owner only as the owner's
  signed job request asks (``signed.verify``) and as root only under the
  site's RAM-disk root (``trust.check``, from root-owned configuration).
* ``direct(environ)``: the same operations in this process, for a caller
  that already has the rights they need: a pool run by root (test
  instances, single-user root installs) or an unprivileged test install
  with ``provider = "dir"``.  Only such a caller may name the site scripts
  of provider command in its request.
* ``RSA_OP=serve`` (either way): a compute node's resident helper, which
  carries out attach and detach requests read from its stdin, each
  checked as above (``serve``).
* ``call(argv)`` (``python3 -m flux_rsa.privileged [--imp PATH]``): the
  pool subjob's task.  It adds what only the task knows (its rank in the
  job, its node's name) and either runs the operation directly or execs
  ``PATH run rsa``, which passes nothing but the ``RSA_*`` variables on.
"""

import os
import sys

from flux_rsa.privileged import variables
from flux_rsa.privileged.variables import PREFIX, Refused

# Everything else is imported where it is used: this module starts every
# privileged operation, an attach on every compute node of every job among
# them, and what an operation does not use it should not load.

PROG = "flux-rsa-helper"
#: the name of the IMP's [run.NAME] table for this entry point
IMP_RUN_NAME = "rsa"
EXIT_REFUSED = 2


def _refuse(message):
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)
    return EXIT_REFUSED


def imp_main(conf_dir, environ=None):
    """``flux-imp run rsa``: check the request, act as root only where the
    site allows, everything else as the job owner."""
    environ = os.environ if environ is None else environ
    if os.geteuid() != 0:
        return _refuse(
            f"runs as uid {os.geteuid()}: this entry point must be started by "
            f"flux-imp run {IMP_RUN_NAME} (installed setuid root)"
        )
    if environ.get(f"{PREFIX}OP") not in SITE_FREE and "site" not in sys.modules:
        import site  # rsa-imp-run starts Python without it (-S)

        site.main()
    caller = environ.get("FLUX_OWNER_USERID", "")
    if not caller.isdigit():
        return _refuse(
            f"FLUX_OWNER_USERID={caller!r}: not set by flux-imp: start this through "
            f"flux-imp run {IMP_RUN_NAME}"
        )
    import flux_rsa
    from flux_rsa.privileged import ops, signed, trust

    try:
        trust.secure_path(
            os.path.dirname(os.path.abspath(flux_rsa.__file__)), "the flux_rsa package"
        )
        req = variables.parse(environ, int(caller))
        signed.verify(req)  # as the job owner only what the owner signed
        trust.check(req, conf_dir)
        scripts = trust.scripts(req, conf_dir)  # the site's, never the caller's
    except Refused as exc:
        return _refuse(str(exc))
    if req.op == "serve":  # each request checked as if it came through the IMP
        return _serve(lambda env: imp_main(conf_dir, env), environ)
    # the IMP keeps the caller's groups: act as root:root, not root:flux
    os.setgroups([])
    os.setgid(0)
    return ops.run(req, scripts)


def direct(environ=None):
    """Run the request in ``environ`` here (a trusted caller: it may name
    the site scripts of provider command)."""
    from flux_rsa.privileged import ops, trust

    environ = os.environ if environ is None else environ
    try:
        req = variables.parse(environ, os.getuid(), trusted=True)
        scripts = trust.scripts(req)
    except Refused as exc:
        return _refuse(str(exc))
    if req.op == "serve":
        return _serve(direct, environ)
    return ops.run(req, scripts)


def _serve(handle, environ):
    # what every request imports, imported once: each child finds it loaded
    from flux_rsa.privileged import ops  # noqa: F401
    from flux_rsa.privileged import serve
    from flux_rsa.ramdisk import disks

    disks.every_provider()
    return serve.serve(handle, environ)


#: the operations that need nothing outside the standard library and
#: flux_rsa, started without the ``site`` module (``python3 -S``): an
#: attach and a detach run on every compute node of every job, and site's
#: start-up work (its ``.pth`` files, which may import packages) is for
#: them pure delay.  Every other operation loads it (a stage needs xxhash,
#: a signed request flux-security's bindings).
SITE_FREE = frozenset({"attach", "detach", "serve"})

#: the operations to which the running task adds facts (``task_facts``);
#: through the IMP the others start ``flux-imp run rsa`` at once
TASK_FACTS = frozenset({"store", "stage", "hold"})


def task_facts(environ, imp):
    """``environ`` with what only the running task knows, for a hold: its
    rank in the holder job, the job's nodes (a RAM disk over several nodes)
    and (through the IMP, which passes no Flux variables on) its node's
    name as the pool knows it; that name also for a store and a stage."""
    env = dict(environ)
    op = env.get(f"{PREFIX}OP")
    if op not in TASK_FACTS:
        return env
    from flux_rsa.core import providercaps
    from flux_rsa.ramdisk import holder

    if op in ("store", "stage"):
        if imp and f"{PREFIX}HOST" not in env:
            env[f"{PREFIX}HOST"] = holder.node_name()
        return env
    rank = env.get("FLUX_TASK_RANK")
    if rank is not None and f"{PREFIX}TASK_RANK" not in env:
        env[f"{PREFIX}TASK_RANK"] = rank
    try:
        needs, may = providercaps.caps(env.get(f"{PREFIX}PROVIDER")).hold_vars
    except providercaps.UnknownProvider:
        needs = may = ()  # refused by the request's checks
    if "NODES" in needs + may and f"{PREFIX}NODES" not in env:
        env[f"{PREFIX}NODES"] = ",".join(holder.job_nodes())
    if imp and env.get(f"{PREFIX}TASK_RANK", "0") == "0" and f"{PREFIX}HOST" not in env:
        env[f"{PREFIX}HOST"] = holder.node_name()
    return env


USAGE = (
    "usage: python3 -m flux_rsa.privileged [--imp PATH]\n"
    "Run one flux-rsa privileged operation (RSA_OP and its RSA_* variables in the "
    "environment): here, or through PATH run rsa (flux-imp)."
)


def call(argv=None):
    """``python3 -m flux_rsa.privileged [--imp PATH]`` (a pool subjob's
    task, or an operation the service starts on a rank)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv in (["-h"], ["--help"]):
        print(USAGE)
        return 0
    if argv and argv[0].startswith("--imp="):
        argv = ["--imp", argv[0].split("=", 1)[1], *argv[1:]]
    if argv and (argv[0] != "--imp" or len(argv) != 2 or not argv[1]):
        return _refuse(f"{' '.join(argv)}: unknown arguments\n{USAGE}")
    imp = argv[1] if argv else None
    env = task_facts(os.environ, imp)
    if imp is None:
        return direct(env)
    try:
        os.execve(imp, [imp, "run", IMP_RUN_NAME], env)
    except OSError as exc:
        return _refuse(f"cannot run the IMP {imp} ([exec] imp): {exc.strerror}")
