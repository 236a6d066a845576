"""``python3 -m flux_rsa.stage.measure PATH [--as-user UID]``

Sum the apparent size and count the files of the tree at PATH, as the job
owner (privileges dropped the way the stager drops them, before PATH is
touched), without following any symbolic link, PATH itself included.

Prints one JSON line ``{"bytes": B, "files": F, "dirs": D}`` and exits 0;
on an error prints ``flux-rsa-measure: PATH: CAUSE (as uid U)`` on stderr
and exits 1.  ``bytes`` sums the sizes of regular files (a file with
several hard links counts once) and of symbolic links (their target's
length); ``files`` counts every entry that is not a directory.
"""

import argparse
import json
import os
import stat
import sys

PROG = "flux-rsa-measure"
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class MeasureError(Exception):
    pass


def _error(path, exc):
    return MeasureError(f"{path}: {exc.strerror or exc}")


def measure(path):
    """(bytes, files, dirs) of the tree at ``path``."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise _error(path, exc) from None
    if not stat.S_ISDIR(st.st_mode):
        return st.st_size, 1, 0
    nbytes = files = dirs = 0
    seen = set()
    todo = [path]
    while todo:
        top = todo.pop()
        dirs += 1
        try:
            fd = os.open(top, DIR_FLAGS)
        except OSError as exc:
            raise _error(top, exc) from None
        try:
            with os.scandir(fd) as it:
                entries = list(it)
        except OSError as exc:
            raise _error(top, exc) from None
        finally:
            os.close(fd)
        for entry in entries:
            full = os.path.join(top, entry.name)
            try:
                est = os.lstat(full)
            except FileNotFoundError:
                continue  # vanished since it was listed
            except OSError as exc:
                raise _error(full, exc) from None
            if stat.S_ISDIR(est.st_mode):
                todo.append(full)
                continue
            files += 1
            if stat.S_ISREG(est.st_mode):
                if est.st_nlink > 1:
                    if (est.st_dev, est.st_ino) in seen:
                        continue
                    seen.add((est.st_dev, est.st_ino))
                nbytes += est.st_size
            elif stat.S_ISLNK(est.st_mode):
                nbytes += est.st_size
    return nbytes, files, dirs


def report(path):
    """Measure ``path`` as this process's user and say it: the JSON line on
    stdout, or the error on stderr.  Returns the exit status."""
    try:
        nbytes, files, dirs = measure(path)
    except MeasureError as exc:
        print(f"{PROG}: {exc} (as uid {os.geteuid()})", file=sys.stderr, flush=True)
        return 1
    print(json.dumps({"bytes": nbytes, "files": files, "dirs": dirs}), flush=True)
    return 0


def main(argv=None):
    p = argparse.ArgumentParser(
        prog="python3 -m flux_rsa.stage.measure",
        description="Size and file count of a tree, as its owner.",
    )
    p.add_argument("path")
    p.add_argument(
        "--as-user", metavar="UID", help="switch to this user first (needs root)"
    )
    args = p.parse_args(argv)
    if args.as_user is not None:
        from flux_rsa.stage import identity
        from flux_rsa.stage.errors import StageError

        try:
            identity.become(args.as_user)
        except StageError as exc:
            print(
                f"{PROG}: {args.path}: {exc} (as uid {os.geteuid()})",
                file=sys.stderr,
                flush=True,
            )
            return 1
    return report(args.path)


if __name__ == "__main__":
    sys.exit(main())
