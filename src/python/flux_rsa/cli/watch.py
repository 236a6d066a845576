"""`flux rsa status --watch` and `flux rsa wait --progress`: a live view.

On a terminal the table is redrawn in place, with a progress bar, rate and
ETA under each staging job (flux.progress's bar); elsewhere (a pipe, a
log file) one plain line is printed per change: a job's state, or another
tenth of its stage.  Both end when ``done(jobs)`` says so.
"""

import shutil
import sys
import time

import flux.progress


class StageBar(flux.progress.ProgressBar):
    """flux.progress's bar as one line of our table, rather than on the
    terminal's last line."""

    def __init__(self):
        super().__init__(
            total=1,
            style="bar",
            before="{label:>22}  ",
            after=" {percent:5.1f}% {done:>6}/{size:<6} {rate:>9} ETA {eta}",
            label="",
            done="",
            size="",
            rate="",
            eta="",
        )
        self.since = time.time()

    @property
    def elapsed(self):
        return flux.progress.ElapsedTime(time.time() - self.since)

    def line(self, job, width):
        self.total = max(1, int(job.size))
        self.count = min(int(job.done), self.total)
        label = "stage-in" if job.rsa_state == "STAGING_IN" else "stage-out"
        self.kwargs.update(
            label=label,
            done=format(job.done),
            size=format(job.size),
            rate=job.rate,
            eta=job.eta,
        )
        return self.formatter(self, width)


def table(fmt, jobs, bars, width):
    """The lines of the table, a bar line under each staging job."""
    jobs = fmt.sort_items(list(jobs))
    shown = type(fmt)(fmt.filter(jobs), headings=fmt.headings, prepend=fmt.prepend)
    lines = [shown.header()]
    for job in jobs:
        lines.append(shown.format(job))
        if job.staging:
            lines.append(bars.setdefault(job.id, StageBar()).line(job, width))
    return lines


class Screen:
    """Lines redrawn in place: back to where the last drawing began, each
    line written over the old one (erasing the rest of it), then what is
    left of the old drawing below erased.  (Erasing the whole screen at
    once would push it into a terminal's scroll-back, as tmux does.)
    Lines are cut to the terminal's width (a wrapped line would throw the
    count off) and to its height."""

    def __init__(self, out):
        self.out = out
        self.drawn = 0

    def draw(self, lines):
        size = shutil.get_terminal_size()
        lines = [line[: size.columns - 1] for line in lines][: max(1, size.lines - 1)]
        back = f"\033[{self.drawn}F" if self.drawn else ""
        self.out.write(back + "".join(f"{line}\033[K\n" for line in lines) + "\033[J")
        self.out.flush()
        self.drawn = len(lines)


class Lines:
    """Off a terminal: a plain line per change."""

    def __init__(self, out):
        self.out = out
        self.last = {}

    def draw(self, jobs):
        for job in jobs:
            tenth = int(job.percent // 10) if job.staging else None
            key = (job.job_state, job.rsa_state, tenth)
            if self.last.get(job.id) == key:
                continue
            self.last[job.id] = key
            line = f"{time.strftime('%H:%M:%S')} {job.id.f58} {job.job_state} {job.rsa_state}"
            if job.staging:
                line += f" {job.percent:.0f}% {job.done}/{job.size} {job.rate} ETA {job.eta}"
            print(line, file=self.out, flush=True)


def watch(fetch, fmt, done, interval=0.5, title="", out=None):
    """Show ``fetch()`` (RsaJob rows) every ``interval`` seconds until
    ``done(rows)``; returns the last rows."""
    out = out or sys.stdout
    tty = out.isatty()
    view = Screen(out) if tty else Lines(out)
    bars = {}
    while True:
        jobs = fetch()
        if tty:
            width = shutil.get_terminal_size().columns - 1
            staging = sum(1 for j in jobs if j.staging)
            head = f"{title}: {len(jobs)} job(s), {staging} staging"
            head += time.strftime("%H:%M:%S").rjust(max(1, width - len(head)))
            view.draw([head, *table(fmt, jobs, bars, width)])
        else:
            view.draw(jobs)
        if done(jobs):
            return jobs
        time.sleep(interval)
