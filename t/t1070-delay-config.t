#!/bin/sh
test_description='rsa.delay drops the inputs for outputs; [rsa] is checked

After rsa.delay seconds the staged inputs leave the RAM disk (RSA_DATA_IN
then leads to data_in itself) and outputs still arrive.  A bad [rsa] table
is refused with a message naming the key, the value and the fix.  The
jobtap plugin follows its [rsa] keys through flux config reload: a job held
for an unreachable service under start-timeout = 10m starts on its
directories once a reload lowers it to one second.'

. $(dirname $0)/sharness-rsa.sh

test_under_rsa_instance

test_expect_success 'setup' '
	rsa_wait_pool 60 &&
	rsa_make_tree "$PWD/in" && mkdir out
'
test_expect_success 'a job with rsa.delay=1 sees its inputs dropped after a second' '
	id=$(flux submit -N1 --setattr=rsa.data_in="$PWD/in" --setattr=rsa.data_out="$PWD/out" \
		--setattr=rsa.delay=1 --setattr=rsa.on_late=wait \
		sh -c "readlink -f \$RSA_DATA_IN >\$RSA_DATA_OUT/before;
		       while test ! -L \$RSA_DATA_IN; do sleep 0.1; done;
		       readlink -f \$RSA_DATA_IN >\$RSA_DATA_OUT/after;
		       ls \$RSA_DATA_IN/ >\$RSA_DATA_OUT/listing") &&
	flux job wait-event -t 60 $id clean &&
	flux rsa wait -t 60 $id
'
test_expect_success 'before: the RAM disk; after: a link to data_in, still readable' '
	rsa_job_ramdisk "$(cat out/before)" in &&
	test "$(cat out/after)" = "$(readlink -f "$PWD/in")" &&
	ls in/ >expect && test_cmp expect out/listing
'
test_expect_success 'the switch is in the history and the eventlog' '
	rsa_history $id >history &&
	grep -x INUSE_IN history && grep -x INUSE_OUT history &&
	flux job eventlog $id >eventlog &&
	grep "rsa-input-released why=\"delay\"" eventlog
'
test_expect_success 'flux config reload refuses a bad [rsa] value and says why' '
	conf="$RSA_INSTANCE_TMP/conf/rsa.toml" &&
	cp "$conf" rsa.toml.good &&
	sed "s/^granule = .*/granule = \"lots\"/" rsa.toml.good >"$conf" &&
	test_must_fail flux config reload 2>err;
	cp rsa.toml.good "$conf" &&
	cat err &&
	grep "\[rsa\] granule: .lots. is not a size" err
'
test_expect_success 'the service still runs with its old configuration' '
	flux rsa status -a >/dev/null &&
	flux module list | grep "^rsa "
'
test_expect_success 'with the service away, the jobtap plugin refuses a bad start-timeout' '
	conf="$RSA_INSTANCE_TMP/conf/rsa.toml" &&
	cp "$conf" rsa.toml.good &&
	flux module remove rsa &&
	{ cat rsa.toml.good && echo "start-timeout = \"soon\""; } >"$conf" &&
	test_must_fail flux config reload 2>err;
	cp rsa.toml.good "$conf" &&
	cat err &&
	grep "rsa: \[rsa\] start-timeout: \"soon\" is not a duration" err
'
test_expect_success 'with start-timeout = 10m and the service away, an RSA job is held' '
	{ cat rsa.toml.good && echo "start-timeout = \"10m\""; } >"$conf" &&
	flux config reload &&
	mkdir held.out &&
	held=$(flux submit -N1 --setattr=rsa.data_out="$PWD/held.out" \
		sh -c "echo \$RSA_DATA_OUT >\$RSA_DATA_OUT/where") &&
	flux job wait-event -t 60 $held prolog-start &&
	flux job eventlog $held >held.before &&
	test_must_fail grep rsa-ready held.before
'
test_expect_success 'a reload to start-timeout = 1 reaches the plugin: the job starts on data_out' '
	{ cat rsa.toml.good && echo "start-timeout = 1"; } >"$conf" &&
	reloaded=$(date +%s.%N) &&
	flux config reload &&
	flux job wait-event -t 30 -f json $held rsa-ready >ready.json &&
	flux job wait-event -t 60 $held clean &&
	test "$(cat held.out/where)" = "$PWD/held.out" &&
	flux python -c "
import json, sys
ready = json.load(open(\"ready.json\"))
print(ready)
assert ready[\"context\"][\"fallback\"].startswith(\"rsa service\"), ready
assert ready[\"timestamp\"] > $reloaded, \"rsa-ready came before the reload\"
"
'
test_expect_success 'the service comes back with the configuration it started with' '
	cp rsa.toml.good "$conf" &&
	flux config reload &&
	flux module load rsa &&
	rsa_wait_pool 60
'
test_expect_success 'a bad [rsa] at start-up stops the instance with the reason' '
	mkdir badconf &&
	cat >badconf/rsa.toml <<-EOF &&
	[rsa]
	node-capacity = "1M"
	granule = "1G"
	EOF
	test_must_fail "$RSA_BUILDDIR"/t/rsa-instance --config "$PWD/badconf" -- true 2>start.err &&
	grep "\[rsa\] node-capacity: .1M. is smaller than one granule" start.err
'
test_done
