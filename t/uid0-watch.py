#!/usr/bin/python3
"""uid0-watch.py UID STOPFILE REPORT: until STOPFILE exists, look through
/proc every 50 ms for processes of user UID and everything they started
(their descendants) that hold uid 0 (real, effective or saved).  The ones
allowed to (flux-imp, the entry point it runs, and the programs the entry
point starts: GlusterFS's servers and clients for a RAM disk spanning nodes,
e2fsprogs' tools for an image) are counted;
any other is a violation.  REPORT gets a JSON object: {"seen": {comm: samples},
"violations": [lines]}."""

import json
import os
import sys
import time

ALLOWED = {"flux-imp", "rsa-imp-run"}
#: the programs the entry point starts as root, allowed only as its
#: descendants: the brick servers and clients of a RAM disk spanning RSA
#: nodes (GlusterFS), and the tools that make, check and grow an image
#: (e2fsprogs; they run for a few milliseconds, so a sample meets them only
#: now and then)
ENTRY_POINT_RUNS = {"glusterfsd", "glusterfs", "mke2fs", "e2fsck", "resize2fs"}


def processes():
    """pid -> (ppid, comm, (ruid, euid, suid))"""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue  # gone meanwhile
        uids = tuple(int(u) for u in fields["Uid"].split()[:3])
        found[int(entry)] = (int(fields["PPid"]), fields["Name"].strip(), uids)
    return found


def started_by_entry_point(pid, procs):
    """Was ``pid`` started by the entry point (its parent, or an ancestor
    when it daemonized)?"""
    seen, parent = set(), procs[pid][0]
    while parent in procs and parent not in seen:
        if procs[parent][1] == "rsa-imp-run":
            return True
        seen.add(parent)
        parent = procs[parent][0]
    return False


def main():
    uid, stop, report = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    seen, violations = {}, []
    while not os.path.exists(stop):
        procs = processes()
        theirs = {pid for pid, (_, _, uids) in procs.items() if uids[0] == uid}
        for pid, (ppid, comm, uids) in procs.items():
            if 0 not in uids:
                continue
            chain, parent = set(), ppid
            while parent in procs and parent not in chain and parent not in theirs:
                chain.add(parent)
                parent = procs[parent][0]
            if pid not in theirs and parent not in theirs:
                continue  # not started by that user
            if comm in ALLOWED or (
                comm in ENTRY_POINT_RUNS and started_by_entry_point(pid, procs)
            ):
                seen[comm] = seen.get(comm, 0) + 1
            else:
                line = f"pid {pid} {comm!r} uids {uids}"
                if line not in violations:
                    violations.append(line)
        time.sleep(0.05)
    with open(report, "w") as f:
        json.dump({"seen": seen, "violations": violations}, f)


if __name__ == "__main__":
    main()
