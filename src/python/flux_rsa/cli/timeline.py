"""`flux rsa timeline`: what the accelerator did, as a Gantt picture.

The thesis's Figure 2.1, measured: one row per RSA job, from its record's
transitions (pending, RAM disk being built, staging in, staged on deck,
running on compute, staging out, HELD, teardown) with a thin bar under it
for the time its RAM disk held capacity; one row per compute node with the
jobs that ran there (so a stage-out is seen to run while the compute nodes
already run someone else); and underneath, the RSA nodes' reserved
capacity over time, job by job, against the pool's total.

``data()`` computes what is drawn (``--json`` prints it); ``draw()``
draws it with matplotlib, imported only there.
"""

import math
import time

from flux_rsa.core.record import Record
from flux_rsa.core.states import HOLDING, PRE_RUN, JobState, RsaState

S = RsaState
J = JobState

#: phases of a job's row, in drawing order, with their colours and labels
PHASES = {
    "pending": ("#d9d9d9", "pending"),
    "building": ("#9ecae1", "RAM disk being built"),
    "staging-in": ("#3182bd", "staging in"),
    "on-deck": ("#a1d99b", "staged, on deck"),
    "running": ("#31a354", "running on compute"),
    "staging-out": ("#fd8d3c", "staging out (compute nodes free)"),
    "held": ("#de2d26", "HELD (stage-out failed)"),
    "kept": ("#bcbddc", "outputs home, kept for a job reading them"),
    "teardown": ("#969696", "teardown"),
}
RAMDISK_COLOUR = "#756bb1"
OTHER_COLOUR = "#c7b299"  # compute jobs without a RAM disk

#: rsa-states in which the RAM disk holds capacity (granted, not yet freed)
GRANTED = HOLDING - {S.REQUESTED}
BUILDING = frozenset({S.ASSIGNED, S.BOOTING, S.BOOTED})


def phase(job_state, rsa_state):
    """The phase a job is in, from its two states (None: nothing to draw,
    e.g. after its end)."""
    job, rsa = JobState(job_state), RsaState(rsa_state)
    if rsa is S.HELD:
        return "held"
    if rsa is S.KEPT:
        return "kept"
    if job in PRE_RUN:
        if rsa in BUILDING:
            return "building"
        if rsa in (S.STAGING_IN, S.STOPPING, S.ABORTED):
            return "staging-in"
        if rsa is S.READY:
            return "on-deck"
        return "pending"
    if job is J.RUNNING:
        return "running"
    if rsa is S.STAGING_OUT:
        return "staging-out"
    if rsa is S.TEARDOWN:
        return "teardown"
    return None


def spans(history, name_of, end):
    """Merge consecutive history entries (t, job_state, rsa_state) with the
    same ``name_of(job_state, rsa_state)`` into {name, start, end}; the last
    one lasts until ``end``.  Entries named None are left out."""
    out = []
    for i, (t, job_state, rsa_state) in enumerate(history):
        stop = history[i + 1][0] if i + 1 < len(history) else end
        name = name_of(job_state, rsa_state)
        if name is None or stop <= t:
            continue
        if out and out[-1]["name"] == name and out[-1]["end"] == t:
            out[-1]["end"] = stop
        else:
            out.append({"name": name, "start": t, "end": stop})
    return out


def job_row(rec, now):
    """A job's row: its phases and the spans its RAM disk held capacity."""
    history = rec.get("history") or []
    end = history[-1][0] if history and Record.from_dict(rec).final else now
    segments = [
        {"phase": s["name"], "start": s["start"], "end": s["end"]}
        for s in spans(history, phase, end)
    ]
    held = spans(
        history, lambda j, r: "ramdisk" if RsaState(r) in GRANTED else None, end
    )
    need = rec.get("granted") or rec.get("need") or 0
    handoff = rec.get("handoff")
    staging = [t for t, _, r in history if r == S.STAGING_IN.value]
    return {
        "jobid": rec["jobid"],
        # inputs from another job's RAM disk: from whom, from when
        "handoff": (
            {"from": handoff["producer"], "t": staging[0]}
            if handoff and rec.get("reused") and staging
            else None
        ),
        "job_state": rec["job_state"],
        "rsa_state": rec["rsa_state"],
        "submit": history[0][0] if history else None,
        "segments": segments,
        "ramdisk": [
            {"start": s["start"], "end": s["end"], "bytes": need} for s in held
        ],
    }


def capacity(rows):
    """The RSA nodes' reserved capacity over time: [{t, bytes}], a step
    function (each value holds until the next t)."""
    changes = []
    for row in rows:
        for span in row["ramdisk"]:
            changes.append((span["start"], span["bytes"]))
            changes.append((span["end"], -span["bytes"]))
    steps, total = [], 0
    for t, delta in sorted(changes, key=lambda c: (c[0], c[1])):
        total += delta
        if steps and steps[-1]["t"] == t:
            steps[-1]["bytes"] = total
        else:
            steps.append({"t": t, "bytes": total})
    return steps


def data(records, compute=(), pool_bytes=None, since=None, now=0.0):
    """What the picture shows: job rows (records active after ``since``),
    compute-node occupancy (``compute``: {jobid, name, nodes, start, end}
    of jobs that ran on compute nodes) and the capacity steps."""
    rows = [job_row(rec, now) for rec in records if rec.get("history")]
    if since is not None:
        rows = [
            r for r in rows if not r["segments"] or r["segments"][-1]["end"] >= since
        ]
    rows.sort(key=lambda r: (r["submit"], r["jobid"]))
    times = [
        s[k]
        for r in rows
        for s in r["segments"] + r["ramdisk"]
        for k in ("start", "end")
    ]
    t0 = min(times) if times else now
    t1 = max(times) if times else now
    compute = [c for c in compute if c["end"] >= t0 and c["start"] <= t1]
    return {
        "t0": t0,
        "t1": t1,
        "jobs": rows,
        "compute": sorted(compute, key=lambda c: c["start"]),
        "capacity": capacity(rows),
        "pool_bytes": pool_bytes,
    }


def draw(picture, path, label=str):
    """Draw ``picture`` (from data()) into ``path`` (.png, .svg, .pdf).
    ``label(jobid)`` names a job."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch
    from matplotlib.ticker import FuncFormatter, MultipleLocator

    from flux_rsa.core.units import format_size

    t0 = picture["t0"]
    jobs = picture["jobs"]
    nodes = sorted({n for c in picture["compute"] for n in c["nodes"]})
    heights = [max(1.5, 0.45 * len(jobs) + 0.6), max(0.9, 0.35 * len(nodes) + 0.5), 1.8]
    fig, (ax_jobs, ax_nodes, ax_cap) = plt.subplots(
        3,
        1,
        sharex=True,
        figsize=(12, sum(heights) + 1.6),
        gridspec_kw={"height_ratios": heights, "hspace": 0.35},
    )

    # one row per RSA job: its phases, and the RAM disk's life under them
    for y, row in enumerate(jobs):
        for seg in row["segments"]:
            ax_jobs.broken_barh(
                [(seg["start"] - t0, seg["end"] - seg["start"])],
                (y - 0.3, 0.45),
                facecolors=PHASES[seg["phase"]][0],
                edgecolor="none",
            )
        for held in row["ramdisk"]:
            ax_jobs.broken_barh(
                [(held["start"] - t0, held["end"] - held["start"])],
                (y + 0.2, 0.12),
                facecolors=RAMDISK_COLOUR,
                edgecolor="none",
            )
    # the hand-off: an arrow from the producer's row to its consumer's, when
    # the consumer's stage-in began reading the producer's RAM disk
    row_of = {r["jobid"]: y for y, r in enumerate(jobs)}
    for y, row in enumerate(jobs):
        h = row["handoff"]
        if h and h["from"] in row_of:
            ax_jobs.annotate(
                "",
                xy=(h["t"] - t0, y - 0.3),
                xytext=(h["t"] - t0, row_of[h["from"]] + 0.15),
                arrowprops={"arrowstyle": "->", "color": RAMDISK_COLOUR, "lw": 1.2},
            )
    ax_jobs.set_yticks(range(len(jobs)), [label(r["jobid"]) for r in jobs])
    ax_jobs.set_ylim(len(jobs) - 0.4, -0.6)
    ax_jobs.set_title("RSA jobs")
    legend = [Patch(color=colour, label=text) for colour, text in PHASES.values()]
    legend.append(Patch(color=RAMDISK_COLOUR, label="RAM disk holds capacity"))
    legend.append(Patch(color=OTHER_COLOUR, label="a job without RAM disk"))
    legend.append(Patch(color="none", label="arrow: inputs from that RAM disk"))
    ax_jobs.legend(
        handles=legend,
        loc="upper center",
        bbox_to_anchor=(0.5, 1.02 + 0.9 / heights[0]),
        ncol=5,
        fontsize=8,
        frameon=False,
    )

    # one row per compute node: the jobs that ran there (RSA jobs in the
    # colour of their running phase, others in grey), named where they fit
    rsa_jobs = {r["jobid"] for r in jobs}
    span = max(1e-3, picture["t1"] - t0)
    for c in picture["compute"]:
        colour = PHASES["running"][0] if c["jobid"] in rsa_jobs else OTHER_COLOUR
        for node in c["nodes"]:
            y = nodes.index(node)
            ax_nodes.broken_barh(
                [(c["start"] - t0, c["end"] - c["start"])],
                (y - 0.35, 0.7),
                facecolors=colour,
                edgecolor="white",
            )
            if (c["end"] - c["start"]) / span > 0.08:
                ax_nodes.text(
                    (c["start"] + c["end"]) / 2 - t0,
                    y,
                    label(c["jobid"]),
                    ha="center",
                    va="center",
                    fontsize=7,
                    clip_on=True,
                )
    ax_nodes.set_yticks(range(len(nodes)), nodes)
    ax_nodes.set_ylim(max(1, len(nodes)) - 0.5, -0.5)
    ax_nodes.set_title("compute nodes")

    # the RSA nodes' reserved capacity, job by job
    steps = picture["capacity"]
    if steps:
        xs = [s["t"] - t0 for s in steps]
        ax_cap.step(xs, [s["bytes"] for s in steps], where="post", color=RAMDISK_COLOUR)
        ax_cap.fill_between(
            xs,
            [s["bytes"] for s in steps],
            step="post",
            color=RAMDISK_COLOUR,
            alpha=0.35,
        )
    if picture.get("pool_bytes"):
        ax_cap.axhline(
            picture["pool_bytes"], color="black", linestyle="--", linewidth=0.8
        )
        ax_cap.text(0, picture["pool_bytes"], " pool total", va="bottom", fontsize=7)
        ax_cap.set_ylim(0, picture["pool_bytes"] * 1.15)
    top = max([picture.get("pool_bytes") or 0] + [s["bytes"] for s in steps] + [1])
    ax_cap.yaxis.set_major_locator(MultipleLocator(2 ** math.ceil(math.log2(top / 5))))
    ax_cap.yaxis.set_major_formatter(FuncFormatter(lambda v, _: format_size(int(v))))
    ax_cap.set_title("RAM-disk capacity reserved on the RSA nodes")
    ax_cap.set_xlabel(
        f"seconds after {time.strftime('%Y-%m-%d %H:%M:%S', time.localtime(t0))}"
    )
    ax_cap.set_xlim(0, max(1e-3, picture["t1"] - t0) * 1.02)
    for ax in (ax_jobs, ax_nodes, ax_cap):
        ax.grid(axis="x", alpha=0.3)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
