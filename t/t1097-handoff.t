#!/bin/sh
test_description='workflow hand-off: a job whose inputs are another job'"'"'s outputs gets them from that job'"'"'s RAM disk

A writes outputs on its RAM disk; B (afterok:A, rsa.data_in = A'"'"'s
rsa.data_out) starts while A'"'"'s outputs are not home yet (A'"'"'s first
stage-out fails: data_out was replaced by a file) and sees exactly A'"'"'s outputs,
read from A'"'"'s RAM disk.  A'"'"'s outputs then reach data_out
byte-identical.  A RAM disk whose outputs are home stays, charged, for a
job that has not read it yet (KEPT), until that job has its inputs, is
cancelled, or [rsa] handoff-keep is over.'

. $(dirname $0)/sharness-rsa.sh

mkdir -p conf &&
printf '[rsa]\nstage-retries = 0\nhandoff-keep = "20s"\n' >conf/rsa.toml
test_under_rsa_instance --config "$PWD/conf"

# A's outputs: three files and a subdirectory, with modes and old mtimes
WRITE='mkdir -p $RSA_DATA_OUT/sub &&
	head -c 200000 /dev/urandom >$RSA_DATA_OUT/big &&
	echo one >$RSA_DATA_OUT/one && chmod 640 $RSA_DATA_OUT/one &&
	seq 1 5000 >$RSA_DATA_OUT/numbers &&
	echo deep >$RSA_DATA_OUT/sub/deep && chmod 700 $RSA_DATA_OUT/sub &&
	touch -d "2011-11-01 12:00:00" $RSA_DATA_OUT/numbers $RSA_DATA_OUT/sub/deep'
# what a job sees at a directory: names, types, sizes, modes, mtimes, sums
SEE='cd "${RSA_DATA_IN:-$1}" && find . -mindepth 1 -printf "%P %y %m %T@\n" | sort >"$2" &&
	find . -type f -printf "%P %s\n" | sort >>"$2" &&
	find . -type f | sort | xargs md5sum >>"$2" &&
	{ test -z "$RSA_DATA_OUT" || echo done >"$RSA_DATA_OUT/result"; }'
manifest() {
	(cd "$1" && find . -mindepth 1 -printf "%P %y %m %T@\n" | sort &&
	 find . -type f -printf "%P %s\n" | sort &&
	 find . -type f | sort | xargs md5sum)
}
# a job that runs until $PWD/$1.open exists (another dependency of B)
gate_job() {
	flux submit -N1 sh -c "while ! test -e \"$PWD/$1.open\"; do sleep 0.1; done"
}
# a producer writing $WRITE's outputs to $PWD/$1, staged out to it
producer() {
	flux submit -N1 --setattr=rsa.data_out="$PWD/$1" --setattr=rsa.capacity=16M \
		--setattr=rsa.on_late=wait sh -c "$WRITE"
}
# a consumer of $PWD/$1 writing what it sees there to $PWD/$2; the rest:
# more flux submit options (its dependencies)
consumer() {
	_in=$1 _seen=$2 && shift 2 &&
	flux submit -N1 "$@" --setattr=rsa.data_in="$PWD/$_in" \
		sh -c "$SEE" see "$PWD/$_in" "$PWD/$_seen"
}

test_expect_success 'setup: the pool' '
	rsa_wait_pool 60 &&
	mkdir out out2 out3 out4 out5 b-out
'
test_expect_success 'A writes its outputs; its stage-out fails (data_out replaced by a file)' '
	A=$(flux submit -N1 --setattr=rsa.data_out="$PWD/out" --setattr=rsa.capacity=16M \
		--setattr=rsa.on_late=wait \
		sh -c "$WRITE && echo w >\"$PWD/a.wrote\" && while ! test -e \"$PWD/a.go\"; do sleep 0.1; done") &&
	B=$(flux submit -N1 --dependency=afterok:$A --setattr=rsa.data_in="$PWD/out" \
		--setattr=rsa.data_out="$PWD/b-out" --setattr=rsa.capacity=16M --setattr=rsa.paths=env \
		sh -c "$SEE" see "$PWD/out" "$PWD/b-seen") &&
	rsa_wait_file a.wrote &&
	mv out out.real && echo "not a directory" >out &&
	touch a.go &&
	rsa_wait_state $A HELD 60
'
test_expect_success 'B runs on A'"'"'s outputs, read from A'"'"'s RAM disk, while A is HELD' '
	flux job wait-event -t 60 $B clean &&
	flux job status $B &&
	test "$(rsa_field rsa_state $A)" = HELD &&
	test "$(rsa_field output_home $A)" = False &&
	flux job eventlog $B >b-events &&
	grep "rsa-handoff" b-events &&
	grep "rsa-staged-in" b-events | grep -F "handoff=\"$(flux job id --to=f58 $A)\"" &&
	grep "rsa-staged-in" b-events | grep -F "nodes=[\"$(rsa_field nodes $A)\"]" &&
	grep -F "numbers f 644 1320148800" b-seen &&
	grep -F "sub d" b-seen
'
test_expect_success 'B'"'"'s own outputs came home' '
	rsa_at_rest $B 60 &&
	test "$(cat b-out/result)" = done &&
	flux rsa status -a $B >b-status && cat b-status &&
	grep -F "inputs from $(flux job id --to=f58 $A)'"'"'s RAM disk; output home" b-status
'
test_expect_success 'A'"'"'s outputs reach data_out once it is out of the way, exactly what B saw' '
	rm out && mv out.real out &&
	flux rsa retry $A &&
	flux rsa wait -t 60 $A &&
	rsa_at_rest $A 60 &&
	manifest out >home &&
	test_cmp home b-seen
'
test_expect_success 'flux rsa timeline draws the hand-off: B'"'"'s inputs from A'"'"'s RAM disk' '
	flux rsa timeline --json $A $B >tl.json &&
	flux python -c "
import json, sys
rows = {r[\"jobid\"]: r for r in json.load(open(\"tl.json\"))[\"jobs\"]}
a, b = $(flux job id --to=dec $A), $(flux job id --to=dec $B)
assert rows[b][\"handoff\"][\"from\"] == a, rows[b]
assert rows[a][\"handoff\"] is None
" &&
	if flux python -c "import matplotlib" 2>/dev/null; then
		flux rsa timeline -o handoff.png $A $B && test -s handoff.png
	fi
'
test_expect_success 'a kept RAM disk: A2'"'"'s outputs home, B2 not yet started (it also waits for G2)' '
	G2=$(gate_job g2) &&
	A2=$(producer out2) &&
	B2=$(consumer out2 b2-seen --dependency=afterok:$A2 --dependency=afterok:$G2 \
		--setattr=rsa.capacity=16M) &&
	rsa_wait_state $A2 KEPT 60 &&
	test "$(rsa_field output_home $A2)" = True &&
	test "$(rsa_field consumers $A2)" = "$(flux job id --to=dec $B2)" &&
	rsa_node_shares $A2 | grep 16777216 &&
	flux rsa status $A2 >a2-status && cat a2-status &&
	grep -F "output home; RAM disk kept for $(flux job id --to=f58 $B2) until" a2-status
'
test_expect_success 'B2 gets its inputs from the kept RAM disk; then A2'"'"'s goes' '
	rsa_open g2 &&
	flux job wait-event -t 60 $B2 clean &&
	flux job status $B2 &&
	flux job eventlog $B2 >b2-events && cat b2-events &&
	grep "rsa-staged-in" b2-events | grep -F "handoff=\"$(flux job id --to=f58 $A2)\"" &&
	manifest out2 >home2 &&
	test_cmp home2 b2-seen &&
	rsa_at_rest $A2 60 &&
	rsa_history $A2 | grep -x KEPT
'
test_expect_success 'a consumer cancelled: the kept RAM disk goes at once' '
	G3=$(gate_job g3) &&
	A3=$(producer out3) &&
	B3=$(consumer out3 b3-seen --dependency=afterok:$A3 --dependency=afterok:$G3) &&
	rsa_wait_state $A3 KEPT 60 &&
	flux cancel $B3 &&
	rsa_at_rest $A3 30 &&
	rsa_open g3
'
test_expect_success 'handoff-keep over: the kept RAM disk goes; its reader gets data_out' '
	G4=$(gate_job g4) &&
	A4=$(producer out4) &&
	B4=$(consumer out4 b4-seen --dependency=afterok:$A4 --dependency=afterok:$G4 \
		--setattr=rsa.capacity=16M) &&
	rsa_wait_state $A4 KEPT 60 &&
	rsa_at_rest $A4 60 &&
	rsa_history $A4 >history4 && cat history4 &&
	grep -x -A1 KEPT history4 | grep -x TEARDOWN &&
	rsa_open g4 &&
	flux job wait-event -t 60 $B4 clean &&
	flux job status $B4 &&
	! flux job eventlog $B4 | grep -F "handoff=" &&
	manifest out4 >home4 &&
	test_cmp home4 b4-seen
'
# A6's RAM disk on RSA node node6, which is then drained: B6 is placed on
# the other one.  A GlusterFS RAM disk is a volume: B6's stage-in mounts
# it there and reads it while A6 is HELD.  A tmpfs one (no GlusterFS: all
# nodes share one mount table) is seen only on node6: B6 waits for A6's
# outputs home, then reads data_out.
test_expect_success 'placed on another RSA node, B6 reads A6'"'"'s RAM disk there (or data_out once home)' '
	mkdir out6 &&
	G6=$(gate_job g6) &&
	A6=$(flux submit -N1 --setattr=rsa.data_out="$PWD/out6" --setattr=rsa.capacity=16M \
		--setattr=rsa.on_late=wait \
		sh -c "$WRITE && echo w >\"$PWD/a6.wrote\" && while ! test -e \"$PWD/a6.go\"; do sleep 0.1; done") &&
	B6=$(flux submit -N1 --dependency=afterok:$A6 --dependency=afterok:$G6 \
		--setattr=rsa.data_in="$PWD/out6" --setattr=rsa.paths=env --setattr=rsa.capacity=16M \
		sh -c "$SEE" see "$PWD/out6" "$PWD/b6-seen") &&
	rsa_wait_file a6.wrote &&
	node6=$(rsa_field nodes $A6) &&
	mv out6 out6.real && echo "not a directory" >out6 &&
	touch a6.go &&
	rsa_wait_state $A6 HELD 60 &&
	flux job wait-event -t 30 $B6 rsa-handoff &&
	flux rsa drain $node6 handoff test &&
	rsa_open g6 &&
	if flux config get rsa.provider | grep -q glusterfs
	then
		flux job wait-event -t 60 $B6 clean &&
		flux job status $B6 &&
		test "$(rsa_field rsa_state $A6)" = HELD &&
		flux job eventlog $B6 | grep rsa-staged-in >staged6 &&
		grep -F "handoff=" staged6 &&
		! grep -F "\"$node6\"" staged6 &&
		rm out6 && mv out6.real out6 &&
		flux rsa retry $A6
	else
		rsa_wait_state $B6 BOOTED 60 &&
		test "$(rsa_field nodes $B6)" != "$node6" &&
		rm out6 && mv out6.real out6 &&
		flux rsa retry $A6 &&
		flux job wait-event -t 60 $B6 clean &&
		flux job status $B6 &&
		! flux job eventlog $B6 | grep -F "handoff="
	fi &&
	flux rsa undrain $node6 &&
	rsa_at_rest $A6 60 &&
	manifest out6 >home6 &&
	test_cmp home6 b6-seen
'
test_expect_success 'rsa.handoff=off: B5 waits until A5'"'"'s outputs are home' '
	A5=$(producer out5) &&
	B5=$(consumer out5 b5-seen --dependency=afterok:$A5 --setattr=rsa.handoff=off) &&
	flux job wait-event -t 60 $B5 clean &&
	flux job status $B5 &&
	! flux job eventlog $B5 | grep rsa-handoff &&
	manifest out5 >home5 &&
	test_cmp home5 b5-seen
'
# B7 waits for nothing but A7: its RAM disk is made while A7 runs, beside
# A7's, and only the copy of A7's outputs is left for A7's end.
test_expect_success 'B7 gets its RAM disk while A7 still runs, B7 held by its dependency' '
	mkdir out7 &&
	A7=$(flux submit -N1 --setattr=rsa.data_out="$PWD/out7" --setattr=rsa.capacity=16M \
		--setattr=rsa.on_late=wait \
		sh -c "$WRITE && while ! test -e \"$PWD/a7.go\"; do sleep 0.1; done") &&
	B7=$(consumer out7 b7-seen --dependency=afterok:$A7 --setattr=rsa.capacity=16M \
		--setattr=rsa.on_late=wait) &&
	rsa_wait_state $B7 BOOTED 60 &&
	test "$(flux jobs -n -o {state} $A7)" = RUN &&
	test "$(flux jobs -n -o {state} $B7)" = DEPEND &&
	test "$(rsa_field nodes $B7)" = "$(rsa_field nodes $A7)" &&
	flux job eventlog $B7 | grep -F "rsa-handoff from=\"$(flux job id --to=f58 $A7)\""
'
test_expect_success 'B7 copies A7'"'"'s outputs from its RAM disk once A7 has ended, and sees them whole' '
	touch a7.go &&
	flux job wait-event -t 60 $B7 clean &&
	flux job status $B7 &&
	flux job eventlog $B7 >b7-events &&
	grep "rsa-staged-in" b7-events | grep -F "handoff=\"$(flux job id --to=f58 $A7)\"" &&
	rsa_at_rest $A7 60 &&
	manifest out7 >home7 &&
	test_cmp home7 b7-seen
'
test_expect_success 'nothing is left: no RAM disk, holder or reserved capacity' '
	rsa_at_rest $A5 60 &&
	rsa_at_rest $B7 60 &&
	rsa_nothing_left
'
test_done
