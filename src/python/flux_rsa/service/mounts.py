"""Attach and detach a job's RAM disk on its compute nodes.

One privileged operation (``RSA_OP=attach`` or ``detach``, see
flux_rsa.privileged) per broker rank of the job, all ranks at once,
started through the broker's ``rexec`` service (as the instance owner;
the operation goes through ``flux-imp run rsa`` when the pool's does).
The core gets one answer: Attached/Detached, ok only when every rank
succeeded.  An attach that fails anywhere is undone on the ranks where it
worked, so the job, which then uses its directories, leaves no mount
behind.  A rank that does not answer within TIMEOUT counts as failed.
"""

import os
import time

import flux.subprocess
from flux.hostlist import Hostlist

from flux_rsa.core import events as E
from flux_rsa.privileged.caller import subjob_environment
from flux_rsa.service.answers import on_answer

TIMEOUT = 60.0


class Mounts:
    def __init__(self, h, log, via, deliver):
        self.h = h
        self.log = log
        self.via = via  # via() -> privileged.caller.Via for the current policy
        self.deliver = deliver  # deliver(jobid, event)
        self.base_env = {**subjob_environment(os.environ), "PYTHONPATH": _python_path()}

    def attach(self, a):
        fields = attach_fields(a.volume)

        def values(rank):
            return dict(root=a.root, name=a.name, rank=rank, **fields)

        def undo(ranks):
            self._run(
                "detach",
                ranks,
                lambda r: dict(root=a.root, name=a.name, rank=r),
                lambda *args: None,
            )

        def done(failed, ok_ranks):
            if failed:
                if ok_ranks:  # nothing may stay attached: the job uses its directories
                    undo(ok_ranks)
                self.deliver(a.jobid, E.Attached(time.time(), False, "; ".join(failed)))
            else:
                self.deliver(a.jobid, E.Attached(time.time(), True))

        # a rank that attached after it was given up (TIMEOUT) detaches too
        self._run("attach", a.ranks, values, done, late=lambda rank: undo([rank]))

    def detach(self, a):
        def done(failed, ok_ranks):
            self.deliver(
                a.jobid, E.Detached(time.time(), not failed, "; ".join(failed) or None)
            )

        self._run(
            "detach", a.ranks, lambda r: dict(root=a.root, name=a.name, rank=r), done
        )

    def _run(self, op, ranks, values, done, late=None):
        """Run ``op`` on every rank; ``done(failures, ok_ranks)`` once all
        have ended (or TIMEOUT passed); ``late(rank)`` when a rank given up
        at TIMEOUT succeeds after all."""
        pending = set(ranks)
        failed, ok = [], []
        state = {"over": False}

        def finish():
            if not state["over"] and not pending:
                state["over"] = True
                timer.stop()
                done(failed, ok)

        def ended(rank, why):
            if rank not in pending:
                if why is None and rank in expired and late is not None:
                    late(rank)
                return
            pending.discard(rank)
            (failed.append(f"{self._node(rank)}: {why}") if why else ok.append(rank))
            finish()

        expired = set()

        def expire(*args):
            for rank in sorted(pending):
                expired.add(rank)
                ended(rank, f"no answer within {TIMEOUT:.0f}s")

        timer = self.h.timer_watcher_create(TIMEOUT, expire)
        timer.start()
        for rank in ranks:
            self._start(op, rank, values(rank), ended)
        finish()  # no ranks: done at once

    def _node(self, rank):
        """How a failure names the compute node: its host name and rank."""
        try:
            return f"{Hostlist(self.h.attr_get('hostlist'))[rank]} (rank {rank})"
        except (OSError, IndexError, ValueError):
            return f"rank {rank}"

    def _start(self, op, rank, values, ended):
        argv, variables = self.via().command(op, **values)
        env = {**self.base_env, **variables}

        def waited(f):
            try:
                status = f.get_status()
            except OSError as exc:
                ended(rank, f"{op}: {exc.strerror or exc}")
                return
            if os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0:
                ended(rank, None)
                return
            said = f.stderr.decode(errors="replace").strip().splitlines()
            how = (
                f"exit status {os.WEXITSTATUS(status)}"
                if os.WIFEXITED(status)
                else f"signal {os.WTERMSIG(status)}"
            )
            ended(rank, said[-1] if said else f"{op} ended with {how}")

        def started(f):
            try:
                pid = f.get_pid()
            except OSError as exc:
                ended(rank, f"cannot start {op}: {exc.strerror or exc}")
                return
            on_answer(flux.subprocess.wait(self.h, pid, nodeid=rank), waited)

        try:
            on_answer(
                flux.subprocess.rexec_bg(
                    self.h,
                    argv,
                    cwd="/",
                    env=env,
                    waitable=True,
                    nodeid=rank,
                    label=None,
                ),
                started,
            )
        except OSError as exc:
            ended(rank, f"cannot start {op}: {exc.strerror or exc}")


def attach_fields(volume):
    """The RSA_OP=attach variables of a RAM disk's ``volume`` (as its holder
    reported it): every field but the ones for the core, lists joined."""
    return {
        key: ",".join(map(str, value)) if isinstance(value, (list, tuple)) else value
        for key, value in volume.items()
        if key not in ("name", "same_path")
    }


def _python_path():
    """Where the operation finds flux_rsa and Flux's bindings."""
    from flux_rsa.pool.launch import python_path

    return python_path()
