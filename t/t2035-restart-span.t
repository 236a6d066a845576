#!/bin/sh
test_description='a RAM disk over both RSA nodes, with headroom, survives a reload, a pool restart and an instance restart

The test instance at the site'"'"'s settings (span-fill 0.95), kept in a
state directory (t/rsa-instance --statedir) with no RAM-disk or mount root
of its own: what a restart needs is kept there.  Job s has a RAM disk over
both RSA nodes, charged more than it asked (each node its share and the
headroom), its outputs not home yet (STAGING_OUT, its stage-out script
gated).  It keeps that RAM disk through a reload of the rsa module and
through a restart of the RSA pool (kept, then adopted); job z is then
running on a one-node RAM disk (an image in its RSA node'"'"'s store) with
its inputs dropped (INUSE_OUT).  The
whole instance stops and starts again on the same state directory: both
RAM disks are adopted, and both jobs'"'"' outputs come home.'

. $(dirname $0)/sharness-rsa.sh

if test "$(id -u)" -ne 0; then
	skip_all="keeping tmpfs RAM disks through a restart needs root"
	test_done
fi
if ! command -v glusterfsd >/dev/null && ! test -x /usr/sbin/glusterfsd; then
	skip_all="GlusterFS is not installed (Debian: glusterfs-server glusterfs-client): no RAM disk over several nodes"
	test_done
fi

state=$(mktemp -d /tmp/rsa-restart-span.XXXXXX)
roots="$state/instance"
# whatever happens, the instance's nodes and directory (kept in $state
# between its lives) go at the end, and so does what they held
end_instance() {
	test -d "$state" && "$RSA_BUILDDIR"/t/rsa-instance --statedir "$state" --end >&2
	rm -rf "$state"
}
trap 'rc=$?; end_instance; (exit $rc); die' EXIT

# a life of the instance: no configuration of its own
run_life() {
	"$RSA_BUILDDIR"/t/rsa-instance --statedir "$state" -- sh "$@"
}
# on_nodes COMMAND...: COMMAND on every node of the instance (they outlive
# it, as hosts outlive a restart), each output line prefixed with its rank
on_nodes() {
	for rank in 0 1 2 3; do
		"$RSA_SRCDIR"/t/rsa-nodes exec "$state/nodes" $rank "$@" | sed "s/^/$rank: /"
	done
}

# helpers for the lives, run inside an instance without sharness (the
# tests' one wait, rsa_wait_for, first)
cp "$RSA_SRCDIR/t/rsa-wait.sh" helpers.sh
cat >>helpers.sh <<'EOF2'
in_state() {
	test "$(flux rsa status -a -n -o "{rsa_state}" $1)" = $2
}
# wait_state JOBID STATE: the job's rsa-state event while it is active,
# then its record
wait_state() {
	flux job wait-event -q -t 60 -m state=$2 $1 rsa-state 2>/dev/null || :
	rsa_wait_for 90 "$1 in $2" in_state $1 $2
}
# what s holds: its RSA nodes, what it asked, what is charged, its RAM disk
holds() {
	flux rsa status -a -n -o "{nodes} {capacity} {charged} {ramdisk}" $1
}
# what job $1 is charged, in bytes: in its record, then on each RSA node
charged() {
	flux rsa status -a -o json $1 | flux python -c "
import json, sys
print(json.load(sys.stdin)[0][\"granted\"])" &&
	flux rsa pool -o json | flux python -c "
import json, sys
for n in json.load(sys.stdin)[\"nodes\"]:
    print(sum(h[\"bytes\"] for h in n[\"holders\"] if h[\"jobid\"] == $(flux job id --to=dec $1)))"
}
EOF2

test_expect_success 'inputs and a gated stage-out script' '
	for j in s z; do rsa_make_tree "$PWD/in-$j" && mkdir out-$j || return 1; done &&
	head -c 20000000 /dev/urandom >in-s/twenty-megabytes &&
	gate_out=$(rsa_gate_out gateout)
'
test_expect_success 'first life: s over both nodes in STAGING_OUT through a reload and a pool restart, z in INUSE_OUT' '
	cat >life1.sh <<-EOF2 &&
	set -e
	. "$PWD/helpers.sh"
	flux rsa pool --wait=60 >/dev/null
	copy="cp -a \\\$RSA_DATA_IN/. \\\$RSA_DATA_OUT/"
	s=\$(flux submit -N1 --setattr=rsa.capacity=136M --setattr=rsa.on_late=wait \\
		--setattr=rsa.data_in="$PWD/in-s" --setattr=rsa.data_out="$PWD/out-s" \\
		--setattr=rsa.stage_out="$gate_out" sh -c "\$copy")
	echo \$s >"$PWD/s.id"
	wait_state \$s STAGING_OUT
	holds \$s >"$PWD/holds.first"
	charged \$s >"$PWD/charged.first"

	# the rsa module reloaded: the pool and its holders carry on
	flux module remove rsa
	flux module load rsa
	flux rsa pool --wait=60 >/dev/null
	wait_state \$s STAGING_OUT
	holds \$s >"$PWD/holds.reload"

	# the pool restarted: it stops keeping what is not home, the next
	# one (launched when the module loads) adopts it
	flux rsa pool --shutdown
	flux module remove rsa
	flux module load rsa
	flux rsa pool --wait=90 >/dev/null
	flux dmesg | grep "rsa: adopting the RAM disk" >"$PWD/adopted.pool" || :
	wait_state \$s STAGING_OUT
	holds \$s >"$PWD/holds.pool"

	z=\$(flux submit -N1 --setattr=rsa.capacity=16M --setattr=rsa.on_late=wait \\
		--setattr=rsa.data_in="$PWD/in-z" --setattr=rsa.data_out="$PWD/out-z" \\
		sh -c "\$copy && flux rsa release-input && sleep inf")
	echo \$z >"$PWD/z.id"
	flux job id --to=dec \$z >"$PWD/z.dec"
	wait_state \$z INUSE_OUT
	flux rsa status -a -o long
	EOF2
	run_life life1.sh >life1.out 2>&1 || { cat life1.out; false; } &&
	cat life1.out
'
test_expect_success 's is over both RSA nodes, each charged more than its share of 136M (headroom)' '
	read nodes asked charged ramdisk <holds.first &&
	test "$nodes" = "rsa[0-1]" && test "$asked" = 136M &&
	case $ramdisk in "$roots"/ramdisk/*) ;; *) false ;; esac &&
	{ read granted && read rsa0 && read rsa1; } <charged.first &&
	test $rsa0 = $rsa1 && test $rsa0 -gt $((68 << 20)) &&
	test $granted = $((rsa0 + rsa1))
'
test_expect_success 'through the reload and the pool restart it kept the same RAM disk, charged the same' '
	test_cmp holds.first holds.reload &&
	test_cmp holds.first holds.pool &&
	grep "adopting the RAM disk $(cut -d" " -f4 holds.first)" adopted.pool
'
test_expect_success 'between lives: the RAM disks with outputs are still mounted under the kept roots' '
	on_nodes grep " $roots/ramdisk/" /proc/mounts >mounts &&
	cat mounts &&
	name=$(basename "$(cut -d" " -f4 holds.first)") &&
	grep "^2: [^ ]* $roots/ramdisk/$name.b0 tmpfs " mounts &&
	grep "^3: [^ ]* $roots/ramdisk/$name.b1 tmpfs " mounts &&
	# z'"'"'s RAM disk, one node'"'"'s, is an image in its RSA node'"'"'s store
	grep "^[23]: [^ ]* $roots/ramdisk/.store-rsa[01] tmpfs " mounts &&
	test $(wc -l <mounts) = 3 &&
	on_nodes sh -c "ls $roots/ramdisk/.store-*/images 2>/dev/null" >images &&
	grep "^[23]: $(cat z.dec).1.img\$" images
'
test_expect_success 'second life, with no configuration of its own: both outputs come home' '
	cat >life2.sh <<-EOF2 &&
	set -e
	. "$PWD/helpers.sh"
	flux rsa pool --wait=90 >/dev/null
	s=\$(cat "$PWD/s.id") z=\$(cat "$PWD/z.id")
	flux rsa status -a -o long
	holds \$s >"$PWD/holds.second"
	touch "$PWD/gateout.open"
	for j in \$s \$z; do flux rsa wait -t 120 \$j; done
	flux rsa status -a -o long
	flux rsa pool -o json >"$PWD/pool.last"
	EOF2
	run_life life2.sh >life2.out 2>&1 || { cat life2.out; false; } &&
	cat life2.out &&
	test_cmp holds.first holds.second
'
test_expect_success 'every file arrived' '
	for j in s z; do rsa_same_tree in-$j out-$j || return 1; done
'
test_expect_success 'nothing leaks: no mount, no RAM disk, no capacity held' '
	on_nodes grep -e " $roots/ramdisk/" -e " $roots/mnt/" /proc/mounts >left-mounts || : &&
	test_must_be_empty left-mounts &&
	on_nodes find "$roots/ramdisk" "$roots/mnt" -mindepth 1 -maxdepth 1 >left-files &&
	test_must_be_empty left-files &&
	"${PYTHON:-python3}" -c "
import json
assert all(n[\"reserved\"] == 0 for n in json.load(open(\"pool.last\"))[\"nodes\"])
"
'
test_expect_success 'the nodes and the kept roots are removed, and nothing was left in them' '
	"$RSA_BUILDDIR"/t/rsa-instance --statedir "$state" --end &&
	! test -e "$roots"
'
test_done
