"""Provider ``command``: the site's own script for each step.

``[rsa] provider = "command"`` names a script per step (``command-create``,
``command-destroy``, and optionally ``command-attach`` and
``command-detach``).  flux-rsa runs them as root, with no arguments, in a
session of their own, with ``/`` as working directory and an environment
of nothing but ``PATH`` and the ``RSA_*`` variables of the step:

=================  =========================================================
``RSA_STEP``       ``create``, ``destroy``, ``attach`` or ``detach``
``RSA_PATH``       create/destroy: the RAM disk's path on the RSA nodes,
                   ROOT/NAME (on index 0 an empty root-owned directory that
                   create must turn into the RAM disk); attach/detach: the
                   mount point on this compute node, MOUNT_ROOT/NAME
``RSA_NAME``       the RAM disk's name, JOBID.GEN
``RSA_NODES``      the reservation's RSA nodes in order, comma-separated
``RSA_JOBID``      the job (decimal), ``RSA_GEN`` its reservation's number
``RSA_PORT``       the first of 8 (``config.COMMAND_PORTS``) TCP ports from ``[rsa]
                   fs-ports`` that no other live reservation of the pool has
``RSA_INDEX``      create/destroy: this node's index in ``RSA_NODES``
``RSA_SIZE``       create/destroy: bytes reserved on this node
``RSA_OWNER``,     create/destroy: the job owner's uid and primary gid
``RSA_GROUP``
``RSA_SOURCE``     attach/detach: the RAM disk's path on the RSA nodes
``RSA_RANK``       attach/detach: the job's broker rank on this node
=================  =========================================================

Exit status 0 means done; otherwise the last line the script wrote on
stderr becomes the error.  Every step must be idempotent (a sweep may run
destroy again for a holder that died) and end in time: create and destroy
are killed after ``TIMEOUT["create"]`` seconds, attach and detach after
``TIMEOUT["attach"]`` (below the service's wait for a compute node).

On each RSA node of a reservation holder task ``INDEX`` keeps a marked
directory - ROOT/NAME on index 0 (the RAM disk itself), ROOT/NAME.n<INDEX>
on the others (a marker only) - so that a sweep finds what a dead holder
left and runs destroy with the same variables.  Which scripts may run is
set once per process (``configure``) by the privileged entry point: from
the site's root-owned ``[rsa]`` table through flux-imp, from a trusted
caller otherwise.
"""

import os
import signal
import subprocess
import sys
import tempfile

from flux_rsa.ramdisk import layout, mounts
from flux_rsa.ramdisk.providers import ProviderError

PROVIDER = "command"
SBIN = "/usr/sbin:/usr/bin:/sbin:/bin"
#: seconds a step may take before it is killed (SIGTERM to its process
#: group, SIGKILL KILL_GRACE seconds later)
TIMEOUT = {"create": 300, "destroy": 300, "attach": 50, "detach": 50}
KILL_GRACE = 5
#: lines of a step's output copied to this process's stdout (for the logs)
OUTPUT_LINES = 50

_scripts = {}


def configure(scripts):
    """The site's scripts this process may run: {step: absolute path}."""
    _scripts.clear()
    _scripts.update(scripts)


def _script(step):
    script = _scripts.get(step)
    if not script:
        raise ProviderError(f"provider command has no {step} script: set [rsa] command-{step}")
    return script


def _how(code):
    return f"killed by signal {-code}" if code < 0 else f"exit status {code}"


def _lines(f):
    f.seek(0)
    return [line.strip() for line in f.read().decode(errors="replace").splitlines() if line.strip()]


def _kill(proc):
    """SIGTERM the step's process group, SIGKILL it when that is not enough."""
    for sig, wait in ((signal.SIGTERM, KILL_GRACE), (signal.SIGKILL, None)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            pass
        try:
            proc.wait(wait)
            return
        except subprocess.TimeoutExpired:
            continue


def run(step, variables):
    """Run the site's script for ``step`` with ``variables`` (names without
    RSA_); raise ProviderError when it fails or overruns."""
    from flux_rsa.ramdisk.hold import unblock_signals

    script = _script(step)
    env = {"PATH": SBIN, "RSA_STEP": step}
    env.update({f"RSA_{k}": str(v) for k, v in variables.items() if v is not None})
    what = f"command-{step} {script}"
    # output goes to files, not pipes: a daemon the script leaves running
    # would keep a pipe open and us waiting
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen([script], stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                    cwd="/", env=env, start_new_session=True, close_fds=True,
                                    preexec_fn=unblock_signals)
        except OSError as exc:
            raise ProviderError(f"{what}: cannot run it: {exc.strerror}") from None
        try:
            code = proc.wait(TIMEOUT[step])
        except subprocess.TimeoutExpired:
            _kill(proc)
            raise ProviderError(f"{what} did not finish within {TIMEOUT[step]}s and was killed "
                                f"(a {step} step must end within {TIMEOUT[step]}s)") from None
        said = _lines(err)
        for line in (_lines(out) + said)[-OUTPUT_LINES:]:
            print(f"{what}: {line}", flush=True)
    if code != 0:
        why = f": {said[-1]}" if said else " (it wrote nothing on stderr)"
        raise ProviderError(f"{what} failed ({_how(code)}){why}")


# --- on the RSA nodes ------------------------------------------------------


def share_name(name, index):
    """The marked directory of holder task ``index`` (> 0) of RAM disk NAME."""
    return f"{name}.n{index}"


def _node_variables(marker):
    """What create and destroy are told, from the task's marker."""
    ramdisk = marker["ramdisk"]
    return {"PATH": ramdisk, "NAME": os.path.basename(ramdisk), "SIZE": marker["size"],
            "INDEX": marker["index"], "NODES": ",".join(marker["nodes"]),
            "OWNER": marker["owner"], "GROUP": marker["group"], "JOBID": marker.get("jobid"),
            "GEN": marker.get("gen"), "PORT": marker.get("port")}


def create(path, marker):
    """The provider's create (``layout.build``): run the site's create
    script for the task whose marked directory is ``path``."""
    del path
    run("create", _node_variables(marker))


def destroy(path, marker):
    """The provider's destroy (``layout.destroy``, also from a sweep): run
    the site's destroy script; nothing may stay mounted at ``path``, which
    the caller then removes."""
    run("destroy", _node_variables(marker))
    if mounts.mounted(path):
        raise ProviderError(f"command-destroy {_script('destroy')} left {path} mounted")


def hold(root, name, size, owner, index, nodes, jobid=None, gen=None, port=None,
         prog="flux-rsa-ramdisk"):
    """Holder task ``index`` of ``nodes``: run create on this node (task 0
    then makes the owner's areas in the RAM disk at ROOT/NAME and reports
    it), wait for a signal, run destroy.  Signals are blocked by the caller.
    The RAM disk is never kept (a keep signal destroys it too)."""
    from flux_rsa.ramdisk.hold import KEEP_SIGNAL, STOP_SIGNALS, report

    ramdisk = layout.path_of(root, name)
    dirname = name if index == 0 else share_name(name, index)
    if jobid is None or gen is None:
        jobid, gen = layout.ids_from_name(name)
    try:
        path = layout.build(root, dirname, size, owner, PROVIDER, jobid=jobid, gen=gen,
                            areas=index == 0, index=index, nodes=list(nodes), ramdisk=ramdisk,
                            port=port)
    except layout.RamdiskError as exc:
        print(f"{prog}: {exc}", file=sys.stderr, flush=True)
        return 1
    if index == 0:
        report("built", path=path)
    sig = signal.sigwait(STOP_SIGNALS | {KEEP_SIGNAL})
    try:
        layout.destroy(path)
    except layout.RamdiskError as exc:
        print(f"{prog}: {exc}", file=sys.stderr, flush=True)
        return 1
    if sig == KEEP_SIGNAL and index == 0:
        print(f"{prog}: {path} was not kept: a RAM disk of provider command does not outlive "
              "its holder", file=sys.stderr, flush=True)
        return 1
    return 0


# --- on the compute nodes ----------------------------------------------------


def attach(mountpoint, rank, source, nodes, jobid=None, port=None):
    """Run the site's attach script on this node for job rank ``rank`` (the
    first rank here; the others share it).  A failed attach is undone with
    the detach script before the error is raised."""
    name = os.path.basename(mountpoint)
    variables = {"PATH": mountpoint, "SOURCE": source, "NAME": name, "NODES": ",".join(nodes),
                 "JOBID": jobid, "GEN": name.partition(".")[2] or None, "PORT": port}

    def mount(workdir):
        try:
            run("attach", {**variables, "RANK": rank})
        except ProviderError:
            try:
                run("detach", {**variables, "RANK": rank})
            except ProviderError:
                pass
            raise

    mounts.attach(mountpoint, rank, {"provider": PROVIDER, "variables": variables}, mount)


def detach(mountpoint, how, rank):
    """Undo an attach (``mounts.detach``, for the last rank on this node)."""
    run("detach", {**how.get("variables", {}), "PATH": mountpoint, "RANK": rank})
    if mounts.mounted(mountpoint):
        raise ProviderError(f"command-detach {_script('detach')} left {mountpoint} mounted")
