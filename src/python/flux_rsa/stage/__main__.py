"""The stager's command line: python3 -m flux_rsa.stage MODE SRC DST [options]
(see doc/stage.md).

A thin layer: argv is parsed into the one typed request of the stager
(``api.StageRequest``), and ``api.command`` carries it out, as it does for
the privileged stage, which calls it in its own process with no argv.

The process ends with os._exit once its output is flushed: everything the
stager opened is closed and its workers reaped by then, and tearing the
interpreter down (freeing every module's objects) is a cost worth saving
(doc/stage.md, How it is fast).
"""

import argparse
import os
import sys

from . import api
from . import progress as progmod
from .errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, StageError

EPILOG = """\
modes:
  copy SRC DST              copy the contents of directory SRC into DST
                            (rsync -a semantics; the default mode)
  tar SRC DSTDIR            write SRC as one archive DSTDIR/NAME
  untar SRC DST             unpack every top-level SRC/*.tar into DST and
                            copy the other top-level entries of SRC
  script PATH RAMDISK DATA  run the executable PATH as: PATH RAMDISK DATA

exit status: 0 complete and verified, 1 failed, 2 usage, 3 no space left,
4 permission denied, 5 missing source, 6 verification mismatch, 7 stage
script failed.  Details: doc/stage.md.
"""


def _shard(text):
    try:
        k, n = (int(x) for x in text.split("/"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not K/N (e.g. 0/4)") from None
    if not (n >= 1 and 0 <= k < n):
        raise argparse.ArgumentTypeError(f"{text}: need 0 <= K < N")
    return (k, n)


def _workers(text):
    try:
        n = int(text)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number")
    return n


def parser():
    p = argparse.ArgumentParser(
        prog="python3 -m flux_rsa.stage",
        description="RSA stager: move a job's data between persistent "
        "storage and its RAM disk, as the job owner.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("mode", choices=api.MODES, help="what to do (default: copy)")
    p.add_argument("src", help="source directory (script: the script)")
    p.add_argument("dst", help="destination directory (script: RAM-disk directory)")
    p.add_argument("data", nargs="?", help="script only: the data directory")
    p.add_argument(
        "--workers",
        "-j",
        type=_workers,
        default=None,
        help="worker processes (default: number of CPUs, at least 2)",
    )
    p.add_argument(
        "--verify",
        choices=("size", "checksum", "none"),
        default="size",
        help="after the copy compare sizes and mtimes (default), "
        "also content hashes (checksum), or nothing (none)",
    )
    p.add_argument("--progress", action="store_true", help="show progress on stderr")
    p.add_argument(
        "--progress-json",
        action="store_true",
        help="print progress as JSON lines on stdout",
    )
    p.add_argument(
        "--as-user",
        metavar="USER|UID",
        help="act as this user (needs root unless it is you)",
    )
    p.add_argument(
        "--shard",
        type=_shard,
        default=(0, 1),
        metavar="K/N",
        help="copy only share K of N (for N stagers on N nodes)",
    )
    p.add_argument(
        "--finalize",
        action="store_true",
        help="copy: only set directory modes and mtimes (after all shards)",
    )
    p.add_argument("--name", help="tar: archive name (default rsa-output.tar)")
    p.add_argument(
        "--no-sync",
        action="store_true",
        help="do not flush the destination file system at the end",
    )
    p.add_argument(
        "--replica",
        metavar="DIR",
        help="copy: a staged copy of SRC (another job's RAM disk) to "
        "copy from instead, if it still matches SRC (names, types, "
        "sizes, modes, mtimes)",
    )
    p.add_argument(
        "--direction",
        choices=("in", "out"),
        help="script: which way the data goes (in: DATA_DIR to the "
        "RAM-disk directory), so that its progress can be measured",
    )
    p.add_argument(
        "--summary",
        action="store_true",
        help="print a JSON summary of the run on stderr at the end",
    )
    return p


def main(argv=None):
    """Parse ARGV (default: sys.argv[1:]) into a StageRequest and carry it
    out; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] not in api.MODES and not argv[0].startswith("-"):
        argv.insert(0, "copy")  # copy is the default mode
    try:
        args = parser().parse_args(argv)
    except SystemExit as exc:
        return EXIT_USAGE if exc.code not in (0, None) else EXIT_OK
    try:
        request = api.StageRequest(
            args.mode,
            args.src,
            args.dst,
            data=args.data,
            workers=args.workers,
            verify=None if args.verify == "none" else args.verify,
            as_user=args.as_user,
            shard=args.shard,
            finalize=args.finalize,
            name=args.name,
            sync=not args.no_sync,
            replica=args.replica,
            direction=args.direction,
        )
    except StageError as exc:
        print(exc.line(), file=sys.stderr)
        return exc.code
    callbacks = []
    if args.progress_json:
        callbacks.append(progmod.json_printer())
    if args.progress:
        callbacks.append(progmod.HumanDisplay())
    return api.command(request, progmod.tee(*callbacks), summary=args.summary)


if __name__ == "__main__":
    code = main()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except OSError:  # output that could not be written is a failed run
        code = code or EXIT_FAILED
    os._exit(code)
