"""bench/scale --growth inside a test instance (`flux python bench/scale
--inner growth`): N RSA jobs and their N twins queued behind a job that
holds every compute node, submitted in chunks while the CPU each process
spends is counted and a probe times job-list's answers; the service
settles; the queue flows a little; the figures are written for the
outside.
"""

import json
import os
import subprocess
import sys
import time

from benchlib.figures import pct
from benchlib.scale_inside import blocker_spec, jobspec_for, start, wait_pool
from benchlib.scale_setup import CHUNK

PROBE = """
import os, sys, time, json, flux
h = flux.Flux()
out, stop = sys.argv[1], sys.argv[2]
times = []
while not os.path.exists(stop):
    t0 = time.monotonic()
    h.rpc("job-list.list", {"max_entries": 1, "attrs": ["priority"], "since": 0.0,
                            "constraint": {"and": [{"states": [8]}]}}).get()  # one SCHED job
    times.append((time.monotonic() - t0) * 1000)
    time.sleep(0.1)
json.dump(times, open(out, "w"))
"""


def start_probe(workdir):
    """Time a one-job job-list.list every 0.1 s from another process
    while the jobs are submitted: how long Flux itself takes to answer
    under that load (the floor under the service's queue reads)."""
    out, stop = os.path.join(workdir, "probe.json"), os.path.join(workdir, "probe.stop")
    proc = subprocess.Popen(["flux", "python", "-c", PROBE, out, stop])
    return proc, out, stop


def end_probe(probe):
    proc, out, stop = probe
    open(stop, "w").close()
    proc.wait(timeout=60)
    with open(out) as f:
        return json.load(f)


WHO = {"rsa": "service", "job-validator": "ingest", "job-frobnicator": "ingest"}


def cpu_seconds():
    """CPU seconds so far of this instance's processes, by who: the brokers
    (and per module thread, "broker:NAME"), the rsa service, job-ingest's
    workers, this submitter."""
    tick = os.sysconf("SC_CLK_TCK")

    def stat(path):
        with open(path) as f:
            text = f.read()
        fields = text[text.rindex(")") + 2 :].split()
        return (
            text[text.index("(") + 1 : text.rindex(")")],
            (int(fields[11]) + int(fields[12])) / tick,
        )

    out = {"submitter": time.process_time()}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            comm, cpu = stat(f"/proc/{pid}/stat")
            if comm.startswith("flux-broker"):
                out["broker"] = out.get("broker", 0.0) + cpu
                for tid in os.listdir(f"/proc/{pid}/task"):
                    name, tcpu = stat(f"/proc/{pid}/task/{tid}/stat")
                    name = "main" if name.startswith("flux-broker") else name
                    out[f"broker:{name}"] = out.get(f"broker:{name}", 0.0) + tcpu
            elif comm in WHO:
                out[WHO[comm]] = out.get(WHO[comm], 0.0) + cpu
        except (OSError, ValueError):
            continue  # gone meanwhile
    return out


def cpu_ms_per_job(spent, jobs):
    """{who: ms per job} of the CPU seconds ``spent``; broker threads that
    took less than 0.01 ms per job are left out."""
    out = {k: round(v * 1000 / jobs, 3) for k, v in spent.items() if jobs}
    return {
        k: v for k, v in sorted(out.items()) if not k.startswith("broker:") or v >= 0.01
    }


def service_stats(h):
    return h.rpc("rsa.stats", {}).get()


def growth_inner(args):
    """Inside the instance: queue N + N jobs behind a job holding every
    compute node, let the service settle, let the queue flow a little."""
    import flux.job

    rate, jobs, datadir, d = start(args)
    if not wait_pool(d.h):
        print("bench/scale: the RSA pool did not come up in 120 s", file=sys.stderr)
    blocker = d.submit([blocker_spec(args)])
    d.drain_journal(lambda: "start" in d.events.get(blocker[0], {}), 120)
    before, t_before = service_stats(d.h), time.monotonic()

    import flux

    submitter = flux.Flux()  # not the journal's handle (see Driver.submit)
    sides = {
        "rsa": [j for j in jobs if j["kind"] == "data"],
        "plain": [j for j in jobs if j["kind"] != "data"],
    }
    chunks = {
        side: [sides[side][i : i + CHUNK] for i in range(0, len(sides[side]), CHUNK)]
        for side in sides
    }
    spent = {"rsa": 0.0, "plain": 0.0}
    cpus = {
        "rsa": {},
        "plain": {},
    }  # who -> CPU seconds while the side's chunks were submitted
    ids = {"rsa": [], "plain": []}
    probe = start_probe(args.workdir)
    i = 0
    while chunks["rsa"] or chunks["plain"]:
        order = ("plain", "rsa") if i % 2 == 0 else ("rsa", "plain")
        for side in order:
            if not chunks[side]:
                continue
            specs = [jobspec_for(j, "rsa", rate, datadir) for j in chunks[side].pop(0)]
            c0, t0 = cpu_seconds(), time.monotonic()
            ids[side] += d.submit(specs, submitter)
            spent[side] += time.monotonic() - t0
            for who, cpu in cpu_seconds().items():
                cpus[side][who] = cpus[side].get(who, 0.0) + cpu - c0.get(who, 0.0)
        i += 1
    probe_ms = end_probe(probe)
    submitted, t_submitted = service_stats(d.h), time.monotonic()
    n = len(ids["rsa"])
    print(
        f"submitted {n} RSA jobs in {spent['rsa']:.1f}s, {len(ids['plain'])} plain in "
        f"{spent['plain']:.1f}s",
        flush=True,
    )

    # settle: every RSA job recorded, and the staged-ahead set no longer moving
    deadline = time.monotonic() + 600
    last, steady = None, 0
    while time.monotonic() < deadline:
        d.drain_journal(lambda: False, 1.0)
        st = service_stats(d.h)
        now = (st.get("records"), tuple(sorted(st.get("states", {}).items())))
        steady = steady + 1 if now == last else 0
        last = now
        if st.get("records", 0) >= n and steady >= 3:
            break
    print(f"settled: {last}", flush=True)
    settled, t_settled = service_stats(d.h), time.monotonic()

    # flow: the holding job goes; the queue runs until n/20 RSA jobs are clean
    flux.job.cancel(d.h, blocker[0], "growth: flow")
    want = max(50, n // 20)
    d.watched = set(
        ids["rsa"]
    )  # counted as events come: a count over every id per event was O(N^2)
    d.watched_clean = sum("clean" in d.events.get(j, ()) for j in d.watched)
    flowed = d.drain_journal(lambda: d.watched_clean >= want, 900)
    d.queue("stop")
    after, t_after = service_stats(d.h), time.monotonic()
    lat, reads = after.get("latency_ms", {}), after.get("queue_read_ms", {})
    passes, gcs = after.get("ondeck_pass_ms", {}), after.get("full_gc_ms", {})
    rsa_rate = n / spent["rsa"] if spent["rsa"] else None
    plain_rate = len(ids["plain"]) / spent["plain"] if spent["plain"] else None
    size = {
        "jobs": n,
        "other_jobs": len(ids["plain"]),
        "latency_p50_ms": lat.get("p50"),
        "latency_p99_ms": lat.get("p99"),
        "latency_max_ms": lat.get("max"),
        "actions": lat.get("count"),
        "queue_read_ms_p50": reads.get("p50"),
        "queue_read_ms_p99": reads.get("p99"),
        "queue_reads": reads.get("count"),
        "ondeck_pass_ms_p50": passes.get("p50"),
        "ondeck_pass_ms_p99": passes.get("p99"),
        "full_gcs": gcs.get("count"),
        "full_gc_ms_max": gcs.get("max"),
        "cpu_ms_per_job": (after["cpu_seconds"] - before["cpu_seconds"]) * 1000 / n,
        "cpu_seconds": after["cpu_seconds"] - before["cpu_seconds"],
        # the service's CPU seconds in each phase: submission, settling, flow
        "phase_cpu_seconds": {
            "submit": submitted["cpu_seconds"] - before["cpu_seconds"],
            "settle": settled["cpu_seconds"] - submitted["cpu_seconds"],
            "flow": after["cpu_seconds"] - settled["cpu_seconds"],
        },
        "phase_wall_seconds": {
            "submit": t_submitted - t_before,
            "settle": t_settled - t_submitted,
            "flow": t_after - t_settled,
        },
        "maxrss_kb": after.get("maxrss_kb"),
        "submit_rsa_per_s": rsa_rate,
        "submit_plain_per_s": plain_rate,
        "submit_ratio": rsa_rate / plain_rate if rsa_rate and plain_rate else None,
        "submit_cpu_ms_per_job": {
            side: cpu_ms_per_job(cpus[side], len(ids[side])) for side in cpus
        },
        "restages": after.get("restages"),
        "flowed_rsa_jobs": want,
        "flux_answer_ms_p50": pct(probe_ms, 50),
        "flux_answer_ms_p99": pct(probe_ms, 99),
        "flow_complete": flowed,
        "states": after.get("states"),
    }
    print(json.dumps(size), flush=True)
    try:
        d.h.rpc("rsa.pool-shutdown", {}).get()
    except OSError:
        pass
    with open(os.path.join(args.workdir, "growth.json"), "w") as f:
        json.dump(size, f)
    return 0
