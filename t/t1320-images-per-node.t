#!/bin/sh
test_description='rsa.fs=per-node: a job on several nodes, each with a file system of its own

A -N2 job asking rsa.fs=per-node gets one image per compute node: each
node sees ext4 at data_in and data_out, the same staged inputs on both,
and only its own outputs (what one node writes the other does not see).
The stage-out copies both nodes'"'"' outputs into one data_out, merging the
directories they share.  A name written on both nodes is not a silent pick
of one of them: the stage-out copies nothing, the job ends HELD saying
which name and on which nodes, and its RAM disk is kept.  At submit, a job
that does not fix its node count, or stages its outputs with a script,
is refused with rsa.fs=per-node, saying why.'

. $(dirname $0)/sharness-rsa.sh

if test "$(id -u)" -ne 0 || ! { command -v glusterfsd >/dev/null || test -x /usr/sbin/glusterfsd; }; then
	skip_all="images need root and GlusterFS (Debian: glusterfs-server glusterfs-client)"
	test_done
fi

mkdir -p conf &&
printf '[rsa]\nstage-retries = 0\n' >conf/rsa.toml
test_under_rsa_instance --config "$PWD/conf"

# job.sh IN OUT SEEN [CLASH]: per task (one a node): what it sees, files of its own
cat >job.sh <<'EOF2'
#!/bin/sh
in=$1 out=$2 seen=$3 r=$FLUX_TASK_RANK
findmnt -n -o FSTYPE --mountpoint "$out" >"$seen/fstype.$r"
cmp "$in/numbers" "$seen/../ref/numbers" && echo same >"$seen/inputs.$r"
mkdir -p "$out/shared" && seq 1 1000 >"$out/shared/part.$r"
echo "$r" >"$out/mine.$r"
ls "$out" >"$seen/listing.$r"
test -n "$4" && echo "from $r" >"$out/clash"
true
EOF2
chmod +x job.sh

test_expect_success 'setup: the pool, inputs' '
	rsa_wait_pool 60 &&
	mkdir in out seen ref &&
	seq 1 50000 >in/numbers && cp in/numbers ref/
'
test_expect_success 'a -N2 job with rsa.fs=per-node: each node its own ext4, the inputs on both' '
	blocker=$(rsa_hold_compute) &&
	id=$(flux submit -N2 -n2 --setattr=rsa.data_in="$PWD/in" --setattr=rsa.data_out="$PWD/out" \
		--setattr=rsa.fs=per-node --setattr=rsa.capacity=32M \
		./job.sh "$PWD/in" "$PWD/out" "$PWD/seen") &&
	rsa_wait_state $id READY 90 &&
	flux cancel $blocker &&
	flux rsa wait -t 120 $id &&
	test "$(cat seen/fstype.0 seen/fstype.1)" = "ext4
ext4" &&
	test "$(cat seen/inputs.0 seen/inputs.1)" = "same
same"
'
test_expect_success 'each node saw only its own outputs' '
	grep -x mine.0 seen/listing.0 && ! grep -x mine.1 seen/listing.0 &&
	grep -x mine.1 seen/listing.1 && ! grep -x mine.0 seen/listing.1
'
test_expect_success 'data_out holds both nodes'"'"' outputs, their shared directory merged' '
	test "$(cat out/mine.0 out/mine.1)" = "0
1" &&
	seq 1 1000 >expect &&
	test_cmp expect out/shared/part.0 && test_cmp expect out/shared/part.1 &&
	flux rsa status -a -n -o "{note}" $id >note && test "$(cat note)" = "output home"
'
test_expect_success 'a name written on both nodes: nothing is copied, HELD, naming it' '
	mkdir out2 &&
	blocker=$(rsa_hold_compute) &&
	clash=$(flux submit -N2 -n2 --setattr=rsa.data_in="$PWD/in" --setattr=rsa.data_out="$PWD/out2" \
		--setattr=rsa.fs=per-node --setattr=rsa.capacity=32M \
		./job.sh "$PWD/in" "$PWD/out2" "$PWD/seen" clash) &&
	rsa_wait_state $clash READY 90 &&
	flux cancel $blocker &&
	rsa_wait_state $clash HELD 120 &&
	rsa_field error $clash >error &&
	cat error &&
	grep "were written on more than one of the job'"'"'s nodes: clash (on node 0 and node 1)" error &&
	test -z "$(ls out2)"
'
test_expect_success 'released, its RAM disk goes; nothing is left' '
	flux rsa release $clash &&
	rsa_at_rest $clash 60 && rsa_at_rest $id &&
	rsa_nothing_left
'
test_expect_success 'refused at submit: per-node without a node count, or with a stage-out script' '
	test_must_fail flux submit -n2 --setattr=rsa.data_out="$PWD/out" --setattr=rsa.fs=per-node true 2>err1 &&
	grep "rsa.fs: per-node gives each compute node a file system of its own" err1 &&
	grep "flux submit -N" err1 &&
	test_must_fail flux submit -N2 --setattr=rsa.data_out="$PWD/out" --setattr=rsa.fs=per-node \
		--setattr=rsa.stage_out=tar true 2>err2 &&
	grep "rsa.stage_out: .tar. cannot stage a job on 2 nodes with rsa.fs=per-node" err2
'
test_done
