"""The pool's side of the privileged entry point: how its subjobs run an
operation, and whether the IMP is set up to let them.

``[rsa] privilege`` chooses: ``direct`` runs operations in the subjob's
own process (a pool run by root, or ``provider = "dir"``); ``imp`` runs
them through ``flux-imp run rsa`` (``[exec] imp``); ``auto`` (default) is
``imp`` when the pool runs as a user other than root and the instance has
``[exec] imp``, else ``direct``.
"""

import json
import os
import stat
import subprocess
from dataclasses import dataclass
from typing import Optional

from flux_rsa.privileged import variables
from flux_rsa.privileged.main import IMP_RUN_NAME, SITE_FREE, TASK_FACTS

MODES = ("auto", "direct", "imp")
CHECK_TIMEOUT = 30.0


@dataclass(frozen=True)
class Via:
    """How this pool runs privileged operations."""

    python: str
    mode: str = "direct"  # "direct" | "imp"
    imp: Optional[str] = None
    #: provider command's site scripts ((step, path), ...), passed on to the
    #: operations that may run them, in direct mode only (through the IMP
    #: the entry point reads them from the site's root-owned configuration)
    scripts: tuple = ()

    def command(self, op, **values):
        """(argv, environment) of a task that runs ``op`` with ``values``
        (lower-case names of its ``RSA_*`` variables)."""
        no_site = ["-S"] if op in SITE_FREE else []
        argv = [self.python, *no_site, "-m", "flux_rsa.privileged"]
        if self.mode == "imp" and op not in TASK_FACTS:
            # nothing for the task to add (an attach, a detach): the IMP
            # itself, one interpreter fewer on every compute node and job
            argv = [self.imp, "run", IMP_RUN_NAME]
        elif self.mode == "imp":
            argv += ["--imp", self.imp]
        steps = variables.OPS[op].scripts
        values.update(
            {
                variables.script_var(step).lower(): path
                for step, path in self.scripts
                if step in steps
            }
        )
        return argv, variables.environment(op, **values)

    def describe(self):
        return {"mode": self.mode, "imp": self.imp}


def choose(python, privilege, imp, uid, scripts=None):
    """The Via for ``[rsa] privilege`` in a pool run by ``uid``;
    ``scripts``: provider command's ({step: path}, ``Policy.scripts``)."""
    if privilege == "imp" or (privilege == "auto" and uid != 0 and imp):
        return Via(python, "imp", imp or None)
    return Via(python, "direct", scripts=tuple(sorted((scripts or {}).items())))


def subjob_environment(environ):
    """A subjob's base environment: the agent's without any RSA_* variable
    (the entry point refuses variables that are not its operation's)."""
    return {k: v for k, v in environ.items() if not k.startswith(variables.PREFIX)}


def imp_config_hint(confdir):
    return os.path.join(confdir, "imp", "conf.d", "rsa.toml")


def problem(via, confdir, user, environ=None):
    """None when ``via`` can run privileged operations on this node, else
    one line saying what is wrong and which file to fix.  Provider
    command's site scripts are checked as the entry point will check them
    (through the IMP it checks the site's, answering ``check``)."""
    guide = "see doc/guide/install.md"
    if via.mode != "imp":
        from flux_rsa.privileged import trust

        for step, path in via.scripts:
            try:
                trust.secure_file(path, f"[rsa] command-{step}")
            except variables.Refused as exc:
                return f"{exc} (see flux-config-rsa(5))"
        return None
    conf = imp_config_hint(confdir)
    if not via.imp:
        return (
            '[rsa] privilege = "imp" needs the IMP: set [exec] imp = "<libexecdir>/flux/'
            f"flux-imp\" in the instance's configuration ({guide})"
        )
    try:
        st = os.stat(via.imp)
    except OSError as exc:
        return f"the IMP {via.imp} ([exec] imp) cannot be used: {exc.strerror} (install flux-security)"
    if st.st_uid != 0 or not st.st_mode & stat.S_ISUID:
        return (
            f"the IMP {via.imp} is not setuid root (owner uid {st.st_uid}, mode "
            f"{stat.S_IMODE(st.st_mode):04o}): chown root and chmod 4755 it ({guide})"
        )
    argv, env = via.command("check")
    env = {**subjob_environment(os.environ if environ is None else environ), **env}
    try:
        proc = subprocess.run(
            argv,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=CHECK_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        return f"flux-imp run {IMP_RUN_NAME} did not answer in {CHECK_TIMEOUT:.0f}s"
    except OSError as exc:
        return f"cannot run {argv[0]}: {exc.strerror}"
    answer = _json(proc.stdout)
    if proc.returncode == 0 and answer.get("ok") and answer.get("euid") == 0:
        return None
    said = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
    if said.startswith("flux-rsa-helper: [rsa] command-"):
        return f"flux-imp run {IMP_RUN_NAME} refuses the site's script: {said} (see flux-config-rsa(5))"
    if "no configuration found" in said:
        fix = f"add a [run.{IMP_RUN_NAME}] table to {conf}"
    elif "permission denied" in said:
        fix = f'add "{user}" to allowed-users of [run.{IMP_RUN_NAME}] in {conf}'
    elif said.startswith("flux-imp"):
        fix = f"check [run.{IMP_RUN_NAME}] in {conf}"
    else:
        fix = f"check the entry point named by [run.{IMP_RUN_NAME}] path in {conf}"
    return f"flux-imp run {IMP_RUN_NAME} failed: {said} ({fix}; {guide})"


def _json(text):
    for line in reversed(text.splitlines()):
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            return value
    return {}
