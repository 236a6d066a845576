"""run(): one stage operation, start to finish, as a Python call."""

import os
import time

from . import identity, native, plan as planmod, progress as progmod
from .copy import Copier
from .errors import EXIT_USAGE, StageError
from .verify import Verifier

MODES = ("copy", "tar", "untar", "script")
VERIFY = ("size", "checksum")


class Result:
    """What a finished run did."""

    def __init__(self, mode):
        self.mode = mode
        self.files_total = 0
        self.bytes_total = 0
        self.files_copied = 0
        self.bytes_copied = 0
        self.files_skipped = 0
        self.elapsed = 0.0
        self.verified = None
        self.output = None  # the archive written by 'tar'

    def as_dict(self):
        return dict(vars(self), output=None if self.output is None
                    else os.fsdecode(self.output))


def _b(path):
    return os.fsencode(path) if path is not None else None


def default_workers():
    return max(2, os.cpu_count() or 2)


def run(mode, src, dst, *, workers=None, verify="size", as_user=None,
        progress=None, shard=(0, 1), finalize=False, name=None, sync=True,
        direction=None):
    """Stage SRC to DST.  MODE is one of MODES; for 'script', SRC is the
    script and DST is (ramdisk_dir, data_dir), and DIRECTION ("in": data to
    RAM disk, "out": RAM disk to data; None: not said) lets its progress be
    measured.  PROGRESS, if given, is called with progress.Snapshot
    objects.  Returns a Result; raises StageError.

    AS_USER switches this whole process to that user for good (as root), or
    must name the current user.
    """
    if mode not in MODES:
        raise StageError(EXIT_USAGE, None, f"unknown mode {mode!r}",
                         "use one of " + ", ".join(MODES))
    if verify not in VERIFY and verify is not None:
        raise StageError(EXIT_USAGE, None, f"unknown --verify {verify!r}",
                         "use size or checksum")
    k, n = shard
    if not (n >= 1 and 0 <= k < n):
        raise StageError(EXIT_USAGE, None, f"bad shard {k}/{n}",
                         "K/N with 0 <= K < N")
    if n > 1 and mode in ("tar", "untar", "script"):
        raise StageError(EXIT_USAGE, None, f"--shard is not supported with {mode}",
                         "shard only 'copy'")
    identity.become(as_user)  # before any user path is touched
    workers = workers or default_workers()
    meter = progmod.Meter(progress)
    result = Result(mode)
    t0 = time.monotonic()
    if mode == "script":
        from . import script as scriptmod

        meter.update("copy", 0, 0, 0, 0, force=True)
        ramdisk, data = (_b(d) for d in dst)
        tick = None
        if direction is not None and progress is not None:
            tick = scriptmod.Growth(*((data, ramdisk) if direction == "in" else (ramdisk, data)), meter)
            result.bytes_total = tick.total
        scriptmod.run_script(_b(src), ramdisk, data, tick=tick)
    elif mode == "tar":
        _tar(_b(src), _b(dst), name, workers, verify, meter, result, sync)
    else:
        _copy(mode, _b(src), _b(dst), workers, verify, meter, result, shard,
              finalize, sync)
    result.elapsed = time.monotonic() - t0
    meter.update("done", result.bytes_total, result.bytes_total,
                 result.files_total, result.files_total, force=True)
    return result


def _copy(mode, src, dst, workers, verify, meter, result, shard, finalize, sync):
    k, n = shard
    tag = b"%d" % k if n > 1 else b"0"
    meter.update("scan", 0, 0, 0, 0, force=True)
    planmod.check_source_dir(src)
    if finalize:
        p = planmod.walk(src, dirs_only=True)
        c = Copier(p, dst, workers=workers, tag=tag)
        try:
            c.finish_dirs()
            if sync:
                c.sync()
        finally:
            c.close()
        return
    walker = None
    if mode == "untar":
        from . import untar

        p = untar.untar_plan(src)
    elif n == 1 and native.load() is not None:
        walker = planmod.Walker(src)  # walked while the copy runs
        p = walker.plan
    else:
        p = planmod.walk(src, shard)
    if walker is None:
        planmod.compare_dest(p, dst, tag)

    def copy_progress(t):
        # "scan" while the walk goes on (totals still growing), then "copy"
        meter.update("copy" if t.walked else "scan", t.bytes_done, t.bytes_total,
                     t.files_done, t.files_total)

    c = Copier(p, dst, workers=workers, tag=tag, progress=copy_progress,
               writeback=sync, hide=walker is not None)
    try:
        try:
            tally = c.run(walker)
        finally:
            if walker is not None:
                walker.close()
        result.files_total = nfiles = len(p.files)
        result.bytes_total = total = p.bytes_total
        meter.update("copy", tally.bytes_done, total, tally.files_done, nfiles,
                     force=True)
        result.files_copied = tally.files_copied
        result.bytes_copied = tally.bytes_copied
        result.files_skipped = nfiles - tally.files_copied
        if n == 1:
            c.finish_dirs()
        files, nf, nb = p.files, 0, 0
        if verify == "size" and c.packed:
            # the files the C loop copied, checked by the C loop while the
            # destination is flushed
            meter.update("verify", 0, total, 0, nfiles, force=True)
            nf, nb = c.verify_packed(Verifier(p, dst, "size"), sync=sync)
            files = c.unpacked
        elif sync:
            c.sync()
    finally:
        c.close()
    if verify:
        meter.update("verify", nb, total, nf, nfiles, force=True)
        Verifier(p, dst, verify, workers, files=files,
                 progress=lambda f, b: meter.update("verify", nb + b, total, nf + f, nfiles)
                 ).run()
        result.verified = verify


def _tar(src, dstdir, name, workers, verify, meter, result, sync):
    from . import tarwrite

    meter.update("scan", 0, 0, 0, 0, force=True)
    planmod.check_source_dir(src)
    # the tree is walked while the archive is written: the totals grow
    # until the walk is over
    w = tarwrite.TarWriter(
        src, dstdir, name=_b(name) if name else tarwrite.DEFAULT_NAME, workers=workers,
        progress=lambda f, b: meter.update("copy", b, w.bytes_total, f, w.files_total))
    meter.update("copy", 0, 0, 0, 0, force=True)
    result.output = w.run(sync=sync)
    p = w.plan
    result.files_total = nfiles = len(p.files)
    result.bytes_total = total = p.bytes_total
    result.files_copied = nfiles
    result.bytes_copied = total
    meter.update("copy", total, total, nfiles, nfiles, force=True)
    if verify:
        meter.update("verify", 0, total, 0, nfiles, force=True)
        w.verify_layout()
        if verify == "checksum":
            # read the archive back as a plan and compare it with the tree
            _verify_archive(p, result.output, verify, workers, meter, total, nfiles)
        meter.update("verify", total, total, nfiles, nfiles, force=True)
        result.verified = verify


def _verify_archive(tree, archive, mode, workers, meter, total, nfiles):
    """Check that ARCHIVE lists every file of TREE with its size and mtime
    (and, for checksum, the same content)."""
    from .errors import EXIT_VERIFY
    from . import fsutil, untar

    back = planmod.Plan(None)
    root = planmod.Dir()
    root.rel = b""
    root.d = None
    root.name = b""
    back.dirs.append(root)
    untar.add_archive(back, archive)
    got = {back.rel(f): f for f in back.files}
    for h in back.hardlinks:  # a name of the tree may hold a link to the data
        got[back.rel(h)] = h.first
    for f in tree.files:
        rel = tree.rel(f)
        g = got.get(rel)
        why = None
        if g is None:
            why = "missing from the archive"
        elif g.size != f.size:
            why = f"size {g.size} in the archive, {f.size} in the tree"
        elif g.mtime != f.mtime:
            why = "modification time differs in the archive"
        if why:
            raise StageError(EXIT_VERIFY, fsutil.full(archive, rel),
                             f"verification failed: {why}", "run the stage again")
    if mode == "checksum":
        _checksum_archive(tree, archive, got)
    meter.update("verify", total, total, nfiles, nfiles, force=True)


def _checksum_archive(tree, archive, got):
    from .errors import EXIT_VERIFY
    from . import fsutil
    from .verify import digest, digest_sparse

    root = os.open(tree.src, fsutil.DIR_FLAGS)
    try:
        for f in tree.files:
            rel = tree.rel(f)
            g = got[rel]
            sfd = fsutil.open_dir(root, tree.dirs[f.d].rel)
            try:
                fd = os.open(f.name, os.O_RDONLY | os.O_NOFOLLOW, dir_fd=sfd)
            finally:
                os.close(sfd)
            afd = os.open(archive, os.O_RDONLY)
            try:
                a = digest(fd, 0, f.size)
                _, off, segs = g.src
                b = (digest(afd, off, g.size) if segs is None
                     else digest_sparse(afd, off, segs, 0, g.size))
            finally:
                os.close(fd)
                os.close(afd)
            if a != b:
                raise StageError(EXIT_VERIFY, fsutil.full(archive, rel),
                                 "verification failed: content differs from the tree",
                                 "run the stage again")
    finally:
        os.close(root)
