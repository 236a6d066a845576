#!/bin/sh
test_description='compute nodes go back to the scheduler when the job ends

A slow user stage-out script keeps the RAM disk busy; meanwhile another job
runs on the compute nodes the first one used.  When `flux rsa wait` returns,
no holder job, RAM disk or reserved capacity remains.'

. $(dirname $0)/sharness-rsa.sh

test_under_rsa_instance

test_expect_success 'setup' '
	rsa_wait_pool 60 &&
	mkdir out &&
	slow=$(rsa_gate_out slowout)
'
test_expect_success 'an RSA job on both compute nodes writes to its RAM disk' '
	id=$(flux submit -N2 --setattr=rsa.data_out="$PWD/out" --setattr=rsa.on_late=wait \
		--setattr=rsa.stage_out="$slow" \
		sh -c "seq 1 100000 >\$RSA_DATA_OUT/result-\$FLUX_TASK_RANK") &&
	flux job wait-event -t 60 $id clean
'
test_expect_success 'the job is over and its stage-out is running' '
	rsa_wait_state $id STAGING_OUT 30 &&
	flux jobs -n -o "{state}" $id >state &&
	test "$(cat state)" = INACTIVE
'
test_expect_success 'another job starts on the same compute nodes meanwhile' '
	next=$(flux submit -N2 hostname) &&
	flux job wait-event -t 30 $next start &&
	test "$(rsa_state $id)" = STAGING_OUT &&
	test "$(rsa_job_nodes $next)" = "$(rsa_job_nodes $id)"
'
test_expect_success 'nothing has reached data_out yet' '
	test -z "$(ls out)"
'
test_expect_success 'once the stage-out finishes, flux rsa wait returns 0' '
	rsa_open slowout &&
	flux rsa wait -t 60 $id &&
	seq 1 100000 >expect &&
	test_cmp expect out/result-0 &&
	test_cmp expect out/result-1
'
test_expect_success 'no holder job, RAM disk or reserved capacity remains' '
	rsa_nothing_left
'
test_done
