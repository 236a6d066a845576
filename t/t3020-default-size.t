#!/bin/sh
test_description='at the site'"'"'s settings: a default reservation fits the pool, status says what was asked and what is charged

The test instance runs the site'"'"'s span-fill (0.95) on two RSA nodes of
128M, so a RAM disk over both holds 168M at most: each node is charged its
share and the headroom that lets a job fill 95% of it.  A -N2 job that
asks for nothing would get both nodes'"'"' worth at proportion 1 (256M): it
is given 168M, its rsa-error event and flux rsa status say so, and it
stages a 50M input in and copies it to its output area without running
out of room (with span-fill 0 it stopped at about 75% of 2 x 64M).  A
size asked for that can never fit is refused at submit, naming the most.
A job that asked 136M over both nodes shows 136M in flux rsa status, and
-o {charged} what its nodes hold for it, more.'

. $(dirname $0)/sharness-rsa.sh

test_under_rsa_instance

M=1048576

# the bytes job $1 holds on each RSA node, one line each (flux rsa pool)
shares() {
	rsa_node_shares $1 | flux python -c "
import json, sys
for node in json.load(sys.stdin):
    print(sum(node))"
}

test_expect_success 'setup: a 50M input' '
	rsa_wait_pool 60 &&
	mkdir in out out2 &&
	head -c $((50 * M)) /dev/urandom >in/fifty-megabytes &&
	rsa_make_tree "$PWD/in/tree"
'
test_expect_success 'a -N2 job asking for nothing: its default is clamped to 168M, its rsa-error says so' '
	id=$(flux submit -N2 --setattr=rsa.data_in="$PWD/in" --setattr=rsa.data_out="$PWD/out" \
		--setattr=rsa.on_late=wait \
		sh -c "test \$FLUX_TASK_RANK = 0 || exit 0; cp -a \"\$RSA_DATA_IN/.\" \"\$RSA_DATA_OUT/\"") &&
	flux job wait-event -t 60 -f json $id rsa-error >error.json &&
	flux python -c "
import json
print(json.load(open(\"error.json\"))[\"context\"][\"error\"])" >error &&
	echo "the default reservation of 256M is more than the RSA pool can hold: reserving 168M, the most it can (choose a size with rsa.capacity)" >expect &&
	test_cmp expect error
'
test_expect_success 'it stages 50M in and copies it out over both nodes: exit 0, outputs home' '
	flux job wait-event -t 120 $id clean &&
	flux job status $id &&
	flux rsa wait -t 120 $id &&
	rsa_same_tree in out
'
test_expect_success 'flux rsa status: it ran on its staged inputs over both nodes, clamped' '
	flux rsa status -a -n -o "{capacity}|{note}" $id >status &&
	echo "168M|output home; default 256M clamped to 168M, the most the RSA pool holds" >expect &&
	test_cmp expect status &&
	rsa_went_through $id INUSE_IN &&
	flux job eventlog $id | grep rsa-staged-in | grep "\"rsa0\",\"rsa1\""
'
test_expect_success 'a size asked for that can never fit is refused at submit, naming the most' '
	test_must_fail flux submit -N2 --setattr=rsa.data_in="$PWD/in" --setattr=rsa.capacity=200M \
		true 2>err &&
	grep "rsa.capacity: .200M. is more than the RSA pool can ever hold (at most 168M: 2 RSA node(s) x 128M, less the headroom of a RAM disk over several nodes)" err
'
test_expect_success 'a job asking 136M over both nodes: status shows 136M, charged what its nodes hold' '
	s=$(flux submit -N1 --setattr=rsa.capacity=136M --setattr=rsa.data_out="$PWD/out2" \
		--setattr=rsa.on_late=wait \
		sh -c "echo made >\"\$RSA_DATA_OUT/made\"; while ! test -e \"$PWD/s.go\"; do sleep 0.1; done") &&
	rsa_wait_state $s INUSE_OUT 60 &&
	shares $s >held && cat held &&
	{ read rsa0 && read rsa1; } <held &&
	test $rsa0 = $rsa1 && test $rsa0 -gt $((68 * M)) &&
	test "$(rsa_field granted $s)" = $((rsa0 + rsa1)) &&
	flux python -c "
from flux_rsa.core.units import format_size
print(\"136M\", format_size($rsa0 + $rsa1))" >expect &&
	flux rsa status -n -o "{capacity} {charged}" $s >asked-charged &&
	test_cmp expect asked-charged &&
	flux rsa status -n $s >default &&
	grep " 136M " default &&
	test_must_fail grep "$(cut -d" " -f2 expect)" default
'
test_expect_success 'its outputs come home, and nothing is left' '
	touch s.go &&
	flux rsa wait -t 60 $s &&
	test "$(cat out2/made)" = made &&
	rsa_at_rest $s &&
	rsa_nothing_left
'
test_done
