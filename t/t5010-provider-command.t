#!/bin/sh
test_description='provider command: the site'"'"'s scripts make, attach, detach and destroy a RAM disk

[rsa] provider = "command" with small site scripts written here (on one
machine: create mounts a tmpfs of the reservation on its first RSA node,
attach bind-mounts it where the job runs, detach and destroy unmount).  A
-N2 job over a reservation of two RSA nodes goes through create on both
nodes, attach, detach and destroy on both nodes, sees its inputs, its
outputs come home, and nothing is left.  A failing create reaches flux rsa
status in its own words; a failing attach starts the job on its
directories with a note.'

. $(dirname $0)/sharness-rsa.sh

if test "$(id -u)" -ne 0; then
	skip_all="the site scripts of provider command run as root (mounts)"
	test_done
fi

# the scripts are written inside the instance (sharness empties this
# directory when the test starts again there), at these paths
mkdir -p conf &&
cat >conf/rsa.toml <<EOF
[rsa]
provider = "command"
command-create = "$PWD/bin/create.sh"
command-destroy = "$PWD/bin/destroy.sh"
command-attach = "$PWD/bin/attach.sh"
command-detach = "$PWD/bin/detach.sh"
stage-retries = 0
# nodes of 64M: a reservation of 96M spans both (this provider's RAM
# disks get no headroom: the site's engine places its files)
node-capacity = "64M"
EOF
# the site scripts written here reach a RAM disk from a compute node with a
# bind mount of the RSA node's path, which only one mount table allows (a
# bind mount cannot cross mount namespaces): these "nodes" share one
test_under_rsa_instance --config "$PWD/conf" --shared-mounts

T=$PWD
export T  # the jobs find the test's files through $T (the path has a space)

# each step the site scripts ran, one line each: STEP INDEX-or-RANK NAME ...
steps() {
	cat "$T/log/steps" 2>/dev/null || true
}
all_gone() {
	rsa_nothing_left && test -z "$(rsa_attached)" &&
	test -z "$(find "$RSA_INSTANCE_TMP/ramdisk" "$RSA_INSTANCE_TMP/mnt" -mindepth 1)"
}
# the context field $2 of job $1's first event named $3
event_field() {
	flux job eventlog -f json "$1" | flux python -c "
import json, sys
for e in map(json.loads, sys.stdin):
    if e[\"name\"] == \"$3\":
        print(e[\"context\"][\"$2\"])
        break"
}

test_expect_success 'setup: the site scripts, root-owned and not writable by others' '
	mkdir -p bin log &&
	cat >bin/create.sh <<-EOF &&
	#!/bin/sh
	# a tmpfs of the whole reservation, on its first RSA node only
	echo "create \$RSA_INDEX \$RSA_NAME \$RSA_NODES \$RSA_SIZE" >>"$T/log/steps"
	if test -e "$T/fail-create"; then
		echo "site check" >&2
		echo "\$RSA_NAME: refused by the site (fail-create)" >&2
		exit 4
	fi
	test "\$RSA_INDEX" = 0 || exit 0
	n=\$(echo "\$RSA_NODES" | tr , "\\n" | wc -l)
	mountpoint -q "\$RSA_PATH" ||
	mount -t tmpfs -o size=\$((RSA_SIZE * n)),mode=0755 rsa-site "\$RSA_PATH"
	EOF
	cat >bin/destroy.sh <<-EOF &&
	#!/bin/sh
	echo "destroy \$RSA_INDEX \$RSA_NAME" >>"$T/log/steps"
	test "\$RSA_INDEX" = 0 || exit 0
	if mountpoint -q "\$RSA_PATH"; then umount "\$RSA_PATH"; fi
	EOF
	cat >bin/attach.sh <<-EOF &&
	#!/bin/sh
	# one machine: the RSA-side path, bind-mounted where the job looks
	echo "attach \$RSA_RANK \$RSA_NAME \$RSA_PATH" >>"$T/log/steps"
	if test -e "$T/fail-attach"; then
		echo "no route from rank \$RSA_RANK to \$RSA_NODES" >&2
		exit 5
	fi
	mountpoint -q "\$RSA_PATH" || mount --bind "\$RSA_SOURCE" "\$RSA_PATH"
	EOF
	cat >bin/detach.sh <<-EOF &&
	#!/bin/sh
	echo "detach \$RSA_RANK \$RSA_NAME" >>"$T/log/steps"
	if mountpoint -q "\$RSA_PATH"; then umount "\$RSA_PATH"; fi
	EOF
	chmod 755 bin/*.sh &&
	rsa_make_tree "$T/tree" &&
	mkdir out-a out-b out-c
'
test_expect_success 'the pool makes RAM disks with the site'"'"'s scripts' '
	rsa_wait_pool 60 &&
	test "$(rsa_provider)" = command
'
test_expect_success 'a -N2 job with 2 x 48M reserved: create ran on both RSA nodes' '
	id=$(flux submit -N2 --setattr=rsa.data_in="$T/tree" --setattr=rsa.data_out="$T/out-a" \
		--setattr=rsa.capacity=96M --setattr=rsa.on_late=wait \
		sh -c "echo \"\$RSA_RAMDISK \$RSA_DATA_IN \$RSA_DATA_OUT\" >\"\$T/env.\$FLUX_TASK_RANK\";
		       findmnt -n -o FSTYPE --mountpoint \"\$RSA_RAMDISK\" >\"\$T/fstype.\$FLUX_TASK_RANK\";
		       (cd \"\$RSA_DATA_IN\" && find . | sort) >\"\$T/seen.\$FLUX_TASK_RANK.tmp\";
		       mv \"\$T/seen.\$FLUX_TASK_RANK.tmp\" \"\$T/seen.\$FLUX_TASK_RANK\";
		       test \$FLUX_TASK_RANK = 1 || cp -a \"\$RSA_DATA_IN\" \"\$RSA_DATA_OUT/copy\";
		       while ! test -e \"\$T/a.go\"; do sleep 0.1; done") &&
	rsa_wait_file seen.0 && rsa_wait_file seen.1 &&
	name=$(basename "$(rsa_field ramdisk $id)") &&
	steps >steps.a && cat steps.a &&
	grep -x "create 0 $name rsa0,rsa1 $((48 << 20))" steps.a &&
	grep -x "create 1 $name rsa0,rsa1 $((48 << 20))" steps.a &&
	rsa_node_shares $id >shares && cat shares &&
	test "$(cat shares)" = "[[$((48 << 20))], [$((48 << 20))]]"
'
test_expect_success 'both ranks see the staged inputs at the attached path' '
	mnt="$RSA_INSTANCE_TMP/mnt/$name" &&
	test "$(cat env.0)" = "$mnt $mnt/in $mnt/out" &&
	test "$(cat env.1)" = "$mnt $mnt/in $mnt/out" &&
	test "$(cat fstype.0) $(cat fstype.1)" = "tmpfs tmpfs" &&
	(cd tree && find . | sort) >expected &&
	test_cmp expected seen.0 && test_cmp expected seen.1 &&
	test "$(rsa_attached)" = "$mnt" &&
	grep "^attach [01] $name $mnt\$" steps.a
'
test_expect_success 'the job ends: detached, staged out, destroyed on both nodes, nothing left' '
	touch a.go &&
	flux rsa wait -t 120 $id &&
	rsa_same_tree tree out-a/copy &&
	rsa_at_rest $id 60 && all_gone &&
	steps >steps.a && cat steps.a &&
	grep "^detach [01] $name\$" steps.a &&
	grep -x "destroy 0 $name" steps.a && grep -x "destroy 1 $name" steps.a &&
	test $(grep -n "^detach" steps.a | cut -d: -f1) -lt $(grep -n "^destroy 0" steps.a | cut -d: -f1)
'
test_expect_success 'a failing create: its own words reach flux rsa status, the job uses its directories' '
	touch fail-create &&
	id=$(flux submit -N1 --setattr=rsa.data_in="$T/tree" --setattr=rsa.data_out="$T/out-b" \
		--setattr=rsa.on_late=wait sh -c "echo \"\$RSA_DATA_IN \$RSA_DATA_OUT\" >\"\$T/env.b\"; echo made >\"\$RSA_DATA_OUT/result\"") &&
	flux job wait-event -t 120 $id clean &&
	rsa_at_rest $id 60 &&
	flux rsa status -a -o json $id >status.b &&
	rsa_field error $id >error.b && cat error.b &&
	grep "command-create $T/bin/create.sh failed (exit status 4): [0-9]*\.[0-9]*: refused by the site (fail-create)" error.b &&
	test "$(cat env.b)" = "$T/tree $T/out-b" &&
	test "$(cat out-b/result)" = made &&
	all_gone
'
test_expect_success 'a failing attach: the job starts on its directories with a note' '
	rm -f fail-create && touch fail-attach &&
	id=$(flux submit -N2 --setattr=rsa.data_in="$T/tree" --setattr=rsa.data_out="$T/out-c" \
		--setattr=rsa.capacity=96M --setattr=rsa.on_late=wait \
		sh -c "echo \"\$RSA_DATA_IN \$RSA_DATA_OUT\" >\"\$T/env.c.\$FLUX_TASK_RANK\";
		       echo made >\"\$RSA_DATA_OUT/result.\$FLUX_TASK_RANK\"") &&
	flux job wait-event -t 120 $id clean &&
	event_field $id error rsa-error >note.c && cat note.c &&
	grep "the RAM disk could not be attached where the job runs (node[01] (rank [01]): .*no route from rank [01] to rsa0,rsa1.*): it uses its directories" note.c &&
	test "$(cat env.c.0)" = "$T/tree $T/out-c" &&
	test "$(cat env.c.1)" = "$T/tree $T/out-c" &&
	test "$(cat out-c/result.0 out-c/result.1)" = "made
made" &&
	rsa_at_rest $id 60 && all_gone
'
test_expect_success 'the failed attach was undone by the site'"'"'s detach' '
	steps >steps.c && cat steps.c &&
	grep "^attach [01] " steps.c | tail -1 >last-attach &&
	rank=$(cut -d" " -f2 last-attach) && job=$(cut -d" " -f3 last-attach) &&
	grep -x "detach $rank $job" steps.c
'
test_done
