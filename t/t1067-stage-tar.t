#!/bin/sh
test_description='rsa.stage_out=tar and rsa.stage_in=tar: one archive out, archives unpacked in

A job that asks rsa.stage_out=tar gets its outputs home as one archive,
data_out/rsa-output.tar, which unpacks into exactly the tree the job wrote:
names with spaces, a symbolic link, an executable, a sparse file, nested
directories, modes and contents.  A job that asks rsa.stage_in=tar finds
every archive at the top of data_in unpacked on its RAM disk, later
archives winning a name written by two.'

. $(dirname $0)/sharness-rsa.sh

test_under_rsa_instance

# tree.sh [DIR]: the tree both the job (at its data_out) and the test write
cat >tree.sh <<'EOF2'
#!/bin/sh
d=${1:-$RSA_DATA_OUT}
mkdir -p "$d/a/b c" &&
seq 1 5000 >"$d/a/numbers" &&
printf 'with spaces\n' >"$d/a/b c/one file" &&
printf '#!/bin/sh\necho hi\n' >"$d/run.sh" && chmod 755 "$d/run.sh" &&
chmod 640 "$d/a/numbers" &&
ln -s a/numbers "$d/link" &&
truncate -s 8M "$d/sparse" && printf end >>"$d/sparse"
EOF2
chmod +x tree.sh

test_expect_success 'setup' '
	rsa_wait_pool 60 &&
	mkdir -p out in expect &&
	./tree.sh expect
'
test_expect_success 'a stage-out in tar: one archive at data_out' '
	id=$(flux submit -N1 --setattr=rsa.data_out="$PWD/out" \
		--setattr=rsa.stage_out=tar --setattr=rsa.capacity=64M --setattr=rsa.on_late=wait \
		"$PWD/tree.sh") &&
	flux job wait-event -t 120 $id clean &&
	flux job status $id &&
	flux rsa wait $id &&
	ls out >listing &&
	echo rsa-output.tar >expect-listing &&
	test_cmp expect-listing listing
'
test_expect_success 'it unpacks into the tree the job wrote: names, link, modes, contents' '
	mkdir unpacked &&
	tar -xf out/rsa-output.tar -C unpacked &&
	diff -r --no-dereference expect unpacked &&
	test "$(readlink unpacked/link)" = a/numbers &&
	test "$(stat -c %a unpacked/run.sh)" = 755 &&
	test "$(stat -c %a unpacked/a/numbers)" = 640
'
test_expect_success 'the sparse file stays sparse in the archive and out of it' '
	test "$(stat -c %s unpacked/sparse)" = $((8 * 1024 * 1024 + 3)) &&
	test $(($(stat -c %b unpacked/sparse) * 512)) -lt $((1024 * 1024)) &&
	test $(stat -c %s out/rsa-output.tar) -lt $((1024 * 1024))
'
test_expect_success 'a stage-in in tar: every archive of data_in unpacked, the later one winning' '
	mkdir t1 t2 &&
	./tree.sh t1 && echo first >t1/both &&
	echo second >t2/both && echo only >t2/second-only &&
	tar -cf in/1.tar -C t1 . && tar -cf in/2.tar -C t2 . &&
	id=$(flux submit -N1 --setattr=rsa.data_in="$PWD/in" --setattr=rsa.stage_in=tar \
		--setattr=rsa.capacity=64M --setattr=rsa.on_late=wait \
		sh -c "cd \$RSA_DATA_IN && cat both second-only && md5sum a/numbers \"a/b c/one file\" && readlink link" ) &&
	flux job wait-event -t 120 $id clean &&
	flux job attach $id >seen &&
	{ echo second && echo only &&
	  (cd expect && md5sum a/numbers "a/b c/one file") && echo a/numbers; } >expect-seen &&
	test_cmp expect-seen seen
'
test_done
