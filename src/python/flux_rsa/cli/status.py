"""`flux rsa status` and `flux rsa wait`: the records the caller may see
(and rows for named jobs the RSA does not manage), filtered and printed,
or watched live; a job's record followed until its outputs are safe.
How they look is views.py's."""

import json
import logging
import sys
import time

import flux
import flux.hostlist
import flux.job

from flux_rsa.cli import views, watch
from flux_rsa.cli.ask import ask_status, records

LOGGER = logging.getLogger("flux-rsa")


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
