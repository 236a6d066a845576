"""Become the job owner before any user path is opened."""

import os
import pwd

from .errors import EXIT_PERMISSION, EXIT_USAGE, StageError


class Owner:
    """Who the stager acts as: uid, gid, login name (may be None) and home."""

    def __init__(self, uid, gid, name, home):
        self.uid = uid
        self.gid = gid
        self.name = name
        self.home = home


def lookup(spec):
    """Resolve USER or UID (a string or int) to an Owner."""
    try:
        if isinstance(spec, int) or str(spec).isdigit():
            uid = int(spec)
            try:
                pw = pwd.getpwuid(uid)
            except KeyError:
                return Owner(uid, uid, None, "/")
        else:
            pw = pwd.getpwnam(spec)
    except KeyError:
        raise StageError(
            EXIT_USAGE,
            None,
            f"--as-user {spec}: no such user",
            "give a login name or a numeric uid",
        ) from None
    return Owner(pw.pw_uid, pw.pw_gid, pw.pw_name, pw.pw_dir)


def become(spec):
    """Switch to SPEC for good; return the Owner, or None when SPEC is None.

    As root: supplementary groups, then gid, then uid, each checked
    afterwards, and a final check that root cannot be regained.  As any
    other user the target must already be who we are: a multi-user
    instance switches identity before exec (flux-imp run), not here.
    """
    if spec is None:
        return None
    owner = lookup(spec)
    if os.geteuid() != 0:
        if owner.uid == os.geteuid() and owner.uid == os.getuid():
            return owner
        raise StageError(
            EXIT_PERMISSION,
            None,
            f"--as-user {spec}: cannot switch from uid {os.geteuid()} to uid "
            f"{owner.uid} without root",
            "start the stager as that user, e.g. through flux-imp run",
        )
    if owner.uid == 0:
        return owner
    if owner.name is not None:
        os.initgroups(owner.name, owner.gid)
    else:
        os.setgroups([owner.gid])
    os.setgid(owner.gid)
    os.setuid(owner.uid)
    _check(owner)
    os.environ["HOME"] = owner.home
    if owner.name is not None:
        os.environ["USER"] = owner.name
        os.environ["LOGNAME"] = owner.name
    return owner


def _check(owner):
    ok = (
        os.getresuid() == (owner.uid,) * 3
        and os.getresgid() == (owner.gid,) * 3
        and (0 not in os.getgroups() or owner.gid == 0)
    )
    try:
        os.setuid(0)
        regained = True
    except PermissionError:
        regained = False
    if not ok or regained:
        raise StageError(
            EXIT_PERMISSION,
            None,
            f"could not drop privileges to uid {owner.uid} gid {owner.gid}",
            "refusing to touch user files with more rights than the owner",
        )
