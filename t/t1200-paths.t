#!/bin/sh
test_description='rsa.paths=bind: jobs find their RAM disk at their own data_in and data_out

Unmodified programs that take their paths from the command line and never
read an RSA_* variable: fio in a two-node job, a plain shell job, nested
flux run steps of a flux batch job (and IOR there, where it is built).
While each runs, persistent data_out stays empty and the RAM disk fills;
after the stage-out data_out holds the files byte-identical.  Another job
on the same node sees persistent storage; so does the node.  At the switch
(rsa.delay, flux rsa release-input) data_in shows persistent storage again;
a job that starts before its inputs are staged sees its real data_in.
What bind mounts change for file-system calls is listed (doc/paths.md).'

. $(dirname $0)/sharness-rsa.sh

test_under_rsa_instance

IOR=${RSA_IOR:-/opt/ior/bin/ior}
if test -x "$IOR"; then
	test_set_prereq IOR
else
	echo "# SKIPPING the IOR steps: no IOR at $IOR (build hpc/ior with Debian's mpich by hand, or set RSA_IOR)" >&2
fi
command -v fio >/dev/null && test_set_prereq FIO

# mounted_at PATH...: nodes (as their admin sees them) with a mount at PATH
mounted_at() {
	_ma_pat=
	for _ma in "$@"; do _ma_pat="$_ma_pat$_ma
"; done
	rsa_on_nodes findmnt -n -l -o TARGET | grep -F -x -e "${_ma_pat%?}"
}
# wait_ready FILE...: the job wrote each FILE (its "ready" mark)
wait_ready() {
	for _f in "$@"; do rsa_wait_file "$_f" || return 1; done
}
# staged_job ARGS...: submit a job (flux submit ARGS) while the compute
# nodes are busy, wait until its inputs are staged, then free the nodes
staged_job() {
	_blocker=$(rsa_hold_compute) &&
	_id=$(flux submit "$@") &&
	rsa_wait_state $_id READY 90 >&2 &&
	flux cancel $_blocker &&
	echo $_id
}

test_expect_success 'setup: the pool, inputs, empty outputs' '
	rsa_wait_pool 60 &&
	rsa_make_tree "$PWD/in" &&
	head -c 8388608 /dev/urandom >in/input.0 &&
	head -c 8388608 /dev/urandom >in/input.1 &&
	chmod 750 in && touch -d "2011-11-11 11:11:11" in &&
	mkdir out seen
'
test_expect_success FIO 'fio in a two-node job reads data_in and writes data_out at their own paths' '
	cat >fio.sh <<-\EOF &&
	#!/bin/sh
	# fio.sh IN OUT SEEN: fio with its files named on its command line
	in=$1 out=$2 seen=$3 r=$FLUX_TASK_RANK
	fio --name=read --filename="$in/input.$r" --rw=read --bs=256k --size=8M \
		--output-format=json --output="$seen/read.$r.json" &&
	fio --name=write --filename="$out/fio.$r" --rw=write --bs=256k --size=8M \
		--output-format=json --output="$seen/write.$r.json" &&
	sha256sum <"$out/fio.$r" >"$seen/fio.$r.sha256" &&
	findmnt -n -o FSTYPE --target "$in/input.$r" >"$seen/in-fstype.$r" &&
	echo ready >"$seen/ready.$r"
	while ! test -e "$seen/go"; do sleep 0.1; done
	EOF
	chmod +x fio.sh &&
	fio=$(staged_job -N2 -n2 --setattr=rsa.data_in="$PWD/in" --setattr=rsa.data_out="$PWD/out" \
		./fio.sh "$PWD/in" "$PWD/out" "$PWD/seen") &&
	wait_ready seen/ready.0 seen/ready.1 &&
	for r in 0 1; do
		test "$(cat seen/in-fstype.$r)" = fuse.glusterfs &&
		flux python -c "
import json, sys
job = json.load(open(sys.argv[1]))[\"jobs\"][0]
assert job[\"read\"][\"io_bytes\"] == 8 << 20, job[\"read\"]
" seen/read.$r.json || return 1
	done
'
test_expect_success FIO 'while it runs, persistent data_out is empty and the RAM disk holds its files' '
	find out -mindepth 1 >persistent && test_must_be_empty persistent &&
	mnt=$(rsa_field mount_path $fio) &&
	rsa_on_node 0 stat -c "%n %s" "$mnt/out/fio.0" "$mnt/out/fio.1" >ramdisk &&
	printf "%s 8388608\n" "$mnt/out/fio.0" "$mnt/out/fio.1" >expect &&
	test_cmp expect ramdisk
'
test_expect_success FIO 'the nodes, and another job on the same node, see persistent storage there' '
	test -z "$(mounted_at "$PWD/in" "$PWD/out")" &&
	flux run -N1 -n1 -t 5m sh -c "ls -A \"$PWD/out\"; findmnt -n --mountpoint \"$PWD/in\" || echo no-mount" >other &&
	echo no-mount >expect && test_cmp expect other &&
	flux rsa status -n -o "{paths}" $fio >paths && echo in=ramdisk,out=ramdisk >expect &&
	test_cmp expect paths
'
test_expect_success FIO 'after the stage-out, data_out holds what fio wrote, byte-identical' '
	touch seen/go &&
	flux rsa wait -t 120 $fio &&
	for r in 0 1; do
		sha256sum <out/fio.$r >sum && test_cmp seen/fio.$r.sha256 sum || return 1
	done
'
test_expect_success 'a plain shell job: its real paths, data_in'"'"'s own mode and mtime, a working directory under data_out' '
	mkdir out2 &&
	cat >plain.sh <<-\EOF &&
	#!/bin/sh
	cat "$1/with space.txt" >"$2/copy"
	echo y >"$2/y"
	echo relative >written-in-cwd
	stat -c "%a %Y" "$1" >"$3/in-top"
	EOF
	chmod +x plain.sh &&
	plain=$(staged_job -N1 -n1 --cwd="$PWD/out2" --setattr=rsa.data_in="$PWD/in" \
		--setattr=rsa.data_out="$PWD/out2" "$PWD/plain.sh" "$PWD/in" "$PWD/out2" "$PWD/seen") &&
	flux job wait-event -t 60 $plain finish &&
	test_must_fail test -e out2/written-in-cwd &&
	flux rsa wait -t 120 $plain &&
	test_cmp "in/with space.txt" out2/copy &&
	test "$(cat out2/y) $(cat out2/written-in-cwd)" = "y relative" &&
	stat -c "%a %Y" in >expect && test_cmp expect seen/in-top
'
test_expect_success 'the switch after rsa.delay: data_in shows persistent storage again' '
	cat >switch.sh <<-\EOF &&
	#!/bin/sh
	# switch.sh IN SEEN: what data_in shows before and after the switch
	findmnt -n -o FSTYPE --mountpoint "$1" >"$2/before" || echo none >"$2/before"
	flux job wait-event -t 120 $FLUX_JOB_ID rsa-input-released &&
	flux rsa release-input >/dev/null &&
	{ findmnt -n -o FSTYPE --mountpoint "$1" || echo none; } >"$2/after" &&
	stat -c %a "$1" >"$2/after-mode"
	EOF
	chmod +x switch.sh && mkdir out3 seen3 &&
	sw=$(staged_job -N1 -n1 --setattr=rsa.data_in="$PWD/in" --setattr=rsa.data_out="$PWD/out3" \
		--setattr=rsa.delay=1 ./switch.sh "$PWD/in" "$PWD/seen3") &&
	flux rsa wait -t 120 $sw &&
	test "$(cat seen3/before)" = "$(rsa_job_fstype $sw)" &&
	test "$(cat seen3/after)" = none &&
	test "$(cat seen3/after-mode)" = 750 &&
	flux job eventlog $sw | grep "rsa-input-released why=\"delay\""
'
test_expect_success 'a job that starts before its inputs are staged sees its real data_in' '
	gate=$(rsa_gate_in never) && mkdir out4 seen4 &&
	cat >late.sh <<-\EOF &&
	#!/bin/sh
	{ findmnt -n -o FSTYPE --mountpoint "$1" || echo none; } >"$3/in"
	findmnt -n -o FSTYPE --mountpoint "$2" >"$3/out"
	ls "$1" >"$2/listing"
	EOF
	chmod +x late.sh &&
	blocker=$(rsa_hold_compute) &&
	late=$(flux submit -N1 -n1 --setattr=rsa.data_in="$PWD/in" --setattr=rsa.data_out="$PWD/out4" \
		--setattr=rsa.stage_in="$gate" --setattr=rsa.on_late=ignore ./late.sh "$PWD/in" "$PWD/out4" "$PWD/seen4") &&
	rsa_wait_state $late STAGING_IN 60 &&
	flux cancel $blocker &&
	flux job wait-event -t 60 $late finish &&
	flux rsa status -a -n -o "{paths}" $late >paths && echo in=real,out=ramdisk >expect &&
	test_cmp expect paths &&
	flux rsa wait -t 120 $late &&
	test "$(cat seen4/in) $(cat seen4/out)" = "none $(rsa_job_fstype $late)" &&
	ls in >expect && test_cmp expect out4/listing
'
test_expect_success 'rename and link across the mount boundary fail with EXDEV; mmap, locks, O_DIRECT, holes hold' '
	mkdir out5 tmp5 &&
	feat=$(staged_job -N1 -n1 --setattr=rsa.data_in="$PWD/in" --setattr=rsa.data_out="$PWD/out5" \
		--output="$PWD/features.out" \
		flux python "$RSA_SRCDIR/t/paths-features.py" "$PWD/in" "$PWD/out5" "$PWD/tmp5") &&
	flux job wait-event -t 120 $feat finish &&
	cat features.out &&
	test_cmp "$RSA_SRCDIR/t/paths-features.expected" features.out &&
	flux rsa wait -t 120 $feat &&
	test "$(stat -c %s out5/sparse)" = 67108864 && test "$(du -k out5/sparse | cut -f1)" -lt 1024 &&
	test "$(stat -c %h out5/b)" = 2
'
test_expect_success 'mv from /tmp into data_out still works (it copies on EXDEV)' '
	echo moved >tmp5/f &&
	mv6=$(staged_job -N1 -n1 --setattr=rsa.data_out="$PWD/out5" --setattr=rsa.capacity=8M \
		mv "$PWD/tmp5/f" "$PWD/out5/f") &&
	flux rsa wait -t 120 $mv6 &&
	test "$(cat out5/f)" = moved && ! test -e tmp5/f
'
test_expect_success 'nested flux run steps of a flux batch job see the same paths' '
	mkdir out6 seen6 &&
	cat >batch.sh <<-\EOF &&
	#!/bin/sh
	in=$1 out=$2 seen=$3
	flux run -N2 -n4 sh -c "cat \"$in/with space.txt\" >\"$out/step1.\$FLUX_TASK_RANK\"" &&
	echo ready >"$seen/ready"
	while ! test -e "$seen/go"; do sleep 0.1; done
	flux run -N2 -n4 sh -c "cmp \"$in/with space.txt\" \"$out/step1.\$FLUX_TASK_RANK\" &&
		findmnt -n -o FSTYPE --mountpoint \"$out\" >\"$out/step2.\$FLUX_TASK_RANK\""
	EOF
	chmod +x batch.sh &&
	_blocker=$(rsa_hold_compute) &&
	batch=$(flux batch -N2 --setattr=rsa.data_in="$PWD/in" --setattr=rsa.data_out="$PWD/out6" \
		./batch.sh "$PWD/in" "$PWD/out6" "$PWD/seen6") &&
	rsa_wait_state $batch READY 90 &&
	flux cancel $_blocker &&
	wait_ready seen6/ready &&
	find out6 -mindepth 1 >persistent && test_must_be_empty persistent &&
	touch seen6/go &&
	flux rsa wait -t 120 $batch &&
	for r in 0 1 2 3; do
		test_cmp "in/with space.txt" out6/step1.$r &&
		test "$(cat out6/step2.$r)" = fuse.glusterfs || return 1
	done
'
test_expect_success IOR 'IOR in a flux batch job: two flux run -n4 steps, file per process under data_out' '
	mkdir out7 seen7 &&
	cat >ior.sh <<-EOF &&
	#!/bin/sh
	out=\$1 seen=\$2
	flux run -N2 -n4 "$IOR" -a POSIX -w -k -F -G 271828 -b 4m -t 1m -o "\$out/ior.dat" >"\$seen/write.txt" 2>&1 &&
	(cd "\$out" && sha256sum ior.dat.*) >"\$seen/sums" &&
	echo ready >"\$seen/ready"
	while ! test -e "\$seen/go"; do sleep 0.1; done
	flux run -N2 -n4 "$IOR" -a POSIX -r -R -k -F -G 271828 -b 4m -t 1m -o "\$out/ior.dat" >"\$seen/read.txt" 2>&1
	EOF
	chmod +x ior.sh &&
	_blocker=$(rsa_hold_compute) &&
	ior=$(flux batch -N2 --setattr=rsa.data_out="$PWD/out7" --setattr=rsa.capacity=96M \
		./ior.sh "$PWD/out7" "$PWD/seen7") &&
	rsa_wait_state $ior READY 90 &&
	flux cancel $_blocker &&
	wait_ready seen7/ready &&
	find out7 -mindepth 1 >persistent && test_must_be_empty persistent &&
	test $(wc -l <seen7/sums) = 4 &&
	touch seen7/go &&
	flux rsa wait -t 180 $ior &&
	grep "^read " seen7/read.txt &&
	(cd out7 && sha256sum ior.dat.*) >sums && test_cmp seen7/sums sums
'
test_expect_success 'a view that cannot be made fails the job, saying why and what to do' '
	mkdir gone out8 && echo x >gone/x &&
	blocker=$(rsa_hold_compute) &&
	nov=$(flux submit -N1 -n1 --setattr=rsa.data_in="$PWD/gone" --setattr=rsa.data_out="$PWD/out8" \
		echo ran) &&
	rsa_wait_state $nov READY 90 &&
	mv gone gone.moved &&
	flux cancel $blocker &&
	test_must_fail flux job attach $nov 2>attach.err &&
	grep "rsa.data_in $PWD/gone: No such file or directory" attach.err &&
	grep "submit with --setattr=rsa.paths=env" attach.err &&
	flux job eventlog $nov | grep "exception.*rsa.paths=bind: cannot show the RAM disk"
'
test_expect_success 'nothing is left: no mount at the jobs'"'"' paths, no RAM disk, no job' '
	for id in $fio $plain $sw $late $feat $mv6 $batch $ior $nov; do
		rsa_at_rest $id 120 || return 1
	done &&
	test -z "$(mounted_at "$PWD/in" "$PWD/out" "$PWD/out2" "$PWD/out3" "$PWD/out4" \
		"$PWD/out5" "$PWD/out6" "$PWD/out7")" &&
	rsa_nothing_left &&
	flux jobs -n -o "{name}" | grep -v -x rsa-pool >active; test_must_be_empty active
'
test_done
