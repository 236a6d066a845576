#!/bin/sh
test_description='a RAM disk over two RSA nodes: one GlusterFS volume, attached where the job runs

A reservation bigger than one RSA node is one GlusterFS volume over a
tmpfs brick on each node (servers started for the job, on loopback here),
mounted by the stager and by every compute node of the job at the path it
is given.  Its capacity is the sum of the shares, the data lands on both
nodes, metadata survives the trip, the compute nodes let go of it as soon
as the job ends, and every fault leaves nothing behind but what is kept on
purpose (a HELD job'"'"'s data).'

. $(dirname $0)/sharness-rsa.sh

if ! command -v glusterfsd >/dev/null 2>&1 && ! test -x /usr/sbin/glusterfsd; then
	skip_all="GlusterFS is not installed (Debian: glusterfs-server glusterfs-client): no parallel RAM disk"
	test_done
fi
if test "$(id -u)" -ne 0; then
	skip_all="bricks and mounts of a parallel RAM disk need root"
	test_done
fi

# nodes of 112M: a reservation of 128M spans both, each node charged its
# share (64M) and the headroom that makes 95% of it surely fit (40M)
mkdir -p conf &&
printf '[rsa]\nprovider = "glusterfs"\nstage-retries = 0\nnode-capacity = "112M"\nspan-fill = 0.95\n' >conf/rsa.toml
test_under_rsa_instance --config "$PWD/conf"

T=$PWD
export T  # the jobs find the test's files through $T (the path has a space)

# brick I of job $1's RAM disk (on the RSA node of holder task I)
brick() {
	echo "$RSA_INSTANCE_TMP/ramdisk/$(basename "$(rsa_field ramdisk $1)").b$2"
}
# on_brick JOB I COMMAND...: COMMAND on the RSA node of job JOB's brick I
on_brick() {
	_ob_node=$(rsa_field nodes $1 | cut -d, -f$(($2 + 1))) && shift 2 &&
	rsa_on_node "$(flux hostlist -F "$_ob_node" instance)" "$@"
}
# used_mib JOB I: MiB used on job JOB's brick I
used_mib() {
	on_brick $1 $2 df --output=used -B1M "$(brick $1 $2)" | tail -1 | tr -d " "
}
# this instance's brick servers and clients still running (but the RSA
# nodes' image stores and the compute nodes' clients of them: the pool's)
gluster_left() {
	pgrep -a -f "rsa-brick|rsa-client" | grep -F "$RSA_INSTANCE_TMP" |
		grep -v -e "/\.store-" -e "/\.stores/" || true
}
all_gone_now() {
	rsa_nothing_left && test -z "$(gluster_left)" && test -z "$(rsa_attached)"
}
# the record rests once the holder job has ended; its node sweeps (after
# a holder stopped mid-build) may still be removing bricks for a moment
all_gone() {
	rsa_wait_for 30 "nothing left of the RAM disk" all_gone_now || {
		echo "left: RAM disks: $(rsa_ramdisks | tr "\n" " ")"
		echo "left: brick servers, clients: $(gluster_left | tr "\n" " ")"
		echo "left: attached: $(rsa_attached | tr "\n" " ")"
		rsa_pool flux jobs -a -o "{id.f58} {name} {status} {exception.note}" | sed "s/^/left: pool job: /"
		flux rsa pool
		false
	}
}
# a listing of a tree, as it looks from here: type, mode, size, links,
# mtime, link target, name (names may hold newlines: NUL-separated)
listing() {
	(cd "$1" && find . -mindepth 1 -printf "%y %m %s %n %T@ %l %p\n\0" | sort -z | tr "\0" "|")
}

test_expect_success 'the pool makes RAM disks with GlusterFS' '
	rsa_wait_pool 60 &&
	test "$(rsa_provider)" = glusterfs
'
test_expect_success 'setup: outputs-to-be, inputs with what users have, gates' '
	mkdir -p gen out-a out-b out-d out-e out-f out-g &&
	for i in $(seq 1 24); do
		head -c 4194304 /dev/urandom >gen/part$i || return 1
	done &&
	chmod 640 gen/part1 && chmod 755 gen/part2 &&
	touch -d "2011-11-01 12:00:00" gen/part3 &&
	rsa_make_tree "$T/tree" &&
	ln tree/big.dat tree/hard-link &&
	truncate -s 20M tree/sparse && echo data | dd of=tree/sparse bs=1 seek=10000000 conv=notrunc &&
	echo odd >"tree/$(printf "new\nline")" && echo utf >"tree/ünïcödé" &&
	mkfifo tree/fifo && chmod 4755 tree/sub/numbers &&
	gout=$(rsa_gate_out gateout) && gin=$(rsa_gate_in gatein) && kout=$(rsa_gate_out killgate)
'
test_expect_success 'a -N2 job with 2 x 64M reserved writes 96M: it lands on both nodes' '
	id=$(flux submit -N2 --setattr=rsa.data_out="$T/out-a" --setattr=rsa.capacity=128M \
		--setattr=rsa.on_late=wait --setattr=rsa.stage_out="$gout" \
		sh -c "findmnt -n -o FSTYPE --mountpoint \"\$RSA_RAMDISK\" >\"\$T/fstype.\"\$FLUX_TASK_RANK;
		       test \$FLUX_TASK_RANK = 1 || { cp -a \"\$T/gen\"/. \"\$RSA_DATA_OUT/\" && echo copied >\"\$T/copied\"; };
		       while ! test -e \"\$T/a.go\"; do sleep 0.1; done") &&
	rsa_wait_file copied && rsa_wait_file fstype.1 &&
	test "$(rsa_state $id)" = INUSE_OUT &&
	b0=$(used_mib $id 0) && b1=$(used_mib $id 1) &&
	echo "brick shares: $b0 MiB + $b1 MiB" &&
	test $((b0 + b1)) -ge 96 && test $b0 -ge 16 && test $b1 -ge 16
'
test_expect_success 'every rank of the job has it mounted, at the path it was given' '
	test "$(cat fstype.0) $(cat fstype.1)" = "fuse.glusterfs fuse.glusterfs" &&
	ramdisk=$(flux job eventlog -f json $id | flux python -c "
import json, sys
print(next(e for e in map(json.loads, sys.stdin) if e[\"name\"] == \"rsa-ready\")[\"context\"][\"ramdisk\"])") &&
	test "$ramdisk" = "$RSA_INSTANCE_TMP/mnt/$(basename "$(rsa_field ramdisk $id)")" &&
	test "$(rsa_attached)" = "$ramdisk"
'
test_expect_success 'flux rsa pool shows each node'"'"'s share of the reservation, with its headroom' '
	rsa_node_shares $id >shares && cat shares &&
	test "$(cat shares)" = "[[$((104 << 20))], [$((104 << 20))]]"
'
test_expect_success 'each brick holds what its node is charged, no more' '
	for i in 0 1; do
		on_brick $id $i df --output=size -B1M "$(brick $id $i)" | tail -1 | tr -d " " >size.$i &&
		test "$(cat size.$i)" = 104 || return 1
	done
'
test_expect_success 'the job ends: its nodes detach at once and run another job during the stage-out' '
	touch a.go &&
	rsa_wait_state $id STAGING_OUT 60 &&
	test -z "$(rsa_attached)" &&
	other=$(flux submit -N2 hostname) &&
	flux job wait-event -t 60 $other finish &&
	test "$(rsa_state $id)" = STAGING_OUT &&
	rsa_open gateout &&
	flux rsa wait -t 120 $id
'
test_expect_success 'the outputs came home byte-identical, with modes and mtimes; nothing left' '
	rsa_same_tree gen out-a &&
	rsa_at_rest $id 60 && all_gone
'
test_expect_success 'two ranks write 121M (95%) of 2 x 64M at once: 4K files, S/8 files, one > S' '
	mkdir out-s &&
	id=$(flux submit -N2 --setattr=rsa.data_out="$T/out-s" --setattr=rsa.capacity=128M \
		--setattr=rsa.on_late=wait \
		sh -c "set -e; cd \"\$RSA_DATA_OUT\";
		       if test \$FLUX_TASK_RANK = 0; then
		           head -c 69M /dev/urandom >big; mkdir small;
		           for i in \$(seq 1 1024); do head -c 4096 /dev/urandom >small/s\$i; done;
		       else
		           for i in 1 2 3 4 5 6; do head -c 8M /dev/urandom >eighth\$i; done;
		       fi; echo \$FLUX_TASK_RANK >\"\$T/wrote.\$FLUX_TASK_RANK\"") &&
	flux job wait-event -t 120 $id clean &&
	flux job status $id &&
	flux rsa wait -t 180 $id &&
	test $(find out-s -type f | wc -l) -eq $((1 + 1024 + 6)) &&
	test "$(find out-s -type f -printf "%s\n" | awk "{s += \$1} END {print s}")" = $((121 << 20)) &&
	rsa_at_rest $id 60 && all_gone
'
test_expect_success 'stage-in of a real tree through the volume: the job sees it identical' '
	id=$(flux submit -N2 --setattr=rsa.data_in="$T/tree" --setattr=rsa.data_out="$T/out-b" \
		--setattr=rsa.capacity=128M --setattr=rsa.on_late=wait \
		sh -c "test \$FLUX_TASK_RANK = 1 && exit 0;
		       cd \"\$RSA_DATA_IN\" && find . -mindepth 1 -printf \"%y %m %s %n %T@ %l %p\n\0\" |
		           sort -z | tr \"\0\" \"|\" >\"\$RSA_DATA_OUT/listing\" &&
		       find . -type f -print0 | sort -z | xargs -0 md5sum >\"\$RSA_DATA_OUT/sums\" &&
		       stat -c \"%s %b %B\" sparse >\"\$RSA_DATA_OUT/sparse\" && echo \"\$RSA_DATA_IN\" >\"\$RSA_DATA_OUT/from\"") &&
	flux rsa wait -t 120 $id &&
	rsa_job_ramdisk "$(cat out-b/from)" in &&
	listing tree >expected && test_cmp expected out-b/listing &&
	(cd tree && find . -type f -print0 | sort -z | xargs -0 md5sum) >sums &&
	test_cmp sums out-b/sums &&
	read size blocks unit <out-b/sparse &&
	echo "sparse: $size bytes in $blocks blocks of $unit" &&
	test $((blocks * unit)) -lt $((size / 4)) &&
	rsa_at_rest $id 60 && all_gone
'
test_expect_success 'cancel in BOOTING: nothing is left' '
	blocker=$(rsa_hold_compute) &&
	id=$(flux submit -N2 --setattr=rsa.data_in="$T/tree" --setattr=rsa.capacity=128M true) &&
	flux job wait-event -t 60 -m state=BOOTING $id rsa-state &&
	flux cancel $id &&
	rsa_at_rest $id 60 &&
	rsa_history $id >history && cat history && grep -x BOOTING history &&
	all_gone
'
test_expect_success 'cancel in STAGING_IN: nothing is left' '
	id=$(flux submit -N2 --setattr=rsa.data_in="$T/tree" --setattr=rsa.capacity=128M \
		--setattr=rsa.stage_in="$gin" --setattr=rsa.on_late=ignore true) &&
	rsa_wait_state $id STAGING_IN 60 &&
	flux cancel $id &&
	flux cancel $blocker &&
	rsa_at_rest $id 60 && all_gone
'
test_expect_success 'cancel in INUSE_OUT: what it wrote comes home, nothing is left' '
	id=$(flux submit -N2 --setattr=rsa.data_out="$T/out-d" --setattr=rsa.capacity=128M \
		--setattr=rsa.on_late=wait \
		sh -c "test \$FLUX_TASK_RANK = 1 || echo partial >\"\$RSA_DATA_OUT/checkpoint\"; sleep inf") &&
	rsa_wait_state $id INUSE_OUT 60 &&
	test -n "$(rsa_attached)" &&
	flux cancel $id &&
	flux rsa wait -t 120 $id &&
	test "$(cat out-d/checkpoint)" = partial &&
	rsa_at_rest $id 60 && all_gone
'
test_expect_success 'a stage-out cannot be cancelled away: the outputs still come home' '
	rm -f gateout.open &&
	id=$(flux submit -N2 --setattr=rsa.data_out="$T/out-e" --setattr=rsa.capacity=128M \
		--setattr=rsa.on_late=wait --setattr=rsa.stage_out="$gout" \
		sh -c "echo done >\"\$RSA_DATA_OUT/result.\$FLUX_TASK_RANK\"") &&
	rsa_wait_state $id STAGING_OUT 60 &&
	test_might_fail flux cancel $id &&
	rsa_open gateout &&
	flux rsa wait -t 120 $id &&
	test "$(cat out-e/result.0 out-e/result.1)" = "done
done" &&
	rsa_at_rest $id 60 && all_gone
'
test_expect_success 'the module reloads while the job is INUSE_OUT: it ends, outputs home' '
	id=$(flux submit -N2 --setattr=rsa.data_in="$T/tree" --setattr=rsa.data_out="$T/out-f" \
		--setattr=rsa.capacity=128M --setattr=rsa.on_late=wait \
		sh -c "test \$FLUX_TASK_RANK = 1 || { cp -a \"\$RSA_DATA_IN/.\" \"\$RSA_DATA_OUT/\" &&
		       flux rsa release-input; }; while ! test -e \"\$T/f.go\"; do sleep 0.1; done") &&
	rsa_wait_state $id INUSE_OUT 60 &&
	flux module remove rsa && flux module load rsa && rsa_wait_pool 30 &&
	test "$(rsa_state $id)" = INUSE_OUT && test -n "$(rsa_attached)" &&
	touch f.go &&
	flux rsa wait -t 120 $id &&
	rsa_same_tree tree out-f &&
	rsa_at_rest $id 60 && all_gone
'
test_expect_success 'a brick server killed mid stage-out: HELD, the survivor'"'"'s data kept' '
	id=$(flux submit -N2 --setattr=rsa.data_out="$T/out-g" --setattr=rsa.capacity=128M \
		--setattr=rsa.on_late=wait --setattr=rsa.stage_out="$kout" \
		sh -c "test \$FLUX_TASK_RANK = 1 || cp -a \"\$T/gen\"/. \"\$RSA_DATA_OUT/\"") &&
	rsa_wait_state $id STAGING_OUT 60 &&
	server=$(on_brick $id 1 cat "$(brick $id 1)/.rsa-ramdisk" |
		flux python -c "import json, sys; print(json.load(sys.stdin)[\"server\"][\"pid\"])") &&
	kill -9 $server &&
	rsa_open killgate &&
	rsa_wait_state $id HELD 120 &&
	rsa_field error $id >error && cat error &&
	grep "a brick server or its RSA node is down" error &&
	on_brick $id 0 findmnt -n -o FSTYPE --mountpoint "$(brick $id 0)" | grep tmpfs &&
	test $(used_mib $id 0) -ge 8
'
test_expect_success 'released, the HELD RAM disk goes: nothing is left' '
	flux rsa release $id &&
	rsa_at_rest $id 60 && all_gone
'
test_done
