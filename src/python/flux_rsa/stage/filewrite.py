"""One regular file written whole under its final name.

The file is written as an unnamed file (O_TMPFILE) in its final directory
and given its name (linkat) once complete, or, where the file system
cannot do that, written under a hidden temporary name and renamed into
place; either way a final name always holds a whole file, with its owner,
mode and times set before it gets that name.  A file is created without
set-user-ID and set-group-ID bits; they are set once its data and owner
are in, as rsync -a does: the kernel clears them when a process without
CAP_FSETID (the job owner) writes to the file, and chown clears them for
anyone.  In a directory that is itself still under a hidden temporary name
(a new directory, see copy.py) the file is written under its final name at
once: no one looks there yet.
"""

import errno
import os
import stat

from . import copyio, fsutil
from .errors import DESTINATION_ERRNOS, EXIT_FAILED, StageError, from_oserror

# open(O_TMPFILE) errors meaning "not here": fall back to named temporary files
NO_TMPFILE_HERE = frozenset({errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL})
SET_ID = stat.S_ISUID | stat.S_ISGID


def created_mode(f):
    """The permission bits file F is created with: its own but the set-ID
    bits, which set_meta sets after the data."""
    return f.mode & 0o7777 & ~SET_ID


class FileWriter:
    """Writes files of PLAN under DST.  NAMES is an fsutil.TmpNames; CHOWN
    says whether owners are set; TMPFILE whether O_TMPFILE is tried."""

    def __init__(
        self, plan, dst, names, chown, tmpfile=True, writeback=False, src_path=None
    ):
        self.plan = plan
        self.dst = dst
        self.names = names
        self.chown = chown
        self.tmpfile = tmpfile
        self.writeback = writeback
        self.src_path = src_path  # file -> its source's path, for messages
        self.link = fsutil.link_proc  # how an unnamed file gets its name
        self._new_owner = {}

    def probe_tmpfile(self, dst_root):
        """Can the destination hold unnamed files (O_TMPFILE) that linkat
        names later?  Tried once, in DST itself: with AT_EMPTY_PATH, else
        through /proc/self/fd."""
        try:
            fd = os.open(b".", fsutil.TMPFILE_FLAGS, 0o600, dir_fd=dst_root)
        except OSError:
            return False
        name = self.names.new()
        try:
            for link in (fsutil.link_fd, fsutil.link_proc):
                try:
                    link(fd, dst_root, name)
                except OSError:
                    continue
                self.link = link
                fsutil.unlink_quiet(name, dst_root)
                return True
            return False
        finally:
            os.close(fd)

    def write(self, f, sfd, ddir, hidden=False):
        """Copy file F from SFD (its source, or the archive holding it) into
        directory DDIR; HIDDEN: DDIR is not seen yet, F is created under its
        final name."""
        name = None  # the temporary name, when O_TMPFILE is not used
        named = hidden  # the file has its final name
        reading = True
        try:
            if hidden:
                dfd = self._create_hidden(f, ddir)
            else:
                dfd, name = self._create(f, ddir)
        except OSError as exc:
            raise from_oserror(exc, self._path(f)) from None
        try:
            try:
                if f.src is not None:
                    done = self._from_archive(f, sfd, dfd)
                elif f.sparse:
                    os.ftruncate(dfd, f.size)
                    copyio.copy_range(sfd, dfd, 0, f.size, sparse=True)
                    done = f.size
                else:
                    done = copyio.copy_whole(sfd, dfd, f.size)
                reading = False
                if done != f.size:
                    raise StageError(
                        EXIT_FAILED,
                        self.src_path(f),
                        f"changed while being copied (planned {f.size} bytes, "
                        f"read {done})",
                        "run the stage again",
                    )
                self.set_meta(dfd, f, ddir)
                if self.writeback and f.size >= copyio.SMALL:
                    fsutil.start_writeback(dfd, 0, f.size)
                if name is None and not named:
                    self._name_tmpfile(dfd, f, ddir)
                    named = True
            finally:
                # where close writes the data (NFS), its error means the file
                # under its final name is not whole: it is removed below
                os.close(dfd)
            if name is not None:
                os.rename(name, f.name, src_dir_fd=ddir, dst_dir_fd=ddir)
        except BaseException as exc:
            if name is not None:
                fsutil.unlink_quiet(name, ddir)
            if named:
                fsutil.unlink_quiet(f.name, ddir)
            if isinstance(exc, OSError):
                if reading and exc.errno not in DESTINATION_ERRNOS:
                    raise from_oserror(exc, self.src_path(f)) from None
                raise from_oserror(exc, self._path(f)) from None
            raise

    def _path(self, f):
        return fsutil.full(self.dst, self.plan.rel(f))

    def _create(self, f, ddir):
        """The file to write F into: unnamed (O_TMPFILE) where the file
        system can, else a new temporary name.  Returns (fd, name or None)."""
        if self.tmpfile:
            try:
                return (
                    os.open(b".", fsutil.TMPFILE_FLAGS, created_mode(f), dir_fd=ddir),
                    None,
                )
            except OSError as exc:
                if exc.errno not in NO_TMPFILE_HERE:
                    raise
                self.tmpfile = False  # e.g. another file system under DST
        name = self.names.new()
        return os.open(name, fsutil.CREATE_FLAGS, created_mode(f), dir_fd=ddir), name

    def _create_hidden(self, f, ddir):
        """F under its final name in DDIR, a hidden directory; a file there
        (partial: a killed run's) is replaced."""
        try:
            return os.open(f.name, fsutil.CREATE_FLAGS, created_mode(f), dir_fd=ddir)
        except FileExistsError:
            os.unlink(f.name, dir_fd=ddir)
        return os.open(f.name, fsutil.CREATE_FLAGS, created_mode(f), dir_fd=ddir)

    def _name_tmpfile(self, dfd, f, ddir):
        """Give the complete unnamed file DFD its final name.  A name
        already there (an older version of the file) is replaced
        atomically: link under a temporary name, then rename over it."""
        try:
            self.link(dfd, ddir, f.name)
            return
        except FileExistsError:
            pass
        tmp = self.names.new()
        self.link(dfd, ddir, tmp)
        try:
            os.rename(tmp, f.name, src_dir_fd=ddir, dst_dir_fd=ddir)
        except BaseException:
            fsutil.unlink_quiet(tmp, ddir)
            raise

    def _from_archive(self, f, afd, dfd):
        _, off, segments = f.src
        if segments is None:
            return copyio.copy_range(afd, dfd, off, f.size, delta=-off)
        os.ftruncate(dfd, f.size)
        for where, n in segments:
            copyio.copy_range(afd, dfd, off, n, delta=where - off)
            off += n
        return f.size

    def set_meta(self, fd, f, dir_fd, mode=False):
        """Owner (when set), set-ID bits and times of file F, open as FD in
        directory DIR_FD, once its data is in; MODE: all its permission
        bits (it was not created with them)."""
        if self.chown and (f.uid, f.gid) != self.owner_of_new(f.d, dir_fd):
            os.fchown(fd, f.uid, f.gid)
        if mode or f.mode & SET_ID:
            os.fchmod(fd, f.mode & 0o7777)
        os.utime(fd, ns=(f.atime, f.mtime))

    def owner_of_new(self, d, dir_fd):
        """(uid, gid) a file created in directory D gets: ours, or the
        directory's group when it is set-group-ID.  A file that should have
        exactly these needs no fchown."""
        owner = self._new_owner.get(d)
        if owner is None:
            st = os.fstat(dir_fd)
            gid = st.st_gid if st.st_mode & stat.S_ISGID else os.getegid()
            owner = self._new_owner[d] = (os.geteuid(), gid)
        return owner


def check_size(fd, f, path):
    """Raise StageError unless FD has F's planned size."""
    st = os.fstat(fd)
    if st.st_size != f.size:
        raise StageError(
            EXIT_FAILED,
            path,
            f"has {st.st_size} bytes after the copy, expected {f.size}",
        )
