#!/bin/sh
test_description='--dependency=afterstaged:A waits for A'"'"'s outputs to be home

A pipeline: job A writes its outputs to its RAM disk; B, submitted with
--dependency=afterstaged:A, reads them from rsa.data_out.  B stays in
DEPEND while A'"'"'s stage-out runs - A'"'"'s compute nodes already run
another job meanwhile - and starts only once the outputs are home.  If
A'"'"'s stage-out fails and its outputs are released without being staged
out, the job waiting for them gets an exception naming A.'

. $(dirname $0)/sharness-rsa.sh

mkdir -p conf &&
printf '[rsa]\nstage-retries = 0\n' >conf/rsa.toml
test_under_rsa_instance --config "$PWD/conf"

# when event NAME was posted to job ID (first one), from its eventlog
event_time() {
	flux job eventlog -f json "$1" | flux python -c "
import json, sys
print(min(e[\"timestamp\"] for e in map(json.loads, sys.stdin) if e[\"name\"] == \"$2\"))"
}
# when job ID's record first entered rsa-state STATE
state_time() {
	flux rsa status -a -o json "$1" | flux python -c "
import json, sys
print(min(t for t, _, s in json.load(sys.stdin)[0][\"history\"] if s == \"$2\"))"
}
# is A < B (two timestamps)?
earlier() {
	flux python -c "import sys; sys.exit(0 if $1 < $2 else 1)"
}

test_expect_success 'setup: the pool, a gated stage-out, a failing one' '
	rsa_wait_pool 60 &&
	mkdir out out2 &&
	gate=$(rsa_gate_out slowout) &&
	cat >failing-out.sh <<-EOF &&
	#!/bin/sh
	echo "the archive refuses new files" >&2
	exit 1
	EOF
	chmod +x failing-out.sh
'
test_expect_success 'A writes its outputs on both compute nodes; B depends on them' '
	A=$(flux submit -N2 --setattr=rsa.data_out="$PWD/out" --setattr=rsa.stage_out="$gate" \
		--setattr=rsa.on_late=wait \
		sh -c "seq 1 100000 >\$RSA_DATA_OUT/result-\$FLUX_TASK_RANK") &&
	B=$(flux submit -N1 --dependency=afterstaged:$A \
		sh -c "cat out/result-0 out/result-1 >b-read") &&
	flux job wait-event -t 10 $B dependency-add
'
test_expect_success 'flux jobs shows what B waits for' '
	flux jobs -n -o "{state} {dependencies}" $B >deps &&
	test "$(cat deps)" = "DEPEND afterstaged=$(flux job id --to=f58 $A)"
'
test_expect_success 'A ends: its compute nodes are free, its stage-out runs' '
	flux job wait-event -t 60 $A clean &&
	rsa_wait_state $A STAGING_OUT 30
'
test_expect_success 'another job C runs on A'"'"'s compute nodes meanwhile; B still waits' '
	C=$(flux submit -N2 hostname) &&
	flux job wait-event -t 30 $C clean &&
	test "$(rsa_job_nodes $C)" = "$(rsa_job_nodes $A)" &&
	test "$(rsa_state $A)" = STAGING_OUT &&
	test "$(flux jobs -n -o {state} $B)" = DEPEND
'
test_expect_success 'once A'"'"'s outputs are home, B runs and reads all of them' '
	rsa_open slowout &&
	flux job wait-event -t 60 $B clean &&
	flux job status $B &&
	seq 1 100000 >expect && cat expect expect >expect2 &&
	test_cmp expect2 b-read
'
test_expect_success 'the order was: C started, A'"'"'s outputs came home, then B started' '
	c_start=$(event_time $C start) &&
	home=$(state_time $A TEARDOWN) &&
	b_free=$(event_time $B dependency-remove) &&
	b_start=$(event_time $B start) &&
	test "$(rsa_field output_home $A)" = True &&
	earlier $c_start $home &&
	earlier $home $b_free &&
	earlier $b_free $b_start
'
test_expect_success 'a job depending on outputs already home starts at once' '
	B3=$(flux submit -N1 --dependency=afterstaged:$A true) &&
	flux job wait-event -t 30 $B3 clean &&
	flux job status $B3
'

# --- A HELD, then released: B gets an exception naming A ---------------------
test_expect_success 'A2'"'"'s stage-out fails: A2 is HELD, B2 keeps waiting' '
	A2=$(flux submit -N1 --setattr=rsa.data_out="$PWD/out2" --setattr=rsa.on_late=wait \
		--setattr=rsa.stage_out="$PWD/failing-out.sh" \
		sh -c "echo 42 >\$RSA_DATA_OUT/answer") &&
	B2=$(flux submit -N1 --dependency=afterstaged:$A2 cat "$PWD/out2/answer") &&
	rsa_wait_state $A2 HELD 60 &&
	flux job wait-event -t 10 $B2 dependency-add &&
	test "$(flux jobs -n -o {state} $B2)" = DEPEND
'
test_expect_success 'A2'"'"'s outputs are released without stage-out: B2 gets an exception naming A2' '
	flux rsa release $A2 &&
	flux job wait-event -t 30 $B2 exception >exc &&
	cat exc &&
	grep "type=\"dependency\" severity=0" exc &&
	grep -F "afterstaged: job $(flux job id --to=f58 $A2): its outputs were never staged out" exc &&
	flux job wait-event -t 30 $B2 clean &&
	test_must_fail flux job wait-event -t 1 $B2 start
'

# --- refused at submit --------------------------------------------------------
test_expect_success 'afterstaged on a job that stages nothing is refused (use afterany)' '
	plain=$(flux submit -N1 true) &&
	test_must_fail flux submit --dependency=afterstaged:$plain true 2>plain.err &&
	grep "afterstaged: job $plain stages nothing (it has no rsa attributes): use --dependency=afterany:$plain" plain.err
'
test_expect_success 'afterstaged on something that is not a job is refused' '
	test_must_fail flux submit --dependency=afterstaged:nonsense true 2>bad.err &&
	grep "afterstaged: \"nonsense\" is not a jobid" bad.err &&
	test_must_fail flux submit --dependency=afterstaged:f1 true 2>none.err &&
	grep "afterstaged: job f1: no such job" none.err
'
test_expect_success 'a job depending on the outputs of two jobs starts once both are home' '
	mkdir out3 out4 &&
	rm -f slowout.open &&
	A3=$(flux submit -N1 --setattr=rsa.data_out="$PWD/out3" --setattr=rsa.on_late=wait \
		sh -c "echo three >\$RSA_DATA_OUT/r") &&
	A4=$(flux submit -N1 --setattr=rsa.data_out="$PWD/out4" --setattr=rsa.stage_out="$gate" \
		--setattr=rsa.on_late=wait sh -c "echo four >\$RSA_DATA_OUT/r") &&
	B3=$(flux submit -N1 --dependency=afterstaged:$A3 --dependency=afterstaged:$A4 \
		sh -c "cat out3/r out4/r >b3-read") &&
	flux rsa wait -t 60 $A3 &&
	rsa_wait_state $A4 STAGING_OUT 60 &&
	test "$(flux jobs -n -o "{state}" $B3)" = DEPEND &&
	rsa_open slowout &&
	flux job wait-event -t 60 $B3 clean &&
	test "$(flux jobs -n -o "{result}" $B3)" = COMPLETED &&
	test "$(cat b3-read)" = "three
four"
'
test_expect_success 'nothing is left: no RAM disk, holder or reserved capacity' '
	rsa_at_rest $A2 60 &&
	rsa_nothing_left
'
test_done
