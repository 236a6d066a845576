#!/bin/sh
test_description='the test instance is a cluster of nodes that share nothing

Every broker runs in a node of its own (t/rsa-nodes): its own mount table
with node-local RAM-disk and mount roots, its own network address and
/etc/hosts.  A tmpfs one node mounts is not seen by another, and a node
outlives its broker (a restart on the same state directory enters it
again).'

. $(dirname $0)/sharness-rsa.sh

if test "$(id -u)" -ne 0; then
	skip_all="nodes of their own need root (mount and network namespaces)"
	test_done
fi
if test -z "$RSA_TEST_INSIDE" && ! command -v glusterfsd >/dev/null && ! test -x /usr/sbin/glusterfsd; then
	skip_all="GlusterFS is not installed (Debian: glusterfs-server glusterfs-client): the test instance shares one mount table"
	test_done
fi

test_under_rsa_instance

# the ranks: node0 node1 rsa0 rsa1
rsa0=2

test_expect_success 'the instance runs on nodes of their own' '
	test -n "$RSA_INSTANCE_NODES" &&
	test "$(flux exec -r all readlink /proc/self/ns/mnt | sort -u | wc -l)" = 4 &&
	test "$(flux exec -r all readlink /proc/self/ns/net | sort -u | wc -l)" = 4
'
test_expect_success 'no node shares the mount table of this machine' '
	readlink /proc/$RSA_NODES_ANCHOR/ns/mnt >host.ns &&
	flux exec -r all readlink /proc/self/ns/mnt >nodes.ns &&
	test_must_fail grep -x -f host.ns nodes.ns
'
test_expect_success 'a tmpfs mounted on rsa0 is not in a compute node'"'"'s mount table' '
	where="$RSA_INSTANCE_TMP/ramdisk/isolation" &&
	flux exec -r $rsa0 sh -c "mkdir -p $where && mount -t tmpfs -o size=1m probe $where &&
	                          echo on-rsa0 >$where/file" &&
	flux exec -r $rsa0 grep -q " $where " /proc/self/mountinfo &&
	test_must_fail grep " $where " /proc/self/mountinfo &&
	test_must_fail flux exec -r 1 grep " $where " /proc/self/mountinfo &&
	test_must_fail flux exec -r 3 grep " $where " /proc/self/mountinfo &&
	test_must_fail test -e "$where/file" &&
	flux exec -r $rsa0 umount "$where" &&
	flux exec -r $rsa0 rmdir "$where"
'
test_expect_success 'each node has an address of its own, and knows the others by name' '
	flux exec -r all sh -c "getent hosts \$(flux getattr hostname) | cut -d\" \" -f1" \
		| sort -u >addresses &&
	test "$(wc -l <addresses)" = 4 &&
	flux exec -r 0 getent hosts rsa1 >rsa1.addr &&
	flux exec -r 3 ip -o -4 addr show dev eth0 >rsa1.dev &&
	grep -F "$(cut -d" " -f1 rsa1.addr)/" rsa1.dev
'
test_expect_success 'every node has a RAM-disk root and a mount root of its own' '
	flux exec -r all sh -c "findmnt -n -o ID $RSA_INSTANCE_TMP/ramdisk; findmnt -n -o ID $RSA_INSTANCE_TMP/mnt" \
		| sort -u >roots &&
	cat roots &&
	test $(wc -l <roots) = 8
'
test_done
