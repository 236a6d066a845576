"""Carry out a checked request (``request.Request``).

Root is kept only for what needs it: mounting and unmounting RAM disks
under the RAM-disk root, their markers and top directories, purging and
removing RAM disks there.  Every access to a user's data (reading
``data_in``, writing ``data_out``, user stage scripts, measuring) happens
after switching to the job owner for good (``identity.become``: groups,
gid, uid, and a check that root cannot be regained).

Each operation prints what the command it replaces printed (the RAM-disk
command's JSON lines, the stager's progress lines) and returns an exit
status; failures are one line on stderr.

Provider command's site scripts run as root too; ``run`` is given the ones
the caller may run (``trust.scripts``: the site's, checked).
"""

import json
import os
import sys

from flux_rsa.ramdisk import command, glusterfs, layout, mounts, parallel, volfiles
from flux_rsa.ramdisk.hold import hold
from flux_rsa.ramdisk.providers import ProviderError
from flux_rsa.ramdisk.purge import purge
from flux_rsa.ramdisk.sweep import sweep

RAMDISK_PROG = "flux-rsa-ramdisk"


def _fail(message, prog=RAMDISK_PROG):
    print(f"{prog}: {message}", file=sys.stderr, flush=True)
    return 1


def _hold(r):
    volume = None
    if r["PROVIDER"] == "glusterfs":
        volume = parallel.volume_of(r["NAME"], r.get("JOBID"), r.get("GEN"), r["NODES"],
                                    r["FS_HOST"], r["PORT"], r["SECRET"])
    return hold(r["ROOT"], r["NAME"], r["SIZE"], r["OWNER"], r["PROVIDER"], prog=RAMDISK_PROG,
                jobid=r.get("JOBID"), gen=r.get("GEN"), adopt=r.get("ADOPT"),
                rank=r.get("TASK_RANK", 0), host=r.get("HOST"), volume=volume,
                nodes=r.get("NODES", ()), port=r.get("PORT"))


def _attach(r):
    mountpoint = os.path.join(r["ROOT"], r["NAME"])
    try:
        os.makedirs(r["ROOT"], mode=0o755, exist_ok=True)
        if r.get("PROVIDER") == "command":
            command.attach(mountpoint, r["RANK"], r["SOURCE"], r["NODES"], jobid=r.get("JOBID"),
                           port=r.get("PORT"))
        else:
            volume = volfiles.Volume(r["NAME"], r["SERVERS"], r["USER"], r["SECRET"])
            glusterfs.attach(volume, mountpoint, r["RANK"])
    except (OSError, glusterfs.GlusterError, ProviderError) as exc:
        return _fail(f"attach {mountpoint}: {exc}")
    return 0


def _detach(r):
    mountpoint = os.path.join(r["ROOT"], r["NAME"])
    try:
        mounts.detach(mountpoint, r["RANK"])
    except (OSError, glusterfs.GlusterError, ProviderError) as exc:
        return _fail(f"detach {mountpoint}: {exc}")
    return 0


def _purge(r):
    try:
        purge(r["PATH"], r.get("LINK"))
    except layout.RamdiskError as exc:
        return _fail(str(exc))
    return 0


def _discard(r):
    try:
        if layout.discard(r["PATH"]):
            print(f"{RAMDISK_PROG}: discarded {r['PATH']}", flush=True)
    except layout.RamdiskError as exc:
        return _fail(str(exc))
    return 0


def _sweep(r):
    failed = sweep(r["ROOT"], say=lambda line: print(f"{RAMDISK_PROG}: {line}", flush=True),
                   report_kept=r.get("REPORT_KEPT", False), gone=r.get("GONE"))
    return 1 if failed else 0


def stage_argv(r):
    """The stager's command line for a stage request (after the switch to
    the owner: no --as-user).  A script gets the RAM-disk directory first
    and the data directory second (thesis Appendix U); --direction lets
    the stager measure its progress."""
    mode, src, dst = r["MODE"], r["SRC"], r["DST"]
    if mode == "script":
        ramdisk, data = (dst, src) if r["DIRECTION"] == "in" else (src, dst)
        argv = ["script", r["SCRIPT"], ramdisk, data, "--direction", r["DIRECTION"]]
    else:
        argv = [mode, src, dst]
    argv += ["--progress-json", "--verify", r.get("VERIFY", "size")]
    if r.get("WORKERS"):
        argv += ["--workers", str(r["WORKERS"])]
    if r.get("REPLICA") is not None:
        argv += ["--replica", r["REPLICA"]]
    return argv


def _stage(r):
    """Switch to the owner, run the stager.  A RAM disk spanning nodes must
    be whole before and after: with a brick down the stager would copy the
    files it can see and call it done."""
    from flux_rsa.stage import cli, identity
    from flux_rsa.stage.errors import EXIT_FAILED, PROG, StageError

    side = r["DST"] if r["DIRECTION"] == "in" else r["SRC"]
    ramdisk = os.path.dirname(side)
    expected = parallel.expected_bytes(ramdisk)  # as root: the brick's marker
    try:
        identity.become(r["OWNER"])  # before any user path is touched
    except StageError as exc:
        print(exc.line(), file=sys.stderr, flush=True)
        return exc.code
    try:
        parallel.check_whole(ramdisk, expected)
        code = cli.main(stage_argv(r))
        parallel.check_whole(ramdisk, expected)
    except (OSError, glusterfs.GlusterError) as exc:
        print(f"{PROG}: {exc}", file=sys.stderr, flush=True)
        return EXIT_FAILED
    return code


def _measure(r):
    from flux_rsa.pool import measure
    from flux_rsa.stage import identity
    from flux_rsa.stage.errors import StageError

    try:
        identity.become(r["OWNER"])
    except StageError as exc:
        return _fail(f"{r['PATH']}: {exc.cause}", prog=measure.PROG)
    return measure.main([r["PATH"]])


def _check(r):
    print(json.dumps({"ok": True, "euid": os.geteuid(), "pid": os.getpid()}), flush=True)
    return 0


RUN = {"hold": _hold, "purge": _purge, "discard": _discard, "sweep": _sweep,
       "stage": _stage, "measure": _measure, "check": _check, "attach": _attach,
       "detach": _detach}


def run(request, scripts=None):
    """Carry out ``request``, with ``scripts`` ({step: path}) the site
    scripts of provider command it may run; return its exit status."""
    command.configure(scripts or {})
    return RUN[request.op](request)
