"""``hold``: build (or adopt) the RAM disk, report it, keep it until signalled.

In a holder job every node runs one task; the task on the first node
(``FLUX_TASK_RANK`` 0, or no Flux at all) builds the RAM disk, the others
only keep the node's capacity reserved until the job is cancelled.

SIGTERM, SIGINT or SIGHUP end the hold and destroy the RAM disk.  SIGALRM
(``KEEP_SIGNAL``) ends it *keeping* the RAM disk: its marker says kept, on
which node, for which job, and ``{"event": "kept", ...}`` is printed; a
later holder can take it over with ``--adopt PATH``.  (Not SIGUSR1: between
a holder and this process ``flux-imp run`` forwards TERM, INT, HUP and ALRM
as they are, but turns USR1 into SIGKILL.)
"""

import json
import os
import signal
import socket
import sys

from flux_rsa.ramdisk import layout

STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
KEEP_SIGNAL = signal.SIGALRM


def _say(line):
    print(line, file=sys.stderr, flush=True)


def report(event, **fields):
    print(json.dumps({"event": event, **fields}), flush=True)


def job_nodes():
    """The names of this job's nodes in rank order (task i runs on node i
    of a holder: one task per node), from the job's R."""
    import flux
    import flux.job
    from flux.hostlist import Hostlist

    h = flux.Flux()
    jobid = flux.job.JobID(os.environ["FLUX_JOB_ID"])
    R = flux.job.job_info_lookup(h, jobid, keys=["R"]).get_decode()["R"]
    return list(Hostlist(R["execution"]["nodelist"]))


def node_name():
    """This node's name as the pool instance's R gives it (in a nested
    instance that need not be the machine's host name); the machine's host
    name when that cannot be learnt (no Flux, or not in a job)."""
    try:
        import flux
        import flux.kvs
        from flux.hostlist import Hostlist
        from flux.idset import IDset

        h = flux.Flux()
        rank = int(h.attr_get("rank"))
        R = flux.kvs.get(h, "resource.R", namespace="primary")
        if isinstance(R, str):
            R = json.loads(R)
        ranks = IDset()
        for entry in R["execution"]["R_lite"]:
            ranks.add(entry["rank"])
        hosts = dict(zip(list(ranks), Hostlist(R["execution"]["nodelist"])))
        return hosts[rank]
    except Exception:  # no Flux here: the machine's name is the best there is
        return socket.gethostname()


def task_rank():
    """This task's rank in its holder job (0 outside a job)."""
    return int(os.environ.get("FLUX_TASK_RANK", "0"))


def block_signals():
    """Block the signals that end a hold, first of all: one arriving while
    the RAM disk is built is kept and ends the wait at once, so nothing is
    ever left behind."""
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS | {KEEP_SIGNAL})


def unblock_signals():
    """In a child the holder starts (a server, a site script): a blocked
    mask is inherited across exec, and the child must die of SIGTERM."""
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


def hold(root, name, size, owner, provider, prog="flux-rsa-ramdisk", jobid=None, gen=None,
         adopt=None, rank=0, host=None, volume=None, nodes=(), port=None):
    """Build (or adopt) the RAM disk on task ``rank`` 0 (the others only
    hold capacity), report it, keep it until signalled.  ``host``: this
    node's name for a kept marker (default: asked from Flux at keep time).
    A provider that spans nodes (``volume``: the volfiles.Volume) has every
    task hold its node's share (ramdisk.parallel); provider command has
    every task of the holder's ``nodes`` run the site's scripts
    (ramdisk.command, ``port``: the first of its ports)."""
    signals = STOP_SIGNALS | {KEEP_SIGNAL}
    block_signals()
    if volume is not None:
        from flux_rsa.ramdisk import parallel

        return parallel.hold(root, name, size, owner, rank, volume, jobid=jobid, gen=gen,
                             prog=prog)
    if provider == "command":
        from flux_rsa.ramdisk import command

        return command.hold(root, name, size, owner, rank, nodes, jobid=jobid, gen=gen,
                            port=port, prog=prog)
    if rank != 0:
        signal.sigwait(signals)
        return 0
    try:
        if adopt is not None:
            path = adopt
            marker = layout.adopt(path, jobid, size, owner)
            report("adopted", path=path, size=marker["size"])
        else:
            path = layout.build(root, name, size, owner, provider, jobid=jobid, gen=gen)
    except layout.RamdiskError as exc:
        _say(f"{prog}: {exc}")
        return 1
    report("built", path=path)
    sig = signal.sigwait(signals)
    try:
        if sig == KEEP_SIGNAL:
            marker = layout.keep(path, host or node_name())
            report("kept", path=path, host=marker["host"], size=marker["size"])
        else:
            layout.destroy(path)
    except layout.RamdiskError as exc:
        _say(f"{prog}: {exc}")
        return 1
    return 0
