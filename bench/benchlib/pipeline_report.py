"""bench/pipeline's report: the file system's figures, then per phase a
column per way, the per-step lines, the steps handed off and the ratios.
"""

from benchlib.figures import GiB, MiB
from benchlib.pipeline_chain import TITLES, WAYS


def size(nbytes):
    """1.00 GiB, 947 MiB: as the report prints bytes."""
    if nbytes >= GiB:
        return f"{nbytes / GiB:.2f} GiB"
    return f"{nbytes / MiB:.0f} MiB"


def span(times):
    """Seconds between a (begin, end) pair, or "-"."""
    return f"{times[1] - times[0]:.1f}" if times[0] and times[1] else "-"


def ratio(a, b):
    return f"{a / b:.2f}x" if a is not None and b else "-"


ROWS = [
    ("end to end, s", lambda r: f"{r['end_to_end_s']:.1f}"),
    ("compute node-s waiting", lambda r: f"{r['waiting_node_s']:.1f}"),
    ("  held before start (RAM disk, stage-in)", lambda r: f"{r['before_node_s']:.1f}"),
    ("  the job's own reads and writes", lambda r: f"{r['io_node_s']:.1f}"),
    ("  other (launch, end)", lambda r: f"{r['other_node_s']:.1f}"),
    ("persistent FS read", lambda r: size(r["pfs_read"])),
    ("persistent FS written", lambda r: size(r["pfs_written"])),
]


def print_header(rep):
    a, fs = rep["args"], rep["slowfs"]
    f = fs["figures"]
    print(
        f"bench/pipeline{' --quick' if a['quick'] else ''}: {a['steps']} steps, "
        f"whole run {rep['wall_s']:.0f} s"
    )
    print(
        f"persistent FS: {fs['fs']} on {fs['device']} (image in /tmp), blkio throttle "
        f"{fs['bandwidth'] / MiB:.0f} MiB/s and {fs['iops']} IOPS each way, write-back cache "
        f"{fs['dirty'] // MiB} MiB"
    )
    print(
        f"  measured: write {f['write_MiBps']:.0f} MiB/s, read {f['read_MiBps']:.0f} MiB/s "
        f"({size(f['stream'])} stream); {f['files']} files of {a['file_size'] // 1024} KiB: "
        f"{f['creates_per_s']:.0f} created+synced/s, {f['small_reads_per_s']:.0f} read/s"
    )
    if rep.get("handoff_refused"):
        print(
            f"  note: afterstaged ran without rsa.handoff=off ({rep['handoff_refused']})"
        )


def print_steps(ways, names):
    print("  per step: waiting node-s (before/io); RSA: stage-in, stage-out s")
    for w in names:
        parts = []
        for s in ways[w]["steps"]:
            text = f"{s['waiting']:.1f} ({s['before']:.1f}/{s['io']:.1f})"
            if w != "direct":
                text += f" in {span(s['stage_in'])} out {span(s['stage_out'])}"
            if s["deps_added"]:
                text += " (+" + ",".join(s["deps_added"]) + ")"
            parts.append(text)
        print(f"    {TITLES[w]:<17}" + " | ".join(parts))
    rsa = [w for w in names if w != "direct"]
    if rsa:
        counts = ", ".join(
            f"{TITLES[w]} {ways[w].get('handed_off', 0)} of {len(ways[w]['steps'])}"
            for w in rsa
        )
        print(
            f"  steps handed off (eventlog: rsa-handoff, rsa-staged-in handoff=): {counts}"
        )


def perfect_handoff(chain):
    """End to end of a hand-off that costs nothing, made of an afterstaged
    chain's own parts: step 1 stages in as it did, each step then runs for
    as long as it ran (its inputs on its RAM disk to its outputs leaving:
    attach, launch, compute, its own I/O, release) right after the one
    before it ends, and the stage-outs write one after another, each as
    long as it took, from its step's end or the previous one's finish,
    whichever is later (the persistent file system moves one at a time
    at its speed).  None when a step has no stage-in or stage-out span."""
    spans = [(s.get("stage_in"), s.get("stage_out")) for s in chain["steps"]]
    if "t0" not in chain or any(
        not span or None in span for pair in spans for span in pair
    ):
        return None
    end = spans[0][0][1] - chain["t0"]  # step 1's inputs on its RAM disk
    written = 0.0
    for (_, in_end), (out_begin, out_end) in spans:
        end += out_begin - in_end
        written = max(end, written) + (out_end - out_begin)
    return written


def print_ratios(ways, names):
    d, s, h = (ways.get(w) if w in names else None for w in WAYS)
    pairs = (("afterstaged / hand-off", s, h), ("direct / afterstaged", d, s))
    for label, x, y in pairs:
        if x and y:
            print(
                f"  {label}: end to end {ratio(x['end_to_end_s'], y['end_to_end_s'])}, "
                f"waiting {ratio(x['waiting_node_s'], y['waiting_node_s'])}, "
                f"read {ratio(x['pfs_read'], y['pfs_read'])}, "
                f"written {ratio(x['pfs_written'], y['pfs_written'])}"
            )
    ideal = perfect_handoff(s) if s and h else None
    if ideal:
        best = s["end_to_end_s"] / ideal
        got = s["end_to_end_s"] / h["end_to_end_s"]
        print(
            f"  a hand-off that costs nothing (afterstaged's stage-ins, steps and "
            f"stage-outs, each stage-out after the last): {ideal:.1f} s, "
            f"afterstaged / it {best:.2f}x; the hand-off reached {got:.2f}x, "
            f"{100 * got / best:.0f}% of that"
        )


def print_report(rep):
    a = rep["args"]
    print_header(rep)
    for phase, ways in rep["phases"].items():
        if not ways:
            continue
        print()
        if phase == "big":
            print(
                f"one {size(a['big'])} file per step, {a['compute']:g} s compute per step"
            )
        else:
            print(
                f"{a['files']} files of {a['file_size'] // 1024} KiB per step, "
                f"{a['compute']:g} s compute per step"
            )
        for w in [w for w in WAYS if "failed" in ways.get(w, {})]:
            print(f"  {TITLES[w]} failed: {ways[w]['failed']}")
        names = [w for w in WAYS if w in ways and "failed" not in ways[w]]
        print(f"{'':<42}" + "".join(f"{TITLES[w]:>17}" for w in names))
        for label, fn in ROWS:
            print(f"{label:<42}" + "".join(f"{fn(ways[w]):>17}" for w in names))
        print_steps(ways, names)
        print_ratios(ways, names)
