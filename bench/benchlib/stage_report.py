"""bench/stage's figures: each row's ratios (the stager against its peers,
the floors and the device), the table, and the targets each figure is
judged against.
"""

from benchlib import PYPATH

# the peers the stager is compared with, and the floors (bench/floor.c)
FLOORS = ("floor", "floor-tmpfile", "floor-guarded")
PEERS = ["cp -a", "rsync -a", "tar|tar", "fpsync"]

A_BYTES = 2 << 30  # dataset a's one file, which dd also copies


def ratios(report):
    for row in report["results"]:
        t = row["times"]
        s = t.get("stager")
        row["ratios"] = {p: round(t[p] / s, 2) for p in PEERS if p in t and s}
        peers = [t[p] for p in PEERS if p in t]
        if s and peers:
            row["vs_fastest_peer"] = round(min(peers) / s, 2)
        if "stager-tar" in t and s:
            row["tar_vs_copy"] = round(s / t["stager-tar"], 2)
        if "floor" in t and "rsync -a" in t:
            row["floor_vs_rsync"] = round(t["rsync -a"] / t["floor"], 2)
        if "floor" in t and s:
            row["vs_floor"] = round(t["floor"] / s, 2)
        if "floor-guarded" in t and s:
            row["vs_floor_guarded"] = round(t["floor-guarded"] / s, 2)
        if "floor-guarded" in t and "floor" in t:
            row["guarded_vs_floor"] = round(t["floor"] / t["floor-guarded"], 2)
        if "floor-tmpfile" in t and "floor" in t:
            row["tmpfile_vs_floor"] = round(t["floor"] / t["floor-tmpfile"], 2)
        if row["dataset"] == "a" and s and "device" in row:
            rates = {k: round(A_BYTES / 1e6 / v) for k, v in row["device"].items()}
            row["device_MBps"] = rates
            dev = max(rates.values())
            mb = A_BYTES / 1e6 / s
            row["stager_MBps"] = round(mb)
            row["pct_of_device"] = round(100 * mb / dev)


def table(report):
    print(
        f"RSA stager benchmark: {report['cpus']} CPUs, tmpfs: {report['tmpfs']}, "
        f"page cache dropped before each run: {'yes' if report['cache_drop'] else 'NO (not root)'}, "
        f"median of {report['runs']} interleaved run(s), each command followed by sync"
    )
    for row in report["results"]:
        if "device_MBps" in row:
            d = row["device_MBps"]
            kind = "read" if row["direction"] == "in" else "write"
            print(
                f"device {kind} limit (dd 2 GiB, 16 MiB blocks, page cache dropped, "
                f"in the rounds of a {row['direction']}): "
                + ", ".join(f"{k[3:]} {v} MB/s" for k, v in d.items())
                + f"; the faster, {max(d.values())} MB/s, is the limit"
            )
    cols = [
        c
        for c in ["stager", "stager-nosync", "stager-python", "stager-tar"]
        + PEERS
        + list(FLOORS)
        if any(c in r["times"] for r in report["results"])
    ]
    print()
    print(
        f"{'data':4} {'dir':6} "
        + " ".join(f"{c:>10}" for c in cols)
        + "  ratio(peer/stager): cp rsync tar fpsync | fastest"
    )
    for row in report["results"]:
        t = row["times"]
        cells = " ".join(f"{t[c]:>10.2f}" if c in t else f"{'-':>10}" for c in cols)
        r = row.get("ratios", {})
        rs = " ".join(f"{r[p]:.2f}" if p in r else "-" for p in PEERS)
        extra = f" | {row.get('vs_fastest_peer', '-')}"
        if "tar_vs_copy" in row:
            extra += f"; tar mode {row['tar_vs_copy']}x own copy"
        if "pct_of_device" in row:
            extra += f"; {row['stager_MBps']} MB/s = {row['pct_of_device']}% of device"
        if "vs_floor" in row:
            extra += f"; {row['vs_floor']:.2f} of the floor"
        if "vs_floor_guarded" in row:
            extra += f", {row['vs_floor_guarded']:.2f} of floor-guarded"
        print(f"{row['dataset']:4} {row['direction']:6} {cells}  {rs}{extra}")
    print(
        "\ntimes in seconds; dataset a: 1 x 2 GiB, b: 2048 x 1 MiB, c: 100000 x 4 KiB;"
        " in: disk->tmpfs, out: tmpfs->disk, cached: in with the source cached"
        f" (every tool on CPU {report['cached_cpu']})"
    )
    if report["stager_path"] != PYPATH:
        print(f"stager run from {report['stager_path']}")
    _targets(report)


def _targets(report):
    """The issue's targets, each with its figure from this invocation."""
    print("\ntargets:")
    for row in report["results"]:
        name = f"{row['dataset']} {row['direction']}"
        t = row["times"]
        if row["direction"] == "cached" and "cp -a" in row.get("ratios", {}):
            v = row["ratios"]["cp -a"]
            print(
                f"  {name}: {v:.2f}x cp -a with the source cached (>= 1.0) "
                + ("met" if v >= 1.0 else "NOT met")
            )
        elif "vs_fastest_peer" in row:
            v = row["vs_fastest_peer"]
            print(
                f"  {name}: vs fastest peer {v:.2f} (>= 1.0) "
                + ("met" if v >= 1.0 else "NOT met")
            )
        if "pct_of_device" in row:
            v = row["pct_of_device"]
            print(
                f"  {name}: {v}% of the device limit (>= 80%) "
                + ("met" if v >= 80 else "NOT met")
            )
        if "vs_floor" in row:
            v = row["vs_floor"]
            print(
                f"  {name}: {v:.2f} of the floor (bench/floor.c, {t['floor']:.2f} s) "
                "(>= 0.90) " + ("met" if v >= 0.9 else "NOT met")
            )
            if "guarded_vs_floor" in row:
                print(
                    f"    floor-guarded (the stager's guarantees' system calls and its flush, in C) ran "
                    f"{t['floor-guarded']:.2f} s: {row['guarded_vs_floor']:.2f} of the floor; "
                    f"the stager is {row['vs_floor_guarded']:.2f} of it"
                )
            if "tmpfile_vs_floor" in row:
                print(
                    f"    floor-tmpfile (each file O_TMPFILE and linkat) ran {t['floor-tmpfile']:.2f} s: "
                    f"{row['tmpfile_vs_floor']:.2f} of the floor"
                )
        if row["dataset"] == "c" and "rsync -a" in row.get("ratios", {}):
            v = row["ratios"]["rsync -a"]
            print(
                f"  {name}: {v:.2f}x rsync -a (>= 3) "
                + ("met" if v >= 3 else "NOT met")
            )
            if "floor_vs_rsync" in row:
                f = row["floor_vs_rsync"]
                print(
                    f"    a bare per-file copy in C (bench/floor.c) ran {t['floor']:.2f} s: "
                    f"{f:.2f}x rsync -a"
                )
        if row["dataset"] == "c" and "tar_vs_copy" in row:
            v = row["tar_vs_copy"]
            print(
                f"  {name}: tar mode {v:.2f}x the stager's own copy (>= 5) "
                + ("met" if v >= 5 else "NOT met")
            )
            if "rsync -a" in t:
                print(
                    f"    with the copy at 3x rsync -a, 5x asks the tar mode for "
                    f"{t['rsync -a'] / 15:.2f} s (rsync -a / 15); it ran "
                    f"{t['stager-tar']:.2f} s"
                )
