"""Is a staged copy (a replica) still the same tree as its source?

A stage-in may copy from another job's RAM disk instead of persistent
storage (``[rsa] reuse``), but only when the replica matches ``data_in``
as ``rsync -a``'s quick check sees it: the same names and types, and for
each file the same size, mode and mtime; for each link the same target.
Directory mtimes are not compared (a job reading its inputs leaves them,
and the copy sets them from the source anyway).  The walk reads metadata
only and stops at the first difference.
"""

import os
import stat


def _entries(path):
    with os.scandir(path) as it:
        return {e.name: e.stat(follow_symlinks=False) for e in it}


def same_tree(src, replica):
    """True when ``replica`` holds what ``src`` holds (see module doc)."""
    todo = [(os.fsencode(src), os.fsencode(replica))]
    while todo:
        a, b = todo.pop()
        try:
            left, right = _entries(a), _entries(b)
        except OSError:
            return False
        if left.keys() != right.keys():
            return False
        for name, sa in left.items():
            sb = right[name]
            if stat.S_IFMT(sa.st_mode) != stat.S_IFMT(sb.st_mode):
                return False
            if stat.S_ISDIR(sa.st_mode):
                if stat.S_IMODE(sa.st_mode) != stat.S_IMODE(sb.st_mode):
                    return False
                todo.append((os.path.join(a, name), os.path.join(b, name)))
            elif stat.S_ISLNK(sa.st_mode):
                try:
                    if os.readlink(os.path.join(a, name)) != os.readlink(
                        os.path.join(b, name)
                    ):
                        return False
                except OSError:
                    return False
            elif (sa.st_size, sa.st_mtime_ns, stat.S_IMODE(sa.st_mode)) != (
                sb.st_size,
                sb.st_mtime_ns,
                stat.S_IMODE(sb.st_mode),
            ):
                return False
    return True
