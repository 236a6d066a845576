"""bench/scale's figures and how they are printed: the three modes
summarized against the targets, and --growth's sizes.
"""

import statistics

from benchlib.figures import GiB
from benchlib.scale_setup import MODES, TITLES, parse_rate

TARGETS = {"idle_ratio": 0.02, "latency_p99_ms": 100.0, "throughput_ratio": 0.95}


def summarize(args, runs):
    out = {
        "jobs": args.jobs,
        "other_jobs": args.other,
        "mock_nodes": args.nodes,
        "rsa_nodes": args.rsa_nodes,
        "rate": parse_rate(args.rate),
        "modes": {},
    }
    for mode in MODES:
        out["modes"][mode] = runs[mode]["figures"]
    rsa = runs["rsa"]
    pe_idle = out["modes"]["perilog"]["idle_node_s"]
    out["idle_ratio"] = (
        out["modes"]["rsa"]["idle_node_s"] / pe_idle if pe_idle else None
    )
    stats = rsa.get("stats") or {}
    lat = stats.get("latency_ms", {})
    out["latency_ms"] = lat
    out["latency_p99_ms"] = lat.get("p99")
    out["queue_read_ms"] = stats.get("queue_read_ms", {})
    out["cpu_seconds"] = stats.get("cpu_seconds")
    out["maxrss_kb"] = stats.get("maxrss_kb")
    out["restages"] = stats.get("restages")
    out["rsa_records"] = stats.get("records")
    out["rsa_states"] = stats.get("states")
    out["pool"] = rsa.get("pool")
    ab = rsa["throughput_ab"]  # same instance, interleaved: the fair comparison
    with_plugin = statistics.median(ab["with"])
    without = statistics.median(ab["without"])
    pairs = [w / o for w, o in zip(ab["with"], ab["without"])]
    out["throughput"] = {
        "with_plugin": with_plugin,
        "without": without,
        "jobs": args.throughput_jobs,
        "interleaved": ab,
        "pair_ratios": pairs,
        "ratio_of_medians": with_plugin / without,
        "cpu_per_1000_jobs": {
            side: statistics.median(v) for side, v in ab["cpu_per_1000"].items()
        },
        "separate_instances": {
            "with": rsa["throughput"].get("runs_jobs_per_s"),
            "without": runs["nostage"]["throughput"].get("runs_jobs_per_s"),
        },
    }
    out["throughput_ratio"] = statistics.median(pairs)
    out["targets"] = {
        "idle_ratio": {
            "target": "<= 0.02",
            "met": out["idle_ratio"] is not None and out["idle_ratio"] <= 0.02,
        },
        "latency_p99_ms": {
            "target": "< 100",
            "met": out["latency_p99_ms"] is not None and out["latency_p99_ms"] < 100,
        },
        "throughput_ratio": {
            "target": ">= 0.95",
            "met": out["throughput_ratio"] is not None
            and out["throughput_ratio"] >= 0.95,
        },
    }
    return out


def fmt(v, spec=".1f"):
    return "-" if v is None else format(v, spec)


def print_table(s):
    yes = {True: "met", False: "NOT met"}
    print(
        f"flux-rsa at scale: {s['jobs']} RSA jobs + {s['other_jobs']} non-RSA jobs on "
        f"{s['mock_nodes']} mock compute nodes, {s['rsa_nodes']} RSA nodes, "
        f"stage rate {s['rate'] / GiB:g} GiB/s (figures are noisy: shared 2-core machine)"
    )
    print()
    print(
        f"{'mode':<15} {'makespan s':>10} {'waiting for data node-s':>24} {'late starts':>11} "
        f"{'start/end overhead node-s':>26}"
    )
    for mode in MODES:
        f = s["modes"][mode]
        print(
            f"{TITLES[mode]:<15} {f['makespan_s']:>10.1f} {f['idle_node_s']:>24.1f} "
            f"{f.get('late', 0):>11} {f.get('start_overhead_node_s', 0.0):>26.1f}"
        )
    print(
        "  waiting for data: held in prolog/epilog; held until rsa-ready; or (no staging) the"
    )
    print(
        "  modeled storage I/O in the job's own time.  overhead: alloc->start and finish->free"
    )
    print(
        "  beyond a plain job's median in the same run (job-exec's latency included)."
    )
    print()
    lat = s["latency_ms"]
    rows = [
        (
            "idle ratio (RSA / prolog-epilog)",
            fmt(s["idle_ratio"], ".4f"),
            "<= 0.02",
            yes[s["targets"]["idle_ratio"]["met"]],
        ),
        ("event-to-action latency p50 ms", fmt(lat.get("p50"), ".2f"), "", ""),
        ("event-to-action latency p90 ms", fmt(lat.get("p90"), ".2f"), "", ""),
        (
            "event-to-action latency p99 ms",
            fmt(lat.get("p99"), ".2f"),
            "< 100",
            yes[s["targets"]["latency_p99_ms"]["met"]],
        ),
        ("event-to-action latency max ms", fmt(lat.get("max"), ".1f"), "", ""),
        ("  (actions measured)", fmt(lat.get("count"), "d"), "", ""),
        (
            "queue read from job-list p50 / p99 ms",
            f"{fmt(s['queue_read_ms'].get('p50'), '.1f')} / {fmt(s['queue_read_ms'].get('p99'), '.1f')}",
            "",
            "",
        ),
        ("service CPU seconds", fmt(s["cpu_seconds"], ".1f"), "", ""),
        (
            "service peak RSS MiB",
            fmt(s["maxrss_kb"] and s["maxrss_kb"] / 1024, ".0f"),
            "",
            "",
        ),
        ("restages", fmt(s["restages"], "d"), "", ""),
        ("non-RSA jobs/s with the plugin", fmt(s["throughput"]["with_plugin"]), "", ""),
        ("non-RSA jobs/s without", fmt(s["throughput"]["without"]), "", ""),
        (
            "throughput ratio",
            fmt(s["throughput_ratio"], ".3f"),
            ">= 0.95",
            yes[s["targets"]["throughput_ratio"]["met"]],
        ),
    ]
    t = s["throughput"]
    rows += [
        ("  (ratio of the medians)", fmt(t["ratio_of_medians"], ".3f"), "", ""),
        (
            "instance CPU s / 1000 jobs, with",
            fmt(t["cpu_per_1000_jobs"]["with"], ".2f"),
            "",
            "",
        ),
        (
            "instance CPU s / 1000 jobs, without",
            fmt(t["cpu_per_1000_jobs"]["without"], ".2f"),
            "",
            "",
        ),
    ]
    print(f"{'figure':<36} {'value':>10} {'target':>9}  ")
    for name, value, target, met in rows:
        print(f"{name:<36} {value:>10} {target:>9}  {met}")
    print(
        "throughput with_i / without_i: "
        + " ".join(f"{r:.2f}" for r in t["pair_ratios"])
    )
    print()
    print(f"RSA records at the end: {s['rsa_states']}")


def growth_targets(sizes):
    """The issue's targets, judged at the largest size against the smallest."""
    if not sizes:
        return {}
    first, last = sizes[0], sizes[-1]
    cpu_growth = (
        last["cpu_ms_per_job"] / first["cpu_ms_per_job"]
        if first.get("cpu_ms_per_job")
        else None
    )
    return {
        "jobs": last["jobs"],
        "latency_p99_ms": {
            "target": "< 100",
            "value": last["latency_p99_ms"],
            "met": last["latency_p99_ms"] is not None and last["latency_p99_ms"] < 100,
        },
        "cpu_growth": {
            "target": f"<= 1.20 x the value at {first['jobs']}",
            "value": cpu_growth,
            "met": cpu_growth is not None and cpu_growth <= 1.2,
        },
        "maxrss_mib": {
            "target": "< 256",
            "value": last["maxrss_kb"] / 1024,
            "met": last["maxrss_kb"] / 1024 < 256,
        },
        "submit_ratio": {
            "target": ">= 0.90",
            "value": last["submit_ratio"],
            "met": last["submit_ratio"] >= 0.9,
        },
    }


def print_growth(out):
    print(
        f"flux-rsa: the service's cost against the queue's length ({out['mock_nodes']} mock "
        f"compute nodes, {out['rsa_nodes']} RSA nodes; N RSA + N non-RSA jobs queued; "
        "noisy 2-core machine)"
    )
    print()
    head = (
        f"{'N':>6} {'p50 ms':>7} {'p99 ms':>7} {'max ms':>8} {'read p50':>9} {'read p99':>9} "
        f"{'pass p99':>8} {'full GC':>8} {'CPU ms/job':>10} {'RSS MiB':>8} {'submit/s rsa':>12} {'plain':>7} {'ratio':>6} "
        f"{'restages':>8} {'Flux p50/p99':>13}"
    )
    print(head)
    for z in out["sizes"]:
        print(
            f"{z['jobs']:>6} {fmt(z['latency_p50_ms'], '.2f'):>7} {fmt(z['latency_p99_ms'], '.1f'):>7} "
            f"{fmt(z['latency_max_ms'], '.0f'):>8} {fmt(z['queue_read_ms_p50'], '.0f'):>9} "
            f"{fmt(z['queue_read_ms_p99'], '.0f'):>9} {fmt(z.get('ondeck_pass_ms_p99'), '.0f'):>8} "
            f"{fmt(z.get('full_gcs'), 'd'):>3}/{fmt(z.get('full_gc_ms_max'), '.0f'):<4} "
            f"{fmt(z['cpu_ms_per_job'], '.2f'):>10} "
            f"{z['maxrss_kb'] / 1024:>8.0f} {z['submit_rsa_per_s']:>12.1f} "
            f"{z['submit_plain_per_s']:>7.1f} {z['submit_ratio']:>6.2f} {z['restages']:>8} "
            f"{fmt(z.get('flux_answer_ms_p50'), '.0f'):>6}/{fmt(z.get('flux_answer_ms_p99'), '.0f'):<6}"
        )
    print(
        "  latency: event (or queue read) to the action it caused; read: job-list.list of"
    )
    print(
        "  the queue's head and the on-deck pass on it; pass: that pass alone, from job-list's"
    )
    print(
        "  answer; full GC: the service's full garbage collections (moved to its quiet"
    )
    print(
        "  moments) and the longest, ms; CPU: the service's, per RSA job, submission to the end of the run;"
    )
    print(
        "  Flux p50/p99: ms job-list took to answer a one-job list from another process while"
    )
    print(
        "  the jobs were submitted (what any reader of the queue waits, the service included)"
    )
    print()
    print("CPU ms per job while each side was submitted (rsa / plain):")
    for z in out["sizes"]:
        cpu = z.get("submit_cpu_ms_per_job") or {}
        rsa, plain = cpu.get("rsa", {}), cpu.get("plain", {})
        who = ("broker", "service", "ingest", "submitter")
        print(
            f"{z['jobs']:>6} "
            + "  ".join(
                f"{w} {fmt(rsa.get(w, 0.0), '.2f')}/{fmt(plain.get(w, 0.0), '.2f')}"
                for w in who
            )
        )
    print()
    print("the service's CPU by phase (the CPU ms/job above is their sum over N):")
    print(
        f"{'N':>6} {'submit ms/job':>13} {'settle s':>9} {'flow s':>7} {'flowed':>7} {'flow wall s':>11} "
        f"{'flow ms/flowed job':>18} {'marginal':>8}"
    )
    prev = None
    for z in out["sizes"]:
        cpu, wall = z.get("phase_cpu_seconds"), z.get("phase_wall_seconds")
        if not cpu:
            continue
        k = z["flowed_rsa_jobs"]
        marginal = (
            (cpu["flow"] - prev[0]) * 1000 / (k - prev[1])
            if prev and k != prev[1]
            else None
        )
        print(
            f"{z['jobs']:>6} {cpu['submit'] * 1000 / z['jobs']:>13.3f} {cpu['settle']:>9.2f} "
            f"{cpu['flow']:>7.2f} {k:>7} {wall['flow']:>11.1f} {cpu['flow'] * 1000 / k:>18.1f} "
            f"{fmt(marginal, '.1f'):>8}"
        )
        prev = (cpu["flow"], k)
    print(
        "  flow: the holding job cancelled, the queue runs until N/20 RSA jobs are clean (each"
    )
    print(
        "  reserved, staged in, run, staged out, torn down); marginal: the flow's CPU per RSA job"
    )
    print(
        "  it ran beyond the size before.  What the smallest size spends beyond its marginal"
    )
    print(
        "  cost (the first wave: every compute node freed at once) is paid once at every N, so"
    )
    print(
        "  the whole run's CPU per job falls as N grows while each part's cost per job holds."
    )
    t = out.get("targets") or {}
    if t:
        yes = {True: "met", False: "NOT met"}
        print()
        print(
            f"targets at {t['jobs']}: p99 {fmt(t['latency_p99_ms']['value'], '.1f')} ms "
            f"(< 100: {yes[t['latency_p99_ms']['met']]}); CPU per job x{fmt(t['cpu_growth']['value'], '.2f')} "
            f"({t['cpu_growth']['target']}: {yes[t['cpu_growth']['met']]}); peak RSS "
            f"{t['maxrss_mib']['value']:.0f} MiB (< 256: {yes[t['maxrss_mib']['met']]}); submit ratio "
            f"{t['submit_ratio']['value']:.2f} (>= 0.90: {yes[t['submit_ratio']['met']]})"
        )
