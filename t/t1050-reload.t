#!/bin/sh
test_description='reloading the rsa module mid-flight loses nothing

Three jobs, one STAGING_IN, one INUSE_OUT and one STAGING_OUT, while the
module is removed and loaded again: each ends correctly, every file
arrives, nothing leaks.'

. $(dirname $0)/sharness-rsa.sh

test_under_rsa_instance

test_expect_success 'setup' '
	rsa_wait_pool 60 &&
	for j in x y z; do rsa_make_tree "$PWD/in-$j" && mkdir out-$j || return 1; done &&
	gate_in=$(rsa_gate_in gatein) &&
	gate_out=$(rsa_gate_out gateout)
'
test_expect_success 'job z has finished and is STAGING_OUT' '
	z=$(flux submit -N1 --setattr=rsa.data_in="$PWD/in-z" --setattr=rsa.data_out="$PWD/out-z" \
		--setattr=rsa.stage_out="$gate_out" --setattr=rsa.on_late=wait --setattr=rsa.capacity=16M \
		sh -c "cp -a \$RSA_DATA_IN/. \$RSA_DATA_OUT/") &&
	rsa_wait_state $z STAGING_OUT 60
'
test_expect_success 'job y runs with its inputs dropped (INUSE_OUT)' '
	y=$(flux submit -N1 --setattr=rsa.data_in="$PWD/in-y" --setattr=rsa.data_out="$PWD/out-y" \
		--setattr=rsa.on_late=wait --setattr=rsa.capacity=16M \
		sh -c "cp -a \$RSA_DATA_IN/. \$RSA_DATA_OUT/ && flux rsa release-input &&
		       while ! test -e \"$PWD/y.go\"; do sleep 0.1; done") &&
	rsa_wait_state $y INUSE_OUT 60
'
test_expect_success 'job x waits behind a blocker and is STAGING_IN' '
	blocker=$(flux submit -N1 sleep inf) &&
	flux job wait-event -t 30 $blocker start &&
	x=$(flux submit -N1 --setattr=rsa.data_in="$PWD/in-x" --setattr=rsa.data_out="$PWD/out-x" \
		--setattr=rsa.stage_in="$gate_in" --setattr=rsa.on_late=wait --setattr=rsa.capacity=16M \
		sh -c "cp -a \$RSA_DATA_IN/. \$RSA_DATA_OUT/") &&
	rsa_wait_state $x STAGING_IN 60
'
test_expect_success 'the module is removed and loaded again' '
	flux module remove rsa &&
	flux module load rsa &&
	rsa_wait_pool 30 &&
	flux rsa status -n -o "{id.f58} {rsa_state}" $x $y $z
'
test_expect_success 'every job carries on and ends correctly' '
	rsa_open gatein && rsa_open gateout && touch y.go &&
	flux cancel $blocker &&
	flux rsa wait -t 90 $z &&
	flux rsa wait -t 90 $y &&
	flux rsa wait -t 90 $x
'
test_expect_success 'every file arrived' '
	rsa_same_tree in-x out-x &&
	rsa_same_tree in-y out-y &&
	rsa_same_tree in-z out-z
'
test_expect_success 'nothing leaks' '
	test -z "$(rsa_ramdisks)" &&
	rsa_pool flux jobs -n -f running,pending -o "{name}" >pooljobs &&
	test_must_fail grep -E "rsa-(hold|stage)" pooljobs &&
	flux rsa pool -o json >pool.json &&
	flux python -c "
import json
assert all(n[\"reserved\"] == 0 for n in json.load(open(\"pool.json\"))[\"nodes\"])
"
'
test_done
