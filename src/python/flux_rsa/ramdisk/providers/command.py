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
import tempfile

from flux_rsa.ramdisk import disks, layout, mounts, signals, sysmount
from flux_rsa.ramdisk.providers.base import Provider, ProviderError

NAME = "command"
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
        raise ProviderError(
            f"provider command has no {step} script: set [rsa] command-{step}"
        )
    return script


def _how(code):
    return f"killed by signal {-code}" if code < 0 else f"exit status {code}"


def _lines(f):
    f.seek(0)
    return [
        line.strip()
        for line in f.read().decode(errors="replace").splitlines()
        if line.strip()
    ]


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
    script = _script(step)
    env = {"PATH": SBIN, "RSA_STEP": step}
    env.update({f"RSA_{k}": str(v) for k, v in variables.items() if v is not None})
    what = f"command-{step} {script}"
    # output goes to files, not pipes: a daemon the script leaves running
    # would keep a pipe open and us waiting
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.Popen(
                [script],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                cwd="/",
                env=env,
                start_new_session=True,
                close_fds=True,
                preexec_fn=signals.unblock,
            )
        except OSError as exc:
            raise ProviderError(f"{what}: cannot run it: {exc.strerror}") from None
        try:
            code = proc.wait(TIMEOUT[step])
        except subprocess.TimeoutExpired:
            _kill(proc)
            raise ProviderError(
                f"{what} did not finish within {TIMEOUT[step]}s and was killed "
                f"(a {step} step must end within {TIMEOUT[step]}s)"
            ) from None
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
    return {
        "PATH": ramdisk,
        "NAME": os.path.basename(ramdisk),
        "SIZE": marker["size"],
        "INDEX": marker["index"],
        "NODES": ",".join(marker["nodes"]),
        "OWNER": marker["owner"],
        "GROUP": marker["group"],
        "JOBID": marker.get("jobid"),
        "GEN": marker.get("gen"),
        "PORT": marker.get("port"),
    }


class Command(Provider):
    name = NAME

    def parts(self, task):
        return [
            task.path
            if task.index == 0
            else os.path.join(task.root, share_name(task.name, task.index))
        ]

    def create(self, task):
        """Run the site's create script on this node (task 0 then makes the
        owner's areas in the RAM disk at ROOT/NAME)."""
        (path,) = self.parts(task)
        jobid, gen = task.ids()
        marker = layout.new_marker(
            os.path.basename(path),
            NAME,
            task.size,
            task.owner,
            jobid,
            gen,
            index=task.index,
            nodes=list(task.nodes),
            ramdisk=task.path,
            port=task.port,
        )
        disks.build(
            path,
            marker,
            lambda: run("create", _node_variables(marker)),
            areas=task.index == 0,
        )
        return path if task.index == 0 else None

    def volume(self, task, path):
        return {
            "provider": NAME,
            "owner": task.owner,
            "nodes": list(task.nodes),
            "source": path,
            "jobid": task.ids()[0],
            "port": task.port,
        }

    def destroy(self, path, marker):
        """Run the site's destroy script (also from a sweep); nothing may
        stay mounted at ``path``, which the caller then removes."""
        run("destroy", _node_variables(marker))
        if sysmount.mounted(path):
            raise ProviderError(
                f"command-destroy {_script('destroy')} left {path} mounted"
            )

    def attach(self, mountpoint, rank, values):
        """Run the site's attach script on this node for job rank ``rank``
        (the first rank here; the others share it).  A failed attach is
        undone with the detach script before the error is raised.  Without
        an attach script the site shows the RAM disk by its own means."""
        if not _scripts.get("attach"):
            return
        name = os.path.basename(mountpoint)
        variables = {
            "PATH": mountpoint,
            "SOURCE": values["SOURCE"],
            "NAME": name,
            "NODES": ",".join(values["NODES"]),
            "JOBID": values.get("JOBID"),
            "GEN": name.partition(".")[2] or None,
            "PORT": values.get("PORT"),
        }

        def mount(workdir):
            try:
                run("attach", {**variables, "RANK": rank})
            except ProviderError:
                try:
                    run("detach", {**variables, "RANK": rank})
                except ProviderError:
                    pass
                raise

        mounts.attach(
            mountpoint, rank, {"provider": NAME, "variables": variables}, mount
        )

    def detach(self, mountpoint, how, rank):
        run("detach", {**how.get("variables", {}), "PATH": mountpoint, "RANK": rank})
        if sysmount.mounted(mountpoint):
            raise ProviderError(
                f"command-detach {_script('detach')} left {mountpoint} mounted"
            )


PROVIDER = Command()
