"""Can a job shell on this node show a job its RAM disk at its own paths?

The job shell plugin (src/shell/rsa.c) makes a mount namespace for the
job: a plain one when it may (root), else inside a user namespace of the
job's user.  ``[rsa] paths = "auto"`` gives jobs ``bind`` where that works
and ``env`` where it does not: the service looks once, when it loads, by
doing what the shell plugin does in a short-lived child process (a user
namespace with the caller's own uid and gid, a mount namespace, a bind
mount in it).  The instance owner is an ordinary user at a site, as job
users are; the answer is this node's, and compute nodes are expected to
run the same system (a site that knows better sets ``[rsa] paths``).
"""

import subprocess
import sys

#: what the child does: exits 0 when it could, else prints why
PROBE = r"""
import ctypes, os, sys
CLONE_NEWNS, CLONE_NEWUSER = 0x00020000, 0x10000000
MS_BIND, MS_REC, MS_SLAVE = 0x1000, 0x4000, 0x80000
libc = ctypes.CDLL(None, use_errno=True)
def fail(what):
    err = ctypes.get_errno()
    print(f"{what}: {os.strerror(err)}")
    sys.exit(1)
uid, gid = os.getuid(), os.getgid()
if libc.unshare(CLONE_NEWNS) != 0:
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNS) != 0:
        fail("unshare(CLONE_NEWUSER|CLONE_NEWNS)")
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"),
                       ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)
if libc.mount(None, b"/", None, MS_REC | MS_SLAVE, None) != 0:
    fail("mount --make-rslave /")
if libc.mount(b"/", b"/", None, MS_BIND | MS_REC, None) != 0:
    fail("mount --rbind / /")
"""


def job_namespaces(timeout=10.0):
    """(True, None) when job shells may make their mount namespace here,
    else (False, why)."""
    try:
        out = subprocess.run(
            [sys.executable, "-c", PROBE],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return False, f"the probe did not run: {exc}"
    if out.returncode == 0:
        return True, None
    why = out.stdout.strip() or out.stderr.strip().splitlines()[-1:] or ["failed"]
    return False, why if isinstance(why, str) else why[0]
