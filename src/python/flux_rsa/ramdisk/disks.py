"""Removing RAM disks, whatever made them: the provider their marker names
gives the space back, then the directory goes.  Nothing without a marker
is ever touched."""

import importlib
import os

from flux_rsa.core import providercaps
from flux_rsa.ramdisk import layout
from flux_rsa.ramdisk.layout import ProviderError
from flux_rsa.ramdisk.sysmount import MountError


def provider(name):
    """The provider ``name`` (its module's ``PROVIDER``), loaded on first use
    (``core.providercaps`` says where it lives; UnknownProvider if
    nowhere)."""
    return importlib.import_module(providercaps.caps(name).module).PROVIDER


def every_provider():
    """Every provider, loaded."""
    return [provider(name) for name in providercaps.PROVIDERS]


def provider_of(marker):
    """The provider that made the RAM disk of ``marker`` (RamdiskError when
    the marker names none flux-rsa knows: never made here)."""
    try:
        return provider(marker.get("provider"))
    except providercaps.UnknownProvider as exc:
        raise layout.RamdiskError(
            f"the {layout.MARKER} marker of RAM disk {marker.get('name')!r} names "
            f"an {exc}: not a RAM disk flux-rsa made"
        ) from None


def destroy(path):
    """Give the RAM disk (or part of one) at ``path`` back and remove it."""
    marker = layout.read_marker(path)
    if marker is None:
        if os.path.lexists(path):
            raise layout.RamdiskError(
                f"{path} has no {layout.MARKER} marker: not removing what "
                "flux-rsa did not make"
            )
        return
    try:
        provider_of(marker).destroy(path, marker)
        layout.remove(path)
    except (OSError, ProviderError) as exc:
        raise layout.RamdiskError(f"cannot remove {path}: {exc}") from None


def claim(path):
    """Make way for a new RAM disk (or part) at ``path``: refuse what is
    not ours, a kept one or one whose holder runs; remove a dead holder's
    leftover."""
    os.makedirs(os.path.dirname(path), mode=0o755, exist_ok=True)
    if not os.path.lexists(path):
        return
    old = layout.read_marker(path)
    if old is None:
        raise layout.RamdiskError(
            f"{path} exists and is not a flux-rsa RAM disk (remove it or "
            "choose another [rsa] ramdisk-root)"
        )
    if old.get("kept"):
        raise layout.RamdiskError(
            f"{path} is a kept RAM disk of job {old.get('jobid')}: adopt it "
            "(rsa-pool.hold adopt) or discard it (rsa-pool.discard) first"
        )
    if layout.holder_alive(old):
        raise layout.RamdiskError(f"{path} is still held by process {old['pid']}")
    destroy(path)


def discard(path):
    """Remove the kept (or abandoned) RAM disk at ``path`` and its parts on
    this node (bricks of one over several nodes); nothing there is fine
    (False).  A RAM disk whose holder still runs is refused."""
    found = False
    for part in [path, *kept_parts(path)]:
        marker = layout.read_marker(part)
        if marker is None and not os.path.lexists(part):
            continue
        if (
            marker is not None
            and not marker.get("kept")
            and layout.holder_alive(marker)
        ):
            raise layout.RamdiskError(
                f"cannot discard {part}: it is held by process "
                f"{marker['pid']} (cancel its holder instead)"
            )
        destroy(part)
        found = True
    return found


def kept_parts(path):
    """The kept parts of the RAM disk ``path`` on this node (their markers
    name it as their volume)."""
    root, name = os.path.split(path)
    try:
        entries = sorted(os.listdir(root))
    except OSError:
        return []
    parts = []
    for entry in entries:
        if entry.startswith(name + ".") and entry != name:
            marker = layout.read_marker(os.path.join(root, entry))
            if (
                marker is not None
                and marker.get("kept")
                and marker.get("volume") == name
            ):
                parts.append(os.path.join(root, entry))
    return parts


def build(path, marker, make, areas=False, mode=0o755):
    """Make the RAM disk (or part) ``path``: a root-owned directory with
    ``marker`` underneath, ``make()`` turning it into storage, the marker
    again on top, and the owner's areas (``areas``).  On failure nothing is
    left and RamdiskError says why."""
    try:
        os.mkdir(path, mode)
        layout.write_marker(path, marker)
        make()
        layout.mark_on_top(path, marker, mode)
        if areas:
            layout.make_areas(path, marker)
    except (OSError, ProviderError, MountError) as exc:
        try:
            destroy(path)
        except layout.RamdiskError:
            pass
        raise layout.RamdiskError(f"cannot build {path}: {exc}") from None
    return path
