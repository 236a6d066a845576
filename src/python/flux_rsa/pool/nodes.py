"""The pool's nodes: their names, whether they are up, whether they are
drained, and what each holds (``capacity``, for the answer of ``status``).

**Drain** takes a node out of new reservations without disturbing the ones
it holds.  Flux's own drain (``resource.drain``) marks the whole node down
for the scheduler, so stage and purge subjobs for the holders already
there could not run either.  Instead every memory granule of the node is
marked down in the pool's Fluxion (``sched-fluxion-resource.set_status``
on each memory vertex): holders need memory, so none lands there (one that
could go nowhere else waits); stages need only a core, so they still run.
Running holders keep what they were given.  Undrain marks the granules up
again, which makes Fluxion reconsider the holders that wait.

A kept RAM disk on a drained node may still be adopted: the granules the
adopting holder needs are lent (marked up) while it is the first job in
the queue (adopting holders are submitted with expedite urgency) and
marked down again as soon as it is allocated or gone.

**Up or down** comes from the pool's resource journal (``online`` /
``offline`` events): a node whose broker was lost is offline.
"""

from flux.idset import IDset
from flux.resource.journal import ResourceJournalConsumer

from flux_rsa.pool import graph, jgf, protocol


class Nodes:
    def __init__(self, h, hosts, granules, log, changed):
        self.h = h
        self.hosts = hosts  # pool rank -> host name (as the parent names it)
        self.granules = granules  # memory granules per node
        self.log = log
        self.changed = changed  # changed(rank, down): a node went down or came up
        self.drained = {}  # rank -> reason
        self.down = set()  # ranks offline
        self.lent = {}  # holder key -> (rank, [memory paths])
        self.history_done = False
        self.journal = None

    # --- names ---

    def names(self):
        return ", ".join(self.hosts[r] for r in sorted(self.hosts))

    def rank_of(self, host, field="host"):
        for rank, name in self.hosts.items():
            if name == host:
                return rank
        raise protocol.BadRequest(
            f"{field}={host!r} is not a pool node (pool nodes: " f"{self.names()})"
        )

    def describe(self, rank):
        return {
            "state": "down" if rank in self.down else "up",
            "drained": rank in self.drained,
            "reason": self.drained.get(rank),
        }

    def paths(self, rank):
        return jgf.memory_paths(self.hosts[rank], self.granules)

    # --- drain ---

    def drain(self, rank, reason, done, adopting=()):
        """Drain ``rank``; ``done(error)`` once Fluxion has it (error None).
        ``adopting``: (key, granules) of the holders queued to adopt a kept
        RAM disk there, drained under their feet: lent what they need."""
        already = rank in self.drained
        self.drained[rank] = reason
        if already:
            done(None)
            return
        self._mark(self.paths(rank), "down", done)
        for key, granules in adopting:
            self.lend(key, rank, granules)

    def undrain(self, rank, done):
        if rank not in self.drained:
            done(None)
            return
        del self.drained[rank]
        for key in [k for k, (r, _) in self.lent.items() if r == rank]:
            del self.lent[key]  # all granules are up now
        self._mark(self.paths(rank), "up", done)

    def lend(self, key, rank, granules):
        """Let adopting holder ``key`` have ``granules`` free granules of
        drained ``rank``.  Asynchronous; errors are logged."""
        if rank not in self.drained or key in self.lent:
            return
        self.lent[key] = (rank, [])
        future = self.h.rpc(
            f"{graph.RESOURCE}.find",
            {"criteria": "sched-now=allocated", "format": "jgf"},
            nodeid=0,
        )
        future.then(self._lend, key, rank, granules)

    def _lend(self, future, key, rank, granules):
        try:
            if key not in self.lent or rank not in self.drained:
                return
            taken = jgf.memory_paths_by_rank((future.get().get("R") or {}).get("graph"))
            busy = taken.get(rank, set())
            for r, paths in self.lent.values():
                if r == rank:
                    busy |= set(paths)
            free = [p for p in self.paths(rank) if p not in busy][:granules]
            self.lent[key] = (rank, free)
            self._mark(
                free,
                "up",
                self._logged(
                    f"lending {len(free)} granule(s) of drained "
                    f"{self.hosts[rank]} to an adopting holder"
                ),
            )
        except Exception as exc:
            self.log(f"lending granules of {self.hosts.get(rank)}: {exc!r}")

    def unlend(self, key):
        """The adopting holder ``key`` was allocated (or is gone)."""
        rank, paths = self.lent.pop(key, (None, []))
        if paths and rank in self.drained:
            self._mark(
                paths, "down", self._logged(f"draining {self.hosts[rank]} again")
            )

    def _logged(self, what):
        def done(error):
            if error:
                self.log(f"{what}: {error}")

        return done

    def _mark(self, paths, status, done):
        """set_status every path; ``done(first error or None)`` after all."""
        state = {"left": len(paths), "error": None}
        if not paths:
            done(None)
            return

        def one(future, path):
            try:
                try:
                    future.get()
                except OSError as exc:
                    state["error"] = state["error"] or (
                        f"Fluxion refused status {status} for {path}: {exc.strerror or exc}"
                    )
                state["left"] -= 1
                if state["left"] == 0:
                    done(state["error"])
            except Exception as exc:  # never let a callback stop the reactor
                self.log(f"marking {path} {status}: {exc!r}")

        for path in paths:
            self.h.rpc(
                f"{graph.RESOURCE}.set_status",
                {"resource_path": path, "status": status},
                nodeid=0,
            ).then(one, path)

    # --- up and down ---

    def watch(self):
        """Follow the pool's resource journal for online/offline events."""
        self.journal = ResourceJournalConsumer(self.h, include_sentinel=True)
        self.journal.set_callback(self._journal_event)
        self.journal.start()

    def _journal_event(self, event):
        try:
            if event is None:
                return
            if event.is_empty():
                self.history_done = True
                return
            if event.name not in ("online", "offline"):
                return
            ranks = [
                r for r in IDset(event.context.get("idset", "")) if r in self.hosts
            ]
            for rank in ranks:
                down = event.name == "offline"
                if down == (rank in self.down):
                    continue
                (self.down.add if down else self.down.discard)(rank)
                if self.history_done:
                    self.changed(rank, down)
        except Exception as exc:
            self.log(f"resource journal: {exc!r}")


def capacity(used, policy, hosts, nodes, holders):
    """The nodes of the answer of `status` (doc/pool.md): each one's
    capacity, what Fluxion has allocated there (``used``: rank ->
    granules), the live ``holders`` on it and its state (up or down,
    drained)."""
    g = policy.granule
    out = []
    for rank in sorted(hosts):
        total = policy.node_granules * g
        reserved = used.get(rank, 0) * g
        on_node = [
            {"jobid": h.key[0], "gen": h.key[1], "bytes": n * g}
            for h in holders
            for r, n in h.granted_by_rank().items()
            if r == rank
        ]
        out.append(
            {
                "host": hosts[rank],
                "rank": rank,
                "total": total,
                "reserved": reserved,
                "free": total - reserved,
                "holders": on_node,
                **nodes.describe(rank),
            }
        )
    return out
