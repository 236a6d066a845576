#!/bin/sh
test_description='workflow hand-off: the producer'"'"'s RSA node is lost

A ended with its outputs on its RAM disk (on rsa1) and not home (its
stage-out failed: HELD).  B reads them from A'"'"'s RAM disk (afterok:A,
rsa.data_in = A'"'"'s data_out), but also waits for another job.  rsa1 is
lost before B has its inputs: A'"'"'s outputs will never be home, and B
gets an exception naming A instead of starting on a part of them.'

. $(dirname $0)/sharness-rsa.sh

if test "$(id -u)" -ne 0; then
	skip_all="the lost RSA node leaves a tmpfs mounted: removing it needs root"
	test_done
fi

mkdir -p conf &&
printf '[rsa]\nstage-retries = 0\n' >conf/rsa.toml
test_under_rsa_instance --config "$PWD/conf" --survive-lost-nodes

WRITE='mkdir -p $RSA_DATA_OUT/sub && seq 1 5000 >$RSA_DATA_OUT/numbers &&
	echo deep >$RSA_DATA_OUT/sub/deep'
COUNT='find "${RSA_DATA_IN:-$1}" -type f | wc -l >"$2"'
gate_job() {
	flux submit -N1 sh -c "while ! test -e \"$PWD/$1.open\"; do sleep 0.1; done"
}

test_expect_success 'setup: the pool; A'"'"'s RAM disk goes to rsa1 (rsa0 drained)' '
	rsa_wait_pool 60 &&
	mkdir out out2 &&
	flux rsa drain rsa0 handoff test
'
test_expect_success 'A ends HELD on rsa1 (data_out replaced by a file); B waits for it and G' '
	A=$(flux submit -N1 --setattr=rsa.data_out="$PWD/out" --setattr=rsa.capacity=16M \
		--setattr=rsa.on_late=wait \
		sh -c "$WRITE && echo w >\"$PWD/a.wrote\" && while ! test -e \"$PWD/a.go\"; do sleep 0.1; done") &&
	G=$(gate_job g) &&
	B=$(flux submit -N1 --dependency=afterok:$A --dependency=afterok:$G \
		--setattr=rsa.data_in="$PWD/out" --setattr=rsa.paths=env --setattr=rsa.capacity=16M \
		sh -c "$COUNT" count "$PWD/out" "$PWD/b-count") &&
	rsa_wait_file a.wrote &&
	test "$(rsa_field nodes $A)" = rsa1 &&
	ra=$(rsa_field ramdisk $A) &&
	mv out out.real && echo "not a directory" >out &&
	touch a.go &&
	rsa_wait_state $A HELD 60 &&
	flux job wait-event -t 30 $B rsa-handoff
'
test_expect_success 'rsa1 is lost: B gets an exception naming A and never runs' '
	flux rsa undrain rsa0 &&
	rsa_crash_rank 3 &&
	flux job wait-event -t 120 $B exception >exc &&
	cat exc &&
	grep -F "is the data_out of job $(flux job id --to=f58 $A)" exc &&
	flux job wait-event -t 60 $B clean &&
	test_must_fail flux job wait-event -t 1 $B start &&
	! test -e b-count &&
	rsa_open g
'
test_expect_success 'nothing leaks but the lost node'"'"'s RAM disk, which a sweep removes' '
	rsa_at_rest $A 120 &&
	# (an image RAM disk: its directory, and its image in the node'"'"'s store)
	rsa_ramdisks | grep -v "/\.rsa-ramdisk\$" | sed -e "s/\.srv\$//" \
		-e "s|/\.store-[^/]*/images/\([^/]*\)\.img\(\.use\)\{0,1\}\$|/\1|" | sort -u >left &&
	cat left && echo "$ra" >expected && test_cmp expected left &&
	rsa_on_node 3 env PYTHONPATH="$RSA_SRCDIR/src/python" "${PYTHON:-/usr/bin/python3}" \
		-m flux_rsa.ramdisk sweep "$RSA_INSTANCE_TMP/ramdisk" &&
	rsa_nothing_left &&
	# the lost node'"'"'s image store, which no pool serves now (a reboot empties it)
	rsa_on_node 3 env PYTHONPATH="$RSA_SRCDIR/src/python" "${PYTHON:-/usr/bin/python3}" \
		-m flux_rsa.ramdisk discard "$RSA_INSTANCE_TMP/ramdisk/.store-rsa1"
'
test_done
