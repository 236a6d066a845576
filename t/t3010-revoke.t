#!/bin/sh
test_description='a demoted job keeps its data until the capacity is needed

Two RSA nodes of 128M, two compute nodes busy, the first two pending jobs
on deck (ondeck-depth 2), no lock-in.  Jobs D1 and D2 hold a whole RSA node
each.  Pushed back by other jobs, D2 keeps its staged inputs while nobody
needs the capacity; going back and forth at the edge of the deck it is
never staged again.  When an urgent RSA job needs a node, the
latest-starting holder (D2) gives its capacity back, not D1.  D2 waits
for its inputs at start (on_late=wait), so it is staged once more.'

. $(dirname $0)/sharness-rsa.sh

mkdir -p conf && cat >conf/rsa.toml <<'EOF2'
[rsa]
ondeck-depth = 2
lock-in = false
EOF2
test_under_rsa_instance --config "$PWD/conf"

job_state() {
	flux rsa status -a -n -o "{job_state}" "$1"
}
restages() {
	flux rsa status -a -n -o "{restages}" "$1"
}
# wait until job $1 has job-state $2
_in_job_state() {
	test "$(job_state $1)" = "$2"
}
wait_job_state() {
	rsa_wait_for 60 "job $1 in job-state $2" _in_job_state $1 $2 ||
	{ echo "job $1 is $(job_state $1)" >&2; return 1; }
}
# jobs that are ahead of everyone in the queue but need no RAM disk
ahead() {
	flux submit -N1 --urgency=20 true
}

test_expect_success 'setup: the pool is up, inputs, both compute nodes busy' '
	rsa_wait_pool 60 &&
	rsa_make_tree "$PWD/in" && mkdir out1 out2 outu &&
	printf "#!/bin/sh\ncp -a \"\$RSA_DATA_IN/.\" \"\$RSA_DATA_OUT/\"\n" >job.sh &&
	chmod +x job.sh && cat job.sh &&
	blocker=$(rsa_hold_compute)
'
test_expect_success 'D1 and D2 hold a whole RSA node each, staged' '
	d1=$(flux submit -N1 --setattr=rsa.data_in="$PWD/in" --setattr=rsa.data_out="$PWD/out1" \
		--setattr=rsa.capacity=128M ./job.sh) &&
	d2=$(flux submit -N1 --setattr=rsa.on_late=wait --setattr=rsa.data_in="$PWD/in" --setattr=rsa.data_out="$PWD/out2" \
		--setattr=rsa.capacity=128M ./job.sh) &&
	rsa_wait_state $d1 READY 60 &&
	rsa_wait_state $d2 READY 60
'
test_expect_success 'one job ahead: D2 is third, inside the hysteresis, still on deck' '
	n1=$(ahead) &&
	rsa_settled &&
	test "$(job_state $d2)" = ONDECK &&
	test "$(rsa_state $d2)" = READY
'
test_expect_success 'two jobs ahead: D2 is demoted but keeps its staged data' '
	n2=$(ahead) &&
	wait_job_state $d2 DEMOTED &&
	rsa_settled &&
	test "$(rsa_state $d2)" = READY
'
test_expect_success 'back and forth at the edge of the deck three times: never staged again' '
	for round in 1 2 3; do
		flux cancel $n1 $n2 &&
		wait_job_state $d2 ONDECK &&
		n1=$(ahead) && n2=$(ahead) &&
		wait_job_state $d2 DEMOTED || return 1
	done &&
	test "$(rsa_state $d2)" = READY &&
	test "$(restages $d2)" = 0 &&
	test "$(rsa_history $d2 | grep -c STAGING_IN)" = 1 &&
	flux cancel $n1 $n2 &&
	wait_job_state $d2 ONDECK
'
test_expect_success 'an urgent RSA job needs a node: the latest-starting holder (D2) gives it back' '
	u=$(flux submit -N1 --urgency=20 --setattr=rsa.data_in="$PWD/in" --setattr=rsa.data_out="$PWD/outu" \
		--setattr=rsa.capacity=128M ./job.sh) &&
	rsa_wait_state $u READY 60 &&
	test "$(rsa_state $d1)" = READY &&
	case "$(rsa_state $d2)" in INITIAL|DESTROYED) ;; *) false ;; esac &&
	rsa_history $d2 | grep TEARDOWN
'
test_expect_success 'all three run with their inputs; D2 was staged once more' '
	flux cancel $blocker &&
	flux rsa wait -t 120 $u && flux rsa wait -t 120 $d1 && flux rsa wait -t 120 $d2 &&
	rsa_same_tree in out1 && rsa_same_tree in outu && rsa_same_tree in out2 &&
	test "$(restages $d2)" = 1 &&
	test "$(restages $d1)" = 0
'
test_expect_success 'nothing leaks' '
	rsa_nothing_left
'
test_done
