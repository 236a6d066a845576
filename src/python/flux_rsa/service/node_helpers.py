"""The compute nodes' resident helpers (``RSA_OP=serve``, see
flux_rsa.privileged.serve): one per compute node, started on its first
attach through the broker's ``rexec`` service (Flux's subprocess client,
which keeps the process's stdin open to us), and kept until the pool
stops for good or the service unloads (its stdin then closes and it
ends).  A request costs a line each way instead of a new process on the
node.

``Helpers.run(rank, command, variables, answered)`` sends one request;
``answered(status, stderr)`` gets its exit status and what it said, or
``answered(None, why, unreachable)`` when the helper could not take it
(``unreachable``: its broker is lost).  A helper that ends or cannot start
fails what was sent to it; the next request starts a new one.
"""

import errno
import json
import os

from flux.core.inner import ffi, lib

RUNNING = lib.FLUX_SUBPROCESS_RUNNING
FAILED = lib.FLUX_SUBPROCESS_FAILED
#: the errors that say a rank's broker is lost
UNREACHABLE = (errno.EHOSTUNREACH, errno.ENOSYS, errno.ECONNRESET)


class Helpers:
    def __init__(self, h, log, environ):
        self.h = h
        self.log = log
        self.environ = environ  # the helpers' base environment
        self.running = {}  # rank -> Helper
        self.ended = []  # helpers to destroy (never from their own callbacks)
        self.ids = 0

    def run(self, rank, command, variables, answered):
        """Send the request ``variables`` (``RSA_*``) to the helper of
        ``rank``, started with ``command`` ((argv, variables)) if it has
        none or another command."""
        self._destroy_ended()
        helper = self.running.get(rank)
        if helper is not None and helper.command != command:
            self._stop(rank)  # (the site's configuration changed)
            helper = None
        if helper is None:
            helper = Helper(self, rank, command)
            self.running[rank] = helper
            helper.start()
        self.ids += 1
        helper.send(self.ids, variables, answered)

    def stop(self):
        """Let every helper go (each ends once what it runs has answered)."""
        for rank in list(self.running):
            self._stop(rank)

    def _stop(self, rank):
        helper = self.running.pop(rank)
        helper.close()
        self.ended.append(helper)

    def _gone(self, helper):
        if self.running.get(helper.rank) is helper:
            del self.running[helper.rank]
        if helper not in self.ended:  # (one let go by _stop is there already)
            self.ended.append(helper)

    def _destroy_ended(self):
        for helper in self.ended:
            helper.destroy()
        self.ended = [x for x in self.ended if x.p is not None]


class Helper:
    """One compute node's helper process, seen through Flux's subprocess
    client."""

    def __init__(self, helpers, rank, command):
        self.helpers = helpers
        self.rank = rank
        self.command = command
        self.p = None
        self.up = False  # RUNNING: requests may be written
        self.over = False
        self.closing = False  # let go before it ran: closed once it runs
        self.queued = []  # lines written once it runs
        self.sent = {}  # id -> answered
        self.said = []  # its last lines on stderr
        self._why = None  # (why, unreachable) once it is over
        # (the callbacks must live as long as the process)
        self._ops = ffi.new("flux_subprocess_ops_t *")
        self._callbacks = [
            ffi.callback("flux_subprocess_output_f", self._on_stdout),
            ffi.callback("flux_subprocess_output_f", self._on_stderr),
            ffi.callback("flux_subprocess_state_f", self._on_state),
            ffi.callback("flux_subprocess_f", self._on_completion),
        ]
        (
            self._ops.on_stdout,
            self._ops.on_stderr,
            self._ops.on_state_change,
            self._ops.on_completion,
        ) = self._callbacks

    def start(self):
        argv, variables = self.command
        cmd = lib.flux_cmd_create(0, ffi.NULL, ffi.NULL)
        try:
            for arg in argv:
                lib.flux_cmd_argv_append(cmd, arg.encode())
            lib.flux_cmd_setcwd(cmd, b"/")
            for name, value in {**self.helpers.environ, **variables}.items():
                lib.flux_cmd_setenvf(
                    cmd, 1, name.encode(), b"%s", ffi.new("char[]", value.encode())
                )
            p = lib.flux_rexec(self.helpers.h.handle, self.rank, 0, cmd, self._ops)
        finally:
            lib.flux_cmd_destroy(cmd)
        if p == ffi.NULL:
            self._fail(f"cannot start: {_strerror(ffi.errno)}", ffi.errno)
            return
        self.p = p

    def send(self, rid, variables, answered):
        self.sent[rid] = answered
        line = json.dumps({"id": rid, "env": variables}) + "\n"
        if self.over:
            self._fail_all(self._why)
        elif self.up:
            self._write(line)
        else:
            self.queued.append(line)

    def close(self):
        """No more requests: its stdin closes (once it runs), and it ends."""
        self.closing = True
        if self.p is not None and self.up and not self.over:
            lib.flux_subprocess_close(self.p, b"stdin")

    def destroy(self):
        if self.p is not None and self.over:
            lib.flux_subprocess_destroy(self.p)
            self.p = None

    def _write(self, line):
        data = line.encode()
        if lib.flux_subprocess_write(self.p, b"stdin", data, len(data)) < 0:
            self._fail(f"cannot write to it: {_strerror(ffi.errno)}", ffi.errno)

    # --- Flux's callbacks (errors are logged: never raised into the reactor) ---

    def _on_state(self, p, state):
        try:
            if state == RUNNING:
                self.up = True
                queued, self.queued = self.queued, []
                for line in queued:
                    self._write(line)
                if self.closing:
                    lib.flux_subprocess_close(p, b"stdin")
            elif state == FAILED:
                number = lib.flux_subprocess_fail_errno(p)
                said = lib.flux_subprocess_fail_error(p)
                why = (
                    ffi.string(said).decode() if said != ffi.NULL else _strerror(number)
                )
                self._fail(why, number)
        except Exception as exc:
            self.helpers.log.error(f"rsa: the helper on rank {self.rank}: {exc!r}")

    def _on_stdout(self, p, stream):
        try:
            for line in _lines(p, stream):
                answer = json.loads(line)
                answered = self.sent.pop(answer.get("id"), None)
                if answered is not None:
                    answered(answer["status"], answer["stderr"])
        except Exception as exc:
            self.helpers.log.error(f"rsa: the helper on rank {self.rank}: {exc!r}")

    def _on_stderr(self, p, stream):
        for line in _lines(p, stream):
            self.said = (self.said + [line.rstrip()])[-5:]
            self.helpers.log.warning(
                f"rsa: the helper on rank {self.rank}: {line.rstrip()}"
            )

    def _on_completion(self, p):
        try:
            status = lib.flux_subprocess_status(p)
            said = f": {self.said[-1]}" if self.said else ""
            self._fail(f"it ended (wait status {status}){said}", 0)
        except Exception as exc:
            self.helpers.log.error(f"rsa: the helper on rank {self.rank}: {exc!r}")

    def _fail(self, why, number):
        """The helper is over: what it was sent fails (``why``)."""
        if not self.over:
            self.over = True
            self._why = (f"the helper {why}", number in UNREACHABLE)
            self.helpers._gone(self)
        self._fail_all(self._why)

    def _fail_all(self, why):
        sent, self.sent = self.sent, {}
        for answered in sent.values():
            answered(None, *why)


def _lines(p, stream):
    """The complete lines ready on ``stream`` (at its end, the rest)."""
    line = ffi.new("const char **")
    while True:
        n = lib.flux_subprocess_read_line(p, stream, line)
        if n <= 0:
            return
        yield ffi.string(line[0], n).decode(errors="replace")


def _strerror(number):
    return os.strerror(number) if number else "unknown error"
