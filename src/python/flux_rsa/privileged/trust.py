"""What the privileged entry point trusts when it runs as root for someone
else: the site's configuration in root-owned files, and directories no one
but root can change.

``flux-imp run rsa`` is called by the instance owner (the ``flux`` user),
whose requests are checked but not believed about where root may act: the
RAM-disk root comes from the ``[rsa]`` table of the TOML files in the
configuration directory fixed when the entry point was installed (the
system instance's, ``<sysconfdir>/flux/system/conf.d``), and only when those
files are root-owned and not writable by others.  So do the site scripts
of provider command (``scripts``); root runs one only when it is a regular
file that only root can change, in directories only root can change.
"""

import os
import stat

from flux_rsa.privileged.variables import OPS, PREFIX, Refused, script_var


def default_root():
    """The RAM-disk root when the site's [rsa] table sets none (the service's)."""
    from flux_rsa.core.config import Policy

    return Policy.ramdisk_root


def _secure(st, owners=(0,), sticky=True):
    """Owned by one of ``owners`` (root) and writable by its owner alone
    (with ``sticky``, a sticky directory such as /tmp is fine: nobody can
    replace what root put there)."""
    writable_by_others = st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
    return st.st_uid in owners and (
        not writable_by_others or (sticky and st.st_mode & stat.S_ISVTX)
    )


def _entry(shown, path, directory, owners=(0,)):
    """lstat ``path``; raise Refused (saying ``shown`` first) unless it is
    a real directory (``directory``) or a regular file, owned by one of
    ``owners`` and writable by its owner alone (a sticky directory such
    as /tmp is fine)."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise Refused(f"{shown}: {exc.strerror}") from None
    if not (stat.S_ISDIR if directory else stat.S_ISREG)(st.st_mode):
        kind = (
            "a symbolic link"
            if stat.S_ISLNK(st.st_mode)
            else "not a directory"
            if directory
            else "not a regular file"
        )
        why = (
            "root acts only under real directories"
            if directory
            else "root runs only regular files; name the script itself"
        )
        raise Refused(f"{shown} is {kind} ({why})")
    if not _secure(st, owners, sticky=directory):
        what = "acts only under directories" if directory else "runs only scripts"
        raise Refused(
            f"{shown} is owned by uid {st.st_uid} with mode "
            f"{stat.S_IMODE(st.st_mode):04o}: root {what} that only root can change "
            "(chown root and chmod go-w it)"
        )
    return st


def secure_path(path, what):
    """Raise Refused unless every component of the absolute ``path`` is a
    real directory (no symbolic link) that only root can change."""
    for current in _chain(path):
        _entry(f"{what} {path}: {current}", current, directory=True)


def _chain(path):
    """The root, then each longer prefix of the absolute ``path``."""
    chain = ["/"]
    for part in filter(None, path.split("/")):
        chain.append(os.path.join(chain[-1], part))
    return chain


def secure_installed(path, what):
    """Like secure_path, for where a package was installed: a component
    may also be a symbolic link root owns (flux-core links its Python
    directory into its own tree); where it leads is checked in turn."""
    for current in _chain(path):
        try:
            st = os.lstat(current)
        except OSError as exc:
            raise Refused(f"{what} {path}: {current}: {exc.strerror}") from None
        if stat.S_ISLNK(st.st_mode):
            if st.st_uid != 0:
                raise Refused(
                    f"{what} {path}: {current} is a symbolic link owned by uid "
                    f"{st.st_uid}: root follows only links root made"
                )
        else:
            _entry(f"{what} {path}: {current}", current, directory=True)
    secure_path(os.path.realpath(path), what)


def site_table(conf_dir):
    """The ``[rsa]`` table of the TOML files in ``conf_dir`` (later files
    win, as Flux reads them), after checking that only root can change them."""
    import tomllib

    secure_path(conf_dir, "configuration directory")
    table = {}
    for entry in sorted(os.listdir(conf_dir)):
        if not entry.endswith(".toml"):
            continue
        path = os.path.join(conf_dir, entry)
        st = os.lstat(path)
        if not stat.S_ISREG(st.st_mode) or not _secure(st, sticky=False):
            raise Refused(
                f"configuration file {path} is not a regular file that only root can "
                "change (chown root and chmod go-w it)"
            )
        try:
            with open(path, "rb") as f:
                table.update(tomllib.load(f).get("rsa", {}))
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise Refused(f"configuration file {path}: {exc}") from None
    return table


#: operations on compute nodes act under [rsa] mount-root (default: ramdisk-root)
ON_COMPUTE_NODES = ("attach", "detach", "leave", "flush")
#: operations that act on RSA nodes or, for an image a compute node holds, there
ON_EITHER = ("purge",)


def site_root(conf_dir, key="ramdisk-root"):
    """The site's RAM-disk root (``[rsa] ramdisk-root``, default as the
    service's), or where compute nodes attach (``[rsa] mount-root``)."""
    table = site_table(conf_dir)
    root = table.get("ramdisk-root") or default_root()
    if key == "mount-root":
        root = table.get("mount-root") or root
    if not isinstance(root, str) or not root.startswith("/"):
        raise Refused(f"[rsa] {key} = {root!r} in {conf_dir} is not an absolute path")
    return os.path.normpath(root)


def check(request, conf_dir):
    """Raise Refused unless ``request`` acts as root only under the site's
    RAM-disk root (on compute nodes: its mount root), and that root is a
    directory only root can change."""
    root = request.get("ROOT")
    if root is None:
        return
    key = "mount-root" if request.op in ON_COMPUTE_NODES else "ramdisk-root"
    site = site_root(conf_dir, key)
    if request.op in ON_EITHER and root == site_root(conf_dir, "mount-root"):
        key, site = "mount-root", root
    if root != site:
        what = "RAM-disk root" if key == "ramdisk-root" else "RAM-disk mount root"
        raise Refused(
            f"{PREFIX}ROOT={root!r}: not the site's {what} {site!r} "
            f"([rsa] {key} in {conf_dir}): root acts nowhere else"
        )
    parent = os.path.dirname(root)
    secure_path(parent, "the parent of the RAM-disk root")
    if os.path.lexists(root):
        secure_path(root, "the RAM-disk root")
    source = request.get("SOURCE")
    if source is not None and os.path.dirname(source) != site_root(conf_dir):
        raise Refused(
            f"{PREFIX}SOURCE={source!r}: not a RAM disk under the site's RAM-disk root "
            f"{site_root(conf_dir)!r} ([rsa] ramdisk-root in {conf_dir})"
        )


def owner_areas(request):
    """Raise Refused unless the RAM-disk areas a stage reads or writes as the
    job owner (its RAM-disk side, and a REPLICA it copies from) are real
    directories that owner owns: the areas of a RAM disk made for that
    owner, which only the owner's job and stages fill.  Staging out from an
    area the instance owner filled would put its files into the user's
    data_out as the user."""
    if request.op != "stage":
        return
    owner = request["OWNER"]
    side = "DST" if request["DIRECTION"] == "in" else "SRC"
    for var in (side, "REPLICA"):
        area = request.get(var)
        if area is None:
            continue
        try:
            st = os.lstat(area)
        except OSError as exc:
            raise Refused(f"{PREFIX}{var}={area!r}: {exc.strerror}") from None
        if not stat.S_ISDIR(st.st_mode) or st.st_uid != owner:
            kind = "a directory" if stat.S_ISDIR(st.st_mode) else "not a directory"
            raise Refused(
                f"{PREFIX}{var}={area!r} is {kind} owned by uid {st.st_uid}, not by "
                f"{PREFIX}OWNER={owner}: a stage works only on the areas of a RAM "
                "disk made for the job's owner"
            )


def secure_file(path, what):
    """Raise Refused unless ``path`` is an absolute path of a regular,
    executable file that only root (or, in a pool not run by root, its
    user) can change, in directories only root can change."""
    if not isinstance(path, str) or not path.startswith("/"):
        raise Refused(
            f"{what} = {path!r}: not an absolute path (give the script's full path)"
        )
    euid = os.geteuid()
    if euid == 0:
        secure_path(os.path.dirname(path), f"{what} {path}: its directory")
    st = _entry(f"{what} {path}", path, directory=False, owners=(0, euid))
    if not st.st_mode & stat.S_IXUSR:
        raise Refused(f"{what} {path} is not executable (chmod u+x it)")


def scripts(request, conf_dir=None):
    """The site scripts of provider command that ``request`` may run:
    {step: path}.  Through flux-imp (``conf_dir`` given) they come from the
    site's ``[rsa]`` table alone; for a trusted caller (``direct``) from
    its request.  Each one is checked with ``secure_file``."""
    steps = OPS[request.op].scripts
    table = site_table(conf_dir) if conf_dir is not None and steps else {}
    found = {}
    for step in steps:
        if conf_dir is not None:
            path, what = table.get(f"command-{step}"), f"[rsa] command-{step}"
        else:
            path, what = request.get(script_var(step)), PREFIX + script_var(step)
        if path:
            secure_file(path, what)
            found[step] = path
    return found
