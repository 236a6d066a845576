#!/bin/sh
test_description='the RSA pool job ends while the service runs: another is launched

The service follows the pool job through its eventlog (its journal is
closed once it has caught up).  When the pool job is canceled, the service
launches a new one, and RSA jobs are staged through it as before.'

. $(dirname $0)/sharness-rsa.sh

test_under_rsa_instance

pool_running() {
	test -n "$(rsa_pool_id)"
}

test_expect_success 'the RSA pool comes up' '
	rsa_wait_pool 60 &&
	rsa_pool_id >pool.old &&
	test -s pool.old
'
test_expect_success 'the pool job is canceled: the service launches another' '
	flux cancel $(cat pool.old) &&
	flux job wait-event -t 60 $(cat pool.old) clean &&
	rsa_wait_for 60 "a new RSA pool job" pool_running &&
	rsa_wait_pool 60 &&
	rsa_pool_id >pool.new &&
	! test_cmp pool.old pool.new &&
	flux dmesg | grep "rsa: the RSA pool $(flux job id --to=f58 $(cat pool.old)) ended"
'
test_expect_success 'an RSA job is staged in and out through the new pool' '
	rsa_make_tree "$PWD/in" &&
	mkdir out &&
	id=$(flux submit -N1 --setattr=rsa.data_in="$PWD/in" --setattr=rsa.data_out="$PWD/out" \
		--setattr=rsa.capacity=16M --setattr=rsa.on_late=wait \
		sh -c "cp -a \$RSA_DATA_IN/. \$RSA_DATA_OUT/") &&
	flux rsa wait -t 120 $id &&
	test "$(rsa_state $id)" = DESTROYED &&
	rsa_same_tree in out
'
test_done
