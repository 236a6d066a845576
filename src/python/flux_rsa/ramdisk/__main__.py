"""The RAM disks' command line: python3 -m flux_rsa.ramdisk
hold|purge|sweep|discard|look (see doc/pool.md); ``look`` is an admin's
read-only view of image RAM disks."""

import argparse
import os
import sys

from flux_rsa.core import providercaps
from flux_rsa.core.units import parse_size
from flux_rsa.ramdisk import disks, imagedisk, layout, store, sysmount
from flux_rsa.ramdisk.holder import hold, task_rank
from flux_rsa.ramdisk.providers.base import Task
from flux_rsa.ramdisk.purge import purge
from flux_rsa.ramdisk.sweep import sweep

PROG = "flux-rsa-ramdisk"


def _size(text):
    try:
        return parse_size(text, "--size")
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _uid(text):
    try:
        uid = int(text)
    except ValueError:
        uid = -1
    if uid < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a numeric uid")
    return uid


def parser():
    p = argparse.ArgumentParser(
        prog="python3 -m flux_rsa.ramdisk",
        description="Make, purge and sweep flux-rsa RAM disks.",
    )
    sub = p.add_subparsers(dest="command", required=True)
    h = sub.add_parser(
        "hold", help="build ROOT/NAME, print it, keep it until signalled"
    )
    h.add_argument(
        "--provider", choices=sorted(providercaps.PROVIDERS), default="tmpfs"
    )
    h.add_argument("--root", required=True, help="directory holding the RAM disks")
    h.add_argument("--name", required=True, help="the RAM disk's name (JOBID.GEN)")
    h.add_argument(
        "--size", type=_size, required=True, help="bytes on this node (e.g. 4G)"
    )
    h.add_argument("--owner", type=_uid, required=True, help="uid of the job owner")
    h.add_argument("--jobid", type=_uid, help="the job's id (default: from NAME)")
    h.add_argument(
        "--gen", type=_uid, help="the reservation's generation (default: from NAME)"
    )
    h.add_argument(
        "--adopt",
        metavar="PATH",
        help="take over the kept RAM disk PATH of --jobid instead of building one",
    )
    h.add_argument(
        "--port",
        type=_uid,
        help="serve it to compute nodes on this TCP port " "(with --secret)",
    )
    h.add_argument("--secret", help="the volume's login compute nodes present")
    h.add_argument("--fs-host", default="127.0.0.1", help="the address it is served at")
    g = sub.add_parser(
        "purge", help="replace PATH by a link to DATA_IN (or an empty directory)"
    )
    g.add_argument("path")
    g.add_argument("--link", metavar="DATA_IN", help="where the link points")
    s = sub.add_parser("sweep", help="remove RAM disks under ROOT whose holder is gone")
    s.add_argument("root")
    s.add_argument(
        "--report-kept",
        action="store_true",
        help="print each kept RAM disk as a JSON line",
    )
    s.add_argument(
        "--gone",
        metavar="NAME",
        help="the RAM disk of a holder job that ended: end its holder process "
        "if it still runs",
    )
    d = sub.add_parser("discard", help="remove the kept RAM disk PATH")
    d.add_argument("path")
    look = sub.add_parser(
        "look",
        help="run COMMAND where the image RAM disks under ROOT (or the one at ROOT) "
        "are mounted read-only at their own paths, for it alone",
    )
    look.add_argument("root", metavar="ROOT")
    look.add_argument("command_args", nargs=argparse.REMAINDER, metavar="COMMAND")
    return p


def _look(root, command):
    """``look``: in a mount namespace of this process alone, mount every
    image RAM disk under ``root`` (or ``root`` itself) read-only, except
    those a compute node or a stage writes now (said on stderr), then run
    ``command``; its exit status."""
    import contextlib
    import subprocess

    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        return _fail("look needs a COMMAND to run")
    marker = layout.read_marker(root)
    paths = (
        [root]
        if marker is not None
        else [os.path.join(root, e) for e in sorted(os.listdir(root))]
    )
    try:
        sysmount.private_namespace()
    except OSError as exc:
        return _fail(f"look: {exc}")
    with contextlib.ExitStack() as stack:
        for path in paths:
            marker = layout.read_marker(path)
            if not imagedisk.is_image(marker) or marker.get("mounted"):
                continue
            try:
                stack.enter_context(imagedisk.opened(path, False, "a look by root"))
            except (OSError, layout.ProviderError) as exc:
                print(f"{PROG}: look: {path}: {exc}", file=sys.stderr, flush=True)
        return subprocess.call(command)


def _fail(message):
    print(f"{PROG}: {message}", file=sys.stderr, flush=True)
    return 1


def main(argv=None):
    args = parser().parse_args(argv)
    if args.command == "hold":
        if args.adopt is not None and args.jobid is None:
            return _fail("hold --adopt needs --jobid (whose kept RAM disk it is)")
        if (args.port is None) != (args.secret is None):
            return _fail("hold --port and --secret come together")
        task = Task(
            args.root,
            args.name,
            args.size,
            args.owner,
            jobid=args.jobid,
            gen=args.gen,
            index=task_rank(),
            port=args.port,
            secret=args.secret,
            fs_host=args.fs_host,
            adopt=args.adopt,
        )
        return hold(task, args.provider, prog=PROG)
    if args.command == "look":
        return _look(args.root, args.command_args)
    if args.command == "discard":
        try:
            if os.path.basename(args.path.rstrip("/")).startswith(store.PREFIX):
                if store.discard(args.path):
                    print(f"{PROG}: discarded the image store {args.path}", flush=True)
            elif disks.discard(args.path):
                print(f"{PROG}: discarded {args.path}", flush=True)
        except layout.RamdiskError as exc:
            return _fail(str(exc))
        return 0
    if args.command == "purge":
        try:
            purge(args.path, args.link)
        except layout.RamdiskError as exc:
            return _fail(str(exc))
        return 0
    failed = sweep(
        args.root,
        say=lambda line: print(f"{PROG}: {line}", flush=True),
        report_kept=args.report_kept,
        gone=args.gone,
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
