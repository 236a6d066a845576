"""One subjob of the pool, followed from submission to ``clean``.

A Subjob submits its jobspec, follows the job's eventlog and its output,
and keeps what Flux reports: the job's R, whether it started, its fatal
exception, its exit status, lines on stdout (``on_stdout``) and the last
line on stderr.  ``ended`` comes once, after ``clean`` *and* the end
of the output (so the last stderr line is known), and subclasses turn
these facts into notifications in ``update``.  Every callback is guarded:
an exception is logged, never allowed to stop the agent's reactor.

A simulated subjob (a test-execution job, see ``jobspecs``) runs no shell
and has no output: only its eventlog is followed.

A subjob sees of the agent only its ``Context``: the pool instance, the
log, the nodes' names, the notifications to the service and whom to tell
that its end went out.
"""

import dataclasses
import os
import re

import flux.job
from flux.job import JobID

from flux_rsa.pool import jobspecs

#: after clean, wait at most this long for the rest of the output
OUTPUT_GRACE = 5.0
#: job-exec's exception when a node of the job was lost (broker rank)
_LOST = re.compile(r"node failure on .*\(rank (\d+)\)")


@dataclasses.dataclass(frozen=True)
class Context:
    """All a subjob may use of the agent."""

    h: object  # the pool instance
    log: object  # log(text): a line in the agent's log
    hosts: dict  # pool rank -> host name (to name a lost node)
    notify: object  # notify(kind, **fields): to the service, in order
    ended: object  # ended(subjob): its end notification went out


class Subjob:
    def __init__(self, ctx, jobspec, urgency=None):
        self.ctx = ctx
        self.h = ctx.h
        self.simulated = jobspecs.simulated(jobspec)
        self.jobid = None
        self.R = None
        self.started = False
        self.exception = None  # text of the first fatal exception
        self.exception_type = None
        self.status = None  # wait status from the finish event
        self.stderr = None  # last line on stderr
        self.cancel_reason = None
        self.ended = False
        self._clean = False
        self._output_done = self.simulated  # no shell, no output
        self._want_R = False
        self._partial = {}
        self._grace = None
        self._futures = []
        options = {} if urgency is None else {"urgency": urgency}
        flux.job.submit_async(self.h, jobspec, **options).then(
            self._guard, self._submitted
        )

    # --- for subclasses ---

    def update(self):
        """Called whenever a fact changed; send what is now known."""

    def on_stdout(self, line):
        """A complete line on the job's stdout."""

    def on_event(self, name):
        """An event of the job's eventlog (after it was taken in)."""

    def done(self):
        """Nothing more will happen (its last notification is out)."""
        return self.ended

    @property
    def name(self):
        return (
            f"job {JobID(self.jobid).f58}" if self.jobid else "job (not yet submitted)"
        )

    def exit_code(self):
        if self.status is None:
            return None
        return os.waitstatus_to_exitcode(self.status)

    def tasks_ok(self):
        """True when the tasks exited 0.  job-exec reports status 1 for a job
        with an exception whose tasks all exited 0; our commands print a
        line on stderr whenever they fail, so 1 without one is a clean exit."""
        code = self.exit_code()
        return code == 0 or (
            code == 1 and self.exception is not None and self.stderr is None
        )

    def lost_rank(self):
        """The pool rank of a node the job lost (its broker failed), or None."""
        found = _LOST.search(self.exception or "")
        return int(found.group(1)) if found else None

    def failure(self):
        """Why the job did not succeed, for a person; None when it did.
        The command's own last stderr line comes first when the job failed
        because of it (an ``exec`` exception is raised by exit-on-error)."""
        code = self.exit_code()
        if self.exception is None and self.started and code == 0:
            return None
        lost = self.lost_rank()
        if lost is not None:
            host = self.ctx.hosts.get(lost, f"pool rank {lost}")
            return (
                f"{self.name} lost RSA node {host}: its Flux broker failed or the node "
                f"went down ({self.exception})"
            )
        if self.stderr and self.exception_type in (None, "exec"):
            return self.stderr
        if self.exception:
            return self.exception
        if code is None:
            return "ended before it started"
        how = f"killed by signal {-code}" if code < 0 else f"exited with status {code}"
        return f"{self.name} {how}"

    # --- actions ---

    def cancel(self, reason):
        """Cancel the job (now, or as soon as it has an id)."""
        if self.cancel_reason is None:
            self.cancel_reason = reason
        if self.jobid is not None and not self._clean:
            flux.job.cancel_async(self.h, self.jobid, reason).then(self._guard, _ignore)

    # --- plumbing ---

    def _guard(self, future, step):
        try:
            step(future)
        except Exception as exc:  # an escaped exception would stop the reactor
            self.ctx.log(f"{self.name}: {exc!r}")

    def _submitted(self, future):
        try:
            self.jobid = future.get_id()
        except OSError as exc:
            self.exception_type = "submit"
            self.exception = f"submit refused: {exc.strerror or exc}"
            self._clean = self._output_done = True
            self._finish()
            return
        self._keep(flux.job.event_watch_async(self.h, self.jobid)).then(
            self._guard, self._event
        )
        if not self.simulated:
            self._keep(flux.job.output_event_watch_async(self.h, self.jobid)).then(
                self._guard, self._output
            )
        if self.cancel_reason is not None:
            self.cancel(self.cancel_reason)
        self._changed()

    def _keep(self, future):
        self._futures.append(future)
        return future

    def _event(self, future):
        event = future.get_event()
        if event is None:
            return
        name, ctx = event.name, event.context
        self.on_event(name)
        if name == "alloc":
            self._want_R = True
            lookup = flux.job.job_info_lookup(self.h, self.jobid, keys=["R"])
            self._keep(lookup).then(self._guard, self._got_R)
            return
        if name == "start":
            self.started = True
        elif (
            name == "exception"
            and ctx.get("severity", 0) == 0
            and self.exception is None
        ):
            self.exception_type = ctx.get("type", "unknown")
            note = ctx.get("note") or ""
            self.exception = (
                f"{ctx.get('type', 'unknown')} exception{': ' + note if note else ''}"
            )
        elif name == "finish":
            self.status = ctx.get("status", 0)
        elif name == "clean":
            self._clean = True
            future.cancel(stop=True)
            if not self._output_done:
                # a shell killed before it started writes no output at all:
                # do not wait for an eventlog that will never exist
                lookup = flux.job.job_info_lookup(
                    self.h, self.jobid, keys=["guest.output"]
                )
                self._keep(lookup).then(self._guard, self._output_exists)
                self._grace = self.h.timer_watcher_create(
                    OUTPUT_GRACE, self._grace_over
                )
                self._grace.start()
        self._changed()

    def _output_exists(self, future):
        try:
            future.get()
        except FileNotFoundError:
            self._output_done = True
            self._changed()

    def _got_R(self, future):
        try:
            self.R = future.get_decode()["R"]
        finally:
            self._want_R = False
            self._changed()

    def _output(self, future):
        try:
            event = future.get_event()
        except OSError:
            event = None  # never started: there is no output
        if event is None:
            self._output_done = True
            self._changed()
            return
        if getattr(event, "name", None) != "data" or event.data is None:
            return
        key = (event.stream, str(event.rank))
        text = self._partial.pop(key, "") + event.data
        *lines, rest = text.split("\n")
        if rest:
            self._partial[key] = rest
        for line in lines:
            self._line(event.stream, line)
        if lines:
            self._changed()

    def _line(self, stream, line):
        if stream == "stderr":
            if line.strip():
                self.stderr = line.strip()
        else:
            self.on_stdout(line)

    def _grace_over(self, *args):
        try:
            self._output_done = True
            self._changed()
        except Exception as exc:
            self.ctx.log(f"{self.name}: {exc!r}")

    def _changed(self):
        if self._clean and self._output_done and not self._want_R and not self.ended:
            self._finish()
            return
        self.update()

    def _finish(self):
        for (stream, _), rest in self._partial.items():
            self._line(stream, rest)
        self._partial = {}
        self.ended = True
        if self._grace is not None:
            self._grace.stop()
        self._futures = []
        self.update()


def _ignore(future):
    try:
        future.get()
    except OSError:
        pass  # already gone: the eventlog says how it ended
