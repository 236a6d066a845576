"""Aggregation: a tree into ONE archive (tar), written by GNU tar.

The stager walks the tree first (the plan: progress totals, the result's
counts, what verification checks), then runs one GNU tar that writes the
archive under a hidden temporary name in DSTDIR; the stager flushes it and
renames it to its final name when complete.  GNU tar writes pax members
with nanosecond mtimes, GNU sparse 1.0 for sparse files, hard links as
hard-link members, names as their bytes, depth first in name order.  Its
messages are turned into the stager's one line and exit code.  (untar.py
reads archives back.)  bench/stage --tar measured this against the
stager's own writer, which this replaced (doc/stage.md).
"""

import errno
import os
import re
import subprocess
import threading

from . import fsutil
from . import plan as planmod
from .errors import EXIT_FAILED, EXIT_VERIFY, StageError, from_oserror

DEFAULT_NAME = b"rsa-output.tar"
TAR = "tar"
CHECKPOINT = 1000  # records (of 10 KiB) between two progress lines
# GNU tar's arguments: pax, names as they are (C locale, no "./" before
# them; a link's target unchanged), numeric owners, no atime or ctime
# records (what a copy keeps, no more), entries in name order
ARGS = [
    "--create",
    "--format=pax",
    "--sparse",
    "--sparse-version=1.0",
    "--numeric-owner",
    "--sort=name",
    "--pax-option=delete=atime,delete=ctime",
    r"--transform=s,^\./\(.\),\1,S",
    "--totals",
    "--verbose",
    f"--checkpoint={CHECKPOINT}",
    "--checkpoint-action=echo=rsa-written %T",
]
_WRITTEN = re.compile(rb"rsa-written W: (\d+)")
_TOTAL = re.compile(rb"Total bytes written: (\d+)")
# tar: NAME: Cannot VERB: STRERROR
_CANNOT = re.compile(rb"^tar: (.*): Cannot [a-z ]+: (.+)$")
# tar: NAME: file changed as we read it (or removed, or shrank)
_CHANGED = re.compile(
    rb"^tar: (.*): (file changed as we read it|File removed before we read it"
    rb"|File shrank by \d+ bytes.*)$"
)
# tar: ARCHIVE: Wrote only N of M bytes (a short write: the file system is full)
_SHORT = re.compile(rb"^tar: (.*): Wrote only \d+ of \d+ bytes$")
_ERRNO = {os.strerror(e).encode(): e for e in errno.errorcode}


class TarWriter:
    """Write the tree SRC as DSTDIR/NAME.  After run(), .plan is the tree
    as walked, .members the number of entries GNU tar archived, .size the
    archive's size as written, .ino its inode.  WORKERS is not used: one
    GNU tar writes the archive."""

    def __init__(
        self, src, dstdir, name=DEFAULT_NAME, workers=2, progress=None, tag=b"0"
    ):
        self.src = src
        self.dstdir = dstdir
        self.name = name
        self.progress = progress or (lambda done, nbytes: None)
        self.tag = tag
        self.plan = None
        self.files_total = self.bytes_total = 0
        self.files_done = self.bytes_done = 0
        self.members = 0
        self.size = None

    def entries(self):
        """The entries of the tree as walked (every one a member)."""
        p = self.plan
        return (
            len(p.dirs)
            + len(p.files)
            + len(p.hardlinks)
            + len(p.symlinks)
            + len(p.specials)
        )

    def run(self, sync=True):
        """Write the archive; return its final path."""
        final = fsutil.full(self.dstdir, self.name)
        self.plan = planmod.walk(self.src)
        self.files_total = len(self.plan.files)
        self.bytes_total = self.plan.bytes_total
        self.progress(0, 0)
        dir_fd = fsutil.open_or_make_root(self.dstdir)
        try:
            self._write_archive(dir_fd, final, sync)
        finally:
            os.close(dir_fd)
        self.final = final
        return final

    def _write_archive(self, dir_fd, final, sync):
        self._remove_stale(dir_fd)
        self.tmp = fsutil.tmp_name(self.tag, 0)
        tmp_path = fsutil.full(self.dstdir, self.tmp)
        try:
            self._tar(tmp_path, final)
            fd = os.open(self.tmp, os.O_WRONLY | os.O_NOFOLLOW, dir_fd=dir_fd)
            try:
                st = os.fstat(fd)
                self.ino = st.st_ino
                if sync:
                    os.fsync(fd)
            finally:
                os.close(fd)
            if st.st_size != self.size:
                raise StageError(
                    EXIT_FAILED,
                    final,
                    f"GNU tar wrote {self.size} bytes, the archive holds {st.st_size}",
                    "run the stage again",
                )
            os.rename(self.tmp, self.name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            if sync:
                os.fsync(dir_fd)
        except OSError as exc:
            fsutil.unlink_quiet(self.tmp, dir_fd)
            raise from_oserror(exc, final) from None
        except BaseException:
            fsutil.unlink_quiet(self.tmp, dir_fd)
            raise

    def _tar(self, tmp_path, final):
        """Run GNU tar writing the archive at TMP_PATH; raise its first
        failure as the stager's."""
        argv = [TAR, *ARGS, f"--file={os.fsdecode(tmp_path)}", "-C"]
        argv += [os.fsdecode(self.src), "."]
        env = dict(os.environ, LC_ALL="C")
        try:
            proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                env=env,
            )
        except OSError as exc:
            raise _not_started(exc) from None
        counter = threading.Thread(target=self._count, args=(proc.stdout,))
        counter.start()
        messages = []
        try:
            for line in proc.stderr:
                line = line.rstrip(b"\n")
                m = _WRITTEN.search(line)
                if m:
                    self._advance(int(m.group(1)))
                    continue
                m = _TOTAL.match(line)
                if m:
                    self.size = int(m.group(1))
                    continue
                messages.append(line)
            rc = proc.wait()
        except BaseException:
            proc.kill()
            proc.wait()
            raise
        finally:
            counter.join()
        if rc != 0 or messages:
            raise self._failure(rc, messages, tmp_path, final)
        self.files_done, self.bytes_done = self.files_total, self.bytes_total
        self.progress(self.files_done, self.bytes_done)

    def _count(self, out):
        """Count the members GNU tar lists (one line each) as it writes."""
        n = 0
        for chunk in iter(lambda: out.read(1 << 16), b""):
            n += chunk.count(b"\n")
            self.members = n
        self.members = n

    def _advance(self, written):
        """GNU tar wrote WRITTEN bytes: progress, as far as it can tell
        (headers counted with the data)."""
        self.bytes_done = min(written, self.bytes_total)
        self.files_done = min(self.members, self.files_total)
        self.progress(self.files_done, self.bytes_done)

    def _failure(self, rc, messages, tmp_path, final):
        """The StageError for GNU tar's exit status RC and its MESSAGES."""
        for line in messages:
            m = _CHANGED.match(line)
            if m:
                return _changed(self._path(m.group(1), tmp_path, final))
            m = _SHORT.match(line)
            if m and m.group(1) == tmp_path:
                return from_oserror(OSError(errno.ENOSPC, "short write"), final)
            m = _CANNOT.match(line)
            if m and m.group(2) in _ERRNO:
                path = self._path(m.group(1), tmp_path, final)
                err = _ERRNO[m.group(2)]
                if err == errno.ENOENT and path != final:
                    return _changed(path)  # removed since the walk
                return from_oserror(OSError(err, os.strerror(err)), path)
        first = messages[0].decode("utf-8", "backslashreplace") if messages else ""
        first = first.removeprefix("tar: ")
        cause = f"GNU tar failed (exit status {rc})" + (f": {first}" if first else "")
        if rc < 0:
            cause = f"GNU tar was killed by signal {-rc}"
        return StageError(EXIT_FAILED, final, cause)

    def _path(self, name, tmp_path, final):
        """The path GNU tar's message names: the archive's final name for
        its temporary one, a source path relative to SRC made whole."""
        if name == tmp_path:
            return final
        if name.startswith(b"./"):
            name = name[2:]
        if name in (b".", b""):
            return self.src
        return fsutil.full(self.src, name)

    def compare(self):
        """--verify checksum: GNU tar reads the archive back and compares
        every member with the tree (size, mode, owner, mtime, link target,
        content); the first difference fails the stage."""
        argv = [TAR, "--compare", "--numeric-owner"]
        argv += [f"--file={os.fsdecode(self.final)}", "-C", os.fsdecode(self.src)]
        try:
            proc = subprocess.run(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=dict(os.environ, LC_ALL="C"),
            )
        except OSError as exc:
            raise _not_started(exc) from None
        if proc.returncode == 0:
            return
        lines = proc.stdout.splitlines() or [b"GNU tar --compare failed"]
        name, _, what = lines[0].removeprefix(b"tar: ").rpartition(b": ")
        what = what.decode("utf-8", "backslashreplace").lower()
        raise StageError(
            EXIT_VERIFY,
            fsutil.full(self.final, name) if name else self.final,
            f"verification failed: {what} (GNU tar --compare)",
            "the tree changed since it was archived; run the stage again",
        )

    def _remove_stale(self, dir_fd):
        for name in os.listdir(dir_fd):
            name = os.fsencode(name)
            if fsutil.is_tmp_of(name, self.tag):
                fsutil.unlink_quiet(name, dir_fd)


def _changed(path):
    return StageError(
        EXIT_FAILED, path, "changed while being archived", "run the stage again"
    )


def _not_started(exc):
    """GNU tar could not be started (``exc``, an OSError)."""
    return StageError(
        EXIT_FAILED,
        TAR,
        f"could not be started: {exc.strerror}",
        "mode tar needs GNU tar installed",
    )
