#!/bin/sh
test_description='rsa.paths=bind on a tmpfs RAM disk the compute nodes see directly

Nodes share one mount table ([rsa] attach = "site"): the job sees the RSA
node'"'"'s tmpfs itself at its own paths, not a GlusterFS client.  A plain
shell job with its real paths, and what bind mounts change for
file-system calls there (EXDEV across the mount boundary; mmap, locks,
O_DIRECT and holes hold), as doc/paths.md lists.'

. $(dirname $0)/sharness-rsa.sh

mkdir -p conf && cat >conf/rsa.toml <<'EOF2'
[rsa]
provider = "tmpfs"
attach = "site"
EOF2
test_under_rsa_instance --shared-mounts --config "$PWD/conf"

test_expect_success 'setup: the pool, inputs, empty outputs' '
	rsa_wait_pool 60 &&
	rsa_make_tree "$PWD/in" && mkdir out tmp &&
	blocker=$(rsa_hold_compute)
'
test_expect_success 'a job using its real paths is staged, then runs' '
	cat >job.sh <<-\EOF &&
	#!/bin/sh
	# job.sh IN OUT TMP: a plain job, then the file-system calls
	findmnt -n -o FSTYPE --mountpoint "$1" >"$2/in-fstype"
	cat "$1/sub/numbers" >"$2/numbers"
	python3 "$RSA_SRCDIR/t/paths-features.py" "$1" "$2" "$3" >"$2/features"
	EOF
	chmod +x job.sh &&
	id=$(flux submit -N1 -n1 --env=RSA_SRCDIR="$RSA_SRCDIR" \
		--setattr=rsa.data_in="$PWD/in" --setattr=rsa.data_out="$PWD/out" \
		./job.sh "$PWD/in" "$PWD/out" "$PWD/tmp") &&
	rsa_wait_state $id READY 90 &&
	flux cancel $blocker &&
	flux job wait-event -t 60 $id finish &&
	find out -mindepth 1 >persistent && test_must_be_empty persistent
'
test_expect_success 'it saw the tmpfs at data_in and wrote to data_out; the outputs came home' '
	flux rsa wait -t 120 $id &&
	test "$(cat out/in-fstype)" = tmpfs &&
	test_cmp in/sub/numbers out/numbers
'
test_expect_success 'EXDEV across the mount boundary; mmap, locks, O_DIRECT and holes hold on tmpfs' '
	test_cmp "$RSA_SRCDIR/t/paths-features.expected" out/features
'
test_expect_success 'nothing is left' '
	rsa_at_rest $id 120 &&
	rsa_nothing_left &&
	! findmnt -n --mountpoint "$PWD/in" && ! findmnt -n --mountpoint "$PWD/out"
'
test_done
