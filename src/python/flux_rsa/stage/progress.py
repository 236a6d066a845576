"""Progress reports: JSON lines for programs, a status line for people."""

import contextlib
import sys
import time

PHASES = ("scan", "copy", "verify", "done")


class Snapshot:
    """One progress reading, as passed to a run(progress=...) callback.
    ``quiet``: seconds a stage script has printed nothing and not grown
    its destination (0 for the stager's own copies)."""

    __slots__ = (
        "phase",
        "bytes_done",
        "bytes_total",
        "files_done",
        "files_total",
        "rate",
        "quiet",
    )

    def __init__(
        self, phase, bytes_done, bytes_total, files_done, files_total, rate, quiet=0
    ):
        self.phase = phase
        self.bytes_done = bytes_done
        self.bytes_total = bytes_total
        self.files_done = files_done
        self.files_total = files_total
        self.rate = rate
        self.quiet = quiet

    def as_dict(self):
        return {
            k: getattr(self, k)
            for k in (
                "bytes_done",
                "bytes_total",
                "files_done",
                "files_total",
                "rate",
                "phase",
                "quiet",
            )
        }


class Meter:
    """Turns counters into Snapshots for a callback, at most once per
    INTERVAL seconds, plus every phase change and the final reading."""

    def __init__(self, callback, interval=1.0, clock=time.monotonic):
        self.callback = callback
        self.interval = interval
        self.clock = clock
        self.t0 = clock()
        self.last = None
        self.phase = None
        self.base_bytes = 0  # bytes already there when copying began
        self.phase_t0 = self.t0

    def update(
        self,
        phase,
        bytes_done,
        bytes_total,
        files_done,
        files_total,
        force=False,
        quiet=0,
    ):
        if self.callback is None:
            return
        now = self.clock()
        if phase != self.phase:
            if self.phase == "copy":
                self.copy_rate = self._rate(
                    bytes_done if phase == "done" else self.copy_bytes, now
                )
            self.phase = phase
            self.phase_t0 = now
            self.base_bytes = bytes_done
            force = True
        if phase == "copy":
            self.copy_bytes = bytes_done
        if not force and self.last is not None and now - self.last < self.interval:
            return
        self.last = now
        if phase == "done":
            rate = getattr(self, "copy_rate", 0)
        else:
            rate = self._rate(bytes_done, now)
        self.callback(
            Snapshot(
                phase, bytes_done, bytes_total, files_done, files_total, rate, quiet
            )
        )

    def _rate(self, bytes_done, now):
        elapsed = now - self.phase_t0
        moved = bytes_done - self.base_bytes
        return int(moved / elapsed) if elapsed > 0 else 0


def json_printer(stream=None):
    """A callback printing each Snapshot as one JSON line (flushed)."""
    import json

    def emit(snap):
        out = stream or sys.stdout
        out.write(json.dumps(snap.as_dict(), separators=(",", ":")) + "\n")
        out.flush()

    return emit


def _size(n):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def describe(snap):
    pct = 100.0 * snap.bytes_done / snap.bytes_total if snap.bytes_total else 100.0
    return (
        f"{snap.phase}: {snap.files_done}/{snap.files_total} files, "
        f"{_size(snap.bytes_done)}/{_size(snap.bytes_total)} ({pct:.0f}%), "
        f"{_size(snap.rate)}/s"
    )


class HumanDisplay:
    """--progress: Flux's progress bar on stderr when the bindings are
    importable and stderr is a terminal, else a plain status line."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.bar = None
        self.tty = self.stream.isatty()
        if self.tty:
            try:
                from flux.progress import ProgressBar  # optional

                self.bar_class = ProgressBar
            except ImportError:
                self.bar_class = None
        else:
            self.bar_class = None
        self.last_line = 0.0

    @contextlib.contextmanager
    def _to_stream(self):
        # flux.progress draws on sys.stdout; stdout may carry JSON lines
        saved = sys.stdout
        sys.stdout = self.stream
        try:
            yield
        finally:
            sys.stdout = saved

    def __call__(self, snap):
        if self.bar_class is not None:
            try:
                self._bar(snap)
                return
            except Exception:  # a terminal quirk must not fail a copy
                self.bar_class = None
        if self.tty:
            end = "\n" if snap.phase == "done" else "\r"
            self.stream.write("\r\033[K" + describe(snap) + end)
        elif snap.phase == "done" or time.monotonic() - self.last_line >= 5:
            self.last_line = time.monotonic()
            self.stream.write(describe(snap) + "\n")
        self.stream.flush()

    def _bar(self, snap):
        with self._to_stream():
            if self.bar is None:
                self.bar = self.bar_class(
                    total=max(snap.bytes_total, 1),
                    before="{phase} ",
                    after=" {percent:5.1f}% {info}",
                    phase=snap.phase,
                    info="",
                )
                self.bar.start()
            self.bar.count = min(snap.bytes_done, max(snap.bytes_total, 1))
            self.bar.update(
                advance=0,
                phase=snap.phase,
                info=f"{snap.files_done}/{snap.files_total} files "
                f"{_size(snap.rate)}/s",
            )
            if snap.phase == "done":
                self.bar.stop()


def tee(*callbacks):
    """One callback calling several (skipping None)."""
    live = [c for c in callbacks if c is not None]
    if not live:
        return None

    def call(snap):
        for c in live:
            c(snap)

    return call
