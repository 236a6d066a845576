"""bench/thesis's rows: each table's jobs, run without and with flux-rsa
in alternating order, their figures summarized; and the task of a
writing job (run as `bench/thesis --task write` inside the job).
"""

import json
import os
import subprocess
import time

from benchlib import BENCH, PY
from benchlib.figures import MiB, human, med, spread, tree_size
from benchlib.instance import mount_seconds, phase_seconds
from benchlib.system import say, write_data


def task_write(args):
    """One task of a writing job: after a barrier of all tasks, write
    --files files of --bytes/--files into DIR; print when it started and
    ended (wall clock, so tasks on different nodes compare)."""
    directory = os.path.expandvars(args.dir)
    rank = int(os.environ.get("FLUX_TASK_RANK", "0"))
    block = os.urandom(MiB)
    per_file = args.bytes // args.files
    if args.barrier:
        subprocess.run(
            [args.barrier, "pmi", "barrier"], check=True, stdout=subprocess.DEVNULL
        )
    t0 = time.time()
    for k in range(args.files):
        write_data(
            os.path.join(directory, f"{args.prefix}.{rank}.{k}"), per_file, block
        )
    t1 = time.time()
    print(
        json.dumps(
            {
                "rank": rank,
                "t0": t0,
                "t1": t1,
                "dir": directory,
                "bytes": per_file * args.files,
                "files": args.files,
            }
        ),
        flush=True,
    )


def task_window(stdout):
    """(seconds from the first task's start to the last one's end, bytes,
    files, directories the tasks wrote) from their JSON lines."""
    lines = [json.loads(s) for s in stdout.splitlines() if s.startswith("{")]
    if not lines:
        return None
    return {
        "io_s": max(x["t1"] for x in lines) - min(x["t0"] for x in lines),
        "bytes": sum(x["bytes"] for x in lines),
        "files": sum(x["files"] for x in lines),
        "tasks": len(lines),
        "dirs": sorted({x["dir"] for x in lines}),
    }


class Bench:
    def __init__(self, args, inst, slow):
        self.args, self.inst, self.slow = args, inst, slow
        self.seq = 0

    def fresh(self, label):
        """A new empty directory on the slow FS (name relative to it)."""
        self.seq += 1
        name = f"{label}.{self.seq}"
        os.makedirs(self.slow.path(name))
        return name

    def capacity(self, nbytes, copies=1):
        """rsa.capacity for NBYTES of data: 1/8 more, in whole granules;
        COPIES times that (rsa.fs=per-node copies data_in into each node's
        image, and shares the reservation evenly between them)."""
        g = self.args.granule
        return str(copies * (-(-(nbytes + nbytes // 8 + MiB) // g) * g) // MiB) + "M"

    def fs(self, nodes, method="copy"):
        """rsa.fs for an RSA job on NODES nodes staged with METHOD (None:
        left unset, the job's default: an image on one node, the shared
        file system on several).  --fs per-node gives each node of a job on
        several an image of its own, except with rsa.stage_out=tar, which
        per-node refuses (such jobs stay shared); --fs shared gives every
        RSA job the shared file system."""
        if self.args.fs == "shared":
            return "shared"
        return "per-node" if nodes > 1 and method == "copy" else None

    def rsa_attrs(self, nodes, method, **attrs):
        """The job's rsa.* attributes: ATTRS, with rsa.on_late=wait and its
        rsa.fs (``fs``)."""
        fs = self.fs(nodes, method)
        return {**attrs, "on_late": "wait", **({"fs": fs} if fs else {})}

    def seen_fs(self, res, rec):
        """What file system the RSA job had, from its record (``image``):
        "image" (one per node on several: "image xN"), else "shared"."""
        res["fs_asked"] = ((rec or {}).get("request") or {}).get("fs")
        if not (rec or {}).get("image"):
            res["fs"] = "shared"
        else:
            nodes = (rec or {}).get("nnodes") or 1
            res["fs"] = "image" if nodes == 1 else f"image x{nodes}"

    def attach(self, jobid):
        r = self.inst.flux("job", "attach", jobid, check=False)
        return r.returncode, r.stdout, r.stderr

    def write_job(self, label, nodes, tpn, nbytes, files, rsa=None):
        """A job whose tasks write NBYTES in all (FILES each) without or
        with the RSA (rsa = stage_out method).  Returns the run's figures."""
        out = self.fresh(label)
        ntasks = nodes * tpn
        task = [
            PY,
            os.path.join(BENCH, "thesis"),
            "--task",
            "write",
            "--bytes",
            str(nbytes // ntasks),
            "--files",
            str(files),
            "--prefix",
            "out",
            "--barrier",
            self.inst.flux_cmd,
        ]
        attrs = None
        if rsa:
            attrs = self.rsa_attrs(
                nodes, rsa, data_out=self.slow.path(out), capacity=self.capacity(nbytes)
            )
            if rsa != "copy":
                attrs["stage_out"] = rsa
            task += ["--dir", "$RSA_DATA_OUT"]
        else:
            task += ["--dir", self.slow.path(out)]
        jobid = self.inst.submit(task, nodes, tpn, attrs, name=label)
        rc, stdout, stderr = self.attach(jobid)
        res = {"jobid": jobid, "rc": rc, "mode": rsa or "direct"}
        win = task_window(stdout)
        if rc != 0 or win is None:
            res["error"] = f"job {jobid} exit {rc}: {stderr.strip()[-500:]}"
            return res, out
        res.update(win)
        ev = self.inst.events(jobid)
        res["run_s"] = ev.get("finish", 0) - ev.get("start", 0)
        if rsa:
            ok, msg = self.inst.wait_staged(jobid)
            rec = self.inst.record(jobid)
            res["staged"] = ok
            res["stage_s"] = phase_seconds(rec, "STAGING_OUT")
            # the job's end on its compute nodes (after they are given back)
            res["detach_s"] = mount_seconds(rec, "detach")
            self.seen_fs(res, rec)
            env = (rec or {}).get("env") or {}
            res["on_ramdisk"] = bool(env.get("out_on_ramdisk"))
            if not ok:
                res["error"] = f"stage-out of {jobid}: {msg}"
            if not res["on_ramdisk"]:
                say(
                    f"{label}: job {jobid} had no RAM disk: it wrote {win['dirs']} directly"
                )
        res["home"] = tree_size(self.slow.path(out))
        return res, out

    def ior_job(self, label, phase, nodes, tpn, nbytes, directory, rsa):
        """IOR write (-w -k) into a fresh directory, or read (-r -E) of
        DIRECTORY (slow-FS relative), without or with the RSA."""
        ntasks = nodes * tpn
        block = max(MiB, nbytes // ntasks // MiB * MiB)
        attrs = None
        if phase == "write":
            directory = self.fresh(label)
            flags = "-w -k"
            where = "$RSA_DATA_OUT" if rsa else self.slow.path(directory)
            if rsa:
                attrs = self.rsa_attrs(
                    nodes,
                    "copy",
                    data_out=self.slow.path(directory),
                    capacity=self.capacity(nbytes),
                )
        else:
            flags = "-r -E"
            where = "$RSA_DATA_IN" if rsa else self.slow.path(directory)
            self.slow.evict(directory)
            if rsa:
                copies = nodes if self.fs(nodes) == "per-node" else 1
                attrs = self.rsa_attrs(
                    nodes,
                    "copy",
                    data_in=self.slow.path(directory),
                    capacity=self.capacity(nbytes, copies),
                )
        script = (
            f"exec {self.args.ior} -a POSIX -F -g {flags} -t 1m -b {block} "
            f'-o "{where}/ior" -O summaryFormat=JSON'
        )
        jobid = self.inst.submit(["sh", "-c", script], nodes, tpn, attrs, name=label)
        rc, stdout, stderr = self.attach(jobid)
        res = {
            "jobid": jobid,
            "rc": rc,
            "mode": "rsa" if rsa else "direct",
            "bytes": block * ntasks,
            "files": ntasks,
            "tasks": ntasks,
        }
        try:
            result = json.loads(stdout)["tests"][0]["Results"][0]
        except (ValueError, KeyError, IndexError):
            res[
                "error"
            ] = f"IOR job {jobid} exit {rc}: {(stdout + stderr).strip()[-800:]}"
            return res, directory
        res.update(
            {
                "io_s": result["totalTime"],
                "open_s": result["openTime"],
                "wrrd_s": result["wrRdTime"],
                "close_s": result["closeTime"],
                "MiBps": result["bwMiB"],
            }
        )
        ev = self.inst.events(jobid)
        res["run_s"] = ev.get("finish", 0) - ev.get("start", 0)
        if rsa:
            rec = None
            if phase == "write":
                ok, msg = self.inst.wait_staged(jobid)
                res["staged"] = ok
                if not ok:
                    res["error"] = f"stage-out of {jobid}: {msg}"
                rec = self.inst.record(jobid)
                res["stage_s"] = phase_seconds(rec, "STAGING_OUT")
                res["on_ramdisk"] = bool(
                    ((rec or {}).get("env") or {}).get("out_on_ramdisk")
                )
            else:
                rec = self.inst.record(jobid)
                res["stage_s"] = phase_seconds(rec, "STAGING_IN")
                res["on_ramdisk"] = bool(
                    ((rec or {}).get("env") or {}).get("staged_in")
                )
            self.seen_fs(res, rec)
            if not res["on_ramdisk"]:
                say(
                    f"{label}: IOR job {jobid} ran on the slow FS itself (no RAM disk / "
                    "inputs not staged)"
                )
        return res, directory

    # one function per table; each returns a list of row dicts

    def row_51(self):
        a = self.args
        return [
            self.paired(
                "5.1",
                f"1 task writes one {human(a.size_51)} file",
                lambda rsa: self.write_job("t51", 1, 1, a.size_51, 1, rsa),
                ("copy",),
            )
        ]

    def row_52(self):
        a = self.args
        n = 2 * a.tasks_per_node
        what = f"-N2, {n} tasks, 1 file each ({human(a.size_52 // n)}), 1 dir"
        return [
            self.paired(
                "5.2",
                what,
                lambda rsa: self.write_job(
                    "t52", 2, a.tasks_per_node, a.size_52, 1, rsa
                ),
                ("copy", "tar"),
            )
        ]

    def row_52m(self):
        a = self.args
        n = 2 * a.tasks_per_node
        files = n * a.files_52m
        what = (
            f"-N2, {n} tasks x {a.files_52m} files ({files}, "
            f"{human(a.size_52 // files)} each), 1 dir"
        )
        return [
            self.paired(
                "5.2m",
                what,
                lambda rsa: self.write_job(
                    "t52m", 2, a.tasks_per_node, a.size_52, a.files_52m, rsa
                ),
                ("copy", "tar"),
            )
        ]

    def row_54(self):
        a = self.args
        n = 2 * a.tasks_per_node
        if not os.access(a.ior, os.X_OK):
            say(
                f"SKIPPING table 5.4: {a.ior} not found (build hpc/ior with Debian's mpich: "
                "see doc/performance.md)"
            )
            return [{"table": "5.4", "what": "IOR", "skipped": f"{a.ior} not found"}]
        what = f"IOR -F -N2, {n} tasks, {human(a.size_54 // n)} each"
        runs = {"direct": {"write": [], "read": []}, "rsa": {"write": [], "read": []}}
        for i in range(a.runs):
            for mode in ("direct", "rsa") if i % 2 == 0 else ("rsa", "direct"):
                rsa = mode == "rsa"
                w, d = self.ior_job(
                    "t54w", "write", 2, a.tasks_per_node, a.size_54, None, rsa
                )
                self.note(f"5.4 write {mode}", w)
                r, _ = self.ior_job(
                    "t54r", "read", 2, a.tasks_per_node, a.size_54, d, rsa
                )
                self.note(f"5.4 read {mode}", r)
                runs[mode]["write"].append(w)
                runs[mode]["read"].append(r)
                self.slow.remove(d)
        return [
            summarize(
                "5.4",
                f"{what}: write",
                runs["direct"]["write"],
                {"copy": runs["rsa"]["write"]},
                "out",
            ),
            summarize(
                "5.4",
                f"{what}: read",
                runs["direct"]["read"],
                {"copy": runs["rsa"]["read"]},
                "in",
            ),
        ]

    def paired(self, table, what, job, methods):
        """Runs JOB without and with the RSA (each stage-out method), the
        order alternating from run to run."""
        direct, rsa = [], {m: [] for m in methods}
        for i in range(self.args.runs):
            order = [None, *methods] if i % 2 == 0 else [*methods, None]
            for method in order:
                res, out = job(method)
                self.note(f"{table} {method or 'direct'}", res)
                (rsa[method] if method else direct).append(res)
                self.slow.remove(out)
        return summarize(table, what, direct, rsa, "out")

    def note(self, label, res):
        brief = {
            k: (round(v, 3) if isinstance(v, float) else v)
            for k, v in res.items()
            if k
            in (
                "jobid",
                "io_s",
                "open_s",
                "run_s",
                "stage_s",
                "detach_s",
                "on_ramdisk",
                "fs",
                "error",
            )
        }
        say(f"{label}: {json.dumps(brief, ensure_ascii=False)}")


def summarize(table, what, direct, rsa, direction):
    row = {
        "table": table,
        "what": what,
        "direction": direction,
        "direct": {
            "io_s": med(r.get("io_s") for r in direct),
            "io_range": spread(r.get("io_s") for r in direct),
            "open_s": med(r.get("open_s") for r in direct),
            "runs": direct,
        },
        "rsa": {},
    }
    for method, runs in rsa.items():
        row["rsa"][method] = {
            "io_s": med(r.get("io_s") for r in runs),
            "io_range": spread(r.get("io_s") for r in runs),
            "open_s": med(r.get("open_s") for r in runs),
            "stage_s": med(r.get("stage_s") for r in runs),
            "stage_range": spread(r.get("stage_s") for r in runs),
            "detach_max": max(
                (r["detach_s"] for r in runs if r.get("detach_s")), default=None
            ),
            "fs": ",".join(sorted({r["fs"] for r in runs if r.get("fs")})) or None,
            "runs": runs,
        }
        d, w = row["direct"]["io_s"], row["rsa"][method]["io_s"]
        row["rsa"][method]["ratio"] = d / w if d and w else None
    row["errors"] = [
        r["error"] for r in direct + sum(rsa.values(), []) if r.get("error")
    ]
    return row
