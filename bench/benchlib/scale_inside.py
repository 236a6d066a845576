"""bench/scale inside a test instance (`flux python bench/scale --inner
MODE`): a driver that submits jobs and follows their events through the
job-manager journal, the non-RSA throughput with the plugin and without,
and one mode's run of the workload, its figures written for the outside.
"""

import json
import os
import statistics
import subprocess
import sys
import time

from benchlib.figures import GiB, pct
from benchlib.scale_setup import parse_rate

LATE = 0.5  # s from alloc to start: an RSA job that waited for its inputs
INGEST_IDLE = 6.0  # s: job-ingest stops idle validators after 5 s (see same_start)


class Driver:
    """Submits jobs and follows their events through the journal."""

    def __init__(self, args):
        import flux
        from flux.job import JournalConsumer

        self.args = args
        self.h = flux.Flux()
        self.events = {}  # jobid -> {name: timestamp} (first of each)
        self.log = {}  # jobid -> [(name, timestamp, context)]
        self.journal = JournalConsumer(self.h, full=False)
        self.journal.start()
        self.watched = set()  # jobs whose clean events are counted (watched_clean)
        self.watched_clean = 0

    def drain_journal(self, until, timeout):
        """Read journal events until until() holds; give up after timeout s."""
        deadline = time.monotonic() + timeout
        while not until():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                ev = self.journal.poll(timeout=min(left, 1.0))
            except TimeoutError:
                continue
            if ev is None:
                continue
            seen = self.events.setdefault(int(ev.jobid), {})
            if (
                ev.name == "clean"
                and "clean" not in seen
                and int(ev.jobid) in self.watched
            ):
                self.watched_clean += 1
            seen.setdefault(ev.name, ev.timestamp)
            self.log.setdefault(int(ev.jobid), []).append(
                (ev.name, ev.timestamp, ev.context)
            )
        return True

    def clean(self, ids):
        return all("clean" in self.events.get(j, ()) for j in ids)

    def submit(self, jobspecs, h=None):
        """Submit and return the ids.  ``h``: another handle than the
        journal's (the journal's answers wait on the journal's handle until
        polled, and every wait on a future of that handle walks them all)."""
        import flux.job

        futures = [flux.job.submit_async(h or self.h, js) for js in jobspecs]
        return [int(f.get_id()) for f in futures]

    def queue(self, action, name="batch"):
        subprocess.run(["flux", "queue", action, "--quiet", name], check=True)

    def throughput(self, n):
        from flux.job import JobspecV1

        specs = []
        for _ in range(n):
            js = JobspecV1.from_command(["true"], num_nodes=1, exclusive=True)
            js.setattr("system.exec.test.run_duration", "0.001s")  # 0 means for ever
            js.cwd = "/"
            specs.append(js)
        t0 = time.time()
        ids = self.submit(specs)
        done = self.drain_journal(lambda: self.clean(ids), 600)
        t1 = max(self.events[j].get("clean", 0) for j in ids)
        return {
            "jobs": n,
            "seconds": t1 - t0,
            "jobs_per_s": n / (t1 - t0),
            "complete": done,
        }


def plugin(on, args, h):
    """Load or unload the whole RSA in this instance: jobtap plugin and module."""
    if on:
        so = os.path.join(args.builddir, "src", "modules", "jobtap", ".libs", "rsa.so")
        subprocess.run(["flux", "jobtap", "load", so], check=True)
        subprocess.run(["flux", "module", "load", "rsa"], check=True)
        wait_pool(h)
    else:
        subprocess.run(["flux", "module", "remove", "rsa"], check=True)
        subprocess.run(["flux", "jobtap", "remove", "rsa.so"], check=True)


def instance_cpu():
    """CPU seconds used so far by the instance's processes: broker rank 0
    and its descendants (the rsa module, the pool, other brokers), this
    driver excepted."""
    root = int(
        subprocess.run(
            ["flux", "getattr", "broker.pid"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    )
    parent, cpu = {}, {}
    tick = os.sysconf("SC_CLK_TCK")
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parent[int(pid)] = int(fields[1])
        cpu[int(pid)] = (int(fields[11]) + int(fields[12])) / tick

    def under_root(pid):
        while pid > 1:
            if pid == root:
                return True
            pid = parent.get(pid, 0)
        return False

    return sum(c for pid, c in cpu.items() if pid != os.getpid() and under_root(pid))


def throughput_ab(d, args):
    """Non-RSA throughput with the plugin loaded and without it, in this same
    instance, in ABBA order (with, without, without, with, ...) so that a
    drift over the instance's life favours neither side; in the steady
    state (a burst after each toggle is not measured) and from the same
    start (same_start)."""
    ab = {"with": [], "without": [], "cpu_per_1000": {"with": [], "without": []}}
    loaded = True
    for i in range(max(1, args.throughput_runs)):
        for side in ("with", "without") if i % 2 == 0 else ("without", "with"):
            if loaded != (side == "with"):
                loaded = side == "with"
                plugin(loaded, args, d.h)
                same_start()
                d.throughput(
                    args.throughput_jobs
                )  # not measured: the burst after a toggle
            same_start()
            cpu0 = instance_cpu()
            ab[side].append(d.throughput(args.throughput_jobs)["jobs_per_s"])
            ab["cpu_per_1000"][side].append(
                (instance_cpu() - cpu0) * 1000 / args.throughput_jobs
            )
    if not loaded:
        plugin(True, args, d.h)
    return ab


def same_start():
    """Every measured run starts from the same instance: no inactive job
    left (purged) and job-ingest's validator processes stopped (they stop
    after 5 s without a submission; a burst that finds them stopped pays
    about 1 s of CPU to start them again)."""
    subprocess.run(
        ["flux", "job", "purge", "--force", "--num-limit=0"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    time.sleep(INGEST_IDLE)


def jobspec_for(job, mode, rate, datadir):
    from flux.job import JobspecV1

    run = job["run"]
    stage_s = job["size"] / rate
    if mode == "nostage" and job["kind"] == "data":
        run += 2 * stage_s  # the job reads and writes persistent storage itself
    js = JobspecV1.from_command(
        ["true"], num_tasks=job["nnodes"], num_nodes=job["nnodes"], exclusive=True
    )
    js.setattr("system.exec.test.run_duration", f"{run:.3f}s")
    js.cwd = "/"
    if mode == "rsa" and job["kind"] == "data":
        js.setattr(
            "system.rsa",
            {
                "data_in": os.path.join(datadir, "in"),
                "data_out": os.path.join(datadir, "out"),
                "capacity": f"{job['size'] // GiB}G",
            },
        )
    return js


def blocker_spec(args):
    from flux.job import JobspecV1

    n = args.nodes
    js = JobspecV1.from_command(["true"], num_tasks=n, num_nodes=n, exclusive=True)
    js.setattr("system.exec.test.run_duration", "3600s")  # cancelled after the warm-up
    js.cwd = "/"
    return js


def wait_pool(h, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if h.rpc("rsa.pool", {}).get().get("ready"):
                return True
        except OSError:
            pass
        time.sleep(0.5)
    return False


def start(args):
    """What a run inside the instance starts from: the stage rate, the
    workload the outside wrote, the data directory the RSA jobs name (its
    input simulated) and a Driver."""
    rate = parse_rate(args.rate)
    with open(os.path.join(args.workdir, "workload.json")) as f:
        jobs = json.load(f)
    datadir = os.path.join(args.workdir, "data")
    os.makedirs(os.path.join(datadir, "in"), exist_ok=True)
    os.makedirs(os.path.join(datadir, "out"), exist_ok=True)
    with open(os.path.join(datadir, "in", "input"), "w") as f:
        f.write("simulated\n")
    d = Driver(args)
    return rate, jobs, datadir, d


def inner(args):
    from flux.job import JobID

    mode = args.inner
    rate, jobs, datadir, d = start(args)
    result = {"mode": mode}
    if mode == "rsa" and not wait_pool(d.h):
        print("bench/scale: the RSA pool did not come up in 120 s", file=sys.stderr)
    if mode == "rsa":
        result["throughput_ab"] = throughput_ab(d, args)
        print(
            f"throughput with/without the plugin, interleaved: {result['throughput_ab']}",
            flush=True,
        )
    if mode in ("rsa", "nostage"):
        # for reference: the same runs in separate instances (JSON only)
        runs = [
            d.throughput(args.throughput_jobs)
            for _ in range(min(3, max(1, args.throughput_runs)))
        ]
        for run in runs:
            print(f"throughput: {run}", flush=True)
        result["throughput"] = sorted(runs, key=lambda r: r["jobs_per_s"])[
            len(runs) // 2
        ]
        result["throughput"]["runs_jobs_per_s"] = [r["jobs_per_s"] for r in runs]

    specs = [jobspec_for(j, mode, rate, datadir) for j in jobs]
    # the machine is busy when the workload arrives: a job on every compute
    # node, cancelled --warmup s after the whole workload is queued (so the
    # warm-up does not depend on how fast each mode takes submissions)
    blocker = d.submit([blocker_spec(args)])
    d.drain_journal(lambda: "start" in d.events.get(blocker[0], {}), 120)
    d.queue("stop")  # the prolog's marker files are written before any job may start
    t_submit = time.time()
    ids = d.submit(specs)
    t_submitted = time.time()
    if mode == "perilog":
        marks = os.path.join(args.workdir, "stage-seconds")
        os.makedirs(marks, exist_ok=True)
        for jobid, job in zip(ids, jobs):
            if job["kind"] == "data":
                # the prolog sees FLUX_JOB_ID in f58
                with open(os.path.join(marks, JobID(jobid).f58), "w") as f:
                    f.write(f"{job['size'] / rate:.3f}\n")
    d.queue("start")
    print(f"submitted {len(ids)} jobs in {t_submitted - t_submit:.1f}s", flush=True)
    d.drain_journal(lambda: False, args.warmup)
    t_start = time.time()
    import flux.job

    flux.job.cancel(d.h, blocker[0], "warm-up over")
    complete = d.drain_journal(lambda: d.clean(ids), 1800)
    t_end = max(
        d.events[j].get("clean", 0) for j in ids if "clean" in d.events.get(j, {})
    )
    print(f"all clean: {complete}, makespan {t_end - t_start:.1f}s", flush=True)

    # "normal" hold: what a non-RSA job of the same run waits from alloc to
    # start and from finish to release (job-exec under this load); a data
    # job's idle staging time is what it waits beyond that
    plain = [d.events.get(j, {}) for j, job in zip(ids, jobs) if job["kind"] == "plain"]
    plain = [
        e for e in plain if all(k in e for k in ("alloc", "start", "finish", "free"))
    ]
    base_before = (
        statistics.median([e["start"] - e["alloc"] for e in plain]) if plain else 0.0
    )
    base_after = (
        statistics.median([e["free"] - e["finish"] for e in plain]) if plain else 0.0
    )
    idle = held_out = modeled = raw = data_wait = 0.0
    late = 0
    waits = []
    for jobid, job in zip(ids, jobs):
        if job["kind"] != "data":
            continue
        ev = d.events.get(jobid, {})
        if not all(k in ev for k in ("alloc", "start", "finish", "free")):
            continue
        before = ev["start"] - ev["alloc"]
        after = ev["free"] - ev["finish"]
        waits.append(before)
        n = job["nnodes"]
        raw += n * (before + after)
        idle += n * (max(0.0, before - base_before) + max(0.0, after - base_after))
        held_out += n * max(0.0, after - base_after)
        if mode == "nostage":
            modeled += n * 2 * job["size"] / rate
            data_wait += (
                n * 2 * job["size"] / rate
            )  # the job reads and writes storage itself
        elif mode == "perilog":
            data_wait += n * (
                ev.get("prolog-finish", 0)
                - ev.get("prolog-start", 0)
                + ev.get("epilog-finish", 0)
                - ev.get("epilog-start", 0)
            )
        elif "rsa-ready" in ev:
            # allocated and held until its inputs were there (rsa-ready is
            # posted when the job may start: at once when it was staged)
            data_wait += n * max(0.0, ev["rsa-ready"] - ev["alloc"])
        if mode == "rsa" and before - base_before > LATE:
            late += 1
    figures = {
        "makespan_s": t_end - t_start,
        "submit_s": t_submitted - t_submit,
        # compute node-seconds waiting for data: held in a prolog or
        # epilog, held for rsa-ready, or (no staging) reading and
        # writing persistent storage in the job's own time
        "idle_node_s": data_wait,
        # all alloc->start and finish->free time beyond a plain job's
        # median (job-exec's own latency included)
        "start_overhead_node_s": idle + modeled,
        "held_node_s": idle,
        "held_raw_node_s": raw,
        "normal_alloc_to_start_ms": base_before * 1000,
        "normal_finish_to_release_ms": base_after * 1000,
        "modeled_io_node_s": modeled,
        "held_out_node_s": held_out,
        "late": late,
        "complete": complete,
        "alloc_to_start_ms": {
            "p50": (pct(waits, 50) or 0) * 1000,
            "p99": (pct(waits, 99) or 0) * 1000,
        },
    }
    result["figures"] = figures
    if mode == "rsa":
        # outputs home: every record final
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            stats = d.h.rpc("rsa.stats", {}).get()
            states = stats.get("states", {})
            if set(states) <= {"DESTROYED", "INELIGIBLE", "INITIAL"}:
                break
            time.sleep(0.5)
        figures["outputs_home_s"] = time.time() - t_start
        result["stats"] = d.h.rpc("rsa.stats", {}).get()
        try:
            result["pool"] = d.h.rpc("rsa.pool", {}).get()
        except OSError as exc:
            result["pool"] = {"error": str(exc)}
        # stop the pool in order before the instance goes
        try:
            d.h.rpc("rsa.pool-shutdown", {}).get()
        except OSError:
            pass
    print(json.dumps(result), flush=True)
    with open(os.path.join(args.workdir, f"{mode}-events.json"), "w") as f:
        json.dump(
            {
                "ids": ids,
                "events": {str(k): v for k, v in d.events.items()},
                "log": {str(k): v for k, v in d.log.items()},
            },
            f,
        )
    with open(os.path.join(args.workdir, f"{mode}.json"), "w") as f:
        json.dump(result, f)
    return 0
