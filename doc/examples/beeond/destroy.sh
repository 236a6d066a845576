#!/bin/sh
# flux-rsa provider "command", step destroy: stop the reservation's BeeOND
# instance and free the storage.  UNTESTED EXAMPLE (see README.md).
#
# Runs as root on every RSA node (all at once), and again from a sweep
# when a holder died: nothing there is fine.
set -u

data="$RSA_PATH.beeond"
status="/run/flux-rsa-beeond.$RSA_NAME"
nodefile="/run/flux-rsa-beeond.$RSA_NAME.nodes"
wait_max=120
failed=0

if [ "$RSA_INDEX" = 0 ]; then
    # services, clients and data on every node of the reservation
    if [ -e "$status" ]; then
        [ -e "$nodefile" ] || echo "$RSA_NODES" | tr ',' '\n' >"$nodefile"
        if ! beeond stop -n "$nodefile" -i "$status" -d -L -q; then
            echo "beeond stop over $RSA_NODES failed" >&2
            failed=1
        fi
    fi
    rm -f "$nodefile"
else
    # node 0 stops this node's services; wait for it, then stop what is left here
    waited=0
    while [ -e "$status" ] && [ "$waited" -lt "$wait_max" ]; do
        sleep 1
        waited=$((waited + 1))
    done
    if [ -e "$status" ]; then
        beeond stoplocal -i "$status" -d -L -c -q || failed=1
    fi
fi

if mountpoint -q "$RSA_PATH"; then
    umount "$RSA_PATH" || umount -l "$RSA_PATH" || failed=1
fi
if mountpoint -q "$data"; then
    umount "$data" || umount -l "$data" || failed=1
fi
rmdir "$data" 2>/dev/null || true
if [ "$failed" != 0 ]; then
    echo "could not stop BeeOND for $RSA_NAME cleanly on this node" >&2
fi
exit "$failed"
