#!/bin/sh
test_description='rsa.capacity alone: a scratch RAM disk, nothing staged

A job that asks only for rsa.capacity gets RSA_RAMDISK of that size (and
no RSA_DATA_IN or RSA_DATA_OUT), writes to it, and afterwards nothing of
it remains: no RAM disk, no holder, no reserved capacity, and no stage-in
or stage-out ever ran.  A key that means nothing without others (rsa.delay
alone) is refused at submit with one line naming the missing keys.'

. $(dirname $0)/sharness-rsa.sh

test_under_rsa_instance

# tmpfs RAM disks (sized) need root; unprivileged instances use plain directories
test "$(id -u)" = 0 && test_set_prereq TMPFS

cat >job.sh <<'EOF2'
#!/bin/sh
# the scratch job: what it was given, the RAM disk's room, and a write to it
out=$1
echo "${RSA_RAMDISK-unset} ${RSA_DATA_IN-unset} ${RSA_DATA_OUT-unset}" >"$out/env"
# without a RAM disk the writes below would go to the node's "/"
test -n "$RSA_RAMDISK" || exit 1
df -B1 --output=avail "$RSA_RAMDISK" | tail -1 | tr -d " " >"$out/size"
seq 1 200000 >"$RSA_RAMDISK/work.dat" && cp "$RSA_RAMDISK/work.dat" "$out/copy"
if head -c 20M /dev/zero >"$RSA_RAMDISK/too-much" 2>"$out/enospc"; then
	echo wrote-20M >"$out/too-much"
fi
ls "$RSA_RAMDISK" >"$out/listing"
EOF2
chmod +x job.sh

test_expect_success 'the RSA pool comes up' '
	rsa_wait_pool 60 &&
	mkdir result
'
test_expect_success 'a job with only rsa.capacity=16M runs' '
	id=$(flux submit -N1 --setattr=rsa.capacity=16M ./job.sh "$PWD/result") &&
	flux job wait-event -t 60 $id clean &&
	flux job status $id
'
test_expect_success 'it saw RSA_RAMDISK on a RAM disk, and no data directories' '
	read ramdisk data_in data_out <result/env &&
	# on the RSA node itself, or where its compute node attached it
	rsa_job_ramdisk "$ramdisk" &&
	test "$data_in" = unset &&
	test "$data_out" = unset
'
test_expect_success TMPFS 'the RAM disk was 16M, and 20M did not fit' '
	# 16M free for its files (less the directories of the RAM disk itself;
	# an image has 64K more, for the extent blocks of its files)
	test "$(cat result/size)" -le $((16 * 1024 * 1024 + 65536)) &&
	test "$(cat result/size)" -gt $((16 * 1024 * 1024 - 65536)) &&
	test ! -e result/too-much &&
	grep "No space left on device" result/enospc
'
test_expect_success 'the job wrote to it and read back what it wrote' '
	seq 1 200000 >expect &&
	test_cmp expect result/copy &&
	grep -x work.dat result/listing
'
test_expect_success 'its record comes to rest: nothing staged in or out' '
	rsa_at_rest $id &&
	rsa_history $id >history &&
	test_must_fail grep STAGING history &&
	grep -x INUSE_OUT history &&
	test "$(rsa_field output_home $id)" = ""
'
test_expect_success 'flux rsa wait says there was nothing to stage out' '
	flux rsa wait -t 30 $id >wait.out &&
	grep "nothing to stage out" wait.out
'
test_expect_success 'nothing remains: the RAM disk, its holder and its capacity are gone' '
	test ! -e "$ramdisk" &&
	rsa_nothing_left
'
test_expect_success 'rsa.delay alone is refused, naming the keys it needs' '
	test_must_fail flux submit --setattr=rsa.delay=5 true 2>delay.err &&
	cat >delay.expected <<-EOF &&
	rsa.delay: 5 needs rsa.data_in and rsa.data_out too (the staged inputs are dropped after the delay to make room for outputs)
	EOF
	sed "s/^\[Errno [0-9]*\] //" delay.err >delay.out &&
	test_cmp delay.expected delay.out
'
test_expect_success 'a scratch RAM disk larger than the pool is refused' '
	test_must_fail flux submit --setattr=rsa.capacity=1G true 2>big.err &&
	grep "rsa.capacity: .1G. is more than the RSA pool can ever hold" big.err
'
test_done
