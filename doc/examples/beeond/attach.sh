#!/bin/sh
# flux-rsa provider "command", step attach: mount the job's BeeOND
# instance on this compute node.  UNTESTED EXAMPLE (see README.md).
#
# Runs as root on each compute node of the job (once per node) before the
# job starts; RSA_PATH is an empty directory under [rsa] mount-root.
set -eu

mgmtd="${RSA_NODES%%,*}"                       # BeeOND runs its management service on node 0
shift=$((RSA_PORT - 8003))
pidfile="/run/flux-rsa-beeond.$RSA_NAME.helperd.pid"
log="/var/log/flux-rsa-beeond/$RSA_NAME.helperd.log"

if mountpoint -q "$RSA_PATH"; then
    exit 0
fi
modprobe beegfs
# BeeGFS 7 clients need a helper daemon; give it the reservation's ports too
if ! { [ -e "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; }; then
    mkdir -p "$(dirname "$log")"
    /opt/beegfs/sbin/beegfs-helperd runDaemonized=true pidFile="$pidfile" \
        logStdFile="$log" connPortShift="$shift"
fi
if ! mount -t beegfs beegfs_ondemand "$RSA_PATH" \
        -o "sysMgmtdHost=$mgmtd,connPortShift=$shift"; then
    echo "cannot mount BeeOND of $RSA_NAME from $mgmtd (port shift $shift)" >&2
    exit 1
fi
