"""Walk a source tree into a Plan: what exists, what must be copied.

The walk opens every directory relative to its parent with O_NOFOLLOW, so a
symbolic link is recorded as a link and never entered, whatever it points at.
Without shards a directory's entries are read and stat'ed by the C scan
(native.Scanner) where it is built, else (and wherever it fails) by
os.scandir; the plan is the same either way.
"""

import collections
import operator
import os
import stat
import sys
import zlib

from . import fsutil, native
from .errors import EXIT_NOSOURCE, StageError, from_oserror

SPARSE_MIN = 64 * 1024  # smaller files are copied whole, holes or not
S_ISREG = stat.S_ISREG
# os.fsencode's encoding, called directly: the walk encodes every name
FS_ENCODING = (sys.getfilesystemencoding(), sys.getfilesystemencodeerrors())
_by_name = operator.attrgetter("name")
_first = operator.itemgetter(0)
# an lstat of native.Scanner, as _add reads one
_Stat = collections.namedtuple(
    "_Stat",
    "st_mode st_uid st_gid st_nlink st_size st_blocks "
    "st_atime_ns st_mtime_ns st_dev st_ino st_rdev",
)


class Entry:
    """Metadata shared by every kind of tree entry."""

    __slots__ = ("d", "name", "mode", "uid", "gid", "atime", "mtime")

    def set_stat(self, st):
        self.mode = st.st_mode
        self.uid = st.st_uid
        self.gid = st.st_gid
        self.atime = st.st_atime_ns
        self.mtime = st.st_mtime_ns


class Dir(Entry):
    __slots__ = ("rel",)


class File(Entry):
    """A regular file.  SRC is None for a file in the source tree, or
    (archive_index, offset, segments) for a member of an archive, where
    segments is None (contiguous data) or a list of (file_offset, length)."""

    __slots__ = ("size", "sparse", "key", "skip", "src")


class Symlink(Entry):
    __slots__ = ("target",)


class Special(Entry):
    __slots__ = ("rdev",)


class HardLink:
    """A further name for an inode already in the plan as FIRST (a File)."""

    __slots__ = ("d", "name", "first")

    def __init__(self, d, name, first):
        self.d = d
        self.name = name
        self.first = first


class Plan:
    """Everything a run will create under the destination."""

    def __init__(self, src):
        self.src = src
        self.dirs = []
        self.files = []
        self.symlinks = []
        self.specials = []
        self.hardlinks = []
        self.stale = []  # (dir index, name) of temporary files to remove
        self.archives = []  # paths of archives that File.src refers to

    def rel(self, entry):
        return fsutil.join(self.dirs[entry.d].rel, entry.name)

    def dir_rel(self, d):
        """Directory D's path in the tree."""
        return self.dirs[d].rel

    def source_path(self, f):
        """The path file F is read from: its own, or the archive holding it."""
        if f.src is None:
            return fsutil.full(self.src, self.rel(f))
        return self.archives[f.src[0]]

    @property
    def bytes_total(self):
        return sum(f.size for f in self.files)


def new_plan(src, st=None):
    """A Plan of SRC holding its root directory alone, with the metadata
    of ST (an os.stat_result) if given."""
    plan = Plan(src)
    root = Dir()
    root.rel = b""
    root.d = None
    root.name = b""
    if st is not None:
        root.set_stat(st)
    plan.dirs.append(root)
    return plan


def shard_of(rel, nshards):
    """Deterministic shard of a relative path (same on every node)."""
    return zlib.crc32(rel) % nshards


def walk(src, shard=(0, 1), dirs_only=False):
    """Walk SRC (bytes path of a directory) into a Plan.

    Only the entries of SHARD (k, n) are kept, except directories, which every
    shard creates.  Hard-link groups go to the shard of their first name.
    """
    w = Walker(src, shard, dirs_only)
    try:
        while w.step() is not None:
            pass
    finally:
        w.close()
    return w.plan


class Walker:
    """A walk taken one directory at a time, depth first: each directory's
    whole subtree is scanned before its next sibling, subdirectories in
    name order.  step() scans the next directory and returns its index
    (None when the walk is over); its entries are then the last ones added
    to the plan's lists (see span())."""

    def __init__(self, src, shard=(0, 1), dirs_only=False):
        self.k, self.n = shard
        self.dirs_only = dirs_only
        self.groups = {}
        try:
            self.root_fd = os.open(src, fsutil.DIR_FLAGS)
        except OSError as exc:
            raise from_oserror(exc, src, missing_is_source=True) from None
        try:
            self.plan = new_plan(src, os.fstat(self.root_fd))
        except BaseException:
            self.close()
            raise
        self.stack = [0]
        self.marks = None

    def step(self):
        if not self.stack:
            return None
        plan = self.plan
        di = self.stack.pop()
        first_dir = len(plan.dirs)
        self.marks = (
            len(plan.files),
            len(plan.hardlinks),
            len(plan.symlinks),
            len(plan.specials),
        )
        _scan_dir(plan, self.root_fd, di, self.k, self.n, self.groups, self.dirs_only)
        self.stack.extend(range(len(plan.dirs) - 1, first_dir - 1, -1))
        return di

    def span(self):
        """(files, hardlinks, symlinks, specials) of the directory scanned
        last, each in name order."""
        plan = self.plan
        f, h, s, p = self.marks
        return (
            plan.files[f:],
            plan.hardlinks[h:],
            plan.symlinks[s:],
            plan.specials[p:],
        )

    def close(self):
        if self.root_fd >= 0:
            os.close(self.root_fd)
            self.root_fd = -1


def _scan_dir(plan, root_fd, di, k, n, groups, dirs_only):
    d = plan.dirs[di]
    path = fsutil.full(plan.src, d.rel)
    try:
        fd = fsutil.open_dir(root_fd, d.rel)
    except OSError as exc:
        raise from_oserror(exc, path) from None
    try:
        if n == 1 and not dirs_only:
            scanner = native.scanner()
            scanned = scanner.scan(fd) if scanner is not None else None
            if scanned is not None:
                _add_scanned(plan, di, d.rel, fd, scanned, groups)
                return
        with os.scandir(fd) as it:
            entries = sorted(it, key=_by_name)
        files = plan.files
        enc, errors = FS_ENCODING
        plain = n == 1 and not dirs_only  # no shards: every file is kept
        for e in entries:
            name = e.name.encode(enc, errors)
            if dirs_only and not e.is_dir(follow_symlinks=False):
                continue
            try:
                st = e.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue  # vanished since readdir
            except OSError as exc:
                raise from_oserror(exc, fsutil.join(path, name)) from None
            if plain and st.st_nlink == 1 and S_ISREG(st.st_mode):
                # the common case, _add's work in short
                size = st.st_size
                files.append(
                    new_file(
                        di,
                        name,
                        st.st_mode,
                        st.st_uid,
                        st.st_gid,
                        st.st_atime_ns,
                        st.st_mtime_ns,
                        size,
                        is_sparse(size, st.st_blocks),
                    )
                )
                continue
            _add(plan, di, d.rel, name, st, fd, k, n, groups)
    except OSError as exc:
        raise from_oserror(exc, path) from None
    finally:
        os.close(fd)


def is_sparse(size, blocks):
    """Whether a file of SIZE bytes in BLOCKS 512-byte blocks is copied as
    sparse (its holes kept)."""
    return size >= SPARSE_MIN and blocks * 512 < size


def new_file(d, name, mode, uid, gid, atime, mtime, size, sparse):
    """A File of the source tree with one name (not an archive member)."""
    f = File()
    f.d = d
    f.name = name
    f.mode = mode
    f.uid = uid
    f.gid = gid
    f.atime = atime
    f.mtime = mtime
    f.size = size
    f.sparse = sparse
    f.key = f.src = None
    f.skip = False
    return f


def _add_scanned(plan, di, drel, fd, scanned, groups):
    """Add the entries of directory DI that native.Scanner read (no shards:
    every entry is kept), in the order os.scandir's names sort in."""
    names = b"".join(name for name, _ in scanned)
    if names.isascii():
        scanned.sort(key=_first)  # bytes sort as their str would
    else:
        enc, errors = FS_ENCODING
        scanned.sort(key=lambda e: e[0].decode(enc, errors))
    files = plan.files
    for name, st in scanned:
        mode, uid, gid, _, nlink, size, blocks, atime, mtime, dev, ino, rdev = st
        if nlink == 1 and S_ISREG(mode):
            files.append(
                new_file(
                    di,
                    name,
                    mode,
                    uid,
                    gid,
                    atime,
                    mtime,
                    size,
                    is_sparse(size, blocks),
                )
            )
            continue
        _add(
            plan,
            di,
            drel,
            name,
            _Stat(mode, uid, gid, nlink, size, blocks, atime, mtime, dev, ino, rdev),
            fd,
            0,
            1,
            groups,
        )


def _add(plan, di, drel, name, st, dir_fd, k, n, groups):
    mode = st.st_mode
    rel = fsutil.join(drel, name)
    if stat.S_ISDIR(mode):
        e = Dir()
        e.rel = rel
    elif stat.S_ISREG(mode):
        if st.st_nlink > 1:
            key = (st.st_dev, st.st_ino)
            first = groups.get(key)
            if first is not None:
                if first is not False:
                    plan.hardlinks.append(HardLink(di, name, first))
                return
            if n > 1 and shard_of(rel, n) != k:
                groups[key] = False  # another shard owns this group
                return
        elif n > 1 and shard_of(rel, n) != k:
            return
        e = File()
        e.size = st.st_size
        e.sparse = is_sparse(e.size, st.st_blocks)
        e.key = (st.st_dev, st.st_ino) if st.st_nlink > 1 else None
        e.skip = False
        e.src = None
        if e.key is not None:
            groups[e.key] = e
    elif n > 1 and shard_of(rel, n) != k:
        return
    elif stat.S_ISLNK(mode):
        e = Symlink()
        e.target = os.readlink(name, dir_fd=dir_fd)
    else:
        e = Special()
        e.rdev = st.st_rdev
    e.d = di
    e.name = name
    e.set_stat(st)
    if isinstance(e, Dir):
        plan.dirs.append(e)
    elif isinstance(e, File):
        plan.files.append(e)
    elif isinstance(e, Symlink):
        plan.symlinks.append(e)
    else:
        plan.specials.append(e)


def compare_dest(plan, dst, tag):
    """Mark files already complete in DST (same size and mtime) as skip, and
    list stale temporary files of shard TAG for removal.  DST may not exist."""
    try:
        root_fd = os.open(dst, fsutil.DIR_FLAGS)
    except FileNotFoundError:
        return
    except OSError as exc:
        raise from_oserror(exc, dst) from None
    by_dir = {}
    for f in plan.files:
        by_dir.setdefault(f.d, []).append(f)
    try:
        for di, d in enumerate(plan.dirs):
            try:
                fd = fsutil.open_dir(root_fd, d.rel)
            except (FileNotFoundError, NotADirectoryError):
                continue
            except OSError as exc:
                raise from_oserror(exc, fsutil.full(dst, d.rel)) from None
            try:
                compare_dir(plan, di, fd, by_dir.get(di, ()), tag)
            finally:
                os.close(fd)
    finally:
        os.close(root_fd)


def compare_dir(plan, di, fd, files, tag):
    """compare_dest() for directory DI, open as FD, and its FILES.  A file
    is complete when it has the source's size, mtime and mode: one whose
    mode differs (an earlier version's copy, made as the owner, lost its
    set-ID bits) is copied again, where rsync -a would set its mode."""
    names = os.listdir(fd)
    if not names:
        return
    present = set()
    for name in names:
        name = os.fsencode(name)
        if fsutil.is_tmp_of(name, tag):
            plan.stale.append((di, name))
        else:
            present.add(name)
    for f in files:
        if f.name not in present:
            continue
        try:
            st = os.stat(f.name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            continue
        if (
            stat.S_ISREG(st.st_mode)
            and st.st_size == f.size
            and st.st_mtime_ns == f.mtime
            and fsutil.has_mode(st, f.mode)
        ):
            f.skip = True


def check_source_dir(src):
    """Raise the 'missing source' error unless SRC is a directory."""
    try:
        st = os.stat(src)
    except OSError as exc:
        raise from_oserror(exc, src, missing_is_source=True) from None
    if not stat.S_ISDIR(st.st_mode):
        raise StageError(
            EXIT_NOSOURCE, src, "Not a directory", "the source must be a directory"
        )
    return st
