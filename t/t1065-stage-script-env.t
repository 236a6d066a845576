#!/bin/sh
test_description='a stage script runs in its job'"'"'s environment; a quiet one is seen

A user'"'"'s stage-in and stage-out scripts get the job'"'"'s own environment
as it was submitted (what --env gave it), less what Flux sets for the
job'"'"'s tasks, plus FLUX_JOB_ID, RSA_RAMDISK and RSA_DIRECTION
(flux-rsa-attributes(7)): a stage-out script that waits for a path the
user passed with --env sees it.  A stage script that has printed nothing
and written nothing for [rsa] script-quiet is named in flux rsa status,
with for how long, long before stage-timeout.'

. $(dirname $0)/sharness-rsa.sh

mkdir -p conf && cat >conf/rsa.toml <<'EOF2'
[rsa]
script-quiet = "2s"
EOF2
test_under_rsa_instance --config "$PWD/conf"

# the variables a script saw (file $1), without those its shell adds
seen_vars() {
	grep -v -e "^PWD=" -e "^SHLVL=" -e "^_=" "$1" | sort
}

test_expect_success 'setup: inputs, and stage scripts that say what they saw' '
	rsa_wait_pool 60 &&
	rsa_make_tree "$PWD/in" && mkdir out out2 &&
	cat >in.sh <<-\EOF2 &&
	#!/bin/sh
	/usr/bin/env >"$SEEN.in"
	/bin/cp -a "$2/." "$1/"
	EOF2
	cat >out.sh <<-\EOF2 &&
	#!/bin/sh
	# waits for the path the user gave it with --env (an unset WAIT_FOR
	# would make it wait until stage-timeout)
	while ! test -e "$WAIT_FOR"; do sleep 0.1; done
	/usr/bin/env >"$SEEN.out"
	/bin/cp -a "$1/." "$2/"
	EOF2
	chmod +x in.sh out.sh &&
	touch ready
'
test_expect_success 'a job with both scripts: its stage-out sees what --env gave it' '
	id=$(MY_SETTING=42 flux submit -N1 --env=WAIT_FOR="$PWD/ready" --env=SEEN="$PWD/seen" \
		--setattr=rsa.data_in="$PWD/in" --setattr=rsa.stage_in="$PWD/in.sh" \
		--setattr=rsa.data_out="$PWD/out" --setattr=rsa.stage_out="$PWD/out.sh" \
		sh -c "cp -a \$RSA_DATA_IN/. \$RSA_DATA_OUT/") &&
	flux rsa wait -t 60 $id &&
	rsa_same_tree in out
'
test_expect_success 'each script had the job'"'"'s id, its RAM disk and its direction' '
	ramdisk="$RSA_INSTANCE_TMP/ramdisk/$(flux job id --to=dec $id).1" &&
	for way in in out; do
		grep -x "FLUX_JOB_ID=$(flux job id --to=f58 $id)" seen.$way &&
		grep -x "RSA_RAMDISK=$ramdisk" seen.$way &&
		grep -x "RSA_DIRECTION=$way" seen.$way &&
		grep -x "MY_SETTING=42" seen.$way &&
		grep -x "WAIT_FOR=$PWD/ready" seen.$way || return 1
	done
'
test_expect_success 'and nothing Flux sets for tasks or for the pool'"'"'s own jobs' '
	for way in in out; do
		test_must_fail grep -e "^FLUX_URI=" -e "^FLUX_KVS_NAMESPACE=" -e "^FLUX_TASK_" \
			-e "^FLUX_JOB_SIZE=" -e "^RSA_OP=" seen.$way || return 1
	done
'
test_expect_success 'a job submitted with --env=-* gives its script that, and the three' '
	id2=$(flux submit -N1 --env=-* --env=SEEN="$PWD/seen2" --env=WAIT_FOR="$PWD/ready" \
		--setattr=rsa.data_out="$PWD/out2" --setattr=rsa.stage_out="$PWD/out.sh" \
		--setattr=rsa.on_late=wait /bin/sh -c "echo made >\$RSA_DATA_OUT/made") &&
	flux rsa wait -t 60 $id2 &&
	test "$(cat out2/made)" = made &&
	cat >expect <<-EOF2 &&
	FLUX_JOB_ID=$(flux job id --to=f58 $id2)
	RSA_DIRECTION=out
	RSA_RAMDISK=$RSA_INSTANCE_TMP/ramdisk/$(flux job id --to=dec $id2).1
	SEEN=$PWD/seen2
	WAIT_FOR=$PWD/ready
	EOF2
	seen_vars seen2.out >vars &&
	test_cmp expect vars
'
quiet_noted() {
	flux rsa status -n -o "{note}" $1 >note &&
	grep "^stage-out script $PWD/quiet.sh has printed nothing and written nothing for 0:00:0[2-9] (the stage ends at \[rsa\] stage-timeout, 6:00:00)$" note
}
test_expect_success 'a stage-out script quiet for script-quiet: flux rsa status names it, and for how long' '
	silent=$(rsa_gate_out quiet) &&
	mkdir out3 &&
	q=$(flux submit -N1 --setattr=rsa.data_out="$PWD/out3" --setattr=rsa.stage_out="$silent" \
		--setattr=rsa.on_late=wait sh -c "seq 1 1000 >\$RSA_DATA_OUT/numbers") &&
	rsa_wait_state $q STAGING_OUT 60 &&
	rsa_wait_for 30 "flux rsa status naming the quiet script" quiet_noted $q &&
	cat note
'
test_expect_success 'it runs on: once it copies, the outputs come home and the note goes' '
	rsa_open quiet &&
	flux rsa wait -t 60 $q &&
	seq 1 1000 >expect && test_cmp expect out3/numbers &&
	test "$(flux rsa status -n -o "{note}" $q)" = "output home"
'
test_expect_success 'nothing leaks' '
	rsa_nothing_left
'
test_done
