##############################################################
# flux-rsa: the RAMDISK Storage Accelerator command
#
#   flux rsa status [JOBID...]     RSA state of jobs (like flux jobs); --watch: live
#   flux rsa wait JOBID            block until the job's outputs are home
#   flux rsa release-input         (inside a job) drop staged inputs now
#   flux rsa retry JOBID           stage out a HELD job again
#   flux rsa release JOBID         give up a HELD job's RAM disk
#   flux rsa pool                  capacity and reservations per RSA node
#   flux rsa timeline [JOBID...]   a Gantt picture of what the RSA did
#   flux rsa drain|undrain NODES   (instance owner) new reservations avoid NODES
#   flux rsa demo                  run sample jobs through the RSA
##############################################################

import argparse
import logging

import flux.util
from flux.job import JobID

# each subcommand's body is in a module of its own
from flux_rsa.cli import ask, demo, gather, release, rsanodes, status

LOGGER = logging.getLogger("flux-rsa")


def add_listing_options(p, names, what, example=""):
    """The options of a listing like `flux jobs` (status, pool): -n, -o
    (``names``: its named formats), --sort and --json (printing ``what``)."""
    p.add_argument(
        "-n", "--no-header", action="store_true", help="do not print a header"
    )
    p.add_argument(
        "-o",
        "--format",
        default="default",
        metavar="FORMAT",
        help=f"output format: a name ({names}) or a Python format string; "
        "'help' lists names",
    )
    p.add_argument(
        "--sort",
        default="",
        metavar="KEY,...",
        help=f"sort by these fields (-KEY: reversed){example}",
    )
    p.add_argument("--json", action="store_true", help=f"print {what} as JSON")


def parse_args():
    parser = argparse.ArgumentParser(
        prog="flux-rsa", formatter_class=flux.util.help_formatter()
    )
    sub = parser.add_subparsers(title="subcommands", dest="subcommand")
    sub.required = True

    p = sub.add_parser(
        "status",
        help="show the RSA state of jobs",
        formatter_class=flux.util.help_formatter(),
    )
    p.add_argument("jobids", nargs="*", type=JobID, metavar="JOBID")
    p.add_argument(
        "-a", "--all", action="store_true", help="include jobs whose RSA work is over"
    )
    p.add_argument("-A", action="store_true", help="jobs of all users, in all states")
    p.add_argument(
        "-u",
        "--user",
        metavar="USER",
        default=None,
        help="jobs of USER (a name, a userid, or all; default: yours)",
    )
    p.add_argument(
        "-f",
        "--filter",
        metavar="STATE,...",
        default="",
        help="only jobs in these job-states or rsa-states (e.g. STAGING_IN,READY)",
    )
    add_listing_options(
        p,
        "default, long, progress, times, json",
        "the records",
        example=", e.g. --sort=-capacity,id",
    )
    p.add_argument(
        "-w",
        "--watch",
        action="store_true",
        help="redraw live (progress bars, rate, ETA) until the jobs shown are at rest",
    )
    p.add_argument(
        "--interval",
        type=flux.util.parse_fsd,
        default=0.5,
        metavar="FSD",
        help="with --watch: how often to look (default 0.5s)",
    )
    p.set_defaults(func=status.cmd_status)

    p = sub.add_parser("wait", help="wait until a job's outputs are safe")
    p.add_argument("jobid", type=JobID, metavar="JOBID")
    p.add_argument(
        "-t",
        "--timeout",
        type=flux.util.parse_fsd,
        default=None,
        metavar="FSD",
        help="give up after FSD",
    )
    p.add_argument("-q", "--quiet", action="store_true")
    p.add_argument(
        "-p",
        "--progress",
        action="store_true",
        help="show the job live meanwhile (progress bar, rate, ETA while it stages)",
    )
    p.set_defaults(func=status.cmd_wait)

    p = sub.add_parser(
        "release-input", help="drop the staged inputs now (run inside the job)"
    )
    p.add_argument(
        "jobid", nargs="?", metavar="JOBID", help="default: the job this runs in"
    )
    p.set_defaults(func=release.cmd_release_input)

    p = sub.add_parser("retry", help="stage out a HELD job again")
    p.add_argument("jobid", type=JobID, metavar="JOBID")
    p.set_defaults(func=release.cmd_retry)

    p = sub.add_parser(
        "release", help="give up a HELD job's RAM disk without stage-out"
    )
    p.add_argument("jobid", type=JobID, metavar="JOBID")
    p.set_defaults(func=release.cmd_release)

    p = sub.add_parser("pool", help="capacity and reservations of each RSA node")
    add_listing_options(p, "default, long, json", "the pool's status")
    p.add_argument(
        "--wait",
        type=flux.util.parse_fsd,
        default=0,
        metavar="FSD",
        help="wait up to FSD for the pool to start",
    )
    p.add_argument(
        "--shutdown",
        action="store_true",
        help="stop the pool in order (instance owner; done at instance shutdown)",
    )
    p.set_defaults(func=rsanodes.cmd_pool)

    p = sub.add_parser(
        "timeline", help="a Gantt picture of what the RSA did (PNG or SVG)"
    )
    p.add_argument(
        "jobids",
        nargs="*",
        type=JobID,
        metavar="JOBID",
        help="default: all your RSA jobs on record",
    )
    p.add_argument(
        "-o",
        "--output",
        metavar="FILE",
        default=None,
        help="the picture: FILE.png, FILE.svg or FILE.pdf (default rsa-timeline.png)",
    )
    p.add_argument(
        "--since",
        metavar="WHEN",
        default=None,
        help="only jobs active since WHEN (e.g. -1h, -30m, a date)",
    )
    p.add_argument("-A", action="store_true", help="jobs of all users")
    p.add_argument(
        "--json",
        action="store_true",
        help="print what would be drawn, as JSON, and draw nothing",
    )
    p.set_defaults(func=gather.cmd_timeline)

    p = sub.add_parser(
        "drain", help="take RSA nodes out of new reservations (instance owner)"
    )
    p.add_argument("nodes", metavar="NODES", help="RSA node names, e.g. rsa[0-1]")
    p.add_argument("reason", nargs="*", help="why (shown by flux rsa pool)")
    p.set_defaults(func=rsanodes.cmd_drain)

    p = sub.add_parser(
        "undrain", help="let drained RSA nodes take new reservations again"
    )
    p.add_argument("nodes", metavar="NODES", help="RSA node names, e.g. rsa[0-1]")
    p.set_defaults(func=lambda a: rsanodes.cmd_drain(a, undrain=True), reason=None)

    p = sub.add_parser(
        "stats", help="service figures as JSON (latency, CPU, memory, records)"
    )
    p.set_defaults(func=ask.cmd_stats)

    p = sub.add_parser("demo", help="run sample jobs through stage-in and stage-out")
    p.add_argument(
        "--jobs", type=int, default=3, help="how many sample jobs (default 3)"
    )
    p.add_argument(
        "--dir",
        default=None,
        help="where to put sample data (default: a new directory under /tmp)",
    )
    p.set_defaults(func=demo.cmd_demo)
    return parser.parse_args()


@flux.util.CLIMain(LOGGER)
def main():
    args = parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
