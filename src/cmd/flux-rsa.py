##############################################################
# flux-rsa: the RAMDISK Storage Accelerator command
#
#   flux rsa status [JOBID...]     RSA state of jobs (like flux jobs)
#   flux rsa wait JOBID            block until the job's outputs are home
#   flux rsa release-input         (inside a job) drop staged inputs now
#   flux rsa retry JOBID           stage out a HELD job again
#   flux rsa release JOBID         give up a HELD job's RAM disk
#   flux rsa pool                  capacity and reservations per RSA node
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

from flux_rsa.cli import demo, views

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


def cmd_status(args):
    h = flux.Flux()
    answer = ask_status(h, args.jobids)
    jobs, caller = answer["jobs"], answer.get("caller", {})
    known = {j["jobid"] for j in jobs}
    missing = []
    for jobid in args.jobids:
        if int(jobid) in known:
            continue
        row = not_rsa(h, jobid, caller)
        if row is None:
            missing.append(jobid)
        else:
            jobs.append(row)
    if args.format == "json" or args.json:
        print(json.dumps(jobs, indent=None if args.no_header else 1))
    else:
        items = [views.RsaJob(j) for j in jobs]
        if not args.jobids and not args.all:
            items = [i for i in items if not i.final]
        fmt = views.StatusConfig().load().get_format_string(args.format)
        views.StatusFormat(fmt).print_items(items, no_header=args.no_header)
    for j in missing:
        LOGGER.warning("%s: no such job (or not yours)", j.f58)
    if missing:
        sys.exit(1)


def cmd_wait(args):
    h = flux.Flux()
    deadline = time.time() + args.timeout if args.timeout else None
    delay = 0.1
    while True:
        jobs = records(h, [args.jobid])
        if not jobs:
            raise SystemExit(f"flux-rsa: {args.jobid.f58}: no RSA record (not an RSA job, or not yours)")
        verdict = views.wait_verdict(jobs[0])
        if verdict is not None:
            code, message = verdict
            if not args.quiet:
                print(f"{args.jobid.f58}: {message}", file=sys.stderr if code else sys.stdout)
            sys.exit(code)
        if deadline and time.time() > deadline:
            raise SystemExit(f"flux-rsa: {args.jobid.f58}: still {jobs[0]['rsa_state']} after {args.timeout:g}s")
        time.sleep(delay)
        delay = min(delay * 2, 1.0)


def cmd_release_input(args):
    jobid = args.jobid or os.environ.get("FLUX_JOB_ID")
    if jobid is None:
        raise SystemExit("flux-rsa: release-input: give a JOBID or run it inside the job (FLUX_JOB_ID is not set)")
    rec = rpc(flux.Flux(), "rsa.release-input", {"id": int(JobID(jobid))})
    print(f"{JobID(jobid).f58}: inputs released ({rec['rsa_state']})")


def cmd_retry(args):
    rec = rpc(flux.Flux(), "rsa.retry", {"id": int(args.jobid)})
    print(f"{args.jobid.f58}: stage-out started again ({rec['rsa_state']}); `flux rsa wait {args.jobid.f58}` follows it")


def cmd_release(args):
    rec = rpc(flux.Flux(), "rsa.release", {"id": int(args.jobid)})
    print(f"{args.jobid.f58}: RAM disk released without stage-out ({rec['rsa_state']})")


def cmd_pool(args):
    h = flux.Flux()
    if args.shutdown:
        try:
            result = rpc(h, "rsa.pool-shutdown", {})
        except PermissionError:
            raise SystemExit("flux-rsa: pool --shutdown: only the instance owner can stop the RSA pool") from None
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
        raise SystemExit("flux-rsa: the RSA pool is not running (yet): see `flux dmesg | grep rsa`")
    if args.format == "json":
        print(json.dumps(status))
        return
    views.print_pool(status, no_header=args.no_header)
    unusable = (status.get("privilege") or {}).get("error")
    if unusable:
        print(f"flux-rsa: the RSA pool cannot make RAM disks (RSA jobs use their directories): "
              f"{unusable}", file=sys.stderr)


def cmd_drain(args, undrain=False):
    h = flux.Flux()
    for host in flux.hostlist.Hostlist(args.nodes):
        try:
            rpc(h, "rsa.drain", {"host": host, "reason": " ".join(args.reason or []), "undrain": undrain})
        except PermissionError:
            raise SystemExit("flux-rsa: only the instance owner can drain or undrain RSA nodes") from None
        print(f"flux-rsa: {host} {'undrained' if undrain else 'drained'}")


def cmd_stats(args):
    print(json.dumps(rpc(flux.Flux(), "rsa.stats", {})))


def cmd_demo(args):
    sys.exit(demo.run(flux.Flux(), args))


def parse_args():
    parser = argparse.ArgumentParser(prog="flux-rsa", formatter_class=flux.util.help_formatter())
    sub = parser.add_subparsers(title="subcommands", dest="subcommand")
    sub.required = True

    p = sub.add_parser("status", help="show the RSA state of jobs", formatter_class=flux.util.help_formatter())
    p.add_argument("jobids", nargs="*", type=JobID, metavar="JOBID")
    p.add_argument("-a", "--all", action="store_true", help="include jobs whose RSA work is over")
    p.add_argument("-n", "--no-header", action="store_true", help="do not print a header")
    p.add_argument("-o", "--format", default="default", metavar="FORMAT",
                   help="output format: a name (default, long, times, json) or a Python format string; 'help' lists names")
    p.add_argument("--json", action="store_true", help="print the records as JSON")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("wait", help="wait until a job's outputs are safe")
    p.add_argument("jobid", type=JobID, metavar="JOBID")
    p.add_argument("-t", "--timeout", type=flux.util.parse_fsd, default=None, metavar="FSD", help="give up after FSD")
    p.add_argument("-q", "--quiet", action="store_true")
    p.set_defaults(func=cmd_wait)

    p = sub.add_parser("release-input", help="drop the staged inputs now (run inside the job)")
    p.add_argument("jobid", nargs="?", metavar="JOBID", help="default: the job this runs in")
    p.set_defaults(func=cmd_release_input)

    p = sub.add_parser("retry", help="stage out a HELD job again")
    p.add_argument("jobid", type=JobID, metavar="JOBID")
    p.set_defaults(func=cmd_retry)

    p = sub.add_parser("release", help="give up a HELD job's RAM disk without stage-out")
    p.add_argument("jobid", type=JobID, metavar="JOBID")
    p.set_defaults(func=cmd_release)

    p = sub.add_parser("pool", help="capacity and reservations of each RSA node")
    p.add_argument("-o", "--format", default="default", metavar="FORMAT", help="default or json")
    p.add_argument("-n", "--no-header", action="store_true")
    p.add_argument("--wait", type=flux.util.parse_fsd, default=0, metavar="FSD", help="wait up to FSD for the pool to start")
    p.add_argument("--shutdown", action="store_true", help="stop the pool in order (instance owner; done at instance shutdown)")
    p.set_defaults(func=cmd_pool)

    p = sub.add_parser("drain", help="take RSA nodes out of new reservations (instance owner)")
    p.add_argument("nodes", metavar="NODES", help="RSA node names, e.g. rsa[0-1]")
    p.add_argument("reason", nargs="*", help="why (shown by flux rsa pool)")
    p.set_defaults(func=cmd_drain)

    p = sub.add_parser("undrain", help="let drained RSA nodes take new reservations again")
    p.add_argument("nodes", metavar="NODES", help="RSA node names, e.g. rsa[0-1]")
    p.set_defaults(func=lambda a: cmd_drain(a, undrain=True), reason=None)

    p = sub.add_parser("stats", help="service figures as JSON (latency, CPU, memory, records)")
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("demo", help="run sample jobs through stage-in and stage-out")
    p.add_argument("--jobs", type=int, default=3, help="how many sample jobs (default 3)")
    p.add_argument("--dir", default=None, help="where to put sample data (default: a new directory under /tmp)")
    p.set_defaults(func=cmd_demo)
    return parser.parse_args()


@flux.util.CLIMain(LOGGER)
def main():
    args = parse_args()
    args.func(args)


if __name__ == "__main__":
    main()
