"""Can user U read/write/search this path?  Answered from stat() and U's
groups, without switching identity (job-ingest runs as the instance owner).
"""

import os
import pwd
import stat

READ, WRITE, EXEC = 4, 2, 1


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

    def may(self, st, want):
        """Does this user have ``want`` (READ|WRITE|EXEC bits) on ``st``?"""
        if self.uid == 0:
            return not (want & EXEC) or stat.S_ISDIR(st.st_mode) or bool(st.st_mode & 0o111)
        mode = st.st_mode
        if st.st_uid == self.uid:
            bits = (mode >> 6) & 7
        elif st.st_gid in self.groups:
            bits = (mode >> 3) & 7
        else:
            bits = mode & 7
        return bits & want == want


def problem(path, who, kind, want):
    """Why ``who`` cannot use ``path`` as ``kind`` ("dir" or "file") with
    ``want`` access, or None.  Every parent must be searchable too."""
    parts = path.split("/")
    for i in range(2, len(parts)):
        parent = "/".join(parts[:i]) or "/"
        try:
            st = os.stat(parent)
        except OSError as exc:
            return f"{parent}: {exc.strerror}"
        if not who.may(st, EXEC):
            return f"{parent}: Permission denied (user {who.name} cannot enter it)"
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return f"{path}: No such {'directory' if kind == 'dir' else 'file'}"
    except OSError as exc:
        return f"{path}: {exc.strerror}"
    if kind == "dir" and not stat.S_ISDIR(st.st_mode):
        return f"{path}: Not a directory"
    if kind == "file" and not stat.S_ISREG(st.st_mode):
        return f"{path}: Not a regular file"
    if not who.may(st, want):
        if kind == "file":
            need = "execute"
        else:
            need = "write to" if want & WRITE else "read"
        return f"{path}: Permission denied (user {who.name} cannot {need} it)"
    return None
