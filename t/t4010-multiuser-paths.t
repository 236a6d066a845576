#!/bin/sh
test_description='a real user'"'"'s job sees its RAM disk at its own data_in and data_out

In a multi-user instance (brokers run by an unprivileged instance owner,
jobs run as their users through a setuid flux-imp) the job shell is an
ordinary process of the user: it shows the RAM disk at the job'"'"'s own
paths in a user namespace of that user, with only the user'"'"'s own uid and
gid mapped.  A plain shell job using its real paths reads the staged
inputs and writes to the RAM disk, on a one-node RAM disk (an image its
compute node mounts) and on a spanning one; persistent data_out stays empty while it runs; another job of the
same user on the same node, and the node itself, see persistent storage;
the outputs come home byte-identical; nothing of the job is left.'

. $(dirname $0)/sharness-rsa.sh
. "$RSA_SRCDIR/t/multiuser.sh"

mu_require

T="$PWD"
export RSA_INSTANCE_TMP="$T"  # where rsa_nothing_left looks for RAM disks
mkdir -p conf "$T/ramdisk" "$T/mnt" && chmod 755 conf "$T/ramdisk" "$T/mnt"
cat >conf/rsa.toml <<EOF
[rsa]
ramdisk-root = "$T/ramdisk"
mount-root = "$T/mnt"
stage-retries = 0
EOF
chmod 644 conf/rsa.toml

mounted_at() {
	rsa_on_nodes findmnt -n -l -o TARGET | grep -F -x -e "$1" -e "$2"
}

test_expect_success 'setup: the instance, A'"'"'s inputs, a job script using real paths' '
	mu_setup "$T/conf" &&
	mu_start --config "$T/conf" &&
	rsa_wait_pool 90 &&
	A=$MU_A && mu_user_dir $A "$T/$A" &&
	mu_user_dir $A "$T/$A/in" 750 && mu_user_dir $A "$T/$A/out" &&
	mu_user_dir $A "$T/$A/in2" 750 && mu_user_dir $A "$T/$A/out2" &&
	mu_user_dir $A "$T/$A/seen" && mu_user_dir $A "$T/$A/seen2" &&
	head -c 1000000 /dev/urandom >"$T/$A/in/x" && cp "$T/$A/in/x" "$T/$A/in2/x" &&
	chown $A: "$T/$A/in/x" "$T/$A/in2/x" &&
	touch -d "2011-11-11 11:11:11" "$T/$A/in" "$T/$A/in2" &&
	# a directory others may search, not its group: the submit-time check (as
	# the instance owner) gets through, A'"'"'s group does not
	mu_user_dir $A "$T/$A/private" 701 && mu_user_dir $A "$T/$A/private/in" 755 &&
	echo secret >"$T/$A/private/in/s" && chown $A: "$T/$A/private/in/s" &&
	touch -d "2012-12-12 12:12:12" "$T/$A/private/in" &&
	cat >"$T/job.sh" <<-\EOF &&
	#!/bin/sh
	# job.sh IN OUT SEEN: an unmodified program: its paths from its command line
	in=$1 out=$2 seen=$3 r=$FLUX_TASK_RANK
	cat "$in/x" >"$out/copy.$r"
	echo "written by rank $r" >"$out/y.$r"
	findmnt -n -o FSTYPE --mountpoint "$in" >"$seen/in-fstype.$r"
	findmnt -n -o FSTYPE --mountpoint "$out" >"$seen/out-fstype.$r"
	cat /proc/self/uid_map >"$seen/uid_map.$r"
	stat -c %U /etc/passwd >"$seen/root-shows-as.$r"
	id -u >"$seen/uid.$r"
	stat -c "%a %U %G %Y" "$in" >"$seen/in-top.$r"
	echo ready >"$seen/ready.$r"
	while ! test -e "$seen/go"; do sleep 0.1; done
	EOF
	chmod 755 "$T/job.sh"
'
test_expect_success 'A'"'"'s jobs are staged: one on a one-node RAM disk, one over both RSA nodes' '
	blocker=$(mu_as $MU_B flux submit -N2 -t 30m sleep inf) &&
	flux job wait-event -t 60 $blocker start &&
	two=$(mu_as $A flux submit -N2 -n2 --setattr=rsa.capacity=136M --setattr=rsa.data_in="$T/$A/in2" \
		--setattr=rsa.data_out="$T/$A/out2" "$T/job.sh" "$T/$A/in2" "$T/$A/out2" "$T/$A/seen2") &&
	one=$(mu_as $A flux submit -N1 -n1 --setattr=rsa.capacity=8M --setattr=rsa.data_in="$T/$A/in" \
		--setattr=rsa.data_out="$T/$A/out" "$T/job.sh" "$T/$A/in" "$T/$A/out" "$T/$A/seen") &&
	rsa_wait_state $one READY 90 && rsa_wait_state $two READY 90 &&
	test "$(rsa_field nodes $one | tr , "\n" | wc -l)" = 1 &&
	test "$(rsa_field nodes $two | tr , "\n" | wc -l)" = 2 &&
	mu_as $MU_B flux cancel $blocker
'
test_expect_success 'both run as A, with the RAM disk at their own paths, in a user namespace of A' '
	{ rsa_wait_file "$T/$A/seen/ready.0" && rsa_wait_file "$T/$A/seen2/ready.0" &&
	  rsa_wait_file "$T/$A/seen2/ready.1" ||
	  { flux job eventlog $one; flux job eventlog -p exec $one; false; }; } &&
	uid=$(id -u $A) &&
	for f in "$T/$A/seen/uid.0" "$T/$A/seen2/uid.0" "$T/$A/seen2/uid.1"; do
		test "$(cat "$f")" = $uid || return 1
	done &&
	for s in seen/in-fstype.0 seen/out-fstype.0; do
		test "$(cat "$T/$A/$s")" = ext4 || return 1  # (one node: an image)
	done &&
	for s in seen2/in-fstype.0 seen2/out-fstype.1; do
		test "$(cat "$T/$A/$s")" = fuse.glusterfs || return 1
	done &&
	test "$(cat "$T/$A/seen2/uid_map.1" | tr -s " " | sed "s/^ //")" = "$uid $uid 1" &&
	test "$(cat "$T/$A/seen/root-shows-as.0")" = nobody &&
	stat -c "%a %U %G %Y" "$T/$A/in" >expect && test_cmp expect "$T/$A/seen/in-top.0" &&
	stat -c "%a %U %G %Y" "$T/$A/in2" >expect && test_cmp expect "$T/$A/seen2/in-top.1" &&
	flux rsa status -o "{paths}" -n $one $two >paths &&
	printf "in=ramdisk,out=ramdisk\nin=ramdisk,out=ramdisk\n" >expect && test_cmp expect paths
'
test_expect_success 'while they run, persistent data_out is empty and the RAM disks hold the outputs' '
	find "$T/$A/out" "$T/$A/out2" -mindepth 1 >persistent && test_must_be_empty persistent &&
	mnt=$(rsa_field mount_path $two) && echo "attached at $mnt" &&
	rsa_on_node 0 cat "$mnt/out/y.0" >y0 && test "$(cat y0)" = "written by rank 0" &&
	rsa_on_node 1 cat "$mnt/out/y.1" >y1 && test "$(cat y1)" = "written by rank 1"
'
test_expect_success 'outside the jobs, no node shows anything at their paths' '
	test -z "$(mounted_at "$T/$A/in2" "$T/$A/out2")" &&
	test -z "$(mounted_at "$T/$A/in" "$T/$A/out")"
'
test_expect_success 'another job of A on the same nodes, without RSA, sees persistent storage' '
	mu_as $A flux run -N1 -n1 -t 5m sh -c "ls -A \"$T/$A/out2\"; findmnt -n --mountpoint \"$T/$A/in2\" || echo no-mount" >other &&
	echo no-mount >expect && test_cmp expect other
'
test_expect_success 'the jobs end; their outputs come home byte-identical and owned by A' '
	touch "$T/$A/seen/go" "$T/$A/seen2/go" &&
	mu_as $A flux rsa wait -t 120 $one && mu_as $A flux rsa wait -t 120 $two &&
	test_cmp "$T/$A/in/x" "$T/$A/out/copy.0" &&
	test_cmp "$T/$A/in2/x" "$T/$A/out2/copy.0" && test_cmp "$T/$A/in2/x" "$T/$A/out2/copy.1" &&
	test "$(cat "$T/$A/out2/y.1")" = "written by rank 1" &&
	test -z "$(find "$T/$A/out" "$T/$A/out2" ! -user $A)"
'
test_expect_success 'data_in under a directory closed to its group: its top shows only owner bits, then persistent storage' '
	cat >"$T/switch.sh" <<-\EOF &&
	#!/bin/sh
	in=$1 seen=$2
	findmnt -n -o FSTYPE --mountpoint "$in" >"$seen/before" || echo none >"$seen/before"
	stat -c "%a %Y" "$in" >"$seen/before-top"
	flux rsa release-input >/dev/null
	findmnt -n -o FSTYPE --mountpoint "$in" >"$seen/after" || echo none >"$seen/after"
	stat -c "%a %Y" "$in" >"$seen/after-top"
	EOF
	chmod 755 "$T/switch.sh" && mu_user_dir $A "$T/$A/seen3" &&
	s=$(mu_as $A flux submit -N1 --setattr=rsa.data_in="$T/$A/private/in" --setattr=rsa.data_out="$T/$A/out" \
		--setattr=rsa.on_late=wait "$T/switch.sh" "$T/$A/private/in" "$T/$A/seen3") &&
	mu_as $A flux rsa wait -t 120 $s &&
	test "$(cat "$T/$A/seen3/before")" = ext4 &&
	test "$(cat "$T/$A/seen3/after")" = none &&
	mtime=$(stat -c %Y "$T/$A/private/in") &&
	test "$(cat "$T/$A/seen3/before-top")" = "700 $mtime" &&
	test "$(cat "$T/$A/seen3/after-top")" = "755 $mtime"
'
test_expect_success 'the flux run steps of A'"'"'s flux batch job see data_out on the RAM disk' '
	mu_user_dir $A "$T/$A/out5" &&
	cat >"$T/batch.sh" <<-\EOF &&
	#!/bin/sh
	flux run -N2 -n2 sh -c "findmnt -n -o FSTYPE --mountpoint \"\$1\" >\"\$1/step.\$FLUX_TASK_RANK\"" step "$1"
	EOF
	chmod 755 "$T/batch.sh" &&
	bt=$(mu_as $A flux batch -N2 --setattr=rsa.data_out="$T/$A/out5" --setattr=rsa.capacity=8M \
		--setattr=rsa.on_late=wait --output="$T/$A/batch.out" "$T/batch.sh" "$T/$A/out5") &&
	mu_as $A flux rsa wait -t 120 $bt &&
	test "$(cat "$T/$A/out5/step.0") $(cat "$T/$A/out5/step.1")" = "fuse.glusterfs fuse.glusterfs" &&
	test -z "$(find "$T/$A/out5" ! -user $A)"
'
test_expect_success 'nothing of the jobs is left on any node: no mount, process or namespace' '
	rsa_at_rest $one 90 && rsa_at_rest $two 90 && rsa_at_rest $s 90 && rsa_at_rest $bt 90 &&
	rsa_nothing_left &&
	test -z "$(pgrep -u $A)" &&
	! lsns -n -o USER -t user | grep -qx $A &&
	test -z "$(mounted_at "$T/$A/in" "$T/$A/out")" &&
	test -z "$(mounted_at "$T/$A/in2" "$T/$A/out2")"
'
test_expect_success 'the instance stops cleanly' '
	mu_stop
'
test_done
