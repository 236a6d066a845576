#!/bin/sh
test_description='a job pushed back during stage-in gives its capacity back

One RSA node: an urgent RSA job needs the capacity the staging job holds,
so the staging job is demoted and its capacity taken back.  When it is on
deck again it is staged again, and runs with its inputs.'

. $(dirname $0)/sharness-rsa.sh

mkdir -p conf && cat >conf/rsa.toml <<'EOF2'
[rsa]
ondeck-depth = 1
EOF2
test_under_rsa_instance --size 3 --rsa 1 --config "$PWD/conf"

test_expect_success 'setup: inputs, a gated stage-in, both compute nodes busy' '
	rsa_wait_pool 60 &&
	rsa_make_tree "$PWD/in" && mkdir out uout &&
	gate=$(rsa_gate_in gatein) &&
	b0=$(flux submit -N1 --exclusive -t 30m --requires=host:node0 sleep inf) &&
	b1=$(flux submit -N1 --exclusive -t 30m --requires=host:node1 sleep inf) &&
	flux job wait-event -t 30 $b0 start &&
	flux job wait-event -t 30 $b1 start
'
test_expect_success 'the RSA job at the head of the queue starts staging in' '
	id=$(flux submit -N1 --exclusive --requires=host:node1 --setattr=rsa.data_in="$PWD/in" \
		--setattr=rsa.data_out="$PWD/out" --setattr=rsa.stage_in="$gate" \
		--setattr=rsa.on_late=ignore \
		sh -c "cp -a \$RSA_DATA_IN/. \$RSA_DATA_OUT/; echo \$RSA_DATA_IN >\$RSA_DATA_OUT/.from") &&
	rsa_wait_state $id STAGING_IN 60
'
test_expect_success 'a more urgent RSA job needs the capacity: ours is demoted and gives it back' '
	urgent=$(flux submit -N1 --exclusive --requires=host:node0 --urgency=31 \
		--setattr=rsa.data_out="$PWD/uout" sleep 2) &&
	rsa_wait_state $id INITIAL 60 &&
	flux rsa status -a -n -o "{job_state}" $id >js &&
	test "$(cat js)" = DEMOTED &&
	rsa_wait_state $urgent READY 60
'
test_expect_success 'the history shows the stop and the teardown' '
	rsa_history $id >history &&
	printf "%s\n" INITIAL REQUESTED ASSIGNED BOOTING BOOTED STAGING_IN STOPPING \
		ABORTED TEARDOWN DESTROYED INITIAL >expect &&
	test_cmp expect history
'
test_expect_success 'the urgent job runs and ends; ours is on deck again and staged again' '
	rsa_open gatein &&
	flux cancel $b0 &&
	flux rsa wait -t 60 $urgent &&
	rsa_wait_state $id READY 60 &&
	flux rsa status -a -n -o "{restages}" $id >restages &&
	test "$(cat restages)" = 1
'
test_expect_success 'it runs with its staged inputs' '
	flux cancel $b1 &&
	flux job wait-event -t 60 $id clean &&
	flux rsa wait -t 60 $id &&
	rsa_job_ramdisk "$(cat out/.from)" in &&
	rm out/.from &&
	rsa_same_tree in out
'
test_done
