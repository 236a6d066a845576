"""One stage operation, start to finish, as a Python call.

A stage is asked as a ``StageRequest`` (a frozen value, checked when it
is made): the command line (``python3 -m flux_rsa.stage``, __main__.py)
parses its argv into one, the privileged stage (``privileged.ops``) builds
one from its checked ``RSA_*`` variables, and both hand it to ``command``:
the stage as the stager's process does it (the replica's reuse said on
stdout, a failure as one line on stderr, an exit status).  ``run`` is the
stage itself, raising ``StageError``.

A stage is three steps, each in modules of its own: the plan (plan.py; for
archives untar.py), the copy (copy.py; tarwrite.py writes one archive,
script.py runs the user's script instead) and the verification
(verify.py).  ``run`` runs them in that order and reports progress and
the result; it decides nothing else.
"""

import dataclasses
import json
import os
import sys
import time
from typing import Optional, Union

from . import identity, native
from . import plan as planmod
from . import progress as progmod
from . import replica as replicamod
from . import verify as verifymod
from .copy import Copier
from .errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, PROG, StageError

MODES = ("copy", "tar", "untar", "script")
#: a path as the stager takes it (text, bytes, or a path object)
Path = Union[str, bytes, os.PathLike]
VERIFY = ("size", "checksum")


def _usage(text, hint="see --help"):
    return StageError(EXIT_USAGE, None, text, hint)


@dataclasses.dataclass(frozen=True)
class StageRequest:
    """One stage, as the stager is asked it.

    ``mode`` is one of MODES.  ``src`` is the source directory (script: the
    user's script), ``dst`` the destination directory (tar: the directory
    the archive goes into; script: the RAM-disk directory) and ``data``,
    for a script only, the data directory.  ``verify`` is "size",
    "checksum" or None (nothing compared).  ``as_user`` switches the
    process to that user for good (as root), or must name the current
    user.  ``shard`` (K, N) copies share K of N; ``finalize`` (copy) only
    sets directory modes and mtimes, after every shard.  ``name``: tar's
    archive name.  ``sync``: flush the destination at the end.
    ``replica`` (an unsharded copy): a staged copy of ``src`` to read
    instead while it still matches.  ``direction`` (script: "in", data to
    RAM disk, or "out") lets a script's progress be measured, and
    ``script_env`` is its environment (None: ours; see
    script.environment).

    Made with a value out of place, it raises StageError (EXIT_USAGE).
    """

    mode: str
    src: Path
    dst: Path
    data: Optional[Path] = None
    workers: Optional[int] = None
    verify: Optional[str] = "size"
    as_user: Optional[str] = None
    shard: tuple = (0, 1)
    finalize: bool = False
    name: Optional[str] = None
    sync: bool = True
    replica: Optional[Path] = None
    direction: Optional[str] = None
    script_env: Optional[dict] = None

    def __post_init__(self):
        mode = self.mode
        if mode not in MODES:
            raise StageError(
                EXIT_USAGE,
                None,
                f"unknown mode {mode!r}",
                "use one of " + ", ".join(MODES),
            )
        if self.verify not in VERIFY and self.verify is not None:
            raise StageError(
                EXIT_USAGE,
                None,
                f"unknown --verify {self.verify!r}",
                "use size or checksum",
            )
        if mode == "script" and self.data is None:
            raise _usage("script needs PATH RAMDISK_DIR DATA_DIR")
        if mode != "script" and self.data is not None:
            raise _usage(f"unexpected argument {self.data!r}")
        if self.direction and mode != "script":
            raise _usage("--direction applies to script only")
        if self.direction not in (None, "in", "out"):
            raise _usage(f"unknown --direction {self.direction!r}", "use in or out")
        if self.name and mode != "tar":
            raise _usage("--name applies to tar only")
        if self.finalize and mode != "copy":
            raise _usage("--finalize applies to copy only")
        if self.replica and (mode != "copy" or self.shard != (0, 1)):
            raise _usage("--replica applies to an unsharded copy only")
        k, n = self.shard
        if not (n >= 1 and 0 <= k < n):
            raise StageError(
                EXIT_USAGE, None, f"bad shard {k}/{n}", "K/N with 0 <= K < N"
            )
        if n > 1 and mode in ("tar", "untar", "script"):
            raise StageError(
                EXIT_USAGE,
                None,
                f"--shard is not supported with {mode}",
                "shard only 'copy'",
            )


class Result:
    """What a finished run did."""

    def __init__(self, mode):
        self.mode = mode
        self.files_total = self.bytes_total = 0
        self.files_copied = self.bytes_copied = self.files_skipped = 0
        self.elapsed = 0.0
        self.verified = None
        self.output = None  # the archive written by 'tar'

    def count(self, plan, files_copied, bytes_copied):
        """The totals of PLAN, of which FILES_COPIED files of BYTES_COPIED
        bytes were copied (the others were complete already)."""
        self.files_total = len(plan.files)
        self.bytes_total = plan.bytes_total
        self.files_copied = files_copied
        self.bytes_copied = bytes_copied
        self.files_skipped = self.files_total - files_copied

    def as_dict(self):
        return dict(
            vars(self), output=None if self.output is None else os.fsdecode(self.output)
        )


def _b(path):
    return os.fsencode(path) if path is not None else None


def default_workers():
    return max(2, os.cpu_count() or 2)


def command(request, progress=None, summary=False):
    """Carry out ``request`` (a StageRequest) as the stager's process does:
    the reuse of its replica said on stdout (``{"reused": DIR}``), a
    failure as one line on stderr; with ``summary``, the Result as JSON on
    stderr.  PROGRESS as for ``run``.  Returns the exit status."""
    try:
        result = run(_source(request), progress)
    except StageError as exc:
        sys.stdout.flush()
        print(exc.line(), file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:  # not classified by the stager: still one line
        print(f"{PROG}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if summary:
        print(json.dumps(result.as_dict()), file=sys.stderr)
    return EXIT_OK


def _source(request):
    """REQUEST, or the same from its replica when the replica still matches
    its source (compared as the user)."""
    if not request.replica:
        return request
    identity.become(request.as_user)
    if not replicamod.same_tree(request.src, request.replica):
        return dataclasses.replace(request, replica=None)
    print(json.dumps({"reused": request.replica}), flush=True)
    return dataclasses.replace(request, src=request.replica, replica=None)


def run(request, progress=None):
    """Stage as ``request`` (a StageRequest) says.  PROGRESS, if given, is
    called with progress.Snapshot objects.  Returns a Result; raises
    StageError.  (``request.replica`` is not read here: ``command``
    chooses the source.)"""
    r = request
    mode, src, dst, verify, name = r.mode, r.src, r.dst, r.verify, r.name
    shard, finalize, sync = r.shard, r.finalize, r.sync
    identity.become(r.as_user)  # before any user path is touched
    workers = r.workers or default_workers()
    meter = progmod.Meter(progress)
    result = Result(mode)
    t0 = time.monotonic()
    if mode == "script":
        _script(
            _b(src),
            (dst, r.data),
            r.direction,
            progress is not None,
            meter,
            result,
            r.script_env,
        )
    elif mode == "tar":
        _tar(_b(src), _b(dst), name, workers, verify, meter, result, sync)
    else:
        _copy(
            mode,
            _b(src),
            _b(dst),
            workers,
            verify,
            meter,
            result,
            shard,
            finalize,
            sync,
        )
    result.elapsed = time.monotonic() - t0
    meter.update(
        "done",
        result.bytes_total,
        result.bytes_total,
        result.files_total,
        result.files_total,
        force=True,
    )
    return result


def _script(script, dst, direction, measured, meter, result, env):
    """Mode script: the user's SCRIPT does the copy, in ``env``."""
    from . import script as scriptmod

    meter.update("copy", 0, 0, 0, 0, force=True)
    ramdisk, data = (_b(d) for d in dst)
    tick = None
    if direction is not None and measured:
        tick = scriptmod.Growth(
            *((data, ramdisk) if direction == "in" else (ramdisk, data)), meter
        )
        result.bytes_total = tick.total
    scriptmod.run_script(script, ramdisk, data, env=env, tick=tick)


def _copy(mode, src, dst, workers, verify, meter, result, shard, finalize, sync):
    """Modes copy and untar (and --finalize): plan, copy, verify."""
    k, n = shard
    tag = b"%d" % k if n > 1 else b"0"
    meter.update("scan", 0, 0, 0, 0, force=True)
    planmod.check_source_dir(src)
    p, walker = _plan(mode, src, dst, shard, tag, finalize)

    def copy_progress(t):
        # "scan" while the walk goes on (totals still growing), then "copy"
        meter.update(
            "copy" if t.walked else "scan",
            t.bytes_done,
            t.bytes_total,
            t.files_done,
            t.files_total,
        )

    copier = Copier(
        p,
        dst,
        workers=workers,
        tag=tag,
        progress=copy_progress,
        writeback=sync,
        hide=walker is not None,
    )
    try:
        if not finalize:
            _copy_files(copier, walker, meter, result)
        if n == 1 or finalize:
            copier.finish_dirs()
        flush = copier.sync if sync else None
        if verify and not finalize:
            total, nfiles = result.bytes_total, result.files_total
            meter.update("verify", 0, total, 0, nfiles, force=True)
            verifymod.check_copy(
                p,
                dst,
                verify,
                workers,
                progress=lambda f, b: meter.update("verify", b, total, f, nfiles),
                packed=copier.packed,
                lib=copier.lib,
                unpacked=copier.unpacked,
                flush=flush,
            )
            result.verified = verify
        elif flush is not None:
            flush()
    finally:
        copier.close()


def _plan(mode, src, dst, shard, tag, finalize):
    """The plan of a copy, and the plan.Walker that makes it while the
    copy runs (None: the plan is whole, and compared with DST already)."""
    if finalize:
        return planmod.walk(src, dirs_only=True), None
    if mode == "untar":
        from . import untar

        p = untar.untar_plan(src)
    elif shard[1] == 1 and native.load() is not None:
        walker = planmod.Walker(src)  # walked while the copy runs
        return walker.plan, walker
    else:
        p = planmod.walk(src, shard)
    planmod.compare_dest(p, dst, tag)
    return p, None


def _copy_files(copier, walker, meter, result):
    """The copy: every file, link and directory of the plan (of WALKER's,
    walked meanwhile, if not None)."""
    try:
        tally = copier.run(walker)
    finally:
        if walker is not None:
            walker.close()
    result.count(copier.plan, tally.files_copied, tally.bytes_copied)
    meter.update(
        "copy",
        tally.bytes_done,
        result.bytes_total,
        tally.files_done,
        result.files_total,
        force=True,
    )


def _tar(src, dstdir, name, workers, verify, meter, result, sync):
    """Mode tar: the tree walked and written as one archive, then verified."""
    from . import tarwrite

    meter.update("scan", 0, 0, 0, 0, force=True)
    planmod.check_source_dir(src)
    # the tree is walked while the archive is written: the totals grow
    # until the walk is over
    w = tarwrite.TarWriter(
        src,
        dstdir,
        name=_b(name) if name else tarwrite.DEFAULT_NAME,
        workers=workers,
        progress=lambda f, b: meter.update("copy", b, w.bytes_total, f, w.files_total),
    )
    meter.update("copy", 0, 0, 0, 0, force=True)
    result.output = w.run(sync=sync)
    result.count(w.plan, len(w.plan.files), w.plan.bytes_total)
    total, nfiles = result.bytes_total, result.files_total
    meter.update("copy", total, total, nfiles, nfiles, force=True)
    if verify:
        meter.update("verify", 0, total, 0, nfiles, force=True)
        verifymod.check_archive(w, verify)
        meter.update("verify", total, total, nfiles, nfiles, force=True)
        result.verified = verify
