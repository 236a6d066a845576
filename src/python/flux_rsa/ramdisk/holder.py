"""The holder: one loop for every provider.

A holder subjob runs one task per RSA node of the reservation; each runs
``hold``: claim the paths it will make, build (or adopt) its share,
report the RAM disk (task 0: ``{"event": "built", "path", "volume"}``),
wait for a signal, then give everything back (a stop signal) or keep it
(``signals.KEEP``, a provider that keeps: the marker says kept, on which
node, for which job, and ``{"event": "kept", ...}`` is printed; a later
holder takes it over with ``Task.adopt``).  Failures are one line on
stderr, ``PROG: ...``, and exit status 1; nothing is left behind.
"""

import dataclasses
import json
import os
import socket
import sys

from flux_rsa.core import providercaps
from flux_rsa.ramdisk import disks, layout, signals

PROG = "flux-rsa-ramdisk"
#: seconds a task that failed waits before it exits (see hold)
OUTPUT_LINGER = 1.0


def _say(line, prog=PROG):
    print(f"{prog}: {line}", file=sys.stderr, flush=True)


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


def hold(task, provider_name, prog=PROG):
    """Holder task ``task`` of provider ``provider_name``: build or adopt,
    report, keep until signalled; return the exit status."""
    signals.block()
    if task.image and task.host is None:
        task = dataclasses.replace(task, host=node_name())  # its store's node
    provider = disks.provider(provider_name)
    keeps = providercaps.caps(provider_name).keeps
    try:
        if task.adopt is not None:
            path = provider.adopt(task)
            if task.index == 0:
                report("adopted", path=path, size=layout.read_marker(path)["size"])
        else:
            for part in provider.parts(task):
                disks.claim(part)
            path = provider.create(task)
        paths = provider.parts(task)
    except layout.RamdiskError as exc:
        if signals.stopping():
            # told to stop while building (a cancel in BOOTING): building
            # stopped and what was made is gone, as the stop asked
            signals.take_stop()
            return 0
        _say(exc, prog)
        # the job ends at the first failed task (exit-on-error), and a line
        # from another node's shell can be lost if that comes first: give
        # it a moment to reach the job's output (the holder's error)
        signals.linger(OUTPUT_LINGER)
        return 1
    if task.index == 0:
        report("built", path=path, volume=provider.volume(task, path))
    sig = signals.wait()
    if sig == signals.KEEP and keeps:
        try:
            marker = provider.keep(
                dataclasses.replace(task, host=task.host or node_name()), paths
            )
        except (OSError, layout.RamdiskError) as exc:
            _say(f"cannot keep {path or paths}: {exc}", prog)
            return 1
        if task.index == 0:
            report("kept", path=path, host=marker["host"], size=marker["size"])
        return 0
    errors = provider.stop(task, paths)
    for error in errors:
        _say(error, prog)
    if sig == signals.KEEP and task.index == 0:
        _say(
            f"{path} was not kept: a RAM disk of provider {provider_name} does not outlive "
            "its holder",
            prog,
        )
        return 1
    return 1 if errors else 0
