#!/bin/sh
test_description='RAM-disk capacity is shared, spanned, drained, sized and reused

Two RSA nodes of 64M each, with span-fill 0 (no headroom: this story is
about reservations taking exactly what they ask for; t3020 is the
headroom'"'"'s).  Two share a node while a third waits; one spans both nodes;
one that can never fit is
refused at submit.  A drained node takes no new reservation.  `flux rsa
pool` agrees with what is held.  With headroom a reservation is sized from
data_in; with reuse a second job of the same owner copies the staged inputs
of the first instead of data_in, unless data_in changed: from a shared RAM
disk while its job waits, from an image (a one-node job'"'"'s) once its job
ended (until then the job may start, and be its one writer, any moment)
and no stage-out script holds it.'

. $(dirname $0)/sharness-rsa.sh

mkdir -p conf && cat >conf/rsa.toml <<'EOF2'
[rsa]
node-capacity = "64M"
span-fill = 0
ondeck-depth = 8
lock-in = false
headroom = 1.5
reuse = true
stage-retries = 0
EOF2
test_under_rsa_instance --config "$PWD/conf"

M=1048576

# the json record of job $1, field $2 (python expression on r)
field() {
	flux rsa status -a -o json "$1" | flux python -c "
import json, sys
r = json.load(sys.stdin)[0]
r[\"nodes\"] = \",\".join(r[\"nodes\"])
print($2)"
}

# what `flux rsa pool -o json` says of node $1: reserved bytes, then the
# decimal jobids of its holders, sorted
pool_node() {
	flux rsa pool -o json | flux python -c "
import json, sys
n = [n for n in json.load(sys.stdin)['nodes'] if n['host'] == '$1'][0]
print(n['reserved'], *sorted(h['jobid'] for h in n['holders']))"
}

dec() {
	for j in "$@"; do flux job id --to=dec $j; done | sort -n | tr '\n' ' ' | sed 's/ $//'
}

submit() {
	name=$1; shift
	mkdir -p "out-$name" &&
	flux submit -N1 --setattr=rsa.data_out="$PWD/out-$name" "$@" true
}

test_expect_success 'setup: the pool is up, inputs, both compute nodes busy' '
	rsa_wait_pool 60 &&
	rsa_make_tree "$PWD/in" &&
	mkdir big && head -c $((10 * M)) /dev/urandom >big/data && rsa_make_tree "$PWD/big/tree" &&
	blocker=$(rsa_hold_compute)
'
test_expect_success 'a drained RSA node is shown drained' '
	flux rsa drain rsa1 for this test &&
	flux rsa pool -o json | flux python -c "
import json, sys
nodes = {n[\"host\"]: n for n in json.load(sys.stdin)[\"nodes\"]}
assert nodes[\"rsa1\"][\"drained\"] and not nodes[\"rsa0\"][\"drained\"], nodes"
'
test_expect_success 'two 32M reservations share rsa0; a third waits (rsa1 is drained)' '
	a=$(submit a --setattr=rsa.data_in="$PWD/in" --setattr=rsa.capacity=32M) &&
	b=$(submit b --setattr=rsa.data_in="$PWD/in" --setattr=rsa.capacity=32M) &&
	c=$(submit c --setattr=rsa.data_in="$PWD/in" --setattr=rsa.capacity=32M) &&
	rsa_wait_state $a READY 60 &&
	rsa_wait_state $b READY 60 &&
	na=$(field $a "r[\"nodes\"]") && nb=$(field $b "r[\"nodes\"]") &&
	echo "a on $na, b on $nb" &&
	test "$na" = rsa0 &&
	test "$nb" = rsa0 &&
	rsa_settled &&
	test "$(rsa_state $c)" = INITIAL
'
test_expect_success 'flux rsa pool agrees: rsa0 holds 64M for both, rsa1 nothing' '
	test "$(pool_node rsa0)" = "$((64 * M)) $(dec $a $b)" &&
	test "$(pool_node rsa1)" = "0"
'
test_expect_success 'undrained, rsa1 takes the third reservation' '
	flux rsa undrain rsa1 &&
	rsa_wait_state $c READY 60 &&
	test "$(field $c "r[\"nodes\"]")" = rsa1 &&
	test "$(pool_node rsa1)" = "$((32 * M)) $(dec $c)"
'
test_expect_success 'cancelled, they give all capacity back' '
	flux cancel $a $b $c &&
	for j in $a $b $c; do rsa_wait_state $j DESTROYED 60 || return 1; done &&
	test "$(pool_node rsa0)" = "0" &&
	test "$(pool_node rsa1)" = "0" &&
	test -z "$(rsa_ramdisks)"
'
test_expect_success 'a 96M reservation spans both nodes and stages its inputs' '
	s=$(submit s --setattr=rsa.data_in="$PWD/in" --setattr=rsa.capacity=96M) &&
	rsa_wait_state $s READY 60 &&
	test "$(field $s "r[\"nodes\"]")" = rsa0,rsa1 &&
	test "$(field $s "r[\"granted\"]")" = $((96 * M)) &&
	r0=$(pool_node rsa0) && r1=$(pool_node rsa1) &&
	test "${r0#* }" = "$(dec $s)" && test "${r1#* }" = "$(dec $s)" &&
	test $(( ${r0%% *} + ${r1%% *} )) = $((96 * M)) &&
	rsa_same_tree_on $s "$PWD/in" "$(field $s "r[\"ramdisk\"]")/in" &&
	flux cancel $s &&
	rsa_wait_state $s DESTROYED 60
'
test_expect_success 'a request larger than the whole pool is refused at submit, naming the limit' '
	test_must_fail flux submit -N1 --setattr=rsa.data_in="$PWD/in" --setattr=rsa.data_out="$PWD/out-a" \
		--setattr=rsa.capacity=200M true 2>err &&
	grep "rsa.capacity" err && grep "at most 128M" err
'
test_expect_success 'headroom: a job without rsa.capacity reserves data_in x 1.5' '
	size=$(du -sb --apparent-size big | cut -f1) &&
	h=$(submit h --setattr=rsa.data_in="$PWD/big" --setattr=rsa.fs=shared) &&
	rsa_wait_state $h READY 60 &&
	want=$(( (size * 3 / 2 + 4 * M - 1) / (4 * M) * 4 * M )) &&
	test "$(field $h "r[\"need\"]")" = $want &&
	test "$(field $h "r[\"input_bytes\"]")" -gt $((10 * M)) &&
	rsa_same_tree_on $h "$PWD/big" "$(field $h "r[\"ramdisk\"]")/in"
'
test_expect_success 'reuse: a second job on the same data_in copies the staged inputs, on the same node' '
	r2=$(submit r2 --setattr=rsa.data_in="$PWD/big" --setattr=rsa.fs=shared) &&
	rsa_wait_state $r2 READY 60 &&
	test "$(field $r2 "r[\"nodes\"]")" = "$(field $h "r[\"nodes\"]")" &&
	test "$(field $r2 "r[\"reused\"]")" = "$(field $h "r[\"ramdisk\"]")/in" &&
	flux job eventlog $r2 | grep "rsa-staged-in.*reused" &&
	rsa_same_tree_on $r2 "$PWD/big" "$(field $r2 "r[\"ramdisk\"]")/in" ||
	{ flux rsa status -a -o json; flux rsa pool; flux dmesg | grep " rsa" | tail -20; false; }
'
test_expect_success 'reuse: once data_in changed, the next job reads data_in itself' '
	echo changed >big/tree/sub/numbers &&
	r3=$(submit r3 --setattr=rsa.data_in="$PWD/big" --setattr=rsa.fs=shared) &&
	rsa_wait_state $r3 READY 60 &&
	test "$(field $r3 "r[\"reused\"]")" = None &&
	rsa_same_tree_on $r3 "$PWD/big" "$(field $r3 "r[\"ramdisk\"]")/in"
'
test_expect_success 'nothing leaks: every reservation ends and the pool is empty' '
	flux cancel $h $r2 $r3 $blocker &&
	for j in $h $r2 $r3; do rsa_wait_state $j DESTROYED 60 || return 1; done &&
	test "$(pool_node rsa0)" = "0" &&
	test "$(pool_node rsa1)" = "0" &&
	test -z "$(rsa_ramdisks)" &&
	flux rsa stats | flux python -c "
import json, sys
assert json.load(sys.stdin)[\"restages\"] == 0"
'
test_expect_success 'no reuse from an image a stage-out script holds: the next job reads data_in' '
	gate=$(rsa_gate_out gate) &&
	i1=$(submit i1 --setattr=rsa.data_in="$PWD/big" --setattr=rsa.on_late=wait \
		--setattr=rsa.stage_out="$gate") &&
	rsa_wait_state $i1 STAGING_OUT 60 &&
	test "$(field $i1 "r[\"image\"]")" = True &&
	i2=$(submit i2 --setattr=rsa.data_in="$PWD/big" --setattr=rsa.on_late=wait) &&
	rsa_wait_state $i2 DESTROYED 60 &&
	test "$(field $i2 "r[\"reused\"]")" = None &&
	flux job eventlog $i2 >eventlog-i2 &&
	grep "rsa-ready.*staged_in=true" eventlog-i2 &&
	! grep ABORTED eventlog-i2 &&
	flux job status $i2 &&
	rsa_open gate &&
	rsa_wait_state $i1 DESTROYED 60 &&
	test -z "$(rsa_ramdisks)"
'
test_expect_success 'reuse from an image: once its job ended, while its outputs wait to go home (HELD)' '
	printf "#!/bin/sh\necho \"\$2: not today\" >&2; exit 1\n" >refuse.sh && chmod +x refuse.sh &&
	i3=$(submit i3 --setattr=rsa.data_in="$PWD/big" --setattr=rsa.on_late=wait \
		--setattr=rsa.stage_out="$PWD/refuse.sh") &&
	rsa_wait_state $i3 HELD 60 &&
	test "$(field $i3 "r[\"image\"]")" = True &&
	i4=$(submit i4 --setattr=rsa.data_in="$PWD/big" --setattr=rsa.on_late=wait) &&
	rsa_wait_state $i4 DESTROYED 60 &&
	test "$(field $i4 "r[\"image\"]")" = True &&
	test "$(field $i4 "r[\"reused\"]")" = "$(field $i3 "r[\"ramdisk\"]")/in" &&
	flux job eventlog $i4 | grep "rsa-staged-in.*reused" &&
	flux job status $i4 &&
	flux rsa release $i3 &&
	rsa_wait_state $i3 DESTROYED 60 &&
	test -z "$(rsa_ramdisks)"
'

test_done
