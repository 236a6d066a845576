"""The entries that are not regular files: symbolic links, special files
(FIFOs, devices) and hard links, made after the files' data is copied.

Each one is made the same way: under a fresh temporary name in its final
directory, given its owner, mode and times there, then renamed over its
final name, so a final name never holds a half-made entry; an entry
already as planned is left alone.
"""

import os
import stat
from contextlib import contextmanager

from . import fsutil
from .errors import from_oserror


class EntryMaker:
    """Makes PLAN's symbolic links, specials and hard links under DST.
    TMP() returns a fresh temporary name; CHOWN says whether owners are set."""

    def __init__(self, plan, dst, chown, tmp):
        self.plan = plan
        self.dst = dst
        self.chown = chown
        self.tmp = tmp

    def make_all(self, dcache):
        """Every entry of the plan; DCACHE gives directories by plan index."""
        for s in self.plan.symlinks:
            self.symlink(s, dcache)
        for s in self.plan.specials:
            self.special(s, dcache)
        for h in self.plan.hardlinks:
            self.hardlink(h, dcache)

    def symlink(self, s, dcache):
        with self._failing_on(s):
            dfd = dcache.get(s.d)
            if _symlink_current(s, dfd):
                return
            self._place(
                dfd,
                s.name,
                lambda name: os.symlink(s.target, name, dir_fd=dfd),
                lambda name: self._set_meta(s, name, dfd, mode=False),
            )

    def special(self, s, dcache):
        with self._failing_on(s):
            dfd = dcache.get(s.d)
            if _special_current(s, dfd):
                return

            def make(name):
                if stat.S_ISFIFO(s.mode):
                    os.mkfifo(name, s.mode & 0o7777, dir_fd=dfd)
                else:
                    os.mknod(name, s.mode, s.rdev, dir_fd=dfd)

            self._place(
                dfd, s.name, make, lambda name: self._set_meta(s, name, dfd, mode=True)
            )

    def hardlink(self, h, dcache):
        first = h.first
        with self._failing_on(h):
            ffd = dcache.get(first.d)
            fst = os.stat(first.name, dir_fd=ffd, follow_symlinks=False)
            dfd = dcache.get(h.d)
            if _same_file(h.name, dfd, fst):
                return
            self._place(
                dfd,
                h.name,
                lambda name: os.link(
                    first.name,
                    name,
                    src_dir_fd=ffd,
                    dst_dir_fd=dfd,
                    follow_symlinks=False,
                ),
                None,
            )

    def _place(self, dfd, final, make, set_meta):
        """The one way an entry is made: MAKE(name) under a temporary name
        in DFD, SET_META(name), rename to FINAL; the temporary name is
        removed if anything fails."""
        name = self.tmp()
        make(name)
        try:
            if set_meta is not None:
                set_meta(name)
            os.rename(name, final, src_dir_fd=dfd, dst_dir_fd=dfd)
        except BaseException:
            fsutil.unlink_quiet(name, dfd)
            raise

    def _set_meta(self, e, name, dfd, mode):
        if self.chown:
            os.chown(name, e.uid, e.gid, dir_fd=dfd, follow_symlinks=False)
        if mode:
            os.chmod(name, e.mode & 0o7777, dir_fd=dfd)
        os.utime(name, ns=(e.atime, e.mtime), dir_fd=dfd, follow_symlinks=False)

    @contextmanager
    def _failing_on(self, e):
        """OSErrors inside become StageErrors naming E's destination path."""
        try:
            yield
        except OSError as exc:
            raise from_oserror(exc, fsutil.full(self.dst, self.plan.rel(e))) from None


def _symlink_current(s, dfd):
    """True if DFD already holds symbolic link S as planned."""
    try:
        if os.readlink(s.name, dir_fd=dfd) != s.target:
            return False
        st = os.stat(s.name, dir_fd=dfd, follow_symlinks=False)
    except OSError:
        return False
    return st.st_mtime_ns == s.mtime


def _special_current(s, dfd):
    """True if DFD already holds special file S as planned."""
    try:
        st = os.stat(s.name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return st.st_mode == s.mode and st.st_rdev == s.rdev and st.st_mtime_ns == s.mtime


def _same_file(name, dfd, fst):
    """True if NAME in DFD is the file FST describes (a hard link done)."""
    try:
        st = os.stat(name, dir_fd=dfd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    return (st.st_dev, st.st_ino) == (fst.st_dev, fst.st_ino)
