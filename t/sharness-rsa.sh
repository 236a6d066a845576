# sharness-rsa.sh: the project's test helpers on top of Debian's sharness.
#
#   . $(dirname $0)/sharness-rsa.sh
#   test_under_rsa_instance [--size N] [--rsa M] [--config DIR]
#
# test_under_rsa_instance re-runs the test script as the initial program
# of a real `flux start` instance made by t/rsa-instance (the RSA loaded
# from this build tree), then returns inside it.

RSA_SRCDIR=${RSA_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
RSA_BUILDDIR=${RSA_BUILDDIR:-$RSA_SRCDIR}
SHARNESS_TEST_SRCDIR=${SHARNESS_TEST_SRCDIR:-$RSA_SRCDIR/t}
export RSA_SRCDIR RSA_BUILDDIR

RSA_TEST_FILE="$(cd "$(dirname "$0")" && pwd)/$(basename "$0")"
if test -z "$RSA_TEST_INSIDE"; then
	# sharness creates the trash directory in the current directory
	cd "$RSA_BUILDDIR/t" || exit 1
fi
. /usr/share/sharness/sharness.sh

# run the rest of the test inside an RSA test instance
test_under_rsa_instance() {
	if test -n "$RSA_TEST_INSIDE"; then
		return 0
	fi
	if ! test -x "$RSA_BUILDDIR/t/rsa-instance"; then
		skip_all="t/rsa-instance not built (run ./configure --with-flux=PREFIX)"
		test_done
	fi
	export RSA_TEST_INSIDE=1
	cd "$RSA_BUILDDIR/t" || return 1
	exec "$RSA_BUILDDIR/t/rsa-instance" "$@" -- \
		sh "$RSA_TEST_FILE" ${verbose:+--verbose} ${debug:+--debug} \
		${immediate:+--immediate}
}

# wait until the RSA pool is up (the service launches it at load)
rsa_wait_pool() {
	flux rsa pool --wait=${1:-60} >/dev/null
}

# the RSA state of a job, e.g. READY
rsa_state() {
	flux rsa status -a -n -o "{rsa_state}" "$1"
}

# wait until job $1 reaches rsa-state $2 (or give up after $3 seconds)
rsa_wait_state() {
	_i=0
	_max=$(( ${3:-30} * 10 ))
	while test "$(rsa_state "$1")" != "$2"; do
		_i=$((_i + 1))
		if test $_i -gt $_max; then
			echo "job $1 is $(rsa_state "$1"), not $2, after ${3:-30}s; its record:" >&2
			flux rsa status -a -o json "$1" >&2
			return 1
		fi
		sleep 0.1
	done
}

# a small tree with what users have: subdirectories, odd names, modes,
# old mtimes, an empty file and directory, a symlink
rsa_make_tree() {
	mkdir -p "$1/sub/deeper" "$1/empty dir" &&
	head -c 300000 /dev/urandom >"$1/big.dat" &&
	echo "hello" >"$1/with space.txt" &&
	: >"$1/empty" &&
	seq 1 1000 >"$1/sub/numbers" &&
	head -c 4096 /dev/urandom >"$1/sub/deeper/blob" &&
	ln -s numbers "$1/sub/link" &&
	chmod 640 "$1/with space.txt" &&
	chmod 755 "$1/sub/numbers" &&
	touch -h -d "2011-11-01 12:00:00" "$1/big.dat" "$1/sub/numbers" "$1/sub/link" &&
	touch -d "2001-01-01 00:00:00" "$1/sub/deeper" "$1/empty dir"
}

# no difference between trees A and B: content, modes, mtimes, links
# (the top directories themselves may differ: the job wrote into B)
rsa_same_tree() {
	rsync -n -a -i --checksum "$1/" "$2/" | grep -v " \./\$" >tree.diff
	test_must_be_empty tree.diff
}

# rsa_field FIELD JOBID: a field of the job's RSA record ("" for none,
# lists joined with commas)
rsa_field() {
	flux rsa status -a -o json "$2" | flux python -c "
import json, sys
v = json.load(sys.stdin)[0].get(\"$1\")
print(\"\" if v is None else \",\".join(v) if isinstance(v, list) else v)"
}

# wait until job $1 is over and its record at rest ($2 seconds, default 120)
rsa_at_rest() {
	_i=0
	_max=$(( ${2:-120} * 5 ))
	while true; do
		_st=$(flux rsa status -a -n -o "{job_state}/{rsa_state}" $1)
		case "$_st" in
		FINISHED/DESTROYED|CANCELED/DESTROYED|FINISHED/INITIAL|CANCELED/INITIAL) return 0 ;;
		esac
		_i=$((_i + 1))
		test $_i -lt $_max || { echo "job $1 stuck in $_st" >&2; return 1; }
		sleep 0.2
	done
}

# nothing leaks: no RAM disk, no holder or stage subjob in the pool, no
# capacity reserved on any RSA node
rsa_nothing_left() {
	test -z "$(rsa_ramdisks)" &&
	rsa_pool flux jobs -n -f running,pending -o "{name}" >pooljobs &&
	test_must_fail grep -E "rsa-(hold|stage)" pooljobs &&
	flux rsa pool -o json >pool.json &&
	flux python -c "
import json
assert all(n[\"reserved\"] == 0 for n in json.load(open(\"pool.json\"))[\"nodes\"])
"
}

# the RSA pool instance's jobid, and a command run inside it
rsa_pool_id() {
	flux jobs -n -a --name=rsa-pool -f running -o "{id}"
}
rsa_pool() {
	FLUX_URI_RESOLVE_LOCAL=t flux proxy "$(rsa_pool_id)" "$@"
}

# RAM disks (and their bricks) present under the test ramdisk root, RAM
# disks attached under its mount root, and anything mounted under either
rsa_ramdisks() {
	find "$RSA_INSTANCE_TMP/ramdisk" "$RSA_INSTANCE_TMP/mnt" -mindepth 1 -maxdepth 2 \
		-name "*.*" 2>/dev/null
	findmnt -n -l -o TARGET | grep -F -e "$RSA_INSTANCE_TMP/ramdisk/" -e "$RSA_INSTANCE_TMP/mnt/"
}

# RAM disks attached where jobs run (mounts under the test mount root)
rsa_attached() {
	findmnt -n -l -o TARGET | grep -F "$RSA_INSTANCE_TMP/mnt/" || true
}

# wait until file $1 has something in it (at most 60 s): a job's shell
# creates the file of a redirection before the command writes to it
rsa_wait_file() {
	_i=0
	while ! test -s "$1"; do
		_i=$((_i + 1)); test $_i -lt 600 || { echo "no $1 after 60s" >&2; return 1; }
		sleep 0.1
	done
}

# the RSA pool's RAM-disk provider (tmpfs, glusterfs, dir, command)
rsa_provider() {
	flux rsa pool -o json | flux python -c "
import json, sys
print(json.load(sys.stdin).get(\"provider\") or \"\")"
}

# gated stage scripts: they wait for "$PWD/<name>.open" (rsa_open <name>),
# then copy like the default stager would.  $1 is the RAM-disk directory,
# $2 the data directory (as in the thesis, Appendix U).
rsa_gate_in() {
	cat >"$1.sh" <<-EOF2
	#!/bin/sh
	while ! test -e "$PWD/$1.open"; do sleep 0.1; done
	cp -a "\$2/." "\$1/"
	EOF2
	chmod +x "$1.sh"
	echo "$PWD/$1.sh"
}
rsa_gate_out() {
	cat >"$1.sh" <<-EOF2
	#!/bin/sh
	while ! test -e "$PWD/$1.open"; do sleep 0.1; done
	cp -a "\$1/." "\$2/"
	EOF2
	chmod +x "$1.sh"
	echo "$PWD/$1.sh"
}
rsa_open() {
	touch "$PWD/$1.open"
}

# what job $1 holds on each RSA node (flux rsa pool), in bytes, as JSON:
# one list per node, e.g. [[67108864], [67108864]]
rsa_node_shares() {
	flux rsa pool -o json | flux python -c "
import json, sys
nodes = json.load(sys.stdin)[\"nodes\"]
print(json.dumps([[h[\"bytes\"] for h in n[\"holders\"] if h[\"jobid\"] == $(flux job id --to=dec $1)]
                  for n in nodes]))"
}

# the nodes a job ran on
rsa_job_nodes() {
	flux jobs -n -o "{nodelist}" "$1"
}

# the rsa-states job $1 went through, one per line (repeats folded)
rsa_history() {
	flux rsa status -a -o json "$1" | flux python -c '
import json, sys
last = None
for t, job_state, state in json.load(sys.stdin)[0]["history"]:
    if state != last:
        print(state)
    last = state
'
}
