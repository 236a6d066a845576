"""The RSA nodes, as `flux rsa pool`, `drain` and `undrain` show and change
them: their capacity and reservations as the pool reports them, and the
instance owner taking nodes out of new reservations or back."""

import json
import sys
import time

import flux
import flux.hostlist
from flux.job import JobID

from flux_rsa.cli import views
from flux_rsa.cli.ask import rpc


def cmd_pool(args):
    h = flux.Flux()
    try:
        fmt = (
            None
            if args.json or args.format == "json"
            else views.formatter(views.PoolFormat, "pool", args.format, args.sort)
        )
    except ValueError as exc:
        raise SystemExit(f"flux-rsa: pool: {exc}") from None
    if args.shutdown:
        try:
            result = rpc(h, "rsa.pool-shutdown", {})
        except PermissionError:
            raise SystemExit(
                "flux-rsa: pool --shutdown: only the instance owner can stop the RSA pool"
            ) from None
        if result.get("stopped"):
            print(f"flux-rsa: RSA pool {JobID(result['jobid']).f58} stopped")
        return
    deadline = time.time() + (args.wait or 0)
    while True:
        status = rpc(h, "rsa.pool", {})
        if status.get("ready") or time.time() >= deadline:
            break
        time.sleep(0.2)
    if not status.get("ready"):
        raise SystemExit(
            "flux-rsa: the RSA pool is not running (yet): see `flux dmesg | grep rsa`"
        )
    if args.json or args.format == "json":
        print(json.dumps(status))
        return
    fmt.print_items(
        [views.PoolNode(n) for n in status.get("nodes", [])], no_header=args.no_header
    )
    unusable = (status.get("privilege") or {}).get("error")
    if unusable:
        print(
            f"flux-rsa: the RSA pool cannot make RAM disks (RSA jobs use their directories): "
            f"{unusable}",
            file=sys.stderr,
        )


def cmd_drain(args, undrain=False):
    h = flux.Flux()
    for host in flux.hostlist.Hostlist(args.nodes):
        try:
            rpc(
                h,
                "rsa.drain",
                {
                    "host": host,
                    "reason": " ".join(args.reason or []),
                    "undrain": undrain,
                },
            )
        except PermissionError:
            raise SystemExit(
                "flux-rsa: only the instance owner can drain or undrain RSA nodes"
            ) from None
        print(f"flux-rsa: {host} {'undrained' if undrain else 'drained'}")
