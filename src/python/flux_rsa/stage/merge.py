"""Merging the output trees of a job's compute nodes into one data_out.

A job on several nodes with a file system of its own on each
(``rsa.fs=per-node``) leaves one output tree per node.  They are copied
into data_out one after another, so that the directories they share hold
the files of all of them; a name that more than one node wrote (a file,
link or anything but a directory in all of them) would be a silent pick
of one node's version, so it is an error that names it, and nothing is
copied.
"""

import os
import stat

from .errors import EXIT_FAILED, StageError

#: at most this many clashing names are shown
SHOWN = 5


def conflicts(trees):
    """[(path, [tree indices])] of the names that more than one of
    ``trees`` (directories) holds, other than directories in all of those
    holding them; paths relative to the trees, sorted.  Symbolic links are
    names like any other (never followed)."""
    seen = {}  # path -> [(tree index, is a directory)]
    for i, top in enumerate(trees):
        for path, is_dir in _walk(top):
            seen.setdefault(path, []).append((i, is_dir))
    found = []
    for path, where in sorted(seen.items()):
        if len(where) > 1 and not all(is_dir for _, is_dir in where):
            found.append((path, [i for i, _ in where]))
    return found


def _walk(top, rel=""):
    try:
        entries = list(os.scandir(os.path.join(top, rel) if rel else top))
    except FileNotFoundError:
        return
    for entry in entries:
        path = f"{rel}/{entry.name}" if rel else entry.name
        is_dir = stat.S_ISDIR(entry.stat(follow_symlinks=False).st_mode)
        yield path, is_dir
        if is_dir:
            yield from _walk(top, path)


def check(trees, names=None):
    """Raise StageError naming the clashing names of ``trees`` (``names``:
    how a person knows each tree, by default "node I")."""
    found = conflicts(trees)
    if not found:
        return
    names = names or [f"node {i}" for i in range(len(trees))]
    shown = "; ".join(
        f"{path} (on {' and '.join(names[i] for i in where)})"
        for path, where in found[:SHOWN]
    )
    more = f" and {len(found) - SHOWN} more" if len(found) > SHOWN else ""
    raise StageError(
        EXIT_FAILED,
        None,
        f"{len(found)} name(s) were written on more than one of the job's nodes: "
        f"{shown}{more}",
        "rsa.fs=per-node copies every node's outputs into data_out and never picks "
        "one node's file over another's: nothing was copied; write distinct names on "
        "each node (e.g. with the task rank in them)",
    )
