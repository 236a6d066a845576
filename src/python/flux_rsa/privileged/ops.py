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
import shutil
import sys
import tempfile

from flux_rsa.privileged import request
from flux_rsa.ramdisk import disks, gluster, layout, mounts, registry, sysmount
from flux_rsa.ramdisk.holder import hold
from flux_rsa.ramdisk.layout import ProviderError
from flux_rsa.ramdisk.providers import command
from flux_rsa.ramdisk.providers.base import Task
from flux_rsa.ramdisk.purge import purge
from flux_rsa.ramdisk.sweep import sweep

RAMDISK_PROG = "flux-rsa-ramdisk"


def _fail(message, prog=RAMDISK_PROG):
    print(f"{prog}: {message}", file=sys.stderr, flush=True)
    return 1


def _hold(r):
    task = Task(
        r["ROOT"],
        r["NAME"],
        r["SIZE"],
        r["OWNER"],
        jobid=r.get("JOBID"),
        gen=r.get("GEN"),
        index=r.get("TASK_RANK", 0),
        nodes=r.get("NODES", ()),
        port=r.get("PORT"),
        secret=r.get("SECRET"),
        fs_host=r.get("FS_HOST", "{host}"),
        host=r.get("HOST"),
        adopt=r.get("ADOPT"),
    )
    return hold(task, r["PROVIDER"], prog=RAMDISK_PROG)


def _attach(r):
    """Attach the RAM disk on this compute node, then check that what the
    job will be given is that RAM disk (its marker: name and owner), not
    an empty directory or another one; if not, undo the attach."""
    mountpoint = os.path.join(r["ROOT"], r["NAME"])
    provider = registry.get(r["PROVIDER"])
    try:
        os.makedirs(r["ROOT"], mode=0o755, exist_ok=True)
        provider.attach(mountpoint, r["RANK"], r.values)
    except (OSError, gluster.GlusterError, ProviderError) as exc:
        return _fail(f"attach {mountpoint}: {exc}")
    try:
        layout.check_ramdisk(mountpoint, r["NAME"], r["OWNER"])
    except layout.RamdiskError as exc:
        try:
            mounts.detach(mountpoint, r["RANK"])
        except (OSError, gluster.GlusterError, ProviderError):
            pass
        return _fail(f"attach: {exc}")
    return 0


def _detach(r):
    mountpoint = os.path.join(r["ROOT"], r["NAME"])
    try:
        mounts.detach(mountpoint, r["RANK"])
    except (OSError, gluster.GlusterError, ProviderError) as exc:
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
        if disks.discard(r["PATH"]):
            print(f"{RAMDISK_PROG}: discarded {r['PATH']}", flush=True)
    except layout.RamdiskError as exc:
        return _fail(str(exc))
    return 0


def _sweep(r):
    failed = sweep(
        r["ROOT"],
        say=lambda line: print(f"{RAMDISK_PROG}: {line}", flush=True),
        report_kept=r.get("REPORT_KEPT", False),
        gone=r.get("GONE"),
    )
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
    """Check the RAM-disk side is the RAM disk (its marker on top: never a
    directory a lost mount left behind), switch to the owner, run the
    stager.  A RAM disk spanning nodes must be whole before and after:
    with a brick down the stager would copy the files it can see and call
    it done.  Where the client that wrote files shows them stale (a
    sharded GlusterFS volume), a copy in writes through a client of its
    own, unverified, then runs again through the RAM disk's own client,
    which finds every complete file and verifies it: the RAM disk's
    client (the stage-out's, the admin's) never wrote them, so it shows
    them as they are."""
    producer = r["DIRECTION"] == "in" and request.producer_area(r["ROOT"], r["SRC"])
    if producer and r.get("PRODUCER_SERVERS") is not None:
        return _from_producer_elsewhere(r, producer)
    return _stage_here(r, producer)


def _stage_here(r, producer):
    """``_stage`` with the producer's RAM disk (the hand-off), if any, at
    ``producer`` on this node."""
    from flux_rsa.stage.errors import EXIT_FAILED, PROG

    side = r["DST"] if r["DIRECTION"] == "in" else r["SRC"]
    ramdisk = os.path.dirname(side)
    try:
        if producer:  # another RAM disk of the same owner (the hand-off)
            layout.check_ramdisk(producer, os.path.basename(producer), r["OWNER"])
        marker = layout.check_ramdisk(ramdisk, os.path.basename(ramdisk), r["OWNER"])
        provider = registry.get(marker.get("provider"))
        expected = provider.expected_bytes(ramdisk)
    except (layout.RamdiskError, registry.UnknownProvider) as exc:
        print(f"{PROG}: {exc}", file=sys.stderr, flush=True)
        return EXIT_FAILED
    argv = stage_argv(r)
    if (
        r["DIRECTION"] == "in"
        and r["MODE"] == "copy"
        and r.get("VERIFY", "size") != "none"
        and provider.sees_own_writes_late(ramdisk)
    ):
        verify = argv.index("--verify")
        unverified = argv[: verify + 1] + ["none"] + argv[verify + 2 :]
        code = _forked(
            lambda: _through_fresh_client(provider, r, ramdisk, expected, unverified)
        )
        if code != 0:
            return code
    return _stager(r, ramdisk, expected, argv)


def _stager(r, ramdisk, expected, argv):
    """Become the owner for good and run the stager with ``argv``."""
    from flux_rsa.stage import cli, identity
    from flux_rsa.stage.errors import EXIT_FAILED, PROG, StageError

    try:
        identity.become(r["OWNER"])  # before any user path is touched
    except StageError as exc:
        print(exc.line(), file=sys.stderr, flush=True)
        return exc.code
    try:
        gluster.check_whole(ramdisk, expected)
        code = cli.main(argv, script_env=_script_env(r, ramdisk))
        gluster.check_whole(ramdisk, expected)
    except (OSError, gluster.GlusterError) as exc:
        print(f"{PROG}: {exc}", file=sys.stderr, flush=True)
        return EXIT_FAILED
    return code


def _from_producer_elsewhere(r, producer):
    """A stage-in from the owner's RAM disk on another RSA node (the
    hand-off): in a mount namespace of this process alone, mount its
    volume read-only (as its compute nodes did), stage from there, unmount.
    Its marker is checked through that mount like a local one's."""
    from flux_rsa.ramdisk import volfiles
    from flux_rsa.stage.errors import EXIT_FAILED, PROG

    name = os.path.basename(producer)
    volume = volfiles.Volume(
        name, r["PRODUCER_SERVERS"], r["PRODUCER_USER"], r["PRODUCER_SECRET"]
    )
    top = tempfile.mkdtemp(prefix="rsa-handoff-")
    mountpoint = os.path.join(top, name)
    try:
        os.chmod(top, 0o711)  # the owner reaches the mount, not the client's files
        os.mkdir(mountpoint)
        workdir = os.path.join(top, "client")
        os.mkdir(workdir, 0o700)
        sysmount.private_namespace()
        gluster.mount(volume, mountpoint, workdir, read_only=True)
    except (OSError, gluster.GlusterError) as exc:
        print(
            f"{PROG}: cannot mount job {name}'s RAM disk from "
            f"{','.join(volume.servers)}: {exc}",
            file=sys.stderr,
            flush=True,
        )
        shutil.rmtree(top, ignore_errors=True)
        return EXIT_FAILED
    try:
        here = dict(r.values, SRC=mountpoint + r["SRC"][len(producer) :])
        return _forked(lambda: _stage_here(request.Request(r.op, here), mountpoint))
    finally:
        try:
            gluster.unmount(mountpoint)
        except OSError as exc:
            print(f"{PROG}: {exc}", file=sys.stderr, flush=True)
        shutil.rmtree(top, ignore_errors=True)


def _through_fresh_client(provider, r, ramdisk, expected, argv):
    """In a mount namespace of this process alone, mount a new client of
    the RAM disk over it, run the stager there as the owner, unmount."""
    from flux_rsa.stage.errors import EXIT_FAILED, PROG

    workdir = None
    try:
        sysmount.private_namespace()
        workdir = provider.mount_fresh(ramdisk)
    except (OSError, gluster.GlusterError) as exc:
        print(
            f"{PROG}: cannot mount a client of its own for the stage-in: {exc}",
            file=sys.stderr,
            flush=True,
        )
        return EXIT_FAILED
    try:
        return _forked(lambda: _stager(r, ramdisk, expected, argv))
    finally:
        sysmount.umount(ramdisk)
        shutil.rmtree(workdir)


def _forked(fn):
    """Run ``fn()`` in a child process; its return value is the child's
    exit status, returned here."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            code = fn()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def _measure(r):
    from flux_rsa.pool import measure
    from flux_rsa.stage import identity
    from flux_rsa.stage.errors import StageError

    try:
        identity.become(r["OWNER"])
    except StageError as exc:
        return _fail(f"{r['PATH']}: {exc.cause}", prog=measure.PROG)
    return measure.main([r["PATH"]])


def _script_env(r, ramdisk):
    """A user's stage script's environment: the job's own, as its J carries
    it (``stage.script.environment``); None for the stager's own modes."""
    from flux_rsa.privileged import signed
    from flux_rsa.stage import script

    if r["MODE"] != "script":
        return None
    submitted = signed.environment(r.get("J"))
    return script.environment(submitted, r.get("JOBID"), ramdisk, r["DIRECTION"])


def _check(r):
    print(
        json.dumps({"ok": True, "euid": os.geteuid(), "pid": os.getpid()}), flush=True
    )
    return 0


RUN = {
    "hold": _hold,
    "purge": _purge,
    "discard": _discard,
    "sweep": _sweep,
    "stage": _stage,
    "measure": _measure,
    "check": _check,
    "attach": _attach,
    "detach": _detach,
}


def run(request, scripts=None):
    """Carry out ``request``, with ``scripts`` ({step: path}) the site
    scripts of provider command it may run; return its exit status."""
    command.configure(scripts or {})
    return RUN[request.op](request)
