#!/bin/sh
test_description='jobs the RSA does not manage are INELIGIBLE and untouched'

. $(dirname $0)/sharness-rsa.sh

mkdir -p conf && cat >conf/rsa.toml <<'EOF2'
[rsa]
min-nodes = 2
EOF2
test_under_rsa_instance --config "$PWD/conf"

test_expect_success 'setup' '
	rsa_wait_pool 60 &&
	mkdir in out && echo data >in/file
'
test_expect_success 'a job without rsa attributes is INELIGIBLE' '
	id=$(flux submit -N1 printenv) &&
	flux job wait-event -t 30 $id clean &&
	flux rsa status -n -o "{rsa_state} {note}" $id >status &&
	test "$(cat status)" = "INELIGIBLE not an RSA job (no rsa.data_in, rsa.data_out or rsa.capacity)"
'
test_expect_success 'and ran untouched: no RSA variables, no rsa events' '
	flux job attach $id >env.out &&
	test_must_fail grep -E "^RSA_(RAMDISK|DATA_IN|DATA_OUT)=" env.out &&
	flux job eventlog $id >eventlog &&
	test_must_fail grep -E "rsa-|prolog" eventlog
'
test_expect_success 'a job smaller than min-nodes is INELIGIBLE with the reason' '
	small=$(flux submit -N1 --setattr=rsa.data_in="$PWD/in" \
		--setattr=rsa.data_out="$PWD/out" printenv) &&
	flux job wait-event -t 30 $small clean &&
	flux rsa status -a -n -o "{rsa_state}|{note}" $small >status &&
	test "$(cat status)" = "INELIGIBLE|job has 1 node(s); the site'"'"'s minimum for a RAM disk is 2"
'
test_expect_success 'it used its own directories and nothing was reserved for it' '
	flux job attach $small >small.env &&
	grep -Fx "RSA_DATA_IN=$PWD/in" small.env &&
	grep -Fx "RSA_DATA_OUT=$PWD/out" small.env &&
	test_must_fail grep ^RSA_RAMDISK= small.env &&
	flux rsa status -a -o json $small >rec.json &&
	flux python -c "
import json
rec = json.load(open(\"rec.json\"))[0]
assert {h[2] for h in rec[\"history\"]} == {\"INELIGIBLE\"}, rec[\"history\"]
assert rec[\"gen\"] == 0
"
'
test_expect_success 'a two-node job is eligible: it gets a RAM disk' '
	big=$(flux submit -N2 --setattr=rsa.data_in="$PWD/in" \
		--setattr=rsa.data_out="$PWD/out" --setattr=rsa.on_late=wait true) &&
	flux job wait-event -t 30 $big clean &&
	flux rsa wait -t 60 $big &&
	test "$(rsa_state $big)" = "DESTROYED"
'
test_done
