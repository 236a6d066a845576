"""Carry out a checked request (``variables.Request``).

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

import contextlib
import json
import os
import signal
import sys

from flux_rsa.core.areas import IN_AREA, OUT_AREA
from flux_rsa.privileged import trust, variables
from flux_rsa.ramdisk import disks, layout, mounts, signals, sysmount
from flux_rsa.ramdisk.layout import ProviderError

# What only some operations use is imported in them: an attach, on every
# compute node of every job, loads no more than it needs.

RAMDISK_PROG = "flux-rsa-ramdisk"


def _fail(message, prog=RAMDISK_PROG):
    print(f"{prog}: {message}", file=sys.stderr, flush=True)
    return 1


def _hold(r):
    from flux_rsa.ramdisk.holder import hold
    from flux_rsa.ramdisk.providers.base import Task

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
        image=r.get("IMAGE", 0),
        writeback=r.get("WRITEBACK"),
    )
    return hold(task, r["PROVIDER"], prog=RAMDISK_PROG)


def _attach(r):
    """Attach the RAM disk on this compute node, then check that what the
    job will be given is that RAM disk (its marker: name and owner), not
    an empty directory or another one; if not, undo the attach."""
    mountpoint = os.path.join(r["ROOT"], r["NAME"])
    provider = disks.provider(r["PROVIDER"])
    try:
        os.makedirs(r["ROOT"], mode=0o755, exist_ok=True)
        provider.attach(mountpoint, r["RANK"], r.values)
    except (OSError, ProviderError) as exc:
        return _fail(f"attach {mountpoint}: {exc}")
    try:
        layout.check_ramdisk(mountpoint, r["NAME"], r["OWNER"])
    except layout.RamdiskError as exc:
        try:
            mounts.detach(mountpoint, r["RANK"])
        except (OSError, ProviderError):
            pass
        return _fail(f"attach: {exc}")
    return 0


def _detach(r):
    mountpoint = os.path.join(r["ROOT"], r["NAME"])
    try:
        mounts.detach(mountpoint, r["RANK"])
        if r.get("LEAVE") and r.get("PROVIDER"):
            disks.provider(r["PROVIDER"]).transports(r["ROOT"]).leave()
    except (OSError, ProviderError) as exc:
        return _fail(f"detach {mountpoint}: {exc}")
    return 0


def _purge(r):
    """Drop the staged inputs: on the RSA node (from each of its images),
    or where the job's compute node holds its image (ROOT is then its mount
    root)."""
    from flux_rsa.ramdisk.purge import purge

    ramdisk = os.path.dirname(r["PATH"])
    try:
        sysmount.private_namespace()  # an image mounted for this alone
        for index in range(max(1, _images(ramdisk))):
            with _opened(ramdisk, write=True, what="the switch's purge", index=index):
                purge(r["PATH"], r.get("LINK"))
    except (OSError, ProviderError, layout.RamdiskError) as exc:
        return _fail(str(exc))
    return 0


def _opened(ramdisk, write, what, reclaim=(), jobid=None, index=0, at=None):
    """The RAM disk ``ramdisk`` on this node (at ``at``), mounted for a
    stage if it is an image (its provider's ``opened``: image ``index``);
    nothing to do for a RAM disk without a marker (the checks that follow
    say what is wrong)."""
    marker = layout.read_marker(ramdisk)
    if marker is None:
        return contextlib.nullcontext()
    return disks.provider_of(marker).opened(
        ramdisk, write, what, reclaim, jobid, index=index, at=at
    )


def _images(ramdisk):
    """How many images the RAM disk ``ramdisk`` is made of here (0: none)."""
    marker = layout.read_marker(ramdisk)
    return 0 if marker is None else disks.provider_of(marker).images(ramdisk)


def _discard(r):
    try:
        if disks.discard(r["PATH"]):
            print(f"{RAMDISK_PROG}: discarded {r['PATH']}", flush=True)
    except layout.RamdiskError as exc:
        return _fail(str(exc))
    return 0


def _sweep(r):
    from flux_rsa.ramdisk.sweep import sweep

    failed = sweep(
        r["ROOT"],
        say=lambda line: print(f"{RAMDISK_PROG}: {line}", flush=True),
        report_kept=r.get("REPORT_KEPT", False),
        gone=r.get("GONE"),
    )
    return 1 if failed else 0


def stage_request(r, ramdisk):
    """The stager's typed request (``stage.api.StageRequest``) for the stage
    request ``r`` of the RAM disk ``ramdisk``, run after the switch to the
    owner (no ``as_user``).  A script gets the RAM-disk directory first and
    the data directory second (thesis Appendix U); its direction lets the
    stager measure its progress, and it runs in the job's own environment
    (``_script_env``)."""
    from flux_rsa.stage.api import StageRequest

    mode, src, dst = r["MODE"], r["SRC"], r["DST"]
    verify = r.get("VERIFY", "size")
    common = dict(
        verify=None if verify == "none" else verify,
        workers=r.get("WORKERS") or None,
        replica=r.get("REPLICA"),
    )
    if mode != "script":
        return StageRequest(mode, src, dst, **common)
    area, data = (dst, src) if r["DIRECTION"] == "in" else (src, dst)
    return StageRequest(
        "script",
        r["SCRIPT"],
        area,
        data=data,
        direction=r["DIRECTION"],
        script_env=_script_env(r, ramdisk),
        **common,
    )


def _stage(r):
    """Check the RAM-disk side is the RAM disk (its marker on top: never a
    directory a lost mount left behind), switch to the owner, run the
    stager.  Every stage runs in a mount namespace of its own: a RAM disk
    that is an image is mounted there for it alone (read-write when it
    writes), never while a compute node holds it.  A RAM disk spanning
    nodes must be whole before and after: with a part down the stager
    would copy the files it can see and call it done.  Where the client
    that wrote files shows them stale (a sharded GlusterFS volume), a copy
    in writes through a client of its own, unverified, then runs again
    through the RAM disk's own client, which finds every complete file and
    verifies it: the RAM disk's client (the stage-out's, the admin's)
    never wrote them, so it shows them as they are."""
    from flux_rsa.stage.errors import EXIT_FAILED, PROG

    producer = r["DIRECTION"] == "in" and variables.producer_area(r["ROOT"], r["SRC"])
    side = r["DST"] if r["DIRECTION"] == "in" else r["SRC"]
    ramdisk = os.path.dirname(side)
    what = f"the stage-{r['DIRECTION']} of job {os.path.basename(ramdisk)}"
    # a stop (the stage canceled) ends the stager and unwinds what this
    # stage mounted and holds, instead of leaving an image in use
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _stopped)
    try:
        sysmount.private_namespace()
        if _images(ramdisk) > 1:
            return _per_node(r, ramdisk, what)
        with contextlib.ExitStack() as stack:
            write = r["DIRECTION"] == "in" or r["MODE"] == "script"
            stack.enter_context(
                _opened(ramdisk, write, what, r.get("RECLAIM", ()), _jobid(ramdisk))
            )
            replica = r.get("REPLICA")
            if replica is not None:
                try:
                    stack.enter_context(_opened(os.path.dirname(replica), False, what))
                except (OSError, ProviderError, layout.RamdiskError) as exc:
                    # a replica only saves reading data_in: read data_in
                    print(f"{PROG}: not reusing {replica}: {exc}", file=sys.stderr)
                    values = {k: v for k, v in r.values.items() if k != "REPLICA"}
                    r = variables.Request(r.op, values)
            if producer and r.get("PRODUCER_SERVERS") is not None:
                there = stack.enter_context(_producer_elsewhere(r, producer, ramdisk))
                src = there + r["SRC"][len(producer) :]
                r, producer = variables.Request(r.op, dict(r.values, SRC=src)), there
            elif producer:
                stack.enter_context(_opened(producer, False, what))
            return _stage_here(r, producer, ramdisk)
    except (OSError, ProviderError, layout.RamdiskError) as exc:
        print(f"{PROG}: {exc}", file=sys.stderr, flush=True)
        return EXIT_FAILED
    except Stopped as exc:
        print(f"{PROG}: stopped by signal {exc.args[0]}", file=sys.stderr, flush=True)
        return 128 + exc.args[0]


class Stopped(BaseException):
    """A stop signal came: unwind (the stager first, then the mounts)."""


#: the stager a stage forked (its process group), killed when it is stopped
_children = set()


def _stopped(signum, frame):
    for pid in list(_children):
        for kill in (os.killpg, os.kill):  # (its group may not be made yet)
            try:
                kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
    raise Stopped(signum)


def _per_node(r, ramdisk, what):
    """A stage of a RAM disk made of one image per compute node of its job
    (``rsa.fs=per-node``), copies only.  In: data_in into the first image,
    then from it into each of the others (memory to memory).  Out: every
    image read-only side by side, nothing copied if a name is in more than
    one (never a silent pick: ``stage.merge``), then each one's outputs
    into data_out in turn."""
    import shutil
    import tempfile

    from flux_rsa.stage.errors import EXIT_FAILED, PROG

    if r["MODE"] != "copy":
        print(
            f"{PROG}: {ramdisk}: a RAM disk with an image per compute node is staged "
            f"by copies only (not {r['MODE']})",
            file=sys.stderr,
            flush=True,
        )
        return EXIT_FAILED
    count, jobid = _images(ramdisk), _jobid(ramdisk)
    reclaim = r.get("RECLAIM", ())
    top = tempfile.mkdtemp(prefix="rsa-images-")
    try:
        os.chmod(top, 0o711)  # the owner reaches the mounts, nothing else
        if r["DIRECTION"] == "in":
            with _opened(ramdisk, True, what, reclaim, jobid):
                code = _stage_here(r, None, ramdisk)
            for index in range(1, count):
                if code != 0:
                    break
                first = os.path.join(top, "0")
                os.makedirs(first, exist_ok=True)
                with _opened(ramdisk, False, what, reclaim, jobid, 0, first), _opened(
                    ramdisk, True, what, reclaim, jobid, index
                ):
                    here = dict(r.values, SRC=os.path.join(first, IN_AREA))
                    code = _stage_here(variables.Request(r.op, here), None, ramdisk)
            return code
        with contextlib.ExitStack() as stack:
            trees = []
            for index in range(count):
                at = os.path.join(top, str(index))
                os.mkdir(at)
                stack.enter_context(
                    _opened(ramdisk, False, what, reclaim, jobid, index, at)
                )
                layout.check_ramdisk(at, os.path.basename(ramdisk), r["OWNER"])
                trees.append(os.path.join(at, OUT_AREA))
            code = _forked(lambda: _merge_check(r, trees))
            for tree in trees:
                if code != 0:
                    break
                at = os.path.dirname(tree)
                mine = variables.Request(r.op, dict(r.values, SRC=tree))
                code = _forked(
                    lambda: _stager(
                        mine,
                        disks.provider_of(layout.read_marker(ramdisk)),
                        at,
                    )
                )
            return code
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _merge_check(r, trees):
    """As the owner: refuse outputs whose names clash between nodes."""
    from flux_rsa.stage import identity, merge
    from flux_rsa.stage.errors import StageError

    try:
        identity.become(r["OWNER"])
        merge.check(trees)
    except StageError as exc:
        print(exc.line(), file=sys.stderr, flush=True)
        return exc.code
    return 0


def _jobid(ramdisk):
    jobid, _ = layout.ids_from_name(os.path.basename(ramdisk))
    return jobid


def _stage_here(r, producer, ramdisk):
    """``_stage`` once every RAM disk it reads or writes is there: the
    producer's (the hand-off), if any, at ``producer``."""
    from flux_rsa.stage.errors import EXIT_FAILED, PROG

    try:
        if producer:  # another RAM disk of the same owner (the hand-off)
            layout.check_ramdisk(producer, os.path.basename(producer), r["OWNER"])
        marker = layout.check_ramdisk(ramdisk, os.path.basename(ramdisk), r["OWNER"])
        provider = disks.provider_of(marker)
        # (here, not before: an image's areas exist once it is mounted)
        trust.owner_areas(r)
    except (layout.RamdiskError, variables.Refused) as exc:
        print(f"{PROG}: {exc}", file=sys.stderr, flush=True)
        return EXIT_FAILED
    if (
        r["DIRECTION"] == "in"
        and r["MODE"] == "copy"
        and r.get("VERIFY", "size") != "none"
        and provider.sees_own_writes_late(ramdisk)
    ):
        code = _forked(
            lambda: _through_fresh_client(provider, r, ramdisk, verify=False)
        )
        if code != 0:
            return code
    return _forked(lambda: _stager(r, provider, ramdisk))


def _stager(r, provider, ramdisk, verify=True):
    """Become the owner for good and run the stager on ``r``'s stage
    (``verify``: as ``r`` asks; else nothing compared)."""
    import dataclasses

    from flux_rsa.stage import api, identity
    from flux_rsa.stage import progress as progmod
    from flux_rsa.stage.errors import EXIT_FAILED, PROG, StageError

    try:
        identity.become(r["OWNER"])  # before any user path is touched
    except StageError as exc:
        print(exc.line(), file=sys.stderr, flush=True)
        return exc.code
    try:
        provider.check_whole(ramdisk)
        stage = stage_request(r, ramdisk)
        if not verify:
            stage = dataclasses.replace(stage, verify=None)
        code = api.command(stage, progmod.json_printer())
        provider.check_whole(ramdisk)
    except StageError as exc:  # a request the stager refuses
        print(exc.line(), file=sys.stderr, flush=True)
        return exc.code
    except (OSError, ProviderError) as exc:
        print(f"{PROG}: {exc}", file=sys.stderr, flush=True)
        return EXIT_FAILED
    return code


@contextlib.contextmanager
def _producer_elsewhere(r, producer, ramdisk):
    """The owner's RAM disk ``producer`` on another RSA node (the
    hand-off), mounted read-only in this namespace as its provider reaches
    it (its volume, or its image in that node's store); yields where.  Its
    marker is then checked as a local one's."""
    import shutil
    import tempfile

    from flux_rsa.ramdisk import holder

    name = os.path.basename(producer)
    values = {
        "SERVERS": r["PRODUCER_SERVERS"],
        "USER": r["PRODUCER_USER"],
        "SECRET": r["PRODUCER_SECRET"],
        "IMAGE": r.get("PRODUCER_IMAGE"),
        "HOST": r.get("HOST") or holder.node_name(),
        "WHAT": f"the hand-off's stage-in of job {os.path.basename(ramdisk)}",
    }
    top = tempfile.mkdtemp(prefix="rsa-handoff-")
    mountpoint = os.path.join(top, name)
    try:
        os.chmod(top, 0o711)  # the owner reaches the mount, not the client's files
        os.mkdir(mountpoint)
        workdir = os.path.join(top, "client")
        os.mkdir(workdir, 0o700)
        provider = disks.provider_of(layout.read_marker(ramdisk) or {})
        try:
            with provider.remote(values, mountpoint, workdir):
                yield mountpoint
        except ProviderError as exc:
            raise ProviderError(
                f"cannot mount job {name}'s RAM disk from "
                f"{','.join(values['SERVERS'])}: {exc}"
            ) from None
    finally:
        shutil.rmtree(top, ignore_errors=True)


def _through_fresh_client(provider, r, ramdisk, verify):
    """In a mount namespace of this process alone, mount a new client of
    the RAM disk over it, run the stager there as the owner, unmount."""
    import shutil

    from flux_rsa.stage.errors import EXIT_FAILED, PROG

    workdir = None
    try:
        sysmount.private_namespace()
        workdir = provider.mount_fresh(ramdisk)
    except (OSError, ProviderError) as exc:
        print(
            f"{PROG}: cannot mount a client of its own for the stage-in: {exc}",
            file=sys.stderr,
            flush=True,
        )
        return EXIT_FAILED
    try:
        return _forked(lambda: _stager(r, provider, ramdisk, verify))
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
            os.setpgid(0, 0)  # it and what it starts: killed together when stopped
            for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                signal.signal(sig, signal.SIG_DFL)
            code = fn()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(code)
    _children.add(pid)
    try:
        while True:
            try:
                return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
            except InterruptedError:
                continue
    finally:
        _children.discard(pid)
        _reap(pid)


def _reap(pid):
    """Wait for a child killed while we were told to stop."""
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:
        pass


def _measure(r):
    from flux_rsa.stage import identity, measure
    from flux_rsa.stage.errors import StageError

    try:
        identity.become(r["OWNER"])
    except StageError as exc:
        return _fail(f"{r['PATH']}: {exc.cause}", prog=measure.PROG)
    return measure.report(r["PATH"])


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


def _flush(r):
    """Write back what this compute node still holds of the job's image (its
    store is about to stop: the instance shuts down while the job runs)."""
    mountpoint = os.path.join(r["ROOT"], r["NAME"])
    try:
        if sysmount.mounted(mountpoint):
            sysmount.syncfs(mountpoint)
    except OSError as exc:
        return _fail(f"flush {mountpoint}: {exc}")
    return 0


def _store(r):
    """Serve this RSA node's image store until told to stop (a signal, as a
    holder is); then stop serving it, keeping it only for the images left
    in it (kept ones)."""
    from flux_rsa.ramdisk import holder

    signals.block()
    provider = disks.provider(r["PROVIDER"])
    host = r.get("HOST") or holder.node_name()
    try:
        marker = provider.serve_store(
            r["ROOT"],
            host,
            r["SIZE"],
            r["PORT"],
            r["SECRET"],
            r.get("FS_HOST", "{host}"),
        )
    except (OSError, ProviderError, layout.RamdiskError) as exc:
        return _fail(str(exc))
    print(
        json.dumps({"event": "store", "host": host, "server": marker["server"]}),
        flush=True,
    )
    signals.wait()
    try:
        left = provider.close_store(r["ROOT"], host)
    except (OSError, ProviderError, layout.RamdiskError) as exc:
        return _fail(f"cannot stop the image store of {host}: {exc}")
    print(json.dumps({"event": "store-closed", "host": host, "kept": left}), flush=True)
    return 0


def _leave(r):
    """Unmount this compute node's clients of the RSA nodes' stores that no
    attached image uses."""
    try:
        left, in_use = disks.provider(r["PROVIDER"]).transports(r["ROOT"]).leave()
    except (OSError, ProviderError, layout.RamdiskError) as exc:
        return _fail(f"cannot leave the image stores: {exc}")
    print(json.dumps({"event": "left", "left": left, "in_use": in_use}), flush=True)
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
    "store": _store,
    "leave": _leave,
    "flush": _flush,
}


def run(request, scripts=None):
    """Carry out ``request``, with ``scripts`` ({step: path}) the site
    scripts of provider command it may run; return its exit status."""
    if scripts:
        from flux_rsa.ramdisk.providers import command

        command.configure(scripts)
    return RUN[request.op](request)
