#!/bin/sh
test_description='a full instance restart loses no file and leaks nothing

The instance (persistent content store) is stopped while jobs are in
STAGING_OUT, HELD, INUSE_OUT, READY and STAGING_IN, and started again:
RAM disks holding outputs are kept through the restart and adopted;
inputs are staged again; every job ends correctly and every file arrives.'

. $(dirname $0)/sharness-rsa.sh

if test "$(id -u)" -ne 0; then
	skip_all="keeping tmpfs RAM disks through a restart needs root"
	test_done
fi

state=$(mktemp -d /tmp/rsa-restart-state.XXXXXX)
root=$(mktemp -d /tmp/rsa-restart-root.XXXXXX)
# whatever happens, the instance's nodes and directory (kept in $state
# between its lives) go at the end, and so does what they held
end_nodes() {
	test -d "$state" && "$RSA_BUILDDIR"/t/rsa-instance --statedir "$state" --end >&2
	rm -rf "$state"
}
trap 'rc=$?; end_nodes; (exit $rc); die' EXIT
mkdir -p conf
printf '[rsa]\nramdisk-root = "%s"\nretry-backoff = "1s"\n' "$root" >conf/rsa.toml

run_phase() {
	"$RSA_BUILDDIR"/t/rsa-instance --statedir "$state" --config "$PWD/conf" -- sh "$@"
}
# on_nodes COMMAND...: COMMAND on every node of the instance (its nodes
# outlive it, as hosts outlive a restart; on this machine when they share
# its mount table), one output line prefixed with the node's rank each
on_nodes() {
	if test -d "$state/nodes"; then
		for rank in 0 1 2 3; do
			"$RSA_SRCDIR"/t/rsa-nodes exec "$state/nodes" $rank "$@" | sed "s/^/$rank: /"
		done
	else
		"$@"
	fi
}

# helpers for the phases, run inside an instance without sharness (the
# tests' one wait, rsa_wait_for, first)
cp "$RSA_SRCDIR/t/rsa-wait.sh" wait_state.sh
cat >>wait_state.sh <<'EOF2'
in_state() {
	test "$(flux rsa status -a -n -o "{rsa_state}" $1)" = $2
}
# wait_state JOBID STATE: the job's rsa-state event while it is active,
# then its record
wait_state() {
	flux job wait-event -q -t 60 -m state=$2 $1 rsa-state 2>/dev/null || :
	rsa_wait_for 60 "$1 in $2" in_state $1 $2
}
given_up() {
	flux rsa status -a -o json $1 | flux python -c "
import json, sys
r = json.load(sys.stdin)[0]
sys.exit(not (r[\"rsa_state\"] == \"HELD\" and not r[\"retry_pending\"]
              and r[\"attempts\"] > r[\"limits\"][\"stage_retries\"]))"
}
# wait_given_up JOBID: HELD with no automatic retry left
wait_given_up() {
	rsa_wait_for 60 "$1 HELD for good" given_up $1
}
EOF2

test_expect_success 'inputs, gates and a stage-out that fails until fixed' '
	for j in x y z w v; do rsa_make_tree "$PWD/in-$j" && mkdir out-$j || return 1; done &&
	gate_out=$(rsa_gate_out gateout) &&
	gate_in=$(rsa_gate_in gatein) &&
	cat >fussy.sh <<-EOF2 &&
	#!/bin/sh
	test -e "$PWD/fixed" || { echo "\$2: not ready (create $PWD/fixed)" >&2; exit 1; }
	cp -a "\$1/." "\$2/"
	EOF2
	chmod +x fussy.sh
'
test_expect_success 'first life: jobs in STAGING_OUT, HELD, INUSE_OUT, READY, STAGING_IN' '
	cat >phase1.sh <<-EOF2 &&
	set -e
	. "$PWD/wait_state.sh"
	flux rsa pool --wait=60 >/dev/null
	common="--setattr=rsa.capacity=16M --setattr=rsa.on_late=wait"
	copy="cp -a \\\$RSA_DATA_IN/. \\\$RSA_DATA_OUT/"
	x=\$(flux submit -N1 \$common --setattr=rsa.data_in="$PWD/in-x" --setattr=rsa.data_out="$PWD/out-x" \\
		--setattr=rsa.stage_out="$gate_out" sh -c "\$copy")
	y=\$(flux submit -N1 \$common --setattr=rsa.data_in="$PWD/in-y" --setattr=rsa.data_out="$PWD/out-y" \\
		--setattr=rsa.stage_out="$PWD/fussy.sh" sh -c "\$copy")
	wait_state \$y HELD
	z=\$(flux submit -N1 \$common --setattr=rsa.data_in="$PWD/in-z" --setattr=rsa.data_out="$PWD/out-z" \\
		sh -c "\$copy && flux rsa release-input && sleep inf")
	b=\$(flux submit -N1 -t 30m sleep inf)
	w=\$(flux submit -N1 \$common --setattr=rsa.data_in="$PWD/in-w" --setattr=rsa.data_out="$PWD/out-w" \\
		sh -c "\$copy")
	v=\$(flux submit -N1 \$common --setattr=rsa.data_in="$PWD/in-v" --setattr=rsa.data_out="$PWD/out-v" \\
		--setattr=rsa.stage_in="$gate_in" sh -c "\$copy")
	echo "\$x \$y \$z \$w \$v" >"$PWD/ids"
	wait_state \$x STAGING_OUT
	wait_state \$z INUSE_OUT
	wait_state \$w READY
	wait_state \$v STAGING_IN
	flux rsa status -a
	EOF2
	run_phase phase1.sh >phase1.out 2>&1 || { cat phase1.out; false; } &&
	cat phase1.out
'
test_expect_success 'between lives: the RAM disks with outputs are still there, kept' '
	# (a tmpfs each, or an image each in its node'"'"'s store, which stays mounted)
	on_nodes /usr/bin/python3 -c "import glob, json, sys; [print(p) for p in glob.glob(sys.argv[1] + \"/*/.rsa-ramdisk\") if json.load(open(p)).get(\"kept\")]" "$root" >kept &&
	cat kept &&
	test $(wc -l <kept) -eq 3
'
test_expect_success 'second life: every job ends correctly' '
	cat >phase2.sh <<-EOF2 &&
	set -e
	. "$PWD/wait_state.sh"
	flux rsa pool --wait=90 >/dev/null
	read x y z w v <"$PWD/ids"
	flux rsa status -a
	touch "$PWD/gateout.open" "$PWD/gatein.open"
	# y retries on its own, failing, until it has no retry left; only
	# then is its stage script fixed and y retried by hand
	wait_given_up \$y
	touch "$PWD/fixed"
	flux rsa retry \$y
	for j in \$x \$y \$z \$w \$v; do flux rsa wait -t 120 \$j; done
	flux rsa status -a
	flux rsa pool -o json >"$PWD/pool.json"
	flux dmesg | grep " rsa\.\| rsa-pool" >"$PWD/dmesg2" || :
	EOF2
	run_phase phase2.sh >phase2.out 2>&1 || { cat phase2.out; false; } &&
	cat phase2.out
'
test_expect_success 'every file arrived' '
	for j in x y z w v; do rsa_same_tree in-$j out-$j || return 1; done
'
test_expect_success 'nothing leaks: no mount, no RAM disk, no capacity held' '
	on_nodes grep " $root/" /proc/mounts >left-mounts || : &&
	{ test_must_be_empty left-mounts || cat dmesg2; } &&
	test_must_be_empty left-mounts &&
	on_nodes find "$root" -mindepth 1 -maxdepth 1 >left-files &&
	test_must_be_empty left-files &&
	"${PYTHON:-python3}" -c "
import json
assert all(n[\"reserved\"] == 0 for n in json.load(open(\"pool.json\"))[\"nodes\"])
" &&
	rmdir "$root"
'
test_expect_success 'the nodes are removed, and nothing was left in them' '
	"$RSA_BUILDDIR"/t/rsa-instance --statedir "$state" --end
'
test_done
