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
import json
import logging
import os
import sys
import time

import flux
import flux.hostlist
import flux.job
import flux.util
from flux.job import JobID

from flux_rsa.cli import demo, paths, timeline, views, watch

LOGGER = logging.getLogger("flux-rsa")


def rpc(h, topic, payload):
    try:
        return h.rpc(topic, payload).get()
    except OSError as exc:
        if exc.errno == 38:  # ENOSYS
            raise SystemExit(
                "flux-rsa: the rsa service is not loaded in this instance "
                "(configure [rsa] or run `flux module load rsa`)"
            ) from None
        raise


def ask_status(h, jobids=()):
    """The service's answer: the records the caller may see, and who the
    caller is to the service (userid, instance owner or not)."""
    return rpc(h, "rsa.status", {"jobids": [int(j) for j in jobids]})


def records(h, jobids=()):
    return ask_status(h, jobids)["jobs"]


def not_rsa(h, jobid, caller):
    """A row for a job of the caller's that the RSA does not manage (no
    rsa attributes); None for a job that is not the caller's."""
    try:
        info = flux.job.job_list_id(h, jobid, attrs=["state", "userid"]).get_jobinfo()
    except OSError:
        return None
    if not caller.get("owner") and info.userid != caller.get("userid"):
        return None  # someone else's job: say no more than for a missing one
    return views.ineligible_row(int(jobid), info.userid, info.state)


#: --user not given: the caller's jobs (the userid the service sees)
MINE = object()


def status_rows(h, args, missing=None):
    """The rows `flux rsa status` shows: records (and rows for named jobs
    the RSA does not manage), filtered; ``missing`` collects named jobs
    that are not there (or not the caller's)."""
    answer = ask_status(h, args.jobids)
    jobs, caller = answer["jobs"], answer.get("caller", {})
    known = {j["jobid"] for j in jobs}
    for jobid in args.jobids:
        if int(jobid) in known:
            continue
        row = not_rsa(h, jobid, caller)
        if row is None:
            if missing is not None:
                missing.append(jobid)
        else:
            jobs.append(row)
    hosts = list(flux.hostlist.Hostlist(h.attr_get("hostlist")))
    if args.jobids:  # named jobs are shown whoever owns them and whatever their state
        return jobs, [views.RsaJob(j, hosts) for j in jobs]
    user = None if args.A else caller.get("userid") if args.user is MINE else args.user
    items = views.select(
        [views.RsaJob(j, hosts) for j in jobs],
        args.filter,
        user,
        everything=args.all or args.A,
    )
    kept = {int(i.id) for i in items}
    return [j for j in jobs if j["jobid"] in kept], items


def check_status_args(args):
    try:
        args.filter = views.parse_states(args.filter) if args.filter else set()
        args.user = views.parse_user(args.user) if args.user is not None else MINE
        if args.format == "json":
            args.json = True
        fmt = (
            None
            if args.json
            else views.formatter(views.StatusFormat, "status", args.format, args.sort)
        )
    except ValueError as exc:
        raise SystemExit(f"flux-rsa: status: {exc}") from None
    if args.watch and args.json:
        raise SystemExit(
            "flux-rsa: status: --watch shows a table: it does not go with --json or -o json"
        )
    return fmt


def cmd_status(args):
    h = flux.Flux()
    fmt = check_status_args(args)
    if args.watch:
        watch.watch(
            lambda: status_rows(h, args)[1],
            fmt,
            lambda jobs: all(j.at_rest for j in jobs),
            interval=args.interval,
            title="flux rsa status --watch",
        )
        return
    missing = []
    jobs, items = status_rows(h, args, missing)
    if args.json:
        print(json.dumps(jobs, indent=None if args.no_header else 1))
    else:
        fmt.print_items(items, no_header=args.no_header)
    for j in missing:
        LOGGER.warning("%s: no such job (or not yours)", j.f58)
    if missing:
        sys.exit(1)


def cmd_wait(args):
    h = flux.Flux()
    deadline = time.time() + args.timeout if args.timeout else None
    delay = 0.1
    verdict = None

    def fetch():
        nonlocal verdict
        jobs = records(h, [args.jobid])
        if not jobs:
            raise SystemExit(
                f"flux-rsa: {args.jobid.f58}: no RSA record (not an RSA job, or not yours)"
            )
        verdict = views.wait_verdict(jobs[0])
        if verdict is None and deadline and time.time() > deadline:
            raise SystemExit(
                f"flux-rsa: {args.jobid.f58}: still {jobs[0]['rsa_state']} after {args.timeout:g}s"
            )
        return [views.RsaJob(jobs[0])]

    if args.progress:
        fmt = views.formatter(views.StatusFormat, "status", "default")
        watch.watch(
            fetch,
            fmt,
            lambda jobs: verdict is not None,
            title=f"flux rsa wait {args.jobid.f58}",
        )
    else:
        fetch()
        while verdict is None:
            time.sleep(delay)
            delay = min(delay * 2, 1.0)
            fetch()
    code, message = verdict
    if not args.quiet:
        print(f"{args.jobid.f58}: {message}", file=sys.stderr if code else sys.stdout)
    sys.exit(code)


def cmd_release_input(args):
    jobid = args.jobid or os.environ.get("FLUX_JOB_ID")
    if jobid is None:
        raise SystemExit(
            "flux-rsa: release-input: give a JOBID or run it inside the job (FLUX_JOB_ID is not set)"
        )
    h = flux.Flux()
    inside = JobID(jobid) == JobID(os.environ.get("FLUX_JOB_ID", 0)) and os.environ.get(
        "RSA_DATA_IN"
    )
    shown = False
    if inside:  # this job's own data_in may show the inputs (rsa.paths=bind)
        before = records(h, [JobID(jobid)])
        shown = bool(before) and paths.shows_inputs(
            before[0], os.environ["RSA_DATA_IN"]
        )
    rec = rpc(h, "rsa.release-input", {"id": int(JobID(jobid))})
    if shown:
        data_in = before[0]["request"]["data_in"]
        if not paths.wait_inputs_gone(data_in, os.environ["RSA_DATA_IN"]):
            LOGGER.warning(
                f"{data_in} still shows the inputs on the RAM disk: the job shell did not "
                "remove its mount there (see the job's output)"
            )
    print(f"{JobID(jobid).f58}: inputs released ({rec['rsa_state']})")


def cmd_retry(args):
    rec = rpc(flux.Flux(), "rsa.retry", {"id": int(args.jobid)})
    print(
        f"{args.jobid.f58}: stage-out started again ({rec['rsa_state']}); `flux rsa wait {args.jobid.f58}` follows it"
    )


def cmd_release(args):
    rec = rpc(flux.Flux(), "rsa.release", {"id": int(args.jobid)})
    print(f"{args.jobid.f58}: RAM disk released without stage-out ({rec['rsa_state']})")


def cmd_pool(args):
    h = flux.Flux()
    try:
        fmt = (
            None
            if args.json or args.format == "json"
            else views.formatter(views.PoolFormat, "pool", args.format, args.sort)
        )
    except ValueError as exc:
        raise SystemExit(f"flux-rsa: pool: {exc}") from None
    if args.shutdown:
        try:
            result = rpc(h, "rsa.pool-shutdown", {})
        except PermissionError:
            raise SystemExit(
                "flux-rsa: pool --shutdown: only the instance owner can stop the RSA pool"
            ) from None
        if result.get("stopped"):
            print(f"flux-rsa: RSA pool {JobID(result['jobid']).f58} stopped")
        return
    deadline = time.time() + (args.wait or 0)
    while True:
        status = rpc(h, "rsa.pool", {})
        if status.get("ready") or time.time() >= deadline:
            break
        time.sleep(0.2)
    if not status.get("ready"):
        raise SystemExit(
            "flux-rsa: the RSA pool is not running (yet): see `flux dmesg | grep rsa`"
        )
    if args.json or args.format == "json":
        print(json.dumps(status))
        return
    fmt.print_items(
        [views.PoolNode(n) for n in status.get("nodes", [])], no_header=args.no_header
    )
    unusable = (status.get("privilege") or {}).get("error")
    if unusable:
        print(
            f"flux-rsa: the RSA pool cannot make RAM disks (RSA jobs use their directories): "
            f"{unusable}",
            file=sys.stderr,
        )


def compute_jobs(h, rsa_hosts, since):
    """Jobs that ran on compute nodes (not on RSA nodes) since ``since``:
    {jobid, name, nodes, start, end}."""
    attrs = ["t_run", "t_cleanup", "t_inactive", "nodelist", "name"]
    try:
        infos = flux.job.JobList(
            h,
            attrs=attrs,
            filters=["running", "inactive"],
            user="all",
            since=since or 0.0,
            max_entries=10000,
        ).jobs()
    except OSError:  # not the instance owner: your own jobs
        infos = flux.job.JobList(
            h,
            attrs=attrs,
            filters=["running", "inactive"],
            since=since or 0.0,
            max_entries=10000,
        ).jobs()
    out = []
    for info in infos:
        nodes = [
            n for n in flux.hostlist.Hostlist(info.nodelist or "") if n not in rsa_hosts
        ]
        if info.t_run > 0 and nodes:
            end = info.t_cleanup or info.t_inactive or time.time()
            out.append(
                {
                    "jobid": int(info.id),
                    "name": info.name,
                    "nodes": nodes,
                    "start": info.t_run,
                    "end": end,
                }
            )
    return out


def cmd_timeline(args):
    h = flux.Flux()
    try:
        since = flux.util.parse_datetime(args.since).timestamp() if args.since else None
    except ValueError as exc:
        raise SystemExit(
            f"flux-rsa: timeline: --since={args.since}: {exc} (give e.g. -1h, -30m or a date)"
        ) from None
    path = args.output or "rsa-timeline.png"
    if not args.json and os.path.splitext(path)[1].lower() not in (
        ".png",
        ".svg",
        ".pdf",
    ):
        raise SystemExit(
            f"flux-rsa: timeline: -o {path}: the picture is written as .png, .svg or .pdf: "
            "name the file so"
        )
    answer = ask_status(h, args.jobids)
    recs = answer["jobs"]
    if not args.jobids and not args.A:
        recs = [
            r for r in recs if r["userid"] == answer.get("caller", {}).get("userid")
        ]
    pool = rpc(h, "rsa.pool", {})
    rsa_hosts = {n["host"] for n in pool.get("nodes", [])}
    pool_bytes = sum(n.get("total", 0) for n in pool.get("nodes", [])) or None
    submits = [r["history"][0][0] for r in recs if r.get("history")]
    compute = compute_jobs(
        h, rsa_hosts, since if since is not None else min(submits, default=0.0)
    )
    picture = timeline.data(recs, compute, pool_bytes, since, now=time.time())
    if args.json:
        print(json.dumps(picture))
        return
    try:
        timeline.draw(picture, path, label=lambda jobid: JobID(jobid).f58)
    except ImportError as exc:
        raise SystemExit(
            f"flux-rsa: timeline: drawing needs matplotlib ({exc}; Debian: python3-matplotlib); "
            "--json prints what would be drawn"
        ) from None
    print(
        f"flux-rsa: timeline of {len(picture['jobs'])} RSA job(s) written to {os.path.abspath(path)}"
    )


def cmd_drain(args, undrain=False):
    h = flux.Flux()
    for host in flux.hostlist.Hostlist(args.nodes):
        try:
            rpc(
                h,
                "rsa.drain",
                {
                    "host": host,
                    "reason": " ".join(args.reason or []),
                    "undrain": undrain,
                },
            )
        except PermissionError:
            raise SystemExit(
                "flux-rsa: only the instance owner can drain or undrain RSA nodes"
            ) from None
        print(f"flux-rsa: {host} {'undrained' if undrain else 'drained'}")


def cmd_stats(args):
    print(json.dumps(rpc(flux.Flux(), "rsa.stats", {})))


def cmd_demo(args):
    sys.exit(demo.run(flux.Flux(), args))


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
    p.add_argument(
        "-n", "--no-header", action="store_true", help="do not print a header"
    )
    p.add_argument(
        "-o",
        "--format",
        default="default",
        metavar="FORMAT",
        help="output format: a name (default, long, progress, times, json) or a Python "
        "format string; 'help' lists names",
    )
    p.add_argument(
        "--sort",
        default="",
        metavar="KEY,...",
        help="sort by these fields (-KEY: reversed), e.g. --sort=-capacity,id",
    )
    p.add_argument("--json", action="store_true", help="print the records as JSON")
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
    p.set_defaults(func=cmd_status)

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
    p.set_defaults(func=cmd_wait)

    p = sub.add_parser(
        "release-input", help="drop the staged inputs now (run inside the job)"
    )
    p.add_argument(
        "jobid", nargs="?", metavar="JOBID", help="default: the job this runs in"
    )
    p.set_defaults(func=cmd_release_input)

    p = sub.add_parser("retry", help="stage out a HELD job again")
    p.add_argument("jobid", type=JobID, metavar="JOBID")
    p.set_defaults(func=cmd_retry)

    p = sub.add_parser(
        "release", help="give up a HELD job's RAM disk without stage-out"
    )
    p.add_argument("jobid", type=JobID, metavar="JOBID")
    p.set_defaults(func=cmd_release)

    p = sub.add_parser("pool", help="capacity and reservations of each RSA node")
    p.add_argument(
        "-o",
        "--format",
        default="default",
        metavar="FORMAT",
        help="output format: a name (default, long, json) or a Python format string; "
        "'help' lists names",
    )
    p.add_argument(
        "--json", action="store_true", help="print the pool's status as JSON"
    )
    p.add_argument(
        "--sort",
        default="",
        metavar="KEY,...",
        help="sort by these fields (-KEY: reversed)",
    )
    p.add_argument(
        "-n", "--no-header", action="store_true", help="do not print a header"
    )
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
    p.set_defaults(func=cmd_pool)

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
    p.set_defaults(func=cmd_timeline)

    p = sub.add_parser(
        "drain", help="take RSA nodes out of new reservations (instance owner)"
    )
    p.add_argument("nodes", metavar="NODES", help="RSA node names, e.g. rsa[0-1]")
    p.add_argument("reason", nargs="*", help="why (shown by flux rsa pool)")
    p.set_defaults(func=cmd_drain)

    p = sub.add_parser(
        "undrain", help="let drained RSA nodes take new reservations again"
    )
    p.add_argument("nodes", metavar="NODES", help="RSA node names, e.g. rsa[0-1]")
    p.set_defaults(func=lambda a: cmd_drain(a, undrain=True), reason=None)

    p = sub.add_parser(
        "stats", help="service figures as JSON (latency, CPU, memory, records)"
    )
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("demo", help="run sample jobs through stage-in and stage-out")
    p.add_argument(
        "--jobs", type=int, default=3, help="how many sample jobs (default 3)"
    )
    p.add_argument(
        "--dir",
        default=None,
        help="where to put sample data (default: a new directory under /tmp)",
    )
    p.set_defaults(func=cmd_demo)
    return parser.parse_args()


@flux.util.CLIMain(LOGGER)
def main():
    args = parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
