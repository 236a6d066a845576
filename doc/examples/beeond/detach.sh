#!/bin/sh
# flux-rsa provider "command", step detach: unmount the job's BeeOND
# instance from this compute node.  UNTESTED EXAMPLE (see README.md).
#
# Runs as root on each compute node after the job ended (and after a failed
# attach): nothing mounted is fine.
set -u

pidfile="/run/flux-rsa-beeond.$RSA_NAME.helperd.pid"

if mountpoint -q "$RSA_PATH"; then
    if ! umount "$RSA_PATH" && ! umount -l "$RSA_PATH"; then
        echo "cannot unmount $RSA_PATH" >&2
        exit 1
    fi
fi
if [ -e "$pidfile" ]; then
    kill "$(cat "$pidfile")" 2>/dev/null || true
    rm -f "$pidfile"
fi
