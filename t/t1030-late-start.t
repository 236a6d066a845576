#!/bin/sh
test_description='a job that starts before its stage-in is done reads data_in

The thesis behaviour (on_late=ignore, the default): the stage-in stops, the
job reads its inputs from persistent storage, and still writes its outputs
to the RAM disk, which are staged out after it ends.'

. $(dirname $0)/sharness-rsa.sh

test_under_rsa_instance

test_expect_success 'setup: inputs, a stage-in that will not finish, nodes busy' '
	rsa_wait_pool 60 &&
	rsa_make_tree "$PWD/in" && mkdir out &&
	gate=$(rsa_gate_in never) &&
	blocker=$(rsa_hold_compute)
'
test_expect_success 'the queued job is staging in' '
	id=$(flux submit -N1 --setattr=rsa.data_in="$PWD/in" \
		--setattr=rsa.data_out="$PWD/out" --setattr=rsa.stage_in="$gate" \
		--setattr=rsa.on_late=ignore \
		sh -c "echo \"\$RSA_DATA_IN\" >\$RSA_DATA_OUT/in; echo \$RSA_DATA_OUT >\$RSA_DATA_OUT/out; ls \"\$RSA_DATA_IN\" >\$RSA_DATA_OUT/listing") &&
	rsa_wait_state $id STAGING_IN 60
'
test_expect_success 'the nodes free up before the stage-in is done: the job starts anyway' '
	flux cancel $blocker &&
	flux job wait-event -t 30 $id clean &&
	flux job eventlog $id >eventlog &&
	grep "rsa-ready.*\"staged_in\":false" eventlog ||
	grep "rsa-ready.*staged_in=false" eventlog
'
test_expect_success 'it read data_in itself and wrote to the RAM disk' '
	flux rsa wait -t 60 $id &&
	test "$(cat out/in)" = "$PWD/in" &&
	rsa_job_ramdisk "$(cat out/out)" out &&
	ls in >expect && test_cmp expect out/listing
'
test_expect_success 'the stage-in was stopped, the outputs staged out, all released' '
	rsa_at_rest $id 60 &&
	rsa_history $id >history &&
	test_must_fail grep -E "READY|INUSE_IN" history &&
	sed -n "/STOPPING/,\$p" history >tail &&
	printf "%s\n" STOPPING ABORTED INUSE_OUT STAGING_OUT TEARDOWN DESTROYED >expect &&
	test_cmp expect tail &&
	flux rsa status -a -n -o "{note}" $id >note &&
	test "$(cat note)" = "output home" &&
	test -z "$(rsa_ramdisks)"
'
test_done
