#!/bin/sh
test_description='a queued RSA job is staged in before it starts, and staged out after

The job finds byte-identical inputs on the RAM disk; what it writes there
arrives in data_out byte-identical, with modes and mtimes kept.'

. $(dirname $0)/sharness-rsa.sh

test_under_rsa_instance

cat >job.sh <<'EOF2'
#!/bin/sh
# the RSA job: check the staged inputs, write outputs to the RAM disk
echo "$RSA_RAMDISK $RSA_DATA_IN $RSA_DATA_OUT" >"$1/env"
# (the RAM disk's own in/ directory keeps its private mode: compare contents)
rsync -n -a -i --checksum "$RSA_DATA_IN/" "$1/in/" | grep -v " \./\$" >"$1/in.diff"
sh "$1/make-output.sh" "$RSA_DATA_OUT"
EOF2
cat >make-output.sh <<'EOF2'
#!/bin/sh
mkdir -p "$1/results/step 1" "$1/empty"
head -c 200000 /dev/zero | tr "\0" "x" >"$1/results/step 1/field.dat"
echo done >"$1/results/summary"
: >"$1/results/nothing"
ln -s summary "$1/results/latest"
chmod 600 "$1/results/summary"
chmod 751 "$1/results/step 1"
find "$1" -mindepth 1 -exec touch -h -d "2011-12-01 10:00:00" {} +
touch -h -d "2011-12-01 08:00:00" "$1/results/step 1/field.dat" "$1/results/latest"
touch -d "2011-12-01 09:00:00" "$1/results/step 1"
EOF2
chmod +x job.sh

test_expect_success 'the RSA pool comes up' '
	rsa_wait_pool 60
'
test_expect_success 'inputs and an empty output directory' '
	rsa_make_tree "$PWD/in" &&
	mkdir out expect &&
	sh make-output.sh "$PWD/expect"
'
test_expect_success 'a job holds both compute nodes' '
	blocker=$(rsa_hold_compute)
'
test_expect_success 'an RSA job queues behind it' '
	id=$(flux submit -N1 --setattr=rsa.data_in="$PWD/in" \
		--setattr=rsa.data_out="$PWD/out" ./job.sh "$PWD") &&
	flux job wait-event -t 10 $id priority
'
test_expect_success 'its inputs are staged while it is pending' '
	rsa_wait_state $id READY 60 &&
	flux jobs -n -o "{state}" $id >state &&
	test "$(cat state)" = "SCHED"
'
test_expect_success 'flux jobs shows the RSA state (annotation user.rsa)' '
	flux jobs -n -o "{user.rsa.state}" $id >annotation &&
	test "$(cat annotation)" = "READY"
'
test_expect_success 'when the compute nodes free up, the job runs' '
	flux cancel $blocker &&
	flux job wait-event -t 60 $id clean
'
test_expect_success 'READY was reached before the job started' '
	flux job eventlog $id >eventlog &&
	ready=$(grep -n "rsa-state.*\"READY\"" eventlog | cut -d: -f1) &&
	start=$(grep -n " start" eventlog | cut -d: -f1) &&
	test -n "$ready" && test -n "$start" && test $ready -lt $start
'
test_expect_success 'the job read its inputs from the RAM disk, byte-identical' '
	read ramdisk data_in data_out <env &&
	test "$data_in" = "$ramdisk/in" &&
	test "$data_out" = "$ramdisk/out" &&
	rsa_job_ramdisk "$ramdisk" &&
	test_must_be_empty in.diff
'
test_expect_success 'flux rsa wait returns once the outputs are home' '
	flux rsa wait $id
'
test_expect_success 'outputs arrived byte-identical with modes and mtimes' '
	rsa_same_tree expect out
'
test_expect_success 'the record shows every step with its time' '
	flux rsa status -a -o json $id >record.json &&
	flux python -c "
import json, sys
rec = json.load(open(\"record.json\"))[0]
seen = [h[2] for h in rec[\"history\"]]
seen = [s for i, s in enumerate(seen) if i == 0 or s != seen[i - 1]]
want = [\"INITIAL\", \"REQUESTED\", \"ASSIGNED\", \"BOOTING\", \"BOOTED\", \"STAGING_IN\",
        \"READY\", \"INUSE_IN\", \"STAGING_OUT\", \"TEARDOWN\", \"DESTROYED\"]
assert [s for s in seen if s in want] == want, seen
assert rec[\"output_home\"] is True
"
'
test_expect_success 'nothing is left: no RAM disk, no holder, no reserved capacity' '
	rsa_nothing_left
'
test_done
