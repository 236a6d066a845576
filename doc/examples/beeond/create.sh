#!/bin/sh
# flux-rsa provider "command", step create: one BeeOND instance over the
# reservation's RSA nodes.  UNTESTED EXAMPLE (see README.md).
#
# Runs as root on every RSA node of the reservation (RSA_INDEX 0..N-1).
# Every node mounts its storage, a tmpfs of RSA_SIZE bytes; node 0 then
# starts BeeOND over RSA_NODES with the client at RSA_PATH.  Safe to run
# again: what exists already is kept.
set -eu

data="$RSA_PATH.beeond"                        # this node's BeeGFS storage
status="/run/flux-rsa-beeond.$RSA_NAME"        # BeeOND's status file, per reservation
nodefile="/run/flux-rsa-beeond.$RSA_NAME.nodes"
logs="/var/log/flux-rsa-beeond/$RSA_NAME"
shift=$((RSA_PORT - 8003))                     # BeeGFS ports 8003-8008 -> RSA_PORT..+5
wait_max=120                                   # seconds node 0 waits for the others

mkdir -p "$data"
if ! mountpoint -q "$data"; then
    mount -t tmpfs -o "size=$RSA_SIZE,mode=0700,nosuid,nodev" flux-rsa-beeond "$data"
fi
test "$RSA_INDEX" = 0 || exit 0

# node 0: wait until every node of the reservation has its storage
echo "$RSA_NODES" | tr ',' '\n' >"$nodefile"
for node in $(cat "$nodefile"); do
    waited=0
    until ssh -o BatchMode=yes "$node" mountpoint -q "$data"; do
        if [ "$waited" -ge "$wait_max" ]; then
            echo "$node: no BeeOND storage tmpfs at $data after ${wait_max}s" >&2
            exit 1
        fi
        sleep 1
        waited=$((waited + 1))
    done
done

# already running (a repeated create): done
if [ -e "$status" ] && mountpoint -q "$RSA_PATH"; then
    exit 0
fi
# half started before: clean that up first
if [ -e "$status" ]; then
    beeond stop -n "$nodefile" -i "$status" -d -c -q || true
fi
# -F: start from an empty storage directory; -L: logs of this reservation
if ! beeond start -n "$nodefile" -d "$data" -c "$RSA_PATH" -p "$shift" \
        -i "$status" -L "$logs" -F -q; then
    echo "beeond start over $RSA_NODES failed (logs: $logs on each node)" >&2
    exit 1
fi
