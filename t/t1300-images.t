#!/bin/sh
test_description='a job on one compute node: its RAM disk is a file-system image it mounts

A -N1 job gets its RAM disk as an ext4 image kept in its RSA node'"'"'s store
and loop-mounted on its compute node: the job sees ext4 at its own data_in
and data_out, its inputs staged, a reservation of C bytes as C bytes free (df),
and creates files in its own kernel; its outputs come home.  While the
compute node holds the image nobody else mounts it (a look on the RSA node
is refused, naming the node and the job).  The switch drops the inputs
inside the image, making room for outputs.  rsa.fs=shared keeps a -N1 job
on the served file system.  The attach and the detach are timed phases,
and the compute node keeps at most [rsa] image-writeback unwritten.
A compute node'"'"'s client of a store that died is mounted again by the
next attach through it.  Each compute node keeps one resident helper for
its attaches and detaches; one that died is replaced by the next attach,
and the pool'"'"'s shutdown ends them all.
Nothing is left: no image, no loop device, no mount but the pool'"'"'s
stores and the compute nodes'"'"' clients of them, which the pool'"'"'s
shutdown removes too.'

. $(dirname $0)/sharness-rsa.sh

if test "$(id -u)" -ne 0 || ! { command -v glusterfsd >/dev/null || test -x /usr/sbin/glusterfsd; }; then
	skip_all="images need root and GlusterFS (Debian: glusterfs-server glusterfs-client) to reach compute nodes"
	test_done
fi

# a site's bound on what a compute node keeps unwritten of an image
mkdir -p conf && cat >conf/rsa.toml <<'EOF2'
[rsa]
image-writeback = "24M"
EOF2
test_under_rsa_instance --config "$PWD/conf"

# job.sh OUT SEEN: what the job sees, then files written at its own paths
cat >job.sh <<'EOF2'
#!/bin/sh
out=$1 seen=$2
findmnt -n -o FSTYPE --mountpoint "$out" >"$seen/out-fstype"
findmnt -n -o SOURCE --mountpoint "$out" >"$seen/out-source"
df -B1 --output=avail "$RSA_RAMDISK" | tail -1 | tr -d " " >"$seen/avail"
du -s -B1 "$RSA_DATA_IN" | cut -f1 >"$seen/inputs"
mkdir "$out/many" &&
i=0 && while test $i -lt 2000; do echo "$i" >"$out/many/f$i"; i=$((i + 1)); done &&
cp "$RSA_DATA_IN/numbers" "$out/numbers.copy" &&
echo ready >"$seen/ready"
while ! test -e "$seen/go"; do sleep 0.1; done
EOF2
chmod +x job.sh

# node_helpers RANK: the pids of the resident helpers (RSA_OP=serve) on
# node RANK: in its mount namespace, not the read-ahead an attach forked
# from one (a session of its own)
node_helpers() {
	rsa_on_node $1 sh -c 'me=$(readlink /proc/self/ns/mnt)
	for f in $(grep -l -s -z -x RSA_OP=serve /proc/[0-9]*/environ); do
		p=${f#/proc/}; p=${p%/environ}
		test "$(readlink /proc/$p/ns/mnt 2>/dev/null)" = "$me" &&
			test "$(ps -o sid= -p $p | tr -d " ")" != $p && echo $p
	done; true'
}

test_expect_success 'setup: the pool, its stores, inputs' '
	rsa_wait_pool 60 &&
	mkdir in out seen &&
	seq 1 100000 >in/numbers &&
	rsa_pool flux jobs -n -o "{name}" >pooljobs &&
	grep -x rsa-store-rsa0 pooljobs && grep -x rsa-store-rsa1 pooljobs
'
test_expect_success 'a -N1 job gets an image: ext4 on a loop device at its own data_out' '
	id=$(flux submit -N1 --setattr=rsa.data_in="$PWD/in" --setattr=rsa.data_out="$PWD/out" \
		--setattr=rsa.capacity=32M --setattr=rsa.on_late=wait ./job.sh "$PWD/out" "$PWD/seen") &&
	rsa_wait_file seen/ready &&
	test "$(rsa_field image $id)" = True &&
	test "$(cat seen/out-fstype)" = ext4 &&
	grep "^/dev/loop" seen/out-source &&
	# free for files: the reservation, less the inputs (and a few
	# directories), and 64K for the files'"'"' extent blocks
	room=$(($(cat seen/avail) + $(cat seen/inputs))) &&
	test $room -le $((32 * 1024 * 1024 + 65536)) &&
	test $room -gt $((32 * 1024 * 1024 - 65536))
'
test_expect_success 'the image is in its RSA node'"'"'s store, reached through the store'"'"'s client' '
	node=$(rsa_field nodes $id) && name=$(basename $(rsa_field ramdisk $id)) &&
	rank=$(rsa_field ranks $id) &&
	dev=$(rsa_on_node $rank findmnt -n -o SOURCE --mountpoint "$(rsa_field mount_path $id)") &&
	backing=$(cat /sys/block/${dev#/dev/}/loop/backing_file) &&
	test "$(basename "$backing")" = "$name.img" &&
	# what it may keep unwritten is the site'"'"'s image-writeback (as the
	# kernel keeps it: a share of its own limit, read back within 1%)
	bdi=/sys/class/bdi/$(cat /sys/block/${dev#/dev/}/dev) &&
	kept=$(cat $bdi/max_bytes) && want=$((24 * 1024 * 1024)) &&
	test $kept -ge $((want * 99 / 100)) && test $kept -le $((want * 101 / 100)) &&
	test "$(cat $bdi/strict_limit)" = 1 &&
	transport=$(dirname "$backing") &&
	test "$(dirname "$transport")" = "$RSA_INSTANCE_TMP/mnt/.stores" &&
	rsa_on_node $rank findmnt -n -o FSTYPE --mountpoint "$transport" >fstype &&
	echo fuse.glusterfs >expect && test_cmp expect fstype &&
	rsa_on_node $(flux hostlist -F $node instance) \
		test -f "$RSA_INSTANCE_TMP/ramdisk/.store-$node/images/$name.img"
'
test_expect_success 'while its compute node holds it, nobody else mounts it: a look is refused, naming who' '
	ramdisk=$(rsa_field ramdisk $id) &&
	{ rsa_on_node $(flux hostlist -F $(rsa_field nodes $id) instance) \
		env PYTHONPATH="$RSA_SRCDIR/src/python" /usr/bin/python3 -m flux_rsa.ramdisk \
		look "$ramdisk" -- ls "$ramdisk/out" >look.out 2>look.err; true; } &&
	test_must_be_empty look.out &&
	grep "is mounted read-write by the compute node on node[01] (rank [01]) for job $(flux job id --to=dec $id)" look.err
'
test_expect_success 'its outputs come home; the attach and detach were timed' '
	touch seen/go &&
	flux rsa wait -t 120 $id &&
	test "$(ls out/many | wc -l)" = 2000 &&
	test_cmp in/numbers out/numbers.copy &&
	flux rsa status -a -n -o "{attach} {detach}" $id >times &&
	grep -E "^[0-9.]+s [0-9.]+s\$" times
'
test_expect_success 'nothing is left of it: no image, no loop device, no mount' '
	rsa_at_rest $id &&
	rsa_nothing_left
'
test_expect_success 'its compute node keeps one resident helper for the attaches to come' '
	node_helpers $rank >helper1 &&
	test $(wc -l <helper1) = 1
'
test_expect_success 'a store client that died is mounted again by the next attach there' '
	# every compute node'"'"'s clients die (kill -9: their mounts stay, failing)
	pkill -9 -f "glusterfs.*$RSA_INSTANCE_TMP/mnt/[.]stores/" &&
	n=0 && while rsa_on_node $rank stat -f "$transport" >/dev/null 2>&1 && test $n -lt 100; do
		sleep 0.1; n=$((n + 1)); done &&
	test_must_fail rsa_on_node $rank stat -f "$transport" 2>dead &&
	grep "not connected" dead &&
	# two one-core jobs on that node at once, each too big to share an RSA node
	# with the other: one of them attaches through the dead client
	mkdir out4 out5 &&
	host=$(flux jobs -n -o "{nodelist}" $id) &&
	a=$(flux submit -n1 --requires=host:$host --setattr=rsa.data_out="$PWD/out4" \
		--setattr=rsa.capacity=100M --setattr=rsa.on_late=wait \
		sh -c "echo written >\$RSA_DATA_OUT/file; while ! test -e \"$PWD/seen/go4\"; do sleep 0.1; done") &&
	b=$(flux submit -n1 --requires=host:$host --setattr=rsa.data_out="$PWD/out5" \
		--setattr=rsa.capacity=100M --setattr=rsa.on_late=wait \
		sh -c "echo written >\$RSA_DATA_OUT/file; while ! test -e \"$PWD/seen/go4\"; do sleep 0.1; done") &&
	flux job wait-event -t 120 $a start && flux job wait-event -t 120 $b start &&
	na=$(rsa_field nodes $a) && nb=$(rsa_field nodes $b) &&
	test -n "$na" && test -n "$nb" && test "$na" != "$nb" &&
	touch seen/go4 &&
	flux rsa wait -t 120 $a && flux rsa wait -t 120 $b &&
	test "$(rsa_field image $a)" = True && test "$(rsa_field image $b)" = True &&
	test "$(cat out4/file)" = written && test "$(cat out5/file)" = written &&
	rsa_on_node $rank stat -f "$transport" >/dev/null
'
test_expect_success 'the same helper served those attaches; one that died is replaced by the next' '
	node_helpers $rank >helper2 &&
	test_cmp helper1 helper2 &&
	kill -9 $(cat helper2) &&
	mkdir out6 &&
	c=$(flux submit -N1 --requires=host:$host --setattr=rsa.data_out="$PWD/out6" \
		--setattr=rsa.capacity=32M --setattr=rsa.on_late=wait \
		sh -c "findmnt -n -o FSTYPE --target \$RSA_DATA_OUT >\$RSA_DATA_OUT/fstype") &&
	flux rsa wait -t 120 $c &&
	test "$(rsa_field image $c)" = True &&
	test "$(cat out6/fstype)" = ext4 &&
	node_helpers $rank >helper3 &&
	test $(wc -l <helper3) = 1 &&
	test "$(cat helper1)" != "$(cat helper3)"
'
test_expect_success 'the switch drops the inputs inside the image: room for outputs' '
	mkdir in2 out2 &&
	head -c 10M /dev/urandom >in2/big &&
	cat >switch.sh <<-\EOF &&
	#!/bin/sh
	# 10M of inputs in 16M: 12M of outputs fit once the inputs are dropped
	flux rsa release-input &&
	n=0 && while ! test -L "$RSA_RAMDISK/in" && test $n -lt 600; do sleep 0.1; n=$((n + 1)); done &&
	head -c 12M /dev/zero >"$RSA_DATA_OUT/result"
	EOF
	chmod +x switch.sh &&
	sw=$(flux submit -N1 --setattr=rsa.data_in="$PWD/in2" --setattr=rsa.data_out="$PWD/out2" \
		--setattr=rsa.capacity=16M --setattr=rsa.on_late=wait --setattr=rsa.paths=env \
		./switch.sh) &&
	flux rsa wait -t 120 $sw &&
	test "$(stat -c %s out2/result)" = $((12 * 1024 * 1024)) &&
	flux job eventlog $sw | grep rsa-input-released
'
test_expect_success 'rsa.fs=shared keeps a -N1 job on the served file system' '
	mkdir out3 &&
	sh3=$(flux submit -N1 --setattr=rsa.data_out="$PWD/out3" --setattr=rsa.capacity=16M \
		--setattr=rsa.on_late=wait --setattr=rsa.fs=shared \
		sh -c "findmnt -n -o FSTYPE --mountpoint \$RSA_RAMDISK >\$RSA_DATA_OUT/fstype") &&
	flux rsa wait -t 120 $sh3 &&
	test -z "$(rsa_field image $sh3)" &&
	echo fuse.glusterfs >expect && test_cmp expect out3/fstype
'
test_expect_success 'a bad rsa.fs is refused at submit, naming the value and the choices' '
	test_must_fail flux submit -N1 --setattr=rsa.data_out="$PWD/out3" --setattr=rsa.fs=local true 2>err &&
	grep "rsa.fs" err && grep "per-node" err && grep "shared" err
'
test_expect_success 'nothing is left; the pool'"'"'s shutdown takes the stores and their clients too' '
	rsa_at_rest $a && rsa_at_rest $b && rsa_at_rest $c && rsa_at_rest $sw && rsa_at_rest $sh3 &&
	rsa_nothing_left &&
	flux rsa pool --shutdown &&
	n=0 && while test -n "$(node_helpers $rank)" && test $n -lt 50; do
		sleep 0.1; n=$((n + 1)); done &&
	test -z "$(node_helpers $rank)" &&
	rsa_on_nodes findmnt -n -l -o TARGET | grep -F "$RSA_INSTANCE_TMP/" >mounts;
	test_must_fail grep -e "/\.store-" -e "/\.stores/" mounts &&
	rsa_on_nodes sh -c "ls -d \"$RSA_INSTANCE_TMP\"/ramdisk/.store-* \"$RSA_INSTANCE_TMP\"/mnt/.stores 2>/dev/null; true" >left &&
	test_must_be_empty left
'
test_done
