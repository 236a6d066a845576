"""Disaggregation: archives (tar) back into a tree (untar).

The reader turns archives into a Plan whose files point into the archive
(offsets of their data), and the copy engine does the rest.
"""

import mmap
import os
import stat

from . import fsutil
from . import plan as planmod
from . import tarformat as tf
from .errors import EXIT_FAILED, StageError, from_oserror, show
from .plan import Dir, File, HardLink, Special, Symlink


def _clean(path, archive):
    parts = []
    for p in path.split(b"/"):
        if p in (b"", b"."):
            continue
        if p == b"..":
            raise StageError(
                EXIT_FAILED,
                archive,
                f"member {show(path)} leaves the destination " "(contains '..')",
                "refusing to unpack it",
            )
        parts.append(p)
    return b"/".join(parts)


class _Merger:
    """Adds archive members to a Plan, later entries replacing earlier ones."""

    def __init__(self, plan):
        self.plan = plan
        self.dir_index = {d.rel: i for i, d in enumerate(plan.dirs)}
        self.others = {}
        for lst in (plan.files, plan.symlinks, plan.specials):
            for e in lst:
                self.others[plan.rel(e)] = e

    def parent(self, rel, archive):
        head, _, name = rel.rpartition(b"/")
        di = self.dir_index.get(head)
        if di is None:
            if head in self.others:
                raise StageError(
                    EXIT_FAILED,
                    archive,
                    f"member {show(rel)} lies under "
                    f"{show(head)}, which is not a directory",
                    "refusing to unpack it",
                )
            d = Dir()
            d.rel = head
            d.d = self.parent(head, archive)[0]
            d.name = head.rpartition(b"/")[2]
            d.mode = 0o40755
            d.uid, d.gid = os.getuid(), os.getgid()
            d.atime = d.mtime = self.plan.dirs[0].mtime
            di = len(self.plan.dirs)
            self.plan.dirs.append(d)
            self.dir_index[head] = di
        return di, name

    def add(self, m, ai, archive):
        rel = _clean(m.path, archive)
        if m.typeflag == tf.TYPE_DIR:
            if rel in self.dir_index:
                e = self.plan.dirs[self.dir_index[rel]]
            else:
                e = Dir()
                e.rel = rel
                if rel:
                    e.d, e.name = self.parent(rel, archive)
                self.dir_index[rel] = len(self.plan.dirs)
                self.plan.dirs.append(e)
            _meta(e, m, 0o040000)
            return
        d, name = self.parent(rel, archive)
        if m.typeflag == tf.TYPE_HARDLINK:
            first = self.others.get(_clean(m.linkname, archive))
            if not isinstance(first, File):
                raise StageError(
                    EXIT_FAILED,
                    archive,
                    f"hard link {show(rel)} points at "
                    f"{show(m.linkname)}, not an earlier file",
                    "the archive is damaged",
                )
            self.plan.hardlinks.append(HardLink(d, name, first))
            return
        if m.typeflag == tf.TYPE_FILE:
            e = File()
            e.size = m.realsize
            e.sparse = m.segments is not None
            e.key = None
            e.skip = False
            e.src = (ai, m.data_off, m.segments)
            kind = 0o100000
        elif m.typeflag == tf.TYPE_SYMLINK:
            e = Symlink()
            e.target = m.linkname
            kind = 0o120000
        elif m.typeflag in (tf.TYPE_CHAR, tf.TYPE_BLOCK, tf.TYPE_FIFO):
            e = Special()
            e.rdev = m.rdev
            kind = {
                tf.TYPE_CHAR: 0o020000,
                tf.TYPE_BLOCK: 0o060000,
                tf.TYPE_FIFO: 0o010000,
            }[m.typeflag]
        else:
            return  # unknown member types are skipped
        e.d, e.name = d, name
        _meta(e, m, kind)
        self.others[rel] = e

    def finish(self):
        plan = self.plan
        plan.files = [e for e in self.others.values() if isinstance(e, File)]
        plan.symlinks = [e for e in self.others.values() if isinstance(e, Symlink)]
        plan.specials = [e for e in self.others.values() if isinstance(e, Special)]
        plan.files.sort(key=lambda f: f.d)


def _meta(e, m, kind):
    e.mode = kind | (m.mode & 0o7777)
    e.uid, e.gid = m.uid, m.gid
    e.mtime = m.mtime
    e.atime = m.atime


def add_archive(plan, path):
    """Add the members of the archive at PATH to PLAN."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise from_oserror(exc, path, missing_is_source=True) from None
    try:
        size = os.fstat(fd).st_size
        ai = len(plan.archives)
        plan.archives.append(path)
        merger = _Merger(plan)
        if size == 0:
            return
        with mmap.mmap(fd, size, prot=mmap.PROT_READ) as buf:
            try:
                for m in tf.members(buf):
                    merger.add(m, ai, path)
            except (tf.FormatError, ValueError, IndexError) as exc:
                raise StageError(
                    EXIT_FAILED,
                    path,
                    f"not a readable tar archive: {exc}",
                    "check the file, or stage it with 'copy'",
                ) from None
        merger.finish()
    finally:
        os.close(fd)


def untar_plan(src, shard=(0, 1)):
    """A plan for 'untar': SRC's top-level *.tar files unpacked (in name
    order), everything else in SRC copied as by 'copy'."""
    base = planmod.walk(src, shard)
    archives = []
    keep = []
    for f in base.files:
        if f.d == 0 and f.name.endswith(b".tar") and stat.S_ISREG(f.mode):
            archives.append(f.name)
        else:
            keep.append(f)
    base.files = keep
    for name in sorted(archives):
        add_archive(base, fsutil.full(src, name))
    return base
