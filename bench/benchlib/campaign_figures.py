"""bench/campaign's modes and their figures: each job's events, task
reports and RSA record collected, summarized per mode, and the modes
printed side by side.
"""

import json
import statistics

from benchlib.figures import GiB, fmt, human, parse_size
from benchlib.instance import mount_seconds

MODES = ("direct", "perilog", "rsa")
TITLES = {"direct": "direct I/O", "perilog": "prolog/epilog staging", "rsa": "flux-rsa"}
KINDS = ("big-write", "read-heavy", "many-files", "short")


def collect(inst, args, mode, jobs, ids, t0):
    """Per-job events and task reports into the mode's figures."""
    per = []
    for j in jobs:
        jobid = ids[j["name"]]
        ev = inst.events(jobid)
        r = inst.flux("job", "attach", jobid, check=False)
        tasks = [json.loads(s) for s in r.stdout.splitlines() if s.startswith("{")]
        rec = None
        staged = None
        if mode == "rsa" and j["kind"] != "other":
            staged = inst.wait_staged(jobid)
            rec = inst.record(jobid)
        alloc, start = ev.get("alloc"), ev.get("start")
        finish, free = ev.get("finish"), ev.get("free")
        row = {
            "name": j["name"],
            "kind": j["kind"],
            "nodes": j["nodes"],
            "jobid": jobid,
            "compute": j["compute"],
            "rc": r.returncode,
            "submit": ev.get("submit"),
            "alloc": alloc,
            "start": start,
            "finish": finish,
            "free": free,
            "io_s": sum(t["read_s"] + t["write_s"] for t in tasks),
            "ok": r.returncode == 0 and len(tasks) == j["nodes"],
        }
        if staged is not None and not staged[0]:
            # its outputs did not all come home: the job failed, whatever its tasks say
            row["ok"] = False
            row["not_home"] = f"{staged[1]} ({(rec or {}).get('rsa_state')})"
        if None in (alloc, start, finish, free):
            row["ok"] = False
        else:
            row["held"] = free - alloc
            row["before"] = start - alloc
            row["after"] = free - finish
            row["lost"] = j["nodes"] * (row["held"] - j["compute"])
        if rec:
            hist = rec.get("history") or []
            row["home"] = max(
                (ts for ts, _js, rs in hist if rs in ("DESTROYED", "HELD")),
                default=None,
            )
            row["staged_in"] = bool((rec.get("env") or {}).get("staged_in"))
            row["attach_s"] = mount_seconds(rec, "attach")
            row["detach_s"] = mount_seconds(rec, "detach")
            row["fs"] = fs_of(rec)
            row["rsa_error"] = rec.get("error")
            row["rsa"] = {
                "capacity": rec.get("request", {}).get("capacity") or rec.get("need"),
                "history": hist,
            }
        per.append(row)
    return summarize(args, mode, per, t0)


def fs_of(rec):
    """The file system the RSA job had, as its record says: "image" (one
    compute node), "per-node" (an image on each of several), "shared"."""
    if not rec.get("image"):
        return "shared"
    return "image" if (rec.get("nnodes") or 1) == 1 else "per-node"


def union_seconds(intervals):
    total, end = 0.0, None
    for a, b in sorted(intervals):
        if end is None or a > end:
            total += b - a
            end = b
        elif b > end:
            total += b - end
            end = b
    return total


def summarize(args, mode, per, t0):
    data = [r for r in per if r["kind"] != "other" and "lost" in r]
    other = [r for r in per if r["kind"] == "other" and "lost" in r]
    end = max(r["free"] for r in per if r.get("free"))
    home = max([end] + [r["home"] for r in per if r.get("home")])
    floor = (
        statistics.median([r["held"] - r["compute"] for r in other]) if other else 0.0
    )
    s = {
        "mode": mode,
        "jobs": len(per),
        "failed": [r["name"] for r in per if not r["ok"]],
        "not_home": {r["name"]: r["not_home"] for r in per if r.get("not_home")},
        "rsa_errors": {r["name"]: r["rsa_error"] for r in per if r.get("rsa_error")},
        "makespan_s": end - t0,
        "home_s": home - t0,
        "lost_node_s": sum(r["lost"] for r in data),
        "lost_beyond_plain_node_s": sum(r["lost"] - r["nodes"] * floor for r in data),
        "plain_overhead_s": floor,
        "io_in_job_node_s": sum(r["io_s"] for r in data),
        "held_before_node_s": sum(r["nodes"] * r["before"] for r in data),
        "held_after_node_s": sum(r["nodes"] * r["after"] for r in data),
        "compute_busy": sum(r["nodes"] * r["compute"] for r in per) / (2 * (end - t0)),
        "other_turnaround_s": statistics.mean(r["free"] - r["submit"] for r in other)
        if other
        else None,
        "other_per_min": len(other) / ((max(r["free"] for r in other) - t0) / 60)
        if other
        else None,
        "other_overtaken": sum(
            1
            for a in other
            for b in per
            if b["submit"] > a["submit"] and b["alloc"] < a["alloc"]
        ),
        "other_first_wait_s": min(other, key=lambda r: r["submit"])["alloc"]
        - min(other, key=lambda r: r["submit"])["submit"]
        if other
        else None,
        "by_kind": {},
    }
    for kind in KINDS:
        rows = [r for r in data if r["kind"] == kind]
        if rows:
            s["by_kind"][kind] = {
                "lost_node_s": sum(r["lost"] for r in rows),
                "io_in_job_node_s": sum(r["io_s"] for r in rows),
            }
    if mode == "rsa":
        held, stages = 0.0, []
        for r in per:
            hist = (r.get("rsa") or {}).get("history") or []
            cap = (r.get("rsa") or {}).get("capacity") or 0
            t_assigned = next((ts for ts, _j, rs in hist if rs == "ASSIGNED"), None)
            t_gone = next((ts for ts, _j, rs in hist if rs == "DESTROYED"), None)
            if t_assigned and t_gone:
                held += cap * (t_gone - max(t_assigned, t0)) if t_gone > t0 else 0
            for i, (ts, _j, rs) in enumerate(hist):
                if rs in ("STAGING_IN", "STAGING_OUT") and i + 1 < len(hist):
                    stages.append((max(ts, t0), max(hist[i + 1][0], t0)))
        total_cap = 2 * parse_size(args.node_capacity)
        s["rsa_capacity_use"] = held / (total_cap * (home - t0))
        s["rsa_capacity_GiB_s"] = held / GiB
        s["rsa_staging_share"] = union_seconds(stages) / (home - t0)
        s["staged_in_share"] = sum(1 for r in data if r.get("staged_in")) / max(
            1, sum(1 for r in data)
        )
        attached = [r for r in data if r.get("attach_s") is not None]
        detached = [r["detach_s"] for r in data if r.get("detach_s") is not None]
        s["attach_node_s"] = (
            sum(r["nodes"] * r["attach_s"] for r in attached) if attached else None
        )
        s["detach_mean_s"] = statistics.mean(detached) if detached else None
        s["detach_max_s"] = max(detached) if detached else None
        s["rsa_fs"] = " ".join(
            f"{fs} {sum(1 for r in data if r.get('fs') == fs)}"
            for fs in ("image", "per-node", "shared")
            if any(r.get("fs") == fs for r in data)
        )
    s["jobs_detail"] = per
    return s


def print_report(rep):
    fs = rep["slowfs"]
    f = fs["figures"]
    print(
        f"Slow file system: {fs['kind']}: {f['write_MiBps']:.0f} MiB/s write, "
        f"{f['read_MiBps']:.0f} MiB/s read, {f['creates_per_s_1']:.0f} / "
        f"{f['creates_per_s_16']:.0f} creates/s (1 / 16 writers, one directory)"
    )
    w = rep["workload"]
    print(
        f"Stream: {w['data_jobs']} data jobs ({', '.join(KINDS)}), {w['other_jobs']} other "
        f"jobs; {human(w['input_bytes'])} of inputs, {human(w['output_bytes'])} "
        f"of outputs; {w['compute_node_s']:.0f} compute node-s; 2 compute nodes; warm-up "
        f"{rep['warmup']:g} s"
    )
    print()
    modes = [m for m in MODES if m in rep["modes"]]
    lines = [
        ("makespan (release -> last job end), s", "makespan_s", ".0f"),
        ("  -> last output home, s", "home_s", ".0f"),
        ("compute node-s lost to I/O or waiting", "lost_node_s", ".1f"),
        ("  beyond a plain job's overhead", "lost_beyond_plain_node_s", ".1f"),
        ("  of which I/O inside the job", "io_in_job_node_s", ".1f"),
        ("  held before start (prolog, RAM disk, inputs)", "held_before_node_s", ".1f"),
        ("    of which attach node-s (nodes x attach)", "attach_node_s", ".1f"),
        ("  held after end (epilog)", "held_after_node_s", ".1f"),
        ("RSA detach after the end (nodes free): mean s", "detach_mean_s", ".2f"),
        ("  max s", "detach_max_s", ".2f"),
        ("a plain job's overhead (median), s", "plain_overhead_s", ".2f"),
        ("compute nodes busy computing", "compute_busy", ".0%"),
        ("other jobs: mean turnaround, s", "other_turnaround_s", ".0f"),
        ("other jobs: per minute", "other_per_min", ".1f"),
        ("other jobs: wait of the first submitted, s", "other_first_wait_s", ".0f"),
        ("other jobs overtaken by jobs submitted later", "other_overtaken", "d"),
        ("RSA capacity held / (capacity x time)", "rsa_capacity_use", ".0%"),
        ("RSA: share of time staging", "rsa_staging_share", ".0%"),
        ("RSA: jobs started on staged inputs", "staged_in_share", ".0%"),
        ("RSA: data jobs' file systems (records)", "rsa_fs", "s"),
    ]
    print(f"{'':<48}" + "".join(f"{TITLES[m]:>24}" for m in modes))
    for label, key, spec in lines:
        vals = [rep["modes"][m].get(key) for m in modes]
        if all(v is None for v in vals):
            continue
        print(f"{label:<48}" + "".join(f"{fmt(v, spec):>24}" for v in vals))
    homes = [rep["modes"][m]["home"] for m in modes]
    print(
        f"{'outputs home (files, bytes)':<48}"
        + "".join(f"{str(h['files']) + ', ' + human(h['bytes']):>24}" for h in homes)
    )
    print()
    print("compute node-s lost, by kind of job:")
    for kind in KINDS:
        vals = [
            rep["modes"][m]["by_kind"].get(kind, {}).get("lost_node_s") for m in modes
        ]
        print(f"  {kind:<46}" + "".join(f"{fmt(v, '.1f'):>24}" for v in vals))
    if "rsa" in rep["modes"]:
        r = rep["modes"]["rsa"]["lost_node_s"]
        for m in modes:
            if m != "rsa" and r:
                print(
                    f"lost node-s, {TITLES[m]} / flux-rsa: "
                    f"{rep['modes'][m]['lost_node_s'] / r:.1f}x"
                )
        tl = rep["modes"]["rsa"].get("timeline")
        if tl:
            print(f"timeline of the flux-rsa run: {tl}")
    for m in modes:
        if rep["modes"][m]["failed"]:
            print(
                f"{TITLES[m]}: jobs that failed: {', '.join(rep['modes'][m]['failed'])}"
            )
        for name, why in (rep["modes"][m].get("not_home") or {}).items():
            print(f"{TITLES[m]}: {name}: outputs not home: {why}")
        for name, why in (rep["modes"][m].get("rsa_errors") or {}).items():
            print(f"{TITLES[m]}: {name}: its record's error: {why}")
    print()
    print(f"(whole run {rep['wall_s']:.0f} s)")
