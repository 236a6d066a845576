#!/bin/sh
test_description='a job never reads a data_in that another job'"'"'s stage-out is still writing

A pipeline written the natural way: B names as rsa.data_in the rsa.data_out
of RSA job A and depends on A with afterok.  A'"'"'s stage-out (a user script
that copies part of the outputs, then waits) is still writing that
directory when A ends.  B waits in DEPEND, as under afterstaged:A, until
A'"'"'s outputs are home, then reads all of them.  So does a job submitted
after A ended, without any dependency.  If A'"'"'s outputs never come home,
B gets an exception naming its data_in instead of starting on a part.'

. $(dirname $0)/sharness-rsa.sh

mkdir -p conf &&
printf '[rsa]\nstage-retries = 0\n' >conf/rsa.toml
test_under_rsa_instance --config "$PWD/conf"

# a stage-out that copies the files named r-0* (the first part), then waits
# for $PWD/$1.open before it copies the rest
gate_halfway() {
	cat >"$1.sh" <<-EOF
	#!/bin/sh
	cp -a "\$1"/r-0* "\$2/"
	while ! test -e "$PWD/$1.open"; do sleep 0.1; done
	cp -a "\$1/." "\$2/"
	EOF
	chmod +x "$1.sh"
	echo "$PWD/$1.sh"
}
# 41 outputs: r-00 .. r-09 first, then r-10 .. r-40
WRITE41='for i in $(seq -w 0 40); do echo $i >$RSA_DATA_OUT/r-$i; done'
COUNT='ls "${RSA_DATA_IN:-$1}" | wc -l >"$2"'

test_expect_success 'setup: the pool' '
	rsa_wait_pool 60 &&
	mkdir out out2 out3 in-b &&
	gate=$(gate_halfway half) &&
	gate2=$(gate_halfway half2)
'
test_expect_success 'A writes 41 outputs; B (afterok:A) names A'"'"'s data_out as its data_in' '
	A=$(flux submit -N1 --setattr=rsa.data_out="$PWD/out" --setattr=rsa.stage_out="$gate" \
		--setattr=rsa.on_late=wait sh -c "$WRITE41") &&
	B=$(flux submit -N1 --dependency=afterok:$A --setattr=rsa.data_in="$PWD/out" \
		sh -c "$COUNT" count "$PWD/out" "$PWD/b-count") &&
	rsa_wait_state $A STAGING_OUT 60 &&
	flux job wait-event -t 30 $A clean
'
# does directory $1 hold $2 entries?
holds_entries() {
	test $(ls "$1" | wc -l) -eq $2
}

test_expect_success 'while A'"'"'s stage-out has written a part, B waits for A'"'"'s outputs' '
	rsa_wait_for 30 "10 files in out" holds_entries out 10 &&
	flux jobs -n -o "{state} {dependencies}" $B >deps &&
	cat deps &&
	test "$(cat deps)" = "DEPEND afterstaged=$(flux job id --to=f58 $A)"
'
test_expect_success 'a job submitted now without a dependency waits too (data_in with a trailing slash)' '
	B2=$(flux submit -N1 --setattr=rsa.data_in="$PWD/out/" \
		sh -c "$COUNT" count "$PWD/out" "$PWD/b2-count") &&
	flux job wait-event -t 10 $B2 dependency-add &&
	test "$(flux jobs -n -o "{state}" $B2)" = DEPEND
'
test_expect_success 'once A'"'"'s outputs are home, both read all 41' '
	rsa_open half &&
	flux job wait-event -t 60 $B clean &&
	flux job wait-event -t 60 $B2 clean &&
	flux job status $B $B2 &&
	test "$(cat b-count)" = 41 &&
	test "$(cat b2-count)" = 41 &&
	test "$(rsa_field output_home $A)" = True
'
test_expect_success 'a job whose data_in merely sits beside A'"'"'s data_out does not wait' '
	A3=$(flux submit -N1 --setattr=rsa.data_out="$PWD/out3" --setattr=rsa.stage_out="$gate2" \
		--setattr=rsa.on_late=wait sh -c "$WRITE41") &&
	rsa_wait_state $A3 STAGING_OUT 60 &&
	echo b >in-b/b &&
	C=$(flux submit -N1 --setattr=rsa.data_in="$PWD/in-b" \
		sh -c "$COUNT" count "$PWD/in-b" "$PWD/c-count") &&
	flux job wait-event -t 60 $C clean &&
	test "$(cat c-count)" = 1 &&
	rsa_open half2 &&
	flux rsa wait -t 60 $A3
'
test_expect_success 'A4'"'"'s stage-out fails after a part: the job reading its data_out waits' '
	cat >fail-half.sh <<-EOF &&
	#!/bin/sh
	cp -a "\$1"/r-0* "\$2/"
	echo "the archive is full" >&2
	exit 1
	EOF
	chmod +x fail-half.sh &&
	A4=$(flux submit -N1 --setattr=rsa.data_out="$PWD/out2" --setattr=rsa.on_late=wait \
		--setattr=rsa.stage_out="$PWD/fail-half.sh" sh -c "$WRITE41") &&
	B4=$(flux submit -N1 --dependency=afterany:$A4 --setattr=rsa.data_in="$PWD/out2" \
		sh -c "$COUNT" count "$PWD/out2" "$PWD/b4-count") &&
	rsa_wait_state $A4 HELD 60 &&
	rsa_wait_for 30 "10 files in out2" holds_entries out2 10 &&
	flux job wait-event -t 10 $B4 dependency-add &&
	test "$(flux jobs -n -o {state} $B4)" = DEPEND
'
test_expect_success 'released without a stage-out: B4 gets an exception naming its data_in, never runs' '
	flux rsa release $A4 &&
	flux job wait-event -t 30 $B4 exception >exc &&
	cat exc &&
	grep -F "rsa: data_in $PWD/out2 is the data_out of job $(flux job id --to=f58 $A4): its outputs were never staged out" exc &&
	flux job wait-event -t 30 $B4 clean &&
	test_must_fail flux job wait-event -t 1 $B4 start &&
	! test -e b4-count
'
test_expect_success 'nothing is left: no RAM disk, holder or reserved capacity' '
	rsa_at_rest $A4 60 &&
	rsa_nothing_left
'
test_done
