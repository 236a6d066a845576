"""bench/images's figures: each way's jobs summarized (medians), the ways
side by side, their ratios, and every job on a line.
"""

from benchlib.figures import fmt, med

WAYS = ("image", "shared", "floor")
TITLES = {"image": "image", "shared": "shared (FUSE)", "floor": "floor (tmpfs)"}
#: (label, key, format, name in the ratios) of the figures compared across the ways
FIGURES = (
    ("creates/s (inside the job)", "creates_per_s", ".0f", "creates/s"),
    ("prolog (alloc -> start), s", "prolog_s", ".2f", "prolog"),
    ("  attach (record), s", "attach_s", ".2f", "attach"),
    ("end (last close -> nodes free), s", "end_s", ".2f", "end"),
    ("detach (record, after the end), s", "detach_s", ".2f", "detach"),
    ("stage-out, s", "stage_out_s", ".2f", "stage-out"),
)


def seen(job):
    """What the job wrote to, as it saw it: the mount's type and source
    (a loop device's number left out), and where: at data_out (the RAM disk
    shown at the job's own path) or a mount point."""
    if job.get("fstype") is None:
        return "?"
    source = job.get("source") or "?"
    if source.startswith("/dev/loop"):
        source = "/dev/loop*"
    elif source.startswith("rsa:"):
        source = "rsa:*"
    where = "data_out" if job["mount"] == job["dir"] else job["mount"]
    return f"{job['fstype']} ({source}) at {where}"


def summarize(jobs, ways):
    """{way: its medians, what its jobs wrote to, its errors}."""
    out = {}
    for way in ways:
        mine = [j for j in jobs if j["way"] == way]
        ok = [j for j in mine if not j.get("error")]
        s = {key: med(j.get(key) for j in ok) for _label, key, _spec, _n in FIGURES}
        s["jobs"] = len(mine)
        s["errors"] = [j["error"] for j in mine if j.get("error")]
        wrote = {}
        for j in ok:
            wrote[seen(j)] = wrote.get(seen(j), 0) + 1
        s["wrote_to"] = wrote
        if way != "floor":
            s["images"] = sum(1 for j in ok if j.get("image"))
            s["paths"] = sorted({j.get("paths") or "-" for j in ok})
        out[way] = s
    return out


def ratio(a, b):
    return f"{a / b:.2f}x" if a is not None and b else "-"


def print_report(rep):
    a, ways = rep["args"], rep["ways"]
    names = [w for w in WAYS if w in ways]
    print(
        f"bench/images: {a['jobs']} -N1 jobs per way, one after another, each writing "
        f"{a['files']} files of 4 KiB from one process (os.open, write, close; one "
        "directory)"
    )
    print(
        f"RSA jobs: rsa.data_out, rsa.capacity={a['capacity']}, rsa.on_late=wait; "
        f"RSA nodes of {a['node_capacity']}; whole run {rep['wall_s']:.0f} s"
    )
    print()
    print(f"{'medians':<40}" + "".join(f"{TITLES[w]:>16}" for w in names))
    for label, key, spec, _name in FIGURES:
        vals = [ways[w].get(key) for w in names]
        if all(v is None for v in vals):
            continue
        print(f"{label:<40}" + "".join(f"{fmt(v, spec):>16}" for v in vals))
    print()
    for w in names:
        s = ways[w]
        wrote = "; ".join(f"{what} x{n}" for what, n in s["wrote_to"].items())
        extra = ""
        if w != "floor":
            extra = (
                f"; records: image in {s['images']} of {s['jobs']}, "
                f"paths {','.join(s['paths'])}"
            )
        print(f"{TITLES[w]}: wrote to {wrote or '-'}{extra}")
    for w, other in (("image", "shared"), ("image", "floor")):
        if w in ways and other in ways:
            parts = [
                f"{name} {ratio(ways[w][key], ways[other][key])}"
                for _label, key, _spec, name in FIGURES
                if ways[w].get(key) is not None and ways[other].get(key) is not None
            ]
            print(f"{TITLES[w]} / {TITLES[other]}: " + ", ".join(parts))
    print()
    print(
        "per job: way, rank (* its way's first job there: an image's first attach on "
        "a node mounts the node's client of the store), creates/s, prolog, attach, "
        "end, detach, stage-out (s)"
    )
    for j in rep["jobs"]:
        first = "*" if j.get("first") else " "
        vals = " ".join(
            f"{fmt(j.get(key), spec):>8}" for _label, key, spec, _n in FIGURES
        )
        print(
            f"  {j['way']:<7} {j['jobid']:<14} {j.get('rank') or '?':>3}{first} {vals}"
        )
    for w in names:
        for e in ways[w]["errors"]:
            print(f"{TITLES[w]}: ERROR: {e}")
