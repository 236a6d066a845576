"""The layout of an archive (tar): where each member of the tree goes.

The parent's side of tarwrite.py.  As the walk scans each directory, its
members are laid out end to end after the ones before (a member's length
is known from its metadata), and cut into the workers' tasks: batches of
small members written in one piece, a big or sparse member's header, the
ranges of a big member's data.  No byte of the archive is written here.
"""

import os
from collections import namedtuple

from . import bigfile, copyio, fsutil
from . import tarformat as tf
from .plan import File, HardLink

BATCH_BYTES = 8 << 20
BATCH_MEMBERS = 512
BATCH_NAMES = 48 << 10  # bytes of names in one batch (a task message's size)


# A member of the archive is a tuple (cheap to make and to send to a
# worker): what it is, where it goes, and its header's fields.  PATH is
# None for a plain file (DIRREL/NAME make it); HEAD is the header when the
# parent had to build it to know its length.
(
    KIND,
    PATH,
    DIRREL,
    NAME,
    MODE,
    UID,
    GID,
    MTIME,
    OFFSET,
    HLEN,
    DLEN,
    LINK,
    RDEV,
    SEGMENTS,
    REALSIZE,
    HEAD,
) = range(16)


class Members(namedtuple("Members", "members")):
    """A worker's task: small MEMBERS, end to end, written in one piece."""

    __slots__ = ()


class Header(namedtuple("Header", "member")):
    """A worker's task: the header of a big or sparse MEMBER (and the data
    of a sparse one)."""

    __slots__ = ()


class MemberRange(namedtuple("MemberRange", "member off length")):
    """A worker's task: [off, off + length) of the data of big MEMBER."""

    __slots__ = ()


def member_path(m):
    """The path of member M in the archive."""
    if m[PATH] is not None:
        return m[PATH]
    return fsutil.join(m[DIRREL], m[NAME])


class Layout:
    """The members of the tree WALKER (plan.Walker) walks, laid out as the
    walk goes on.  .members is every member so far, in archive order;
    .size the archive's once the walk is over."""

    def __init__(self, walker):
        self.walker = walker
        self.plan = walker.plan
        self.members = []
        self.files_total = 0  # of the walk so far
        self.bytes_total = 0
        self.offset = 0
        self.data_at = {}  # id(File) -> path of the member holding its data
        self.batch = []
        self.batch_bytes = self.batch_names = 0
        self.walk_done = False
        self.size = None

    def step(self):
        """Scan the next directory and lay out its members: its own, then
        its files and hard links, symbolic links and specials, each in name
        order (then its subdirectories follow, one whole subtree after the
        other: GNU tar sets a directory's times when it meets the first
        member outside it, so an entry archived after that would leave the
        directory with the time of the extraction).  Returns the tasks now
        complete, or None when the walk is over."""
        if self.walk_done:
            return None
        tasks = []
        plan = self.plan
        di = self.walker.step()
        if di is None:
            self.walk_done = True
            self._flush(tasks)
            end = self.offset + 2 * tf.BLOCK
            self.size = (end + tf.RECORD - 1) // tf.RECORD * tf.RECORD
            return tasks
        d = plan.dirs[di]
        files, hardlinks, symlinks, specials = self.walker.span()
        self.files_total += len(files)
        self.bytes_total += sum(f.size for f in files)
        rel = d.rel
        add = self._add
        add(tasks, "dir", (rel or b".") + b"/", None, None, d)
        names = files
        if hardlinks:
            names = sorted(files + hardlinks, key=lambda e: e.name)
        for e in names:
            if e.__class__ is File and e.key is None and not e.sparse:
                add(tasks, "file", None, rel, e.name, e, e.size)
            else:
                self._regular(tasks, e, rel)
        for s in symlinks:
            add(tasks, "symlink", fsutil.join(rel, s.name), None, None, s, 0, s.target)
        for s in specials:
            add(tasks, "special", fsutil.join(rel, s.name), None, None, s)
        return tasks

    def _regular(self, tasks, e, rel):
        """A name of a file: its data the first time, later a hard link."""
        f = e.first if isinstance(e, HardLink) else e
        first = self.data_at.get(id(f))
        if first is not None:
            self._add(
                tasks, "hardlink", fsutil.join(rel, e.name), None, None, f, 0, first
            )
            return
        if f.key is not None:
            self.data_at[id(f)] = fsutil.join(rel, e.name)
        if not f.sparse:
            self._add(tasks, "file", None, rel, e.name, f, f.size)
            return
        segments = self._sparse_layout(rel, e.name, f.size)
        dlen = len(tf.sparse_map(segments)) + sum(n for _, n in segments)
        self._add(tasks, "file", None, rel, e.name, f, dlen, b"", segments)

    def _add(self, tasks, kind, path, dirrel, name, e, dlen=0, link=b"", segments=None):
        """Lay member KIND out after the members before it, and give it to
        a task.  E is its entry in the plan.  Its header is built here only
        when its length depends on the names (long ones, in pax records)."""
        if path is not None:
            plen = len(path)
        else:
            plen = len(dirrel) + 1 + len(name) if dirrel else len(name)
        m = (
            kind,
            path,
            dirrel,
            name,
            e.mode,
            e.uid,
            e.gid,
            e.mtime,
            self.offset,
            3 * tf.BLOCK,
            dlen,
            link,
            e.rdev if kind == "special" else 0,
            segments,
            e.size if kind == "file" else 0,
            None,
        )
        if plen + len(link) >= tf.SHORT_PATHS:
            head = header(m)
            m = m[:HLEN] + (len(head),) + m[HLEN + 1 : HEAD] + (head,)
        hlen = m[HLEN]
        self.offset += hlen + (dlen + tf.BLOCK - 1) // tf.BLOCK * tf.BLOCK
        self.members.append(m)
        if kind == "file" and (dlen >= bigfile.BIG or segments is not None):
            # a batch is written in one piece: it ends before this member
            self._flush(tasks)
            tasks.append(Header(m))
            if segments is None:
                for off in range(0, dlen, bigfile.CHUNK):
                    tasks.append(MemberRange(m, off, min(bigfile.CHUNK, dlen - off)))
            return
        batch = self.batch
        batch.append(m)
        self.batch_bytes += hlen + dlen
        self.batch_names += plen + len(link) + len(dirrel or b"")
        if (
            len(batch) >= BATCH_MEMBERS
            or self.batch_bytes >= BATCH_BYTES
            or self.batch_names >= BATCH_NAMES
        ):
            self._flush(tasks)

    def _flush(self, tasks):
        if self.batch:
            tasks.append(Members(self.batch))
            self.batch = []
            self.batch_bytes = self.batch_names = 0

    def _sparse_layout(self, rel, name, size):
        """The data segments of a sparse file, ending with its real end."""
        dfd = fsutil.open_dir(self.walker.root_fd, rel)
        try:
            fd = os.open(name, fsutil.OPEN_FLAGS, dir_fd=dfd)
        finally:
            os.close(dfd)
        try:
            segs = list(copyio.data_segments(fd, 0, size))
        finally:
            os.close(fd)
        if not segs or segs[-1][0] + segs[-1][1] < size:
            segs.append((size, 0))  # marks the real end, as GNU tar does
        return segs

    def spans(self):
        """(offset, length) of each member, in archive order."""
        pad = tf.pad
        return ((m[OFFSET], m[HLEN] + pad(m[DLEN])) for m in self.members)


_TYPEFLAGS = {
    "dir": tf.TYPE_DIR,
    "file": tf.TYPE_FILE,
    "symlink": tf.TYPE_SYMLINK,
    "hardlink": tf.TYPE_HARDLINK,
}


def header(m):
    """All header blocks of member M, built."""
    kind = m[KIND]
    sparse = m[SEGMENTS] is not None and kind == "file"
    return tf.header(
        member_path(m),
        m[MODE],
        m[UID],
        m[GID],
        m[DLEN] if kind == "file" else 0,
        m[MTIME],
        _TYPEFLAGS.get(kind) or tf.typeflag_of(m[MODE]),  # special: by its mode
        m[LINK] if kind in ("symlink", "hardlink") else b"",
        rdev=m[RDEV] if kind == "special" else 0,
        sparse=(m[REALSIZE],) if sparse else None,
    )
