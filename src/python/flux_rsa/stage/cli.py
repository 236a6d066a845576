"""Command line: python3 -m flux_rsa.stage MODE SRC DST [options]."""

import argparse
import sys

from . import api, identity
from . import progress as progmod
from . import replica
from .errors import EXIT_FAILED, EXIT_OK, EXIT_USAGE, PROG, StageError

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


def main(argv=None, script_env=None):
    """The stager's command line; ``script_env``: a stage script's
    environment (None: ours), for callers in the same process."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] not in api.MODES and not argv[0].startswith("-"):
        argv.insert(0, "copy")  # copy is the default mode
    try:
        args = parser().parse_args(argv)
    except SystemExit as exc:
        return EXIT_USAGE if exc.code not in (0, None) else EXIT_OK
    if args.mode == "script":
        if args.data is None:
            return _usage("script needs PATH RAMDISK_DIR DATA_DIR")
        dst = (args.dst, args.data)
    else:
        if args.data is not None:
            return _usage(f"unexpected argument {args.data!r}")
        dst = args.dst
    if args.direction and args.mode != "script":
        return _usage("--direction applies to script only")
    if args.name and args.mode != "tar":
        return _usage("--name applies to tar only")
    if args.finalize and args.mode != "copy":
        return _usage("--finalize applies to copy only")
    if args.replica and (args.mode != "copy" or args.shard != (0, 1)):
        return _usage("--replica applies to an unsharded copy only")
    callbacks = []
    if args.progress_json:
        callbacks.append(progmod.json_printer())
    if args.progress:
        callbacks.append(progmod.HumanDisplay())
    try:
        src = _source(args)
        result = api.run(
            args.mode,
            src,
            dst,
            workers=args.workers,
            verify=None if args.verify == "none" else args.verify,
            as_user=args.as_user,
            progress=progmod.tee(*callbacks),
            shard=args.shard,
            finalize=args.finalize,
            name=args.name,
            sync=not args.no_sync,
            direction=args.direction,
            script_env=script_env,
        )
    except StageError as exc:
        sys.stdout.flush()
        print(exc.line(), file=sys.stderr)
        return exc.code
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except OSError as exc:  # not classified by the stager: still one line
        print(f"{PROG}: {exc}", file=sys.stderr)
        return EXIT_FAILED
    if args.summary:
        import json

        print(json.dumps(result.as_dict()), file=sys.stderr)
    return EXIT_OK


def _source(args):
    """SRC, or the replica when it still matches SRC (compared as the user)."""
    if not args.replica:
        return args.src
    identity.become(args.as_user)
    if not replica.same_tree(args.src, args.replica):
        return args.src
    import json

    print(json.dumps({"reused": args.replica}), flush=True)
    return args.replica


def _usage(text):
    print(f"{PROG}: {text} (see --help)", file=sys.stderr)
    return EXIT_USAGE
