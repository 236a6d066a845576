"""`flux rsa timeline`: what the picture shows, gathered from the instance
(the RSA records the caller may see, the pool's nodes, the jobs that ran
on compute nodes meanwhile); timeline.py turns it into the picture."""

import json
import os
import time

import flux
import flux.hostlist
import flux.job
import flux.util
from flux.job import JobID

from flux_rsa.cli import timeline
from flux_rsa.cli.ask import ask_status, rpc


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
