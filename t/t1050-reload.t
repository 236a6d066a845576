#!/bin/sh
test_description='reloading the rsa module mid-flight loses nothing

Seven jobs, in INITIAL, STAGING_IN, READY, INUSE_IN, INUSE_OUT,
STAGING_OUT and HELD, while the module is removed and loaded again: each
ends correctly, every file arrives, nothing leaks.'

. $(dirname $0)/sharness-rsa.sh

mkdir -p conf && cat >conf/rsa.toml <<'EOF2'
[rsa]
ondeck-depth = 2
stage-retries = 0
EOF2
test_under_rsa_instance --config "$PWD/conf"

test_expect_success 'setup' '
	rsa_wait_pool 60 &&
	for j in x y z w h r i; do rsa_make_tree "$PWD/in-$j" && mkdir out-$j || return 1; done &&
	gate_in=$(rsa_gate_in gatein) &&
	gate_out=$(rsa_gate_out gateout) &&
	printf "#!/bin/sh\ntest -e \"$PWD/fixed\" || { echo \"\$2: not fixed yet\" >&2; exit 1; }\ncp -a \"\$1/.\" \"\$2/\"\n" >fussy.sh &&
	chmod +x fussy.sh && cat fussy.sh
'
test_expect_success 'job z has finished and is STAGING_OUT' '
	z=$(flux submit -N1 --setattr=rsa.data_in="$PWD/in-z" --setattr=rsa.data_out="$PWD/out-z" \
		--setattr=rsa.stage_out="$gate_out" --setattr=rsa.on_late=wait --setattr=rsa.capacity=16M \
		sh -c "cp -a \$RSA_DATA_IN/. \$RSA_DATA_OUT/") &&
	rsa_wait_state $z STAGING_OUT 60
'
test_expect_success 'job h has finished and its stage-out failed: HELD' '
	h=$(flux submit -N1 --setattr=rsa.data_in="$PWD/in-h" --setattr=rsa.data_out="$PWD/out-h" \
		--setattr=rsa.stage_out="$PWD/fussy.sh" --setattr=rsa.on_late=wait --setattr=rsa.capacity=16M \
		sh -c "cp -a \$RSA_DATA_IN/. \$RSA_DATA_OUT/") &&
	rsa_wait_state $h HELD 60
'
test_expect_success 'job y runs with its inputs dropped (INUSE_OUT)' '
	y=$(flux submit -N1 --setattr=rsa.data_in="$PWD/in-y" --setattr=rsa.data_out="$PWD/out-y" \
		--setattr=rsa.on_late=wait --setattr=rsa.capacity=16M \
		sh -c "cp -a \$RSA_DATA_IN/. \$RSA_DATA_OUT/ && flux rsa release-input &&
		       while ! test -e \"$PWD/y.go\"; do sleep 0.1; done") &&
	rsa_wait_state $y INUSE_OUT 60
'
test_expect_success 'job w runs with its staged inputs (INUSE_IN)' '
	w=$(flux submit -N1 --setattr=rsa.data_in="$PWD/in-w" --setattr=rsa.data_out="$PWD/out-w" \
		--setattr=rsa.on_late=wait --setattr=rsa.capacity=16M \
		sh -c "cp -a \$RSA_DATA_IN/. \$RSA_DATA_OUT/ &&
		       while ! test -e \"$PWD/w.go\"; do sleep 0.1; done") &&
	rsa_wait_state $w INUSE_IN 60
'
test_expect_success 'behind them: x is STAGING_IN, r READY and i INITIAL (not on deck)' '
	x=$(flux submit -N1 --setattr=rsa.data_in="$PWD/in-x" --setattr=rsa.data_out="$PWD/out-x" \
		--setattr=rsa.stage_in="$gate_in" --setattr=rsa.on_late=wait --setattr=rsa.capacity=16M \
		sh -c "cp -a \$RSA_DATA_IN/. \$RSA_DATA_OUT/") &&
	r=$(flux submit -N1 --setattr=rsa.data_in="$PWD/in-r" --setattr=rsa.data_out="$PWD/out-r" \
		--setattr=rsa.on_late=wait --setattr=rsa.capacity=16M \
		sh -c "cp -a \$RSA_DATA_IN/. \$RSA_DATA_OUT/ &&
		       while ! test -e \"$PWD/r.go\"; do sleep 0.1; done") &&
	i=$(flux submit -N1 --setattr=rsa.data_in="$PWD/in-i" --setattr=rsa.data_out="$PWD/out-i" \
		--setattr=rsa.on_late=wait --setattr=rsa.capacity=16M \
		sh -c "cp -a \$RSA_DATA_IN/. \$RSA_DATA_OUT/") &&
	rsa_wait_state $x STAGING_IN 60 &&
	rsa_wait_state $r READY 60 &&
	rsa_settled &&
	test "$(rsa_state $i)" = INITIAL
'
test_expect_success 'the module is removed and loaded again' '
	flux module remove rsa &&
	flux module load rsa &&
	rsa_wait_pool 30 &&
	flux rsa status -a &&
	test "$(rsa_state $i) $(rsa_state $x) $(rsa_state $r) $(rsa_state $w)" = \
		"INITIAL STAGING_IN READY INUSE_IN" &&
	test "$(rsa_state $y) $(rsa_state $z) $(rsa_state $h)" = "INUSE_OUT STAGING_OUT HELD"
'
# the plugin tells the service of start and finish; with the module away,
# nobody hears them: the service must find them when it comes back
test_expect_success 'with the module away, w and y end; r waits for its RAM disk to be attached' '
	flux module remove rsa &&
	touch w.go y.go &&
	flux job wait-event -t 60 $w clean &&
	flux job wait-event -t 60 $y clean &&
	flux job wait-event -t 60 $r alloc &&
	test_must_fail flux job wait-event -t 1 $r start &&
	flux module load rsa &&
	rsa_wait_pool 30 &&
	flux job wait-event -t 60 $r start &&
	flux rsa status -a &&
	test "$(rsa_state $r)" = INUSE_IN &&
	for j in $w $y; do
		case $(rsa_state $j) in INUSE_*|READY) return 1;; esac
	done
'
test_expect_success 'every job carries on and ends correctly' '
	rsa_open gatein && rsa_open gateout && touch r.go fixed &&
	flux rsa retry $h &&
	for j in $z $h $y $w $x $r $i; do flux rsa wait -t 120 $j || return 1; done
'
test_expect_success 'every file arrived' '
	for j in x y z w h r i; do rsa_same_tree in-$j out-$j || return 1; done
'
test_expect_success 'nothing leaks' '
	rsa_nothing_left
'
test_done
