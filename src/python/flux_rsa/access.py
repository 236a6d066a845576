"""Can user U read/write/search this path?  Answered from stat() and U's
groups, without switching identity (job-ingest runs as the instance owner).

Paths are walked the way the kernel walks them for U: every directory must
be searchable by U before anything inside it is looked at, and symbolic
links are followed from there.  So the answers never tell U more than U
could find out alone (a link into another user's private directory is
refused at that directory, whatever lies behind it).  POSIX ACLs are not
read: the mode bits decide.
"""

import os
import pwd
import stat

READ, WRITE, EXEC = 4, 2, 1
MAX_LINKS = 40  # as the kernel (ELOOP)


class Who:
    def __init__(self, uid):
        self.uid = uid
        try:
            pw = pwd.getpwuid(uid)
            self.name = pw.pw_name
            self.groups = set(os.getgrouplist(pw.pw_name, pw.pw_gid))
        except KeyError:
            self.name = str(uid)
            self.groups = set()

    def bits(self, st):
        """The permission bits (READ|WRITE|EXEC) this user has on ``st``."""
        if self.uid == 0:
            x = EXEC if stat.S_ISDIR(st.st_mode) or st.st_mode & 0o111 else 0
            return READ | WRITE | x
        mode = st.st_mode
        if st.st_uid == self.uid:
            return (mode >> 6) & 7
        if st.st_gid in self.groups:
            return (mode >> 3) & 7
        return mode & 7

    def may(self, st, want):
        """Does this user have ``want`` (READ|WRITE|EXEC bits) on ``st``?"""
        return self.bits(st) & want == want


def shown(path):
    """A path for a one-line message (control characters escaped)."""
    return path if path.isprintable() else repr(path)


class Refused(Exception):
    pass


def _enter(directory, who):
    try:
        st = os.stat(directory)
    except OSError as exc:
        raise Refused(f"{shown(directory)}: {exc.strerror}") from None
    if not who.may(st, EXEC):
        raise Refused(
            f"{shown(directory)}: Permission denied (user {who.name} cannot enter it)"
        )


def resolve(path, who, kind="dir"):
    """The real path behind absolute ``path`` as ``who`` would reach it;
    Refused (with a message) where ``who`` could not."""
    todo = [p for p in path.split("/") if p]
    todo.reverse()
    here = "/"
    links = 0
    missing = f"{shown(path)}: No such {'directory' if kind == 'dir' else 'file'}"
    while todo:
        name = todo.pop()
        if name == ".":
            continue
        _enter(here, who)
        if name == "..":
            here = os.path.dirname(here)
            continue
        step = os.path.join(here, name)
        try:
            st = os.lstat(step)
        except FileNotFoundError:
            raise Refused(missing) from None
        except OSError as exc:
            raise Refused(f"{shown(step)}: {exc.strerror}") from None
        if stat.S_ISLNK(st.st_mode):
            links += 1
            if links > MAX_LINKS:
                raise Refused(f"{shown(path)}: Too many levels of symbolic links")
            target = os.readlink(step)
            parts = [p for p in target.split("/") if p]
            todo.extend(reversed(parts))
            if target.startswith("/"):
                here = "/"
            continue
        if todo and not stat.S_ISDIR(st.st_mode):
            raise Refused(f"{shown(step)}: Not a directory")
        here = step
    return here


def look(path, who, kind, want):
    """(real path, None) when ``who`` can use ``path`` as ``kind`` ("dir" or
    "file") with ``want`` access, else (None, why)."""
    try:
        real = resolve(path, who, kind)
    except Refused as exc:
        return None, str(exc)
    st = os.stat(real)
    if kind == "dir" and not stat.S_ISDIR(st.st_mode):
        return None, f"{shown(path)}: Not a directory"
    if kind == "file" and not stat.S_ISREG(st.st_mode):
        return None, f"{shown(path)}: Not a regular file"
    lacking = want & ~who.bits(st)
    if lacking:
        if kind == "file":
            need = "read" if lacking & READ else "execute"
        elif lacking & WRITE:
            need = "write to"
        elif lacking & READ:
            need = "read"
        else:
            need = "enter"
        return (
            None,
            f"{shown(path)}: Permission denied (user {who.name} cannot {need} it)",
        )
    return real, None


def problem(path, who, kind, want):
    """Why ``who`` cannot use ``path`` as ``kind`` with ``want`` access, or None."""
    return look(path, who, kind, want)[1]
