"""The RAM disks an earlier pool kept on this pool's nodes.

A pool shut down with ``keep`` leaves the RAM disks of the holders named
there in place, each marked kept (``holders.py``).  The next pool learns
them from its start-up sweep (``learn``), lists them (``listing``), and
each ends one of two ways: a holder adopts it (``for_adoption`` checks the
request, ``took_over`` once the holder holds it) or a ``discard`` removes
it (``forget`` once it is gone).  A RAM disk over several nodes is kept
in parts, one per node, listed in order under ``parts``; one with a part
missing cannot be read whole and is discarded at once.

Entries: path -> ``{jobid, gen, owner, bytes, host, rank, path}`` (the
node the marker names), with ``parts`` (the same per node) for one over
several nodes and ``broken`` for one being discarded for a missing part.
"""

import json
import os

from flux_rsa.pool import jobspecs, protocol


class Kept:
    def __init__(self, ramdisk_root, log):
        self.ramdisk_root = ramdisk_root
        self.log = log
        self.disks = {}  # path -> entry

    def __len__(self):
        return len(self.disks)

    def __contains__(self, path):
        return path in self.disks

    def get(self, path):
        return self.disks.get(path)

    @staticmethod
    def parts(entry):
        """The parts of a kept RAM disk: one per node it is on."""
        return entry.get("parts") or [entry]

    # --- learnt at start-up ---

    def learn(self, lines, by_task, hosts, discard):
        """Take the kept RAM disks from the start-up sweep's output
        (``lines``, labelled by task; task i ran on ``by_task[i]``, a
        (rank, host) pair); every other line goes to the log.  ``discard``
        (path) removes a RAM disk over several nodes that lost a part."""
        parts = {}  # RAM disk path -> {index: part} of those over several nodes
        ranks = {name: r for r, name in hosts.items()}
        for line in lines:
            task, _, text = line.partition(": ")
            kept = _json(text)
            if kept and kept.get("event") == "kept" and task.isdigit():
                # the node the marker names (the holder learnt it from the
                # pool's R), else the node the sweep found it on
                rank, host = by_task[int(task)]
                if kept.get("host") in ranks:
                    rank, host = ranks[kept["host"]], kept["host"]
                entry = {
                    "jobid": kept.get("jobid"),
                    "gen": kept.get("gen"),
                    "owner": kept.get("owner"),
                    "bytes": kept.get("bytes") or 0,
                    "host": host,
                    "rank": rank,
                    "path": kept["path"],
                    "image": kept.get("kind") == "image",
                }
                if kept.get("part_of"):
                    parts.setdefault(kept["part_of"], {})[kept.get("index")] = {
                        **entry,
                        "of": kept.get("parts"),
                    }
                elif kept["path"] not in self.disks:  # (else seen from another node)
                    self.disks[kept["path"]] = entry
            else:
                self.log(f"sweep: {text}")
        for path, found in parts.items():
            self._over_nodes(path, found, discard)
        for path, kept in sorted(self.disks.items()):
            where = ",".join(p["host"] for p in kept.get("parts", [])) or kept["host"]
            self.log(
                f"kept RAM disk {path} on {where} (job {kept['jobid']}, {kept['bytes']} "
                "bytes): adopt or discard it"
            )

    def _over_nodes(self, path, found, discard):
        """The kept RAM disk ``path`` over several nodes, from its parts
        (``found``: index -> part): listed with every node in order when
        all are there; else its parts are removed (a node rebooted and its
        share is gone: what is left cannot be read whole)."""
        whole = self.disks.get(path)
        count = next(iter(found.values()))["of"]
        if whole is not None and sorted(found) == list(range(count)):
            ordered = [found[i] for i in range(count)]
            whole.update(parts=ordered, bytes=sum(part["bytes"] for part in ordered))
            return
        self.log(
            f"kept RAM disk {path}: only parts {sorted(found)} of {count} (and "
            f"{'its' if whole else 'no'} namespace) are left: discarding them"
        )
        self.disks[path] = {
            **next(iter(found.values())),
            "path": path,
            "parts": list(found.values()),
            "broken": True,
        }
        discard(path)

    # --- hold ---

    def refuse_over(self, jobid, gen):
        """A new holder would build its RAM disk where one is kept."""
        path = os.path.join(self.ramdisk_root, jobspecs.ramdisk_name(jobid, gen))
        if path in self.disks:
            raise protocol.BadRequest(
                f"{protocol.topic(protocol.HOLD)}: {path} is a kept RAM disk of job "
                f"{jobid} gen {gen}: adopt it (adopt={path!r}) or discard it first"
            )

    def for_adoption(self, path, p, live, down):
        """The kept RAM disk ``path`` a hold request ``p`` adopts, checked
        against the ``live`` holders and the ``down`` ranks; raises
        BadRequest saying why it cannot."""
        where = f"{protocol.topic(protocol.HOLD)}: adopt={path!r}"
        kept = self.disks.get(path)
        if kept is None:
            owner = [h for h in live if path in (h.path, h.adopt)]
            if owner:
                jobid, gen = owner[0].key
                raise protocol.BadRequest(
                    f"{where} is held by holder {jobid}.{gen} already"
                )
            known = ", ".join(sorted(self.disks)) or "none"
            raise protocol.BadRequest(
                f"{where} is not a kept RAM disk on this pool's nodes "
                f"(kept: {known}); hold without adopt for a new one"
            )
        if kept["jobid"] != p["jobid"]:
            raise protocol.BadRequest(
                f"{where} was kept for job {kept['jobid']}, not job " f"{p['jobid']}"
            )
        if kept["owner"] != p["userid"]:
            raise protocol.BadRequest(
                f"{where} belongs to uid {kept['owner']}, not userid " f"{p['userid']}"
            )
        busy = [h for h in live if h.adopt == path]
        if busy:
            jobid, gen = busy[0].key
            raise protocol.BadRequest(
                f"{where} is being adopted by holder {jobid}.{gen}"
            )
        gone = [part["host"] for part in self.parts(kept) if part["rank"] in down]
        if gone:
            raise protocol.BadRequest(f"{where} is on {','.join(gone)}, which is down")
        return kept

    def took_over(self, path):
        """A holder adopted ``path``: it is a holder's RAM disk again."""
        self.disks.pop(path, None)

    # --- discard ---

    def forget(self, path):
        """``path`` is gone (discarded, or unknown)."""
        self.disks.pop(path, None)

    # --- list ---

    def listing(self, adopting):
        """`list`'s kept: every kept RAM disk but those being discarded;
        ``adopting``: path -> key of the live holder adopting it."""
        out = []
        for path, k in sorted(self.disks.items()):
            if k.get("broken"):
                continue  # being discarded: nothing to adopt
            key = adopting.get(path)
            out.append(
                {
                    "jobid": k["jobid"],
                    "gen": k["gen"],
                    "host": k["host"],
                    "path": path,
                    "bytes": k["bytes"],
                    "owner": k["owner"],
                    "hosts": [part["host"] for part in k.get("parts", [])]
                    or [k["host"]],
                    "adopting": None
                    if key is None
                    else {"jobid": key[0], "gen": key[1]},
                }
            )
        return out


def _json(text):
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
