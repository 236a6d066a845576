#!/bin/sh
test_description='one flux cancel cleans up a job in any rsa-state

States a test can hold a job in are tested one by one.  Of the short-lived
ones (REQUESTED, ASSIGNED, BOOTING, BOOTED), REQUESTED is held by keeping
the RSA nodes busy in the pool, so that the job'"'"'s holder waits there; all
of them are covered by the core property tests.'

. $(dirname $0)/sharness-rsa.sh

test_under_rsa_instance

# annotated JOB STATE: flux jobs shows the job in rsa-state STATE
annotated() {
	test "$(flux jobs -n -o "{user.rsa.state}" "$1")" = "$2"
}

test_expect_success 'setup' '
	rsa_wait_pool 60 &&
	rsa_make_tree "$PWD/in" && mkdir out &&
	gate=$(rsa_gate_in gate) &&
	blocker=$(rsa_hold_compute)
'
test_expect_success 'cancel in INITIAL (pending, not on deck)' '
	ahead="$(flux submit -N2 true) $(flux submit -N2 true) $(flux submit -N2 true) $(flux submit -N2 true) $(flux submit -N2 true) $(flux submit -N2 true) $(flux submit -N2 true) $(flux submit -N2 true)" &&
	id=$(flux submit -N1 --setattr=rsa.data_in="$PWD/in" --setattr=rsa.data_out="$PWD/out" true) &&
	flux job wait-event -t 30 $id priority &&
	rsa_settled &&
	test "$(rsa_state $id)" = INITIAL &&
	rsa_wait_for 10 "flux jobs showing INITIAL" annotated $id INITIAL &&
	flux cancel $id $ahead &&
	rsa_at_rest $id 60 && rsa_nothing_left
'
test_expect_success 'cancel in STAGING_IN' '
	id=$(flux submit -N1 --setattr=rsa.data_in="$PWD/in" --setattr=rsa.data_out="$PWD/out" \
		--setattr=rsa.stage_in="$gate" --setattr=rsa.on_late=ignore true) &&
	rsa_wait_state $id STAGING_IN 60 &&
	flux cancel $id &&
	rsa_at_rest $id 60 && rsa_nothing_left
'
test_expect_success 'cancel in READY' '
	id=$(flux submit -N1 --setattr=rsa.data_in="$PWD/in" --setattr=rsa.data_out="$PWD/out" true) &&
	rsa_wait_state $id READY 60 &&
	flux cancel $id &&
	rsa_at_rest $id 60 && rsa_nothing_left
'
test_expect_success 'cancel while held at start for inputs (on_late=wait)' '
	flux cancel $blocker &&
	id=$(flux submit -N1 --setattr=rsa.data_in="$PWD/in" --setattr=rsa.data_out="$PWD/out" \
		--setattr=rsa.stage_in="$gate" --setattr=rsa.on_late=wait true) &&
	flux job wait-event -t 30 $id prolog-start &&
	rsa_wait_state $id STAGING_IN 60 &&
	flux cancel $id &&
	flux job wait-event -t 30 $id clean &&
	rsa_at_rest $id 60 && rsa_nothing_left
'
test_expect_success 'cancel in INUSE_IN: what the job wrote is staged out, then all released' '
	rm -rf out/* &&
	id=$(flux submit -N1 --setattr=rsa.data_in="$PWD/in" --setattr=rsa.data_out="$PWD/out" \
		--setattr=rsa.on_late=wait \
		sh -c "echo partial >\$RSA_DATA_OUT/checkpoint; sleep inf") &&
	rsa_wait_state $id INUSE_IN 60 &&
	flux cancel $id &&
	flux rsa wait -t 60 $id &&
	test "$(cat out/checkpoint)" = partial &&
	rsa_at_rest $id 60 && rsa_nothing_left
'
test_expect_success 'cancel in INUSE_OUT (inputs already dropped)' '
	rm -rf out/* &&
	id=$(flux submit -N1 --setattr=rsa.data_in="$PWD/in" --setattr=rsa.data_out="$PWD/out" \
		--setattr=rsa.on_late=wait \
		sh -c "flux rsa release-input; echo late >\$RSA_DATA_OUT/checkpoint;
		       echo wrote >\"$PWD/wrote\"; sleep inf") &&
	rsa_wait_state $id INUSE_OUT 60 &&
	rsa_wait_file wrote &&
	flux cancel $id &&
	flux rsa wait -t 60 $id &&
	test "$(cat out/checkpoint)" = late &&
	rsa_at_rest $id 60 && rsa_nothing_left
'
test_expect_success 'cancel in REQUESTED: its holder waits for the RSA nodes, busy in the pool' '
	b=$(rsa_hold_compute) &&
	cores=$(rsa_pool flux resource list -s free -n -o "{ncores}") &&
	busy=$(rsa_pool flux submit -N2 -n2 -c$((cores / 2)) -t 30m sleep inf) &&
	rsa_pool flux job wait-event -t 30 $busy start &&
	id=$(flux submit -N1 --setattr=rsa.data_in="$PWD/in" --setattr=rsa.data_out="$PWD/out" true) &&
	rsa_wait_state $id REQUESTED 60 &&
	rsa_settled &&
	test "$(rsa_state $id)" = REQUESTED &&
	flux cancel $id &&
	rsa_at_rest $id 60 &&
	rsa_history $id >history &&
	cat history &&
	grep -x REQUESTED history &&
	test_must_fail grep -x -e ASSIGNED -e BOOTING -e BOOTED history &&
	rsa_pool flux cancel $busy &&
	flux cancel $b &&
	rsa_nothing_left
'
test_done
