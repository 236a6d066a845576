#!/bin/sh
test_description='a job pushed back during stage-in gives its capacity back

It is staged again when it is on deck again, and runs with its inputs.'

. $(dirname $0)/sharness-rsa.sh

mkdir -p conf && cat >conf/rsa.toml <<'EOF2'
[rsa]
ondeck-depth = 1
EOF2
test_under_rsa_instance --config "$PWD/conf"

test_expect_success 'setup: inputs, a gated stage-in, both compute nodes busy' '
	rsa_wait_pool 60 &&
	rsa_make_tree "$PWD/in" && mkdir out &&
	gate=$(rsa_gate_in gatein) &&
	b1=$(flux submit -N1 sleep inf) &&
	b2=$(flux submit -N1 sleep inf) &&
	flux job wait-event -t 30 $b1 start &&
	flux job wait-event -t 30 $b2 start
'
test_expect_success 'the RSA job at the head of the queue starts staging in' '
	id=$(flux submit -N1 --setattr=rsa.data_in="$PWD/in" \
		--setattr=rsa.data_out="$PWD/out" --setattr=rsa.stage_in="$gate" \
		--setattr=rsa.on_late=ignore \
		sh -c "cp -a \$RSA_DATA_IN/. \$RSA_DATA_OUT/; echo \$RSA_DATA_IN >\$RSA_DATA_OUT/.from") &&
	rsa_wait_state $id STAGING_IN 60
'
test_expect_success 'a more urgent job pushes it back: it is demoted and releases everything' '
	urgent=$(flux submit -N1 --urgency=31 sleep inf) &&
	rsa_wait_state $id INITIAL 60 &&
	flux rsa status -a -n -o "{job_state}" $id >js &&
	test "$(cat js)" = DEMOTED &&
	test -z "$(rsa_ramdisks)" &&
	flux rsa pool -o json >pool.json &&
	flux python -c "
import json
assert all(n[\"reserved\"] == 0 for n in json.load(open(\"pool.json\"))[\"nodes\"])
"
'
test_expect_success 'the history shows the stop and the teardown' '
	rsa_history $id >history &&
	cat >expect <<-EOF2 &&
	INITIAL
	REQUESTED
	ASSIGNED
	BOOTING
	BOOTED
	STAGING_IN
	STOPPING
	ABORTED
	TEARDOWN
	DESTROYED
	INITIAL
	EOF2
	test_cmp expect history
'
test_expect_success 'one node frees up: the urgent job takes it, ours is on deck again and staged again' '
	rsa_open gatein &&
	flux cancel $b1 &&
	flux job wait-event -t 30 $urgent start &&
	rsa_wait_state $id READY 60 &&
	flux rsa status -a -n -o "{restages}" $id >restages &&
	test "$(cat restages)" = 1
'
test_expect_success 'it runs with its staged inputs' '
	flux cancel $b2 &&
	flux job wait-event -t 60 $id clean &&
	flux rsa wait -t 60 $id &&
	case "$(cat out/.from)" in "$RSA_INSTANCE_TMP"/ramdisk/*/in) ;; *) false ;; esac &&
	rm out/.from &&
	rsa_same_tree in out &&
	flux cancel $urgent
'
test_done
