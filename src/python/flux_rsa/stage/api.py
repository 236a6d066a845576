"""run(): one stage operation, start to finish, as a Python call.

A stage is three steps, each in modules of its own: the plan (plan.py; for
archives untar.py), the copy (copy.py; tarwrite.py writes one archive,
script.py runs the user's script instead) and the verification
(verify.py).  This module runs them in that order and reports progress and
the result; it decides nothing else.
"""

import os
import time

from . import identity, native
from . import plan as planmod
from . import progress as progmod
from . import verify as verifymod
from .copy import Copier
from .errors import EXIT_USAGE, StageError

MODES = ("copy", "tar", "untar", "script")
VERIFY = ("size", "checksum")


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


def run(
    mode,
    src,
    dst,
    *,
    workers=None,
    verify="size",
    as_user=None,
    progress=None,
    shard=(0, 1),
    finalize=False,
    name=None,
    sync=True,
    direction=None,
    script_env=None,
):
    """Stage SRC to DST.  MODE is one of MODES; for 'script', SRC is the
    script and DST is (ramdisk_dir, data_dir), DIRECTION ("in": data to
    RAM disk, "out": RAM disk to data; None: not said) lets its progress be
    measured, and SCRIPT_ENV is its environment (None: ours; see
    script.environment).  PROGRESS, if given, is called with
    progress.Snapshot objects.  Returns a Result; raises StageError.

    AS_USER switches this whole process to that user for good (as root), or
    must name the current user.
    """
    if mode not in MODES:
        raise StageError(
            EXIT_USAGE, None, f"unknown mode {mode!r}", "use one of " + ", ".join(MODES)
        )
    if verify not in VERIFY and verify is not None:
        raise StageError(
            EXIT_USAGE, None, f"unknown --verify {verify!r}", "use size or checksum"
        )
    k, n = shard
    if not (n >= 1 and 0 <= k < n):
        raise StageError(EXIT_USAGE, None, f"bad shard {k}/{n}", "K/N with 0 <= K < N")
    if n > 1 and mode in ("tar", "untar", "script"):
        raise StageError(
            EXIT_USAGE,
            None,
            f"--shard is not supported with {mode}",
            "shard only 'copy'",
        )
    identity.become(as_user)  # before any user path is touched
    workers = workers or default_workers()
    meter = progmod.Meter(progress)
    result = Result(mode)
    t0 = time.monotonic()
    if mode == "script":
        _script(
            _b(src), dst, direction, progress is not None, meter, result, script_env
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
