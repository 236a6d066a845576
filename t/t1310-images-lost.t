#!/bin/sh
test_description='an image'"'"'s compute node or RSA node is lost while a job uses it

A compute node lost with its job'"'"'s image mounted (it goes down as a host
does: what it had not written back is gone) leaves an image that was not
unmounted: its detach fails, the stage-out breaks that node'"'"'s hold on the
image, checks and repairs it (e2fsck -p) and stages out what reached the
RSA node; the record says so.  An RSA node lost under a running job takes
the image with it: the job is told at once, by an exception naming the
node, and its record says why its outputs are lost.'

. $(dirname $0)/sharness-rsa.sh

if test "$(id -u)" -ne 0 || ! { command -v glusterfsd >/dev/null || test -x /usr/sbin/glusterfsd; }; then
	skip_all="images need root and GlusterFS (Debian: glusterfs-server glusterfs-client)"
	test_done
fi

mkdir -p conf &&
printf '[rsa]\nstage-retries = 0\n' >conf/rsa.toml
test_under_rsa_instance --size 5 --config "$PWD/conf" --survive-lost-nodes

if test -z "$RSA_INSTANCE_NODES"; then
	skip_all="nodes share this machine's mount table: none can be lost alone"
	test_done
fi

# job.sh OUT: a file written and synced, then the job waits to be lost
cat >job.sh <<'EOF2'
#!/bin/sh
seq 1 100000 >"$1/synced" && sync "$1/synced" &&
echo ready >"$1/.ready-mark" && sync &&
echo ready >"$2"
while :; do echo more >>"$1/unsynced"; sleep 0.2; done
EOF2
chmod +x job.sh

test_expect_success 'setup: the pool (2 RSA nodes), three compute nodes (node0 runs this test)' '
	rsa_wait_pool 60 &&
	mkdir out out2
'
test_expect_success 'a job on node1 has its image mounted, one file written back' '
	id=$(flux submit -N1 --requires=host:node1 --setattr=rsa.data_out="$PWD/out" \
		--setattr=rsa.capacity=16M --setattr=rsa.on_late=wait \
		./job.sh "$PWD/out" "$PWD/ready") &&
	rsa_wait_file ready &&
	test "$(rsa_field image $id)" = True
'
test_expect_success 'node1 goes down: the job ends, its detach fails naming node1' '
	rsa_crash_node 1 &&
	flux job wait-event -t 120 $id clean &&
	rsa_at_rest $id 180 &&
	test "$(rsa_field reclaim $id)" = node1
'
test_expect_success 'the stage-out broke node1'"'"'s hold, checked the image and staged out what reached it' '
	test "$(rsa_field output_home $id)" = True &&
	seq 1 100000 >expect && test_cmp expect out/synced &&
	flux rsa status -a -n -o "{note}" $id >note &&
	cat note &&
	grep "output home; node1 was lost with the job'"'"'s image mounted: the image was checked" note
'
test_expect_success 'a job on node2 runs on an image of rsa1; rsa1 goes down' '
	flux rsa drain rsa0 images-lost test &&
	id2=$(flux submit -N1 --requires=host:node2 --setattr=rsa.data_out="$PWD/out2" \
		--setattr=rsa.capacity=16M --setattr=rsa.on_late=wait \
		./job.sh "$PWD/out2" "$PWD/ready2") &&
	rsa_wait_file ready2 &&
	test "$(rsa_field nodes $id2)" = rsa1 &&
	rsa_crash_node 4
'
test_expect_success 'the job is told at once, by an exception naming rsa1, and ends' '
	flux job wait-event -t 120 $id2 exception >exc &&
	cat exc &&
	grep "type=\"rsa\"" exc && grep "rsa1" exc &&
	flux job wait-event -t 60 $id2 clean
'
test_expect_success 'its record says its outputs were lost with the RAM disk' '
	rsa_at_rest $id2 120 &&
	test "$(rsa_field output_home $id2)" = False &&
	rsa_field error $id2 >error &&
	cat error &&
	grep "RAM disk lost before its outputs were staged out" error && grep rsa1 error
'
test_expect_success 'nothing is left on the nodes still up' '
	flux rsa undrain rsa0 &&
	rsa_ramdisks >left &&
	cat left &&
	test_must_be_empty left
'
test_done
