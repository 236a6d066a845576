"""How many holders and stages per second a simulated pool sustains.

``python3 -m flux_rsa.pool.bench [--holders 200] [--stages 400] ...``

Starts a Flux test instance (``flux start --test-size``: one compute node
and ``--rsa-nodes`` RSA nodes), launches the pool in simulation mode
(``simulate_rate``: holders and stages are test-execution jobs, Fluxion
still allocates every granule and core) and stands in for the rsa service
(topic ``rsabench.pool-event``).  Then, each phase timed from the first
request to the last notification:

1. ``hold`` N holders at once            -> every ``ramdisk-built``
2. ``stage`` M stages over them at once  -> every ``stage-end`` (each lasts
   ``--stage-seconds``, i.e. size = rate x seconds)
3. ``cancel`` every holder               -> every ``holder-end``

and prints the rates and the per-request latency (median, 95th percentile).
A benchmark, not a test: it asserts nothing but that everything ended.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

GiB = 2**30


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="python3 -m flux_rsa.pool.bench",
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--flux", default=shutil.which("flux") or "/opt/flux/bin/flux")
    p.add_argument("--rsa-nodes", type=int, default=2)
    p.add_argument("--holders", type=int, default=200)
    p.add_argument("--stages", type=int, default=400)
    p.add_argument(
        "--holder-gib", type=int, default=4, help="capacity per holder (GiB)"
    )
    p.add_argument(
        "--node-gib", type=int, default=1024, help="RAM-disk budget per node (GiB)"
    )
    p.add_argument(
        "--pool-cores", type=int, default=512, help="virtual cores per RSA node"
    )
    p.add_argument("--rate", type=int, default=GiB, help="simulate_rate, bytes/s")
    p.add_argument("--stage-seconds", type=float, default=0.1)
    return p.parse_args(argv)


class Bench:
    TOPIC = "rsabench.pool-event"

    def __init__(self, args):
        import flux
        import flux.constants

        self.args = args
        self.workdir = tempfile.mkdtemp(prefix="rsa-pool-bench-")
        hosts = f"node0,rsa[0-{args.rsa_nodes - 1}]"
        conf = os.path.join(self.workdir, "conf")
        os.makedirs(conf)
        with open(os.path.join(conf, "resource.toml"), "w") as f:
            f.write(
                f'[resource]\nnoverify = true\n\n[[resource.config]]\nhosts = "{hosts}"\n'
                f'cores = "0-1"\n\n[[resource.config]]\nhosts = "rsa[0-{args.rsa_nodes - 1}]"\n'
                'properties = ["rsa"]\n'
            )
        urifile = os.path.join(self.workdir, "uri")
        env = dict(
            os.environ, PYTHONPATH=":".join(sys.path[:1] + [p for p in sys.path if p])
        )
        self.proc = subprocess.Popen(
            [
                args.flux,
                "start",
                f"--test-size={args.rsa_nodes + 1}",
                f"--test-hosts={hosts}",
                f"--config-path={conf}",
                "sh",
                "-c",
                f'echo "$FLUX_URI" >{urifile}.tmp && mv {urifile}.tmp {urifile} && exec cat >/dev/null',
            ],
            stdin=subprocess.PIPE,
            env=env,
        )
        deadline = time.monotonic() + 60
        while not os.path.exists(urifile):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("flux start failed")
            time.sleep(0.05)
        self.h = flux.Flux(open(urifile).read().strip())
        self.h.service_register("rsabench").get()
        self.w = self.h.msg_watcher_create(
            self._take, flux.constants.FLUX_MSGTYPE_REQUEST, self.TOPIC
        )
        self.w.start()
        self.seen = {}  # (kind, key) -> time
        self.until = None

    def _take(self, h, watcher, msg, arg):
        p = msg.payload
        h.respond(msg, {})
        key = (p.get("jobid"), p.get("gen", p.get("seq")))
        self.seen.setdefault((p["kind"], key), time.monotonic())
        if self.until is not None and self.until():
            h.reactor_stop()

    def wait(self, pred, timeout):
        self.until = pred
        timer = self.h.timer_watcher_create(timeout, lambda h, *a: h.reactor_stop())
        timer.start()
        try:
            if not pred():
                self.h.reactor_run()
        finally:
            timer.stop()
            self.until = None
        if not pred():
            raise RuntimeError(f"not done within {timeout}s")

    def call(self, _method, **payload):
        return self.h.rpc(f"rsa-pool.{_method}", payload, nodeid=self.rank)

    def phase(self, name, requests, kind, timeout=600):
        """Send every request (method, payload, key) at once; wait for the
        ``kind`` notification of each; return (rate, latencies)."""
        sent = {}
        t0 = time.monotonic()
        futures = []
        for method, payload, key in requests:
            sent[key] = time.monotonic()
            futures.append(self.call(method, **payload))
        for f in futures:
            f.get()
        self.wait(lambda: all((kind, k) in self.seen for k in sent), timeout)
        took = max(self.seen[(kind, k)] for k in sent) - t0
        lat = sorted(self.seen[(kind, k)] - t for k, t in sent.items())
        rate = len(sent) / took
        p95 = lat[int(0.95 * (len(lat) - 1))]
        print(
            f"{name:<34} {len(sent):>5} in {took:6.2f}s = {rate:7.1f}/s   "
            f"latency median {statistics.median(lat):.3f}s p95 {p95:.3f}s",
            flush=True,
        )
        return rate

    def run(self):
        from flux_rsa.core.config import Policy
        from flux_rsa.pool import launch

        a = self.args
        policy = Policy(
            node_capacity=a.node_gib * GiB,
            granule=GiB,
            pool_cores=a.pool_cores,
            ramdisk_root=os.path.join(self.workdir, "ramdisks"),
            simulate_rate=a.rate,
        )
        env = dict(
            os.environ, PATH=f"{os.environ.get('PATH', '')}:{os.path.dirname(a.flux)}"
        )
        t0 = time.monotonic()
        jobid = launch.launch(self.h, policy, notify_topic=self.TOPIC, env=env)
        self.wait(lambda: any(k[0] == "pool-ready" for k in self.seen), 120)
        self.rank = launch.ready_info(self.h)["rank"]
        print(
            f"pool of {a.rsa_nodes} simulated RSA nodes ({a.node_gib} GiB in 1 GiB granules, "
            f"{a.pool_cores} cores each) ready in {time.monotonic() - t0:.2f}s",
            flush=True,
        )
        holders = [(j, 1) for j in range(1, a.holders + 1)]
        self.phase(
            "hold -> ramdisk-built",
            [
                (
                    "hold",
                    {"jobid": j, "gen": g, "need": a.holder_gib * GiB, "userid": 0},
                    (j, g),
                )
                for j, g in holders
            ],
            "ramdisk-built",
        )
        nodes = {h["jobid"]: h["nodes"] for h in self.call("list").get()["holders"]}
        size = int(a.rate * a.stage_seconds)
        stages = [(holders[i % len(holders)][0], i + 1) for i in range(a.stages)]
        self.phase(
            f"stage ({a.stage_seconds}s each) -> stage-end",
            [
                (
                    "stage",
                    {
                        "jobid": j,
                        "seq": s,
                        "direction": "in",
                        "src": "/sim",
                        "dst": "/sim",
                        "method": None,
                        "userid": 0,
                        "verify": "size",
                        "nodes": nodes[j],
                        "size": size,
                    },
                    (j, s),
                )
                for j, s in stages
            ],
            "stage-end",
        )
        self.phase(
            "cancel -> holder-end",
            [("cancel", {"jobid": j, "gen": g}, (j, g)) for j, g in holders],
            "holder-end",
        )
        t0 = time.monotonic()
        launch.shutdown_async(self.h, jobid).get_info()
        print(f"pool shutdown {time.monotonic() - t0:.2f}s", flush=True)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=60)
        shutil.rmtree(self.workdir, ignore_errors=True)


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    bench = Bench(args)
    try:
        bench.run()
    finally:
        bench.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
