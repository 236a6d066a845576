#!/bin/sh
test_description='a real multi-user instance: the broker is not root, flux-rsa uses flux-imp

The brokers run as an unprivileged user made for the test, the instance
owner.  Two more test users submit munge-signed jobs with runuser; the jobs
run as them through a setuid flux-imp.  RAM disks are tmpfs mounts (a
one-node job'"'"'s an ext4 image in one, its compute node'"'"'s to mount)
made, attached and staged through `flux-imp run rsa` and the entry point,
which acts as root only under the RAM-disk root and reads and writes users'"'"' data only as
their owner.  No process started by the instance owner holds uid 0 but
flux-imp and the entry point.'

. $(dirname $0)/sharness-rsa.sh
. "$RSA_SRCDIR/t/multiuser.sh"

mu_require

T="$PWD"
ROOTDIR="$T/ramdisk"
export RSA_INSTANCE_TMP="$T"  # where rsa_nothing_left looks for RAM disks
MOUNTDIR="$T/mnt"
# one-node RAM disks are tmpfs; with GlusterFS installed, one over both RSA
# nodes is a volume whose bricks and compute-node mounts go through the IMP
provider=tmpfs
if command -v glusterfsd >/dev/null 2>&1 || test -x /usr/sbin/glusterfsd; then
	provider=glusterfs
	test_set_prereq GLUSTERFS
fi
mkdir -p conf "$ROOTDIR" "$MOUNTDIR" && chmod 755 conf "$ROOTDIR" "$MOUNTDIR"
cat >conf/rsa.toml <<EOF
[rsa]
ramdisk-root = "$ROOTDIR"
mount-root = "$MOUNTDIR"
provider = "$provider"
stage-retries = 0
EOF
chmod 644 conf/rsa.toml

# the instance's RAM disks still mounted, on any node (not the RSA nodes'
# image stores and the compute nodes' clients of them: the pool's own)
mounted() {
	rsa_on_nodes findmnt -n -l -o TARGET | grep -F -e "$ROOTDIR/" -e "$MOUNTDIR/" |
		grep -v -e "^$ROOTDIR/\.store-[^/]*\$" -e "^$MOUNTDIR/\.stores/[^/]*\$"
}
# fstype JOB PATH: the file system at PATH on job JOB's RSA node
fstype() {
	rsa_on_ramdisk $1 findmnt -n -o FSTYPE --mountpoint "$2"
}
# the file system a job sees its RAM disk in: GlusterFS, attached where it
# runs (one RSA node or several), unless the nodes share one mount table
job_fstype=tmpfs
test_have_prereq GLUSTERFS && job_fstype=fuse.glusterfs
# the entry points running, but the RSA nodes' image stores and the compute
# nodes' resident helpers (the pool's, for as long as it runs)
entry_points() {
	for p in $(pgrep -x rsa-imp-run); do
		tr "\0" "\n" <"/proc/$p/environ" 2>/dev/null | grep -qx -e RSA_OP=store -e RSA_OP=serve ||
			echo $p
	done
}
imp_run() {
	runuser -u $MU_FLUX -- env -i PATH=/usr/bin:/bin "$@" "$MU_IMP" run rsa
}
owner_of() {
	stat -c %U "$1"
}
# owner_on JOB PATH: the owner of PATH on job JOB's RSA node
owner_on() {
	rsa_on_ramdisk $1 stat -c %U "$2"
}

test_expect_success 'setup: test users, munge, the IMP runs our entry point' '
	mu_setup "$T/conf" &&
	id $MU_FLUX && id $MU_A && id $MU_B &&
	imp_run RSA_OP=check >check.json &&
	grep "\"euid\": 0" check.json &&
	rm -f watch.stop &&
	(/usr/bin/python3 "$RSA_SRCDIR/t/uid0-watch.py" $(id -u $MU_FLUX) "$T/watch.stop" \
		"$T/watch.json" &)
'
test_expect_success 'the brokers start as the unprivileged instance owner' '
	mu_start --config "$T/conf" &&
	test "$(flux getattr security.owner)" = "$(id -u $MU_FLUX)" &&
	pgrep -u $MU_FLUX flux-broker >brokers && test $(wc -l <brokers) -ge 4 &&
	for pid in $(cat brokers); do
		grep "^Uid:" /proc/$pid/status | grep -vw 0 || return 1
	done &&
	rsa_wait_pool 90
'
test_expect_success 'the pool makes RAM disks through flux-imp run rsa' '
	flux rsa pool -o json >pool.json &&
	flux python -c "
import json
p = json.load(open(\"pool.json\"))[\"privilege\"]
assert p[\"mode\"] == \"imp\" and p[\"error\"] is None, p
" &&
	flux rsa pool 2>pool.err && test_must_be_empty pool.err
'
test_expect_success 'setup: each user has data of their own' '
	for u in $MU_A $MU_B; do
		mu_user_dir $u "$T/$u" &&
		rsa_make_tree "$T/$u/in" && chmod 750 "$T/$u/in" && mkdir "$T/$u/out" &&
		echo "$u private" >"$T/$u/in/private.txt" && chmod 600 "$T/$u/in/private.txt" &&
		chown -R $u: "$T/$u" || return 1
	done &&
	mu_user_dir $MU_B "$T/$MU_B/secret" 700 &&
	echo "b secret" >"$T/$MU_B/secret/s.txt" && chown $MU_B: "$T/$MU_B/secret/s.txt" &&
	ln -s "$T/$MU_B/secret/s.txt" "$T/$MU_A/in/b-secret" &&
	ln -s /etc "$T/$MU_A/in/etc" &&
	chown -h $MU_A: "$T/$MU_A/in/b-secret" "$T/$MU_A/in/etc" &&
	cat >"$T/job.sh" <<-\EOF &&
	#!/bin/sh
	id -u >"$RSA_DATA_OUT/uid"
	findmnt -n -o FSTYPE --mountpoint "$RSA_RAMDISK" >"$RSA_DATA_OUT/fstype"
	cp -a "$RSA_DATA_IN/." "$RSA_DATA_OUT/copy"
	cd "$RSA_DATA_IN" && find . -mindepth 1 -printf "%u %m %T@ %y %p\n" | sort >"$RSA_DATA_OUT/staged"
	while ! test -e "/tmp/rsa-t-go.$(id -un)"; do sleep 0.1; done
	EOF
	chmod 755 "$T/job.sh"
'
# (rsa.fs=shared: the RSA node's tmpfs itself, served; a one-node job's
# default, an image, is the story of the test after these)
test_expect_success 'A and B submit munge-signed jobs as themselves' '
	a=$(mu_as $MU_A flux submit -N1 --setattr=rsa.data_in="$T/$MU_A/in" --setattr=rsa.fs=shared \
		--setattr=rsa.data_out="$T/$MU_A/out" --setattr=rsa.on_late=wait "$T/job.sh") &&
	b=$(mu_as $MU_B flux submit -N1 --setattr=rsa.data_in="$T/$MU_B/in" --setattr=rsa.fs=shared \
		--setattr=rsa.data_out="$T/$MU_B/out" --setattr=rsa.on_late=wait "$T/job.sh") &&
	test "$(flux jobs -n -o {username} $a)" = $MU_A &&
	test "$(flux jobs -n -o {username} $b)" = $MU_B &&
	rsa_wait_state $a INUSE_IN 90 && rsa_wait_state $b INUSE_IN 90
'
test_expect_success 'their RAM disks are tmpfs mounts whose areas belong to them' '
	ra=$(rsa_field ramdisk $a) && rb=$(rsa_field ramdisk $b) &&
	test "$(fstype $a "$ra") $(fstype $b "$rb")" = "tmpfs tmpfs" &&
	test "$(owner_on $a "$ra")" = root &&
	test "$(owner_on $a "$ra/in") $(owner_on $a "$ra/out")" = "$MU_A $MU_A" &&
	test "$(owner_on $b "$rb/in") $(owner_on $b "$rb/out")" = "$MU_B $MU_B" &&
	test "$(owner_on $a "$ra/in/private.txt")" = $MU_A
'
test_expect_success 'B cannot stage in from A'"'"'s RAM disk (the hand-off is for one owner)' '
	flux job info $b J >b.J && ra=$(rsa_field ramdisk $a) &&
	rsa_on_ramdisk $a sh -c "mkdir -p \"\$1\" && chown $MU_B: \"\$1\"" - "$ROOTDIR/97.1/in" &&
	test_must_fail rsa_on_ramdisk $a runuser -u $MU_FLUX -- env -i PATH=/usr/bin:/bin \
		RSA_OP=stage RSA_ROOT="$ROOTDIR" RSA_DIRECTION=in RSA_MODE=copy RSA_SRC="$ra/out" \
		RSA_DST="$ROOTDIR/97.1/in" RSA_OWNER=$(id -u $MU_B) \
		RSA_J="$(cat b.J)" "$MU_IMP" run rsa 2>handoff.err &&
	cat handoff.err &&
	grep "is not the RAM disk ${ra##*/} of uid $(id -u $MU_B) (it belongs to uid $(id -u $MU_A))" handoff.err &&
	rsa_on_ramdisk $a find "$ROOTDIR/97.1" -mindepth 2 >left && test_must_be_empty left &&
	rsa_on_ramdisk $a rm -r "$ROOTDIR/97.1"
'
test_expect_success 'B cannot read A'"'"'s RAM disk, see A'"'"'s record, retry or release A'"'"'s job' '
	test_must_fail runuser -u $MU_B -- ls "$T/$MU_A/in" &&
	test_must_fail rsa_on_ramdisk $a runuser -u $MU_B -- ls "$ra/in" 2>ls.err &&
	grep "Permission denied" ls.err &&
	test_must_fail rsa_on_ramdisk $a runuser -u $MU_B -- cat "$ra/in/private.txt" &&
	mu_as $MU_B flux rsa status -a -n -o "{id}" >b-sees &&
	grep -x "$(flux job id --to=f58 $b)" b-sees && ! grep -x "$(flux job id --to=f58 $a)" b-sees &&
	test_must_fail mu_as $MU_B flux rsa retry $a 2>retry.err &&
	grep "not yours" retry.err &&
	test_must_fail mu_as $MU_B flux rsa release $a 2>release.err &&
	grep "not yours" release.err &&
	mu_as $MU_A flux rsa status -a -n -o "{id}" | grep -x "$(flux job id --to=f58 $a)"
'
test_expect_success 'the jobs end; their outputs come home owned by them' '
	touch /tmp/rsa-t-go.$MU_A /tmp/rsa-t-go.$MU_B &&
	mu_as $MU_A flux rsa wait -t 120 $a &&
	mu_as $MU_B flux rsa wait -t 120 $b &&
	rm -f /tmp/rsa-t-go.$MU_A /tmp/rsa-t-go.$MU_B &&
	test "$(cat $MU_A/out/uid)" = "$(id -u $MU_A)" &&
	test "$(cat $MU_B/out/uid)" = "$(id -u $MU_B)" &&
	test "$(cat $MU_A/out/fstype)" = $job_fstype &&
	test "$(find $MU_A/out $MU_B/out ! -user $MU_A ! -user $MU_B | wc -l)" = 0 &&
	test "$(find $MU_A/out -user $MU_B | wc -l)" = 0
'
test_expect_success 'staged inputs kept owner, modes and mtimes, outputs too' '
	(cd $MU_A/in && find . -mindepth 1 -printf "%u %m %T@ %y %p\n" | sort) >a.expected &&
	test_cmp a.expected $MU_A/out/staged &&
	rsa_same_tree $MU_A/in $MU_A/out/copy &&
	rsa_same_tree $MU_B/in $MU_B/out/copy
'
test_expect_success 'links A planted were copied as links: B'"'"'s file and /etc stay out' '
	test -L $MU_A/out/copy/b-secret && test -L $MU_A/out/copy/etc &&
	test "$(readlink $MU_A/out/copy/etc)" = /etc &&
	! grep -rs "b secret" $MU_A/out
'
test_expect_success 'A'"'"'s one-node RAM disk is an image: mounted through the IMP (its node'"'"'s helper), A'"'"'s inside, root'"'"'s outside' '
	mu_user_dir $MU_A "$T/$MU_A/out7" &&
	i=$(mu_as $MU_A flux submit -N1 --setattr=rsa.data_in="$T/$MU_A/in" \
		--setattr=rsa.data_out="$T/$MU_A/out7" --setattr=rsa.on_late=wait \
		sh -c "id -u >\"\$RSA_DATA_OUT/uid\";
		       findmnt -n -o FSTYPE --target \"\$RSA_DATA_OUT\" >\"\$RSA_DATA_OUT/fstype\";
		       cp -a \"\$RSA_DATA_IN/.\" \"\$RSA_DATA_OUT/copy\";
		       while ! test -e \"$T/i7.go\"; do sleep 0.1; done") &&
	rsa_wait_state $i INUSE_IN 90 &&
	test "$(rsa_field image $i)" = True &&
	rank=$(rsa_field ranks $i) && mnt=$(rsa_field mount_path $i) &&
	test "$(rsa_on_node $rank stat -c %U "$mnt/in") $(rsa_on_node $rank stat -c %U "$mnt/out")" = "$MU_A $MU_A" &&
	test_must_fail rsa_on_node $rank runuser -u $MU_B -- ls "$mnt/in" &&
	test_must_fail rsa_on_node $rank runuser -u $MU_B -- cat "$mnt/in/private.txt" &&
	node=$(rsa_field nodes $i) && name=$(basename "$(rsa_field ramdisk $i)") &&
	img="$ROOTDIR/.store-$node/images/$name.img" &&
	test "$(rsa_on_node $(flux hostlist -F $node instance) stat -c "%U %a" "$img")" = "root 600" &&
	test_must_fail rsa_on_node $(flux hostlist -F $node instance) \
		runuser -u $MU_B -- head -c1 "$img" &&
	# the attach was the compute node'"'"'s resident helper'"'"'s: the entry
	# point, through the IMP, as root
	for p in $(pgrep -x rsa-imp-run); do
		! tr "\0" "\n" <"/proc/$p/environ" 2>/dev/null | grep -qx RSA_OP=serve ||
			ps -o user= -p $p
	done >helpers &&
	grep -x root helpers &&
	touch "$T/i7.go" &&
	mu_as $MU_A flux rsa wait -t 120 $i &&
	test "$(cat $MU_A/out7/uid)" = "$(id -u $MU_A)" &&
	test "$(cat $MU_A/out7/fstype)" = ext4 &&
	rsa_same_tree $MU_A/in $MU_A/out7/copy &&
	test "$(find $MU_A/out7 ! -user $MU_A | wc -l)" = 0 &&
	rsa_at_rest $i 90 && rsa_nothing_left && test -z "$(mounted)"
'
test_expect_success 'A'"'"'s data_out holding links to B'"'"'s file and /etc: they are not followed' '
	cp /etc/passwd passwd.before && cp $MU_B/secret/s.txt s.before &&
	mkdir -p $MU_A/out2 && ln -s "$T/$MU_B/secret/s.txt" $MU_A/out2/victim &&
	ln -s /etc $MU_A/out2/etc && chown -R -h $MU_A: $MU_A/out2 &&
	c=$(mu_as $MU_A flux submit -N1 --setattr=rsa.data_out="$T/$MU_A/out2" --setattr=rsa.on_late=wait \
		sh -c "echo pwned >\"\$RSA_DATA_OUT/victim\"; mkdir \"\$RSA_DATA_OUT/etc\";
		       echo pwned >\"\$RSA_DATA_OUT/etc/passwd\"") &&
	rsa_wait_state $c HELD 120 &&
	rsa_field error $c >c.error && cat c.error &&
	grep "out2/etc: exists and is not a directory" c.error &&
	test_cmp passwd.before /etc/passwd && test_cmp s.before $MU_B/secret/s.txt &&
	test -L $MU_A/out2/victim && test -L $MU_A/out2/etc &&
	mu_as $MU_A flux rsa release $c && rsa_at_rest $c 120
'
test_expect_success 'the entry point refuses what is not its job' '
	test_must_fail imp_run RSA_OP=format 2>op.err &&
	grep "RSA_OP=.format.: not an operation" op.err &&
	test_must_fail imp_run RSA_OP=discard RSA_ROOT="$ROOTDIR" RSA_PATH=/etc 2>path.err &&
	grep "RSA_PATH=./etc.: not a RAM-disk path under RSA_ROOT" path.err &&
	test_must_fail imp_run RSA_OP=sweep RSA_ROOT=/etc 2>root.err &&
	grep "not the site.s RAM-disk root" root.err &&
	test_must_fail imp_run RSA_OP=measure RSA_OWNER=0 RSA_PATH=/root 2>uid.err &&
	grep "RSA_OWNER=0: refusing to act as root" uid.err &&
	test_must_fail imp_run RSA_OP=measure RSA_OWNER=$(id -u $MU_A) \
		RSA_PATH="$T/$MU_B/secret" 2>unsigned.err &&
	grep "RSA_J is not set: RSA_OP=measure acts as uid $(id -u $MU_A) only with the job request that user signed" unsigned.err &&
	test_must_fail runuser -u $MU_A -- env RSA_OP=check "$MU_IMP" run rsa 2>caller.err &&
	grep "permission denied" caller.err
'
test_expect_success 'as a user, the instance owner does only what that user signed (J)' '
	flux job info $a J >a.J && test -s a.J &&
	ua=$(id -u $MU_A) && ub=$(id -u $MU_B) &&
	imp_run RSA_OP=measure RSA_OWNER=$ua RSA_PATH="$T/$MU_A/in" RSA_J="$(cat a.J)" >measured.json &&
	grep "\"files\": [1-9]" measured.json &&
	test_must_fail imp_run RSA_OP=measure RSA_OWNER=$ub RSA_PATH="$T/$MU_B/secret" \
		RSA_J="$(cat a.J)" 2>signer.err &&
	grep "RSA_J is signed by uid $ua, not by RSA_OWNER=$ub" signer.err &&
	test_must_fail imp_run RSA_OP=measure RSA_OWNER=$ua RSA_PATH="$T/$MU_A" \
		RSA_J="$(cat a.J)" 2>path.err &&
	grep "RSA_PATH=.$T/$MU_A.: not the rsa.data_in .$T/$MU_A/in. uid $ua signed" path.err &&
	mu_user_dir $MU_A "$T/$MU_A/elsewhere" &&
	mkdir -p "$ROOTDIR/99.1/out" &&
	test_must_fail imp_run RSA_OP=stage RSA_ROOT="$ROOTDIR" RSA_DIRECTION=out RSA_MODE=copy \
		RSA_SRC="$ROOTDIR/99.1/out" RSA_DST="$T/$MU_A/elsewhere" RSA_OWNER=$ua \
		RSA_J="$(cat a.J)" 2>dst.err &&
	grep "RSA_DST=.$T/$MU_A/elsewhere.: not the rsa.data_out" dst.err &&
	printf "#!/bin/sh\\nid -u >/tmp/rsa-t-ran\\n" >"$T/evil.sh" && chmod 755 "$T/evil.sh" &&
	test_must_fail imp_run RSA_OP=stage RSA_ROOT="$ROOTDIR" RSA_DIRECTION=out RSA_MODE=script \
		RSA_SCRIPT="$T/evil.sh" RSA_SRC="$ROOTDIR/99.1/out" RSA_DST="$T/$MU_A/out" \
		RSA_OWNER=$ua RSA_J="$(cat a.J)" 2>script.err &&
	grep "RSA_SCRIPT=.$T/evil.sh.: not the rsa.stage_out .copy. uid $ua signed" script.err &&
	/usr/bin/python3 -c "import base64, json, sys
head, body, sig = open(sys.argv[1]).read().strip().split(\".\")
spec = json.loads(base64.b64decode(body))
spec[\"attributes\"][\"system\"][\"rsa\"][\"data_in\"] = sys.argv[2]
print(head, base64.b64encode(json.dumps(spec).encode()).decode(), sig, sep=\".\")
" a.J "$T/$MU_A" >forged.J &&
	test_must_fail imp_run RSA_OP=measure RSA_OWNER=$ua RSA_PATH="$T/$MU_A" \
		RSA_J="$(cat forged.J)" 2>forged.err &&
	grep "RSA_J: not a valid signature" forged.err &&
	! test -e /tmp/rsa-t-ran &&
	test -z "$(ls -A "$T/$MU_A/elsewhere")" &&
	rmdir "$ROOTDIR/99.1/out" "$ROOTDIR/99.1"
'
test_expect_success 'nor stage out as the user what the instance owner put on a RAM disk' '
	mkdir -p "$ROOTDIR/98.1/out" && echo planted >"$ROOTDIR/98.1/out/planted" &&
	printf "{\"name\": \"98.1\", \"provider\": \"tmpfs\", \"mounted\": true, \"owner\": $(id -u $MU_A), \"group\": $(id -g $MU_A)}\n" \
		>"$ROOTDIR/98.1/.rsa-ramdisk" &&
	chown -R $MU_FLUX: "$ROOTDIR/98.1/out" && chmod -R a+rX "$ROOTDIR/98.1/out" &&
	test_must_fail imp_run RSA_OP=stage RSA_ROOT="$ROOTDIR" RSA_DIRECTION=out RSA_MODE=copy \
		RSA_SRC="$ROOTDIR/98.1/out" RSA_DST="$T/$MU_A/out" RSA_OWNER=$(id -u $MU_A) \
		RSA_J="$(cat a.J)" 2>planted.err &&
	grep "RSA_SRC=.$ROOTDIR/98.1/out. is a directory owned by uid $(id -u $MU_FLUX), not by RSA_OWNER=$(id -u $MU_A)" planted.err &&
	! test -e "$T/$MU_A/out/planted" &&
	rm -r "$ROOTDIR/98.1"
'
test_expect_success GLUSTERFS 'A'"'"'s RAM disk over both RSA nodes: bricks and mounts through the IMP, as A'"'"'s' '
	mu_user_dir $MU_A "$T/$MU_A/out5" &&
	g=$(mu_as $MU_A flux submit -N2 --setattr=rsa.data_out="$T/$MU_A/out5" \
		--setattr=rsa.capacity=160M --setattr=rsa.on_late=wait \
		sh -c "id -u >\"\$RSA_DATA_OUT/uid.\$FLUX_TASK_RANK\";
		       findmnt -n -o FSTYPE --mountpoint \"\$RSA_RAMDISK\" >\"\$RSA_DATA_OUT/fstype.\$FLUX_TASK_RANK\";
		       head -c 8388608 /dev/urandom >\"\$RSA_DATA_OUT/data.\$FLUX_TASK_RANK\"") &&
	mu_as $MU_A flux rsa wait -t 120 $g &&
	flux rsa status -a -o "{id} {rsa_state} {note}" $g &&
	test "$(cat $MU_A/out5/fstype.0 $MU_A/out5/fstype.1)" = "fuse.glusterfs
fuse.glusterfs" &&
	test "$(cat $MU_A/out5/uid.0)" = "$(id -u $MU_A)" &&
	test "$(owner_of $MU_A/out5/data.1)" = $MU_A &&
	test "$(stat -c %s $MU_A/out5/data.0)" = 8388608 &&
	rsa_at_rest $g 90 && rsa_nothing_left &&
	test -z "$(mounted)"
'
# the hand-off through the IMP, across RSA nodes: A's second job reads
# its first job's outputs from that job's RAM disk, whose node is drained
# by then, so the stage-in mounts that RAM disk's volume on the other node
test_expect_success GLUSTERFS 'A'"'"'s job reads A'"'"'s earlier outputs from its RAM disk on the other RSA node' '
	mu_user_dir $MU_A "$T/$MU_A/out6" && mu_user_dir $MU_A "$T/$MU_A/b6" &&
	g6=$(mu_as $MU_A flux submit -N1 sh -c "while ! test -e \"$T/g6.open\"; do sleep 0.1; done") &&
	a6=$(mu_as $MU_A flux submit -N1 --setattr=rsa.data_out="$T/$MU_A/out6" \
		--setattr=rsa.capacity=16M --setattr=rsa.on_late=wait \
		sh -c "seq 1 5000 >\"\$RSA_DATA_OUT/numbers\" && mkdir \"\$RSA_DATA_OUT/sub\" &&
		       echo deep >\"\$RSA_DATA_OUT/sub/deep\"") &&
	b6=$(mu_as $MU_A flux submit -N1 --dependency=afterok:$a6 --dependency=afterok:$g6 \
		--setattr=rsa.data_in="$T/$MU_A/out6" --setattr=rsa.data_out="$T/$MU_A/b6" \
		--setattr=rsa.capacity=16M --setattr=rsa.on_late=wait \
		sh -c "cd \"\$RSA_DATA_IN\" && find . -type f | sort | xargs md5sum >\"\$RSA_DATA_OUT/seen\"") &&
	flux job wait-event -t 90 $b6 rsa-handoff &&
	node6=$(rsa_field nodes $a6) &&
	mu_as $MU_FLUX flux rsa drain $node6 handoff test &&
	touch "$T/g6.open" &&
	mu_as $MU_A flux rsa wait -t 120 $b6 &&
	mu_as $MU_FLUX flux rsa undrain $node6 &&
	flux job eventlog $b6 | grep rsa-staged-in >staged6 && cat staged6 &&
	grep -F "handoff=" staged6 && ! grep -F "\"$node6\"" staged6 &&
	rsa_at_rest $a6 90 &&
	(cd "$T/$MU_A/out6" && find . -type f | sort | xargs md5sum) >home6 &&
	test_cmp home6 "$T/$MU_A/b6/seen" &&
	test "$(owner_of $MU_A/b6/seen)" = $MU_A &&
	rsa_at_rest $b6 90 && rsa_nothing_left && test -z "$(mounted)"
'
test_expect_success 'cancel in STAGING_IN: nothing is left' '
	blocker=$(mu_as $MU_B flux submit -N2 sleep inf) &&
	flux job wait-event -t 60 $blocker start &&
	gate=$(rsa_gate_in gate) && chmod 755 gate.sh &&
	d=$(mu_as $MU_A flux submit -N1 --setattr=rsa.data_in="$T/$MU_A/in" \
		--setattr=rsa.data_out="$T/$MU_A/out" --setattr=rsa.stage_in="$gate" \
		--setattr=rsa.on_late=ignore true) &&
	rsa_wait_state $d STAGING_IN 90 &&
	mu_as $MU_A flux cancel $d &&
	mu_as $MU_B flux cancel $blocker &&
	rsa_at_rest $d 90 && rsa_nothing_left &&
	test -z "$(mounted)" && test -z "$(entry_points)"
'
test_expect_success 'a stage-out cannot be cancelled away: the outputs still come home' '
	gout=$(rsa_gate_out gateout) && chmod 755 gateout.sh &&
	mu_user_dir $MU_A "$T/$MU_A/out3" &&
	e=$(mu_as $MU_A flux submit -N1 --setattr=rsa.data_out="$T/$MU_A/out3" \
		--setattr=rsa.stage_out="$gout" --setattr=rsa.on_late=wait \
		sh -c "echo done >\"\$RSA_DATA_OUT/result\"") &&
	rsa_wait_state $e STAGING_OUT 90 &&
	test_might_fail mu_as $MU_A flux cancel $e &&
	rsa_open gateout &&
	mu_as $MU_A flux rsa wait -t 90 $e &&
	test "$(cat $MU_A/out3/result)" = done &&
	test "$(owner_of $MU_A/out3/result)" = $MU_A &&
	rsa_at_rest $e 90 && rsa_nothing_left && test -z "$(mounted)"
'
test_expect_success 'the module reloads while A'"'"'s job is INUSE_OUT: outputs complete' '
	mu_user_dir $MU_A "$T/$MU_A/out4" &&
	f=$(mu_as $MU_A flux submit -N1 --setattr=rsa.data_in="$T/$MU_A/in" \
		--setattr=rsa.data_out="$T/$MU_A/out4" --setattr=rsa.on_late=wait \
		sh -c "cp -a \"\$RSA_DATA_IN/.\" \"\$RSA_DATA_OUT/\" && flux rsa release-input &&
		       while ! test -e /tmp/rsa-t-go.f; do sleep 0.1; done") &&
	rsa_wait_state $f INUSE_OUT 90 &&
	flux module remove rsa && flux module load rsa && rsa_wait_pool 60 &&
	test "$(rsa_state $f)" = INUSE_OUT &&
	touch /tmp/rsa-t-go.f &&
	mu_as $MU_A flux rsa wait -t 120 $f && rm -f /tmp/rsa-t-go.f &&
	rsa_same_tree $MU_A/in $MU_A/out4 &&
	rsa_at_rest $f 90 && rsa_nothing_left &&
	test -z "$(mounted)" && test -z "$(entry_points)"
'
test_expect_success 'no process of the instance owner held uid 0 but flux-imp and the entry point' '
	touch watch.stop &&
	while ! test -s watch.json; do sleep 0.1; done &&
	cat watch.json && echo &&
	flux python -c "
import json
w = json.load(open(\"watch.json\"))
assert w[\"violations\"] == [], w[\"violations\"]
assert w[\"seen\"].get(\"rsa-imp-run\", 0) > 0 and w[\"seen\"].get(\"flux-imp\", 0) > 0, w
"
'
test_expect_success 'the instance stops; no RAM disk, entry point or process of the owner is left' '
	mu_stop &&
	test -z "$(mounted)" &&
	n=0 && while pgrep -x rsa-imp-run && test $n -lt 50; do sleep 0.1; n=$((n + 1)); done &&
	test -z "$(pgrep -x rsa-imp-run)" &&
	test -z "$(pgrep -u $MU_FLUX)"
'
test_done
