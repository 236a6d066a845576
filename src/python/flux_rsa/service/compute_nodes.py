"""Attach and detach a job's RAM disk on its compute nodes.

One privileged operation (``RSA_OP=attach`` or ``detach``, see
flux_rsa.privileged) per broker rank of the job, all ranks at once,
carried out by the rank's resident helper (``node_helpers``, started
through the broker's ``rexec`` service as the instance owner, and
through ``flux-imp run rsa`` when the pool's operations are); the
rarer ones (purge, flush, leave) each start a process of their own the
same way.
The core gets one answer: Attached/Detached, ok only when every rank
succeeded.  An attach that fails anywhere is undone on the ranks where it
worked, so the job, which then uses its directories, leaves no mount
behind.  A rank that does not answer within TIMEOUT counts as failed; one
whose broker is lost is named as such in Detached (its hold on an image
is broken by the stage-out that reads it next).

A RAM disk that is an image is reached through its RSA node's store,
whose client a compute node mounts on its first such attach and keeps
(``ramdisk.store``).  The ranks that have one are remembered (in memory
and in the KVS, ``rsa.stores-joined``) so that, when the pool stops for
good, ``leave`` unmounts them all.  The switch's purge of an image's
inputs runs where its compute node holds it (``purge``).
"""

import errno
import os
import time

import flux.kvs
import flux.subprocess
from flux.hostlist import Hostlist

from flux_rsa.core import events as E
from flux_rsa.privileged.caller import subjob_environment
from flux_rsa.privileged.serve import SERVED
from flux_rsa.service.node_helpers import Helpers
from flux_rsa.service.reactor import on_answer

TIMEOUT = 60.0
#: the ranks that mounted a client of an RSA node's image store
JOINED = "rsa.stores-joined"


class Mounts:
    def __init__(self, h, log, via, deliver, policy=None):
        self.h = h
        self.log = log
        self.via = via  # via() -> privileged.caller.Via for the current policy
        self.deliver = deliver  # deliver(jobid, event)
        self.policy = policy  # policy() -> the current Policy
        self.base_env = {**subjob_environment(os.environ), "PYTHONPATH": _python_path()}
        self.helpers = Helpers(h, log, self.base_env)
        self._joined_ranks = None  # read from the KVS on first use
        self._hosts = None
        self.closed = False  # the pool stopped for good: nothing is attached any more
        self.attaching = 0  # attaches of images under way
        self.leaving = None  # leave(done) waiting for them

    def attach(self, a):
        if self.closed:
            self.deliver(
                a.jobid,
                E.Attached(time.time(), False, "the RSA pool has stopped (shutdown)"),
            )
            return
        fields = attach_fields(a.volume)
        image = a.volume.get("image") is not None
        # one image per compute node (rsa.fs=per-node): rank i mounts image i
        per_rank = dict(zip(a.ranks, a.volume.get("images") or ()))
        if image:
            fields = {**fields, "jobid": a.jobid}
            # (joined before it runs: a failed attach may still leave the
            # store's client mounted there, for a later job or for `leave`)
            self._joined(a.ranks)
            self.attaching += 1

        def values(rank):
            extra = {"host": self._host(rank)} if image else {}
            if rank in per_rank:
                extra["image"] = per_rank[rank]
            return dict(root=a.root, name=a.name, rank=rank, **{**fields, **extra})

        def undo(ranks):
            self._run(
                "detach",
                ranks,
                lambda r: dict(root=a.root, name=a.name, rank=r),
                lambda *args: None,
            )

        def done(failed, ok_ranks):
            if image:
                self.attaching -= 1
            if failed:
                if ok_ranks:  # nothing may stay attached: the job uses its directories
                    undo(ok_ranks)
                self.deliver(a.jobid, E.Attached(time.time(), False, "; ".join(failed)))
            else:
                self.deliver(a.jobid, E.Attached(time.time(), True))
            if image and not self.attaching and self.leaving is not None:
                self.leave(self.leaving)

        # a rank that attached after it was given up (TIMEOUT) detaches too
        self._run("attach", a.ranks, values, done, late=lambda rank: undo([rank]))

    def detach(self, a):
        lost = []

        def done(failed, ok_ranks):
            self.deliver(
                a.jobid,
                E.Detached(
                    time.time(),
                    not failed,
                    "; ".join(failed) or None,
                    tuple(self._host(r) for r in lost),
                    tuple(self._host(r) for r in ok_ranks),
                ),
            )

        # once the pool stopped for good, a compute node leaves the stores
        # as soon as its last image is gone (jobs canceled at shutdown)
        leave = self._leave_values() if self.closed else {}
        self._run(
            "detach",
            a.ranks,
            lambda r: dict(
                root=a.root, name=a.name, rank=r, host=self._host(r), **leave
            ),
            done,
            lost=lost,
        )

    def purge(self, a, root):
        """The switch's purge of an image's inputs, on the compute nodes that
        hold the job's images (``a.ranks``), under their mount root."""

        def done(failed, ok_ranks):
            if failed:
                self.log.warning(
                    f"rsa: job {a.jobid}: dropping inputs failed: {'; '.join(failed)}"
                )

        self._run(
            "purge",
            a.ranks,
            lambda r: dict(root=root, path=a.path, link=a.data_in),
            done,
        )

    @property
    def joined(self):
        """The ranks that mounted a client of an image store (and keep it)."""
        if self._joined_ranks is None:
            self._joined_ranks = set(_load_joined(self.h))
        return self._joined_ranks

    def flush(self, jobs, done):
        """Have the compute nodes write back what they hold of the images
        of ``jobs`` (records, with an image attached) before their stores
        stop; ``done()`` once they all answered (TIMEOUT at most)."""
        pending = {rec.jobid: rec for rec in jobs}

        def flushed(jobid):
            pending.pop(jobid, None)
            if not pending:
                done()

        if not pending:
            done()
        for rec in jobs:
            root, _, name = rec.mount_path.rpartition("/")
            self._run(
                "flush",
                rec.ranks,
                lambda r, root=root, name=name: dict(root=root, name=name),
                lambda failed, ok, jobid=rec.jobid: flushed(jobid),
            )

    def leave(self, done):
        """Unmount every store client the ranks that joined one keep (the
        pool stops for good); ``done()`` once they all answered."""
        self.closed = True
        if self.attaching:  # (each may mount a store's client yet)
            self.leaving = done
            return
        self.leaving = None
        ranks = sorted(self.joined)

        def left(failed, ok_ranks):
            for why in failed:
                self.log.warning(f"rsa: leaving the RSA nodes' image stores: {why}")
            self.joined.difference_update(ok_ranks)
            self._save_joined()
            self.helpers.stop()
            done()

        root = self._mount_root()
        provider = self._leave_values()["provider"]
        self._run("leave", ranks, lambda r: dict(root=root, provider=provider), left)

    def _mount_root(self):
        policy = self.policy()
        return policy.mount_root or policy.ramdisk_root

    def _leave_values(self):
        """The variables that make an operation on a compute node leave the
        stores (the provider whose clients they are)."""
        policy = self.policy()
        return {"leave": True, "provider": policy.caps.one_node or policy.provider}

    def _joined(self, ranks):
        if not set(ranks) <= self.joined:
            self.joined.update(ranks)
            self._save_joined()

    def _save_joined(self):
        try:
            txn = flux.kvs.KVSTxn(self.h)
            txn.put(JOINED, sorted(self.joined))
            txn.commit_async().then(lambda f: _quiet(f))
        except OSError as exc:
            self.log.warning(f"rsa: recording the ranks with store clients: {exc}")

    def _run(self, op, ranks, values, done, late=None, lost=None):
        """Run ``op`` on every rank; ``done(failures, ok_ranks)`` once all
        have ended (or TIMEOUT passed); ``late(rank)`` when a rank given up
        at TIMEOUT succeeds after all; ``lost`` (a list) gets the failed
        ranks whose brokers are lost."""
        pending = set(ranks)
        failed, ok = [], []
        state = {"over": False}

        def finish():
            if not state["over"] and not pending:
                state["over"] = True
                timer.stop()
                done(failed, ok)

        def ended(rank, why, unreachable=False):
            if rank not in pending:
                if why is None and rank in expired and late is not None:
                    late(rank)
                return
            pending.discard(rank)
            (failed.append(f"{self._node(rank)}: {why}") if why else ok.append(rank))
            if why and unreachable and lost is not None:
                lost.append(rank)
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

    def _host(self, rank):
        """The host name of broker ``rank`` (as the instance names it)."""
        try:
            if self._hosts is None:
                self._hosts = Hostlist(self.h.attr_get("hostlist"))
            return self._hosts[rank]
        except (OSError, IndexError, ValueError):
            return f"rank{rank}"

    def _node(self, rank):
        """How a failure names the compute node: its host name and rank."""
        return f"{self._host(rank)} (rank {rank})"

    def _start(self, op, rank, values, ended):
        argv, variables = self.via().command(op, **values)
        if op in SERVED:
            self._ask_helper(op, rank, variables, ended)
            return
        env = {**self.base_env, **variables}

        def waited(f):
            try:
                status = f.get_status()
            except OSError as exc:
                ended(rank, f"{op}: {exc.strerror or exc}", _unreachable(exc))
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
                ended(
                    rank, f"cannot start {op}: {exc.strerror or exc}", _unreachable(exc)
                )
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
            ended(rank, f"cannot start {op}: {exc.strerror or exc}", _unreachable(exc))

    def _ask_helper(self, op, rank, variables, ended):
        """``op`` by the resident helper of ``rank``."""

        def answered(status, said, unreachable=False):
            if status is None:
                ended(rank, f"{op}: {said}", unreachable)
                if op == "attach" and not unreachable:
                    # it may have mounted the image before its helper ended
                    _, undo = self.via().command(
                        "detach",
                        **{
                            k: variables[f"RSA_{k.upper()}"]
                            for k in ("root", "name", "rank")
                        },
                    )
                    self._ask_helper("detach", rank, undo, lambda *a: None)
            elif status == 0:
                ended(rank, None)
            else:
                lines = said.strip().splitlines()
                ended(
                    rank,
                    lines[-1] if lines else f"{op} ended with exit status {status}",
                )

        self.helpers.run(rank, self.via().command("serve"), variables, answered)


def _unreachable(exc):
    """Does this error say the rank's broker is lost?"""
    return exc.errno in (errno.EHOSTUNREACH, errno.ENOSYS, errno.ECONNRESET)


def _load_joined(h):
    try:
        value = flux.kvs.get(h, JOINED)
    except (OSError, FileNotFoundError):
        return []
    return [r for r in value if isinstance(r, int)] if isinstance(value, list) else []


def _quiet(f):
    try:
        f.get()
    except OSError:
        pass


def attach_fields(volume):
    """The RSA_OP=attach variables of a RAM disk's ``volume`` (as its holder
    reported it): every field but the ones for the core, lists joined."""
    return {
        key: ",".join(map(str, value)) if isinstance(value, (list, tuple)) else value
        for key, value in volume.items()
        if key not in ("name", "same_path", "images")
    }


def _python_path():
    """Where the operation finds flux_rsa and Flux's bindings."""
    from flux_rsa.pool.launch import python_path

    return python_path()
