#!/bin/sh
test_description='faults: killed stages, a full RAM disk, an unwritable data_out,
a stage that never ends and a lost RSA node

Each fault is injected into a real instance and the job is followed to its
end: killed stage-ins and stage-outs are tried again after a back-off and
every file arrives; a stage-in that does not fit the RAM disk, or does not
finish within [rsa] stage-timeout, leaves the job on its persistent data_in;
a stage-out into a data_out that is no longer a directory is HELD with the
outputs kept on the RAM disk until `flux rsa retry` or `flux rsa release`;
losing the RSA node under a stage-in makes a new reservation on the other
one.  After each, nothing is left reserved or mounted.  The jobs whose
RAM disks the test looks into on their RSA node while a stage holds them
ask for rsa.fs=shared; the others get a one-node job'"'"'s image (an
image'"'"'s lost nodes: t1310).'

. $(dirname $0)/sharness-rsa.sh

if test "$(id -u)" -ne 0; then
	skip_all="the lost RSA node leaves a tmpfs mounted: removing it needs root"
	test_done
fi

mkdir -p conf &&
printf '[rsa]\nstage-retries = 2\nretry-backoff = "1s"\n' >conf/rsa.toml
test_under_rsa_instance --config "$PWD/conf" --survive-lost-nodes

T=$PWD

# wait_for PATH: wait until PATH exists (60s)
wait_for() {
	rsa_wait_for 60 "$1" test -e "$1"
}
# submit_until_go K: an RSA job from in$K to out$K that copies its inputs
# to its outputs, then runs until $T/go$K exists (on a shared RAM disk,
# whose files a look on its RSA node sees while a stage runs)
submit_until_go() {
	flux submit -N1 --setattr=rsa.data_in="$T/in$1" --setattr=rsa.data_out="$T/out$1" \
		--setattr=rsa.on_late=wait --setattr=rsa.fs=shared \
		sh -c "cp -a \"\$RSA_DATA_IN\"/. \"\$RSA_DATA_OUT\"/ && while ! test -e \"$T/go$1\"; do sleep 0.1; done"
}
# the pool subjob running (or about to run) a stage of job $1
stage_subjob() {
	rsa_pool flux jobs -n -f pending,running -o "{name}:{id}" |
		grep "^rsa-stage-$(flux job id --to=dec $1)-" | cut -d: -f2
}
# wait until a stage of job $1 other than subjob $2 is running
_new_stage() {
	_s=$(stage_subjob $1)
	test -n "$_s" && test "$_s" != "$2"
}
wait_new_stage() {
	rsa_wait_for 60 "job $1: a new stage" _new_stage $1 $2
}
# half_gate NAME in|out: a stage script for that direction that copies
# big.dat, waits for $PWD/NAME.open, then copies everything (as the gates
# of sharness-rsa.sh, its $1 is the RAM-disk side and $2 the data side)
half_gate() {
	cat >"$1.sh" <<-EOF2
	#!/bin/sh
	if test "$2" = in; then from="\$2" to="\$1"; else from="\$1" to="\$2"; fi
	cp -a "\$from/big.dat" "\$to/" || exit 1
	while ! test -e "$PWD/$1.open"; do sleep 0.1; done
	cp -a "\$from/." "\$to/"
	EOF2
	chmod +x "$1.sh"
	echo "$PWD/$1.sh"
}
# the rsa-states job $1 went through, on one line
history_line() {
	rsa_history $1 | tr "\n" " "
}
# on_ramdisk_node JOB PATH: PATH (a RAM disk) is mounted on job JOB's RSA node
mounted() {
	rsa_on_ramdisk $1 grep -q " $2 " /proc/mounts
}
# nowhere PATH: no node has PATH (mounted or not)
nowhere() {
	test -z "$(rsa_on_nodes sh -c "grep \" $1 \" /proc/mounts; test ! -e $1 || echo $1")"
}
# wait_on JOB PATH: wait until PATH exists on job JOB's RSA node (60s)
wait_on() {
	rsa_wait_for 60 "$2" rsa_on_ramdisk $1 test -e "$2"
}
# same_disk PATH RAMDISK: PATH (where a job was told its inputs are) is in
# RAMDISK (as the RSA nodes name it), attached where the job ran
same_disk() {
	rsa_job_ramdisk "$1" in && test "$(basename "$(dirname "$1")")" = "$(basename "$2")"
}

test_expect_success 'setup: inputs, outputs, stage scripts' '
	rsa_wait_pool 60 &&
	for j in 1 2 3 4 5 6 7; do
		rsa_make_tree "$T/in$j" && mkdir "$T/out$j" || return 1
	done &&
	head -c 12000000 /dev/urandom >"$T/in3/too-big.dat" &&
	halfin=$(half_gate halfin in) &&
	halfout=$(half_gate halfout out) &&
	gate5=$(rsa_gate_in gate5) &&
	gate6=$(rsa_gate_in gate6)
'

# --- 1. a stage-in killed mid-copy ------------------------------------------
test_expect_success 'a stage-in killed mid-copy is tried again after a back-off' '
	id1=$(flux submit -N1 --setattr=rsa.data_in="$T/in1" --setattr=rsa.data_out="$T/out1" \
		--setattr=rsa.stage_in="$halfin" --setattr=rsa.fs=shared \
		sh -c "echo \"\$RSA_DATA_IN\" >\"$T/where1\" && cp -a \"\$RSA_DATA_IN\"/. \"\$RSA_DATA_OUT\"/") &&
	rsa_wait_state $id1 STAGING_IN 60 &&
	rd1=$(rsa_field ramdisk $id1) &&
	wait_on $id1 "$rd1/in/big.dat" &&
	sub=$(stage_subjob $id1) && test -n "$sub" &&
	rsa_pool flux job kill $sub &&
	rsa_pool flux job wait-event -t 60 $sub clean &&
	wait_new_stage $id1 $sub &&
	rsa_field error $id1 >error1 && cat error1 &&
	grep -E "status 143|signal" error1 &&
	rsa_open halfin &&
	flux rsa wait -t 120 $id1
'
test_expect_success 'the job had its staged inputs, byte-identical; the history shows the retry' '
	same_disk "$(cat where1)" "$rd1" &&
	rsa_same_tree in1 out1 &&
	history_line $id1 >history1 && cat history1 &&
	grep "STAGING_IN ABORTED STAGING_IN READY" history1 &&
	flux rsa status -a -o json $id1 | flux python -c "
import json, sys
h = json.load(sys.stdin)[0][\"history\"]
aborted = next(t for t, _, s in h if s == \"ABORTED\")
again = next(t for t, _, s in h if s == \"STAGING_IN\" and t > aborted)
assert again - aborted >= 0.9, (aborted, again)  # retry-backoff = 1s
" &&
	test "$(rsa_field restages $id1)" = 1 &&
	flux job eventlog $id1 | grep rsa-staged-in &&
	rsa_at_rest $id1 120 && rsa_nothing_left
'

# --- 2. a stage-out killed mid-copy -----------------------------------------
test_expect_success 'a stage-out killed mid-copy is tried again; every output arrives' '
	id2=$(flux submit -N1 --setattr=rsa.data_in="$T/in2" --setattr=rsa.data_out="$T/out2" \
		--setattr=rsa.stage_out="$halfout" --setattr=rsa.on_late=wait \
		sh -c "cp -a \"\$RSA_DATA_IN\"/. \"\$RSA_DATA_OUT\"/") &&
	rsa_wait_state $id2 STAGING_OUT 60 &&
	wait_for "$T/out2/big.dat" &&
	sub=$(stage_subjob $id2) && test -n "$sub" &&
	rsa_pool flux job kill $sub &&
	rsa_pool flux job wait-event -t 60 $sub clean &&
	wait_new_stage $id2 $sub &&
	rsa_open halfout &&
	flux rsa wait -t 120 $id2 &&
	rsa_same_tree in2 out2 &&
	history_line $id2 >history2 && cat history2 &&
	grep "STAGING_OUT HELD STAGING_OUT TEARDOWN DESTROYED" history2 &&
	test "$(rsa_field output_home $id2)" = True &&
	rsa_at_rest $id2 120 && rsa_nothing_left
'

# --- 3. inputs larger than the RAM disk -------------------------------------
test_expect_success 'ENOSPC: inputs larger than the RAM disk; the job runs on its data_in' '
	id3=$(flux submit -N1 --setattr=rsa.data_in="$T/in3" --setattr=rsa.capacity=4M \
		--setattr=rsa.on_late=wait \
		sh -c "echo \"\$RSA_DATA_IN\" >\"$T/where3\" && cmp \"\$RSA_DATA_IN\"/too-big.dat \"$T/in3/too-big.dat\"") &&
	flux job wait-event -t 120 $id3 clean &&
	flux job status $id3 &&
	test "$(cat where3)" = "$T/in3" &&
	rsa_at_rest $id3 120 &&
	rsa_field error $id3 >error3 && cat error3 &&
	test $(wc -l <error3) -eq 1 &&
	grep "No space left on device" error3 &&
	grep "the job uses data_in directly" error3 &&
	test_must_fail grep rsa-staged-in $(flux job eventlog $id3 >ev3; echo ev3) &&
	rsa_nothing_left
'

# --- 4. data_out no longer a directory at stage-out --------------------------
# (data_out is replaced by a file while the job runs: that fails even for root)
test_expect_success 'data_out replaced by a file: HELD, the path named, outputs kept on the RAM disk' '
	id4=$(submit_until_go 4) &&
	rsa_wait_state $id4 INUSE_IN 60 &&
	rd4=$(rsa_field ramdisk $id4) &&
	wait_on $id4 "$rd4/out/sub/numbers" &&
	mv out4 out4.real && echo "not a directory" >out4 &&
	touch go4 &&
	test_must_fail flux rsa wait -t 120 $id4 2>wait4 && cat wait4 &&
	grep "flux rsa retry" wait4 &&
	test "$(rsa_state $id4)" = HELD &&
	test "$(rsa_field retry_pending $id4)" = False &&
	rsa_field error $id4 >error4 && cat error4 &&
	test $(wc -l <error4) -eq 1 &&
	grep -F "$T/out4" error4 &&
	mounted $id4 "$rd4" &&
	rsa_same_tree_on $id4 "$T/in4" "$rd4/out"
'
test_expect_success 'fixed and retried with flux rsa retry: the outputs arrive' '
	rm out4 && mv out4.real out4 &&
	flux rsa retry $id4 &&
	flux rsa wait -t 120 $id4 &&
	rsa_same_tree in4 out4 &&
	test "$(rsa_field output_home $id4)" = True &&
	nowhere "$rd4" &&
	rsa_at_rest $id4 120 && rsa_nothing_left
'
test_expect_success 'a second job HELD the same way is given up with flux rsa release' '
	id5=$(submit_until_go 5) &&
	rsa_wait_state $id5 INUSE_IN 60 &&
	rd5=$(rsa_field ramdisk $id5) &&
	rmdir out5 && echo "not a directory" >out5 &&
	touch go5 &&
	test_must_fail flux rsa wait -t 120 $id5 &&
	test "$(rsa_state $id5)" = HELD &&
	mounted $id5 "$rd5" &&
	flux rsa release $id5 &&
	rsa_at_rest $id5 120 &&
	test "$(rsa_field output_home $id5)" = False &&
	nowhere "$rd5" &&
	test "$(cat out5)" = "not a directory" &&
	rsa_nothing_left
'

# --- 6. a stage-in that never ends ------------------------------------------
conf_rsa="$RSA_INSTANCE_TMP/conf/rsa.toml"
test_expect_success 'stage-timeout: a stage-in that never ends is stopped; the job runs on data_in' '
	cp "$conf_rsa" rsa.toml.saved &&
	echo "stage-timeout = \"5s\"" >>"$conf_rsa" &&
	flux config reload &&
	id6=$(flux submit -N1 --setattr=rsa.data_in="$T/in6" --setattr=rsa.data_out="$T/out6" \
		--setattr=rsa.stage_in="$gate6" \
		sh -c "echo \"\$RSA_DATA_IN\" >\"$T/where6\" && cp -a \"\$RSA_DATA_IN\"/. \"\$RSA_DATA_OUT\"/ &&
		       while ! test -e \"$T/go6\"; do sleep 0.1; done") &&
	rsa_wait_state $id6 STAGING_IN 60 &&
	cp rsa.toml.saved "$conf_rsa" &&
	flux config reload &&
	rsa_wait_state $id6 INUSE_OUT 120 &&
	rsa_field error $id6 >error6 && cat error6 &&
	test $(wc -l <error6) -eq 1 &&
	grep -F "stage-in did not finish within 5s ([rsa] stage-timeout)" error6 &&
	wait_for where6 &&
	test "$(cat where6)" = "$T/in6" &&
	touch go6 &&
	flux job wait-event -t 120 $id6 clean &&
	flux job status $id6 &&
	flux rsa wait -t 120 $id6 &&
	rsa_same_tree in6 out6 &&
	history_line $id6 >history6 && cat history6 &&
	grep "STAGING_IN STOPPING ABORTED" history6 &&
	rsa_at_rest $id6 120 && rsa_nothing_left
'

# --- 5. the RSA node under a stage-in is lost -------------------------------
# pool rank 0 runs on rsa0: the node lost must be rsa1 (parent rank 3)
# wait_lost JOBID: until the job's record has let go of its lost RAM disk (120s)
wait_lost() {
	rsa_wait_through $1 DESTROYED 120
}
# The job then either gets a new reservation on rsa0 (the usual outcome) or,
# when the retries are used up (the stage and the holder on the lost node
# both fail; a new holder may land on rsa1 before the pool sees it down),
# starts on its persistent data_in: both end the job with every file.
test_expect_success 'the RSA node under a stage-in is lost: the job ends with all its files' '
	flux rsa drain rsa0 fault test &&
	id7=$(flux submit -N1 --setattr=rsa.data_in="$T/in7" --setattr=rsa.data_out="$T/out7" \
		--setattr=rsa.stage_in="$gate5" --setattr=rsa.fs=shared \
		sh -c "echo \"\$RSA_DATA_IN\" >\"$T/where7\" && cp -a \"\$RSA_DATA_IN\"/. \"\$RSA_DATA_OUT\"/") &&
	rsa_wait_state $id7 STAGING_IN 60 &&
	test "$(rsa_field nodes $id7)" = rsa1 &&
	rd7=$(rsa_field ramdisk $id7) &&
	flux rsa undrain rsa0 &&
	rsa_crash_rank 3 &&
	wait_lost $id7 &&
	rsa_open gate5 &&
	flux rsa wait -t 120 $id7 &&
	flux job status $id7 &&
	rsa_same_tree in7 out7 &&
	history_line $id7 >history7 && cat history7 &&
	grep -E "STAGING_IN (ABORTED )?DESTROYED" history7 &&
	if test "$(cat where7)" = "$T/in7"; then
		echo "the job fell back to its data_in: $(rsa_field error $id7)" &&
		test "$(rsa_field failed $id7)" = True
	else
		echo "the job was staged again on rsa0: $(cat where7)" &&
		grep -E "STAGING_IN (ABORTED )?DESTROYED INITIAL REQUESTED .* READY" history7 &&
		! same_disk "$(cat where7)" "$rd7" &&
		rsa_job_ramdisk "$(cat where7)" in
	fi &&
	rsa_at_rest $id7 120
'
test_expect_success 'the lost node is down in flux rsa pool; nothing is reserved' '
	flux rsa pool -o json >pool.json &&
	flux python -c "
import json
nodes = {n[\"host\"]: n for n in json.load(open(\"pool.json\"))[\"nodes\"]}
assert nodes[\"rsa1\"][\"state\"] == \"down\", nodes
assert all(n[\"reserved\"] == 0 for n in nodes.values()), nodes
"
'
test_expect_success 'nothing leaks but the lost node'"'"'s RAM disk, which a sweep removes, and its store' '
	rsa_ramdisks | grep -v "/\.rsa-ramdisk\$" | sed "s/\.srv\$//" | sort -u >left &&
	cat left &&
	echo "$rd7" >expected && test_cmp expected left &&
	rsa_on_node 3 env PYTHONPATH="$RSA_SRCDIR/src/python" "${PYTHON:-/usr/bin/python3}" \
		-m flux_rsa.ramdisk sweep "$RSA_INSTANCE_TMP/ramdisk" &&
	rsa_nothing_left &&
	# its image store went with it, as a reboot empties a tmpfs
	rsa_on_node 3 umount "$RSA_INSTANCE_TMP/ramdisk/.store-rsa1"
'
test_done
