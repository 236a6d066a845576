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

. "$RSA_SRCDIR/t/rsa-wait.sh"

# rsa_in_state JOB STATE: the job is in rsa-state STATE now
rsa_in_state() {
	test "$(rsa_state "$1")" = "$2"
}

# rsa_went_through JOB STATE: the job's record has been in STATE
rsa_went_through() {
	rsa_history "$1" | grep -qx "$2"
}

# rsa_wait_state JOB STATE [SECONDS, default 30]: wait until job JOB is in
# rsa-state STATE.  While a job is active the service mirrors each of its
# states into its eventlog (rsa-state): flux job wait-event waits for it;
# then (and for states after the job ended) the record says.
rsa_wait_state() {
	flux job wait-event -q -t ${3:-30} -m state="$2" "$1" rsa-state 2>/dev/null
	rsa_wait_for ${3:-30} "job $1 in rsa-state $2" rsa_in_state "$1" "$2" ||
	{ echo "job $1 is $(rsa_state "$1"); its record:" >&2
	  flux rsa status -a -o json "$1" >&2; return 1; }
}

# rsa_wait_through JOB STATE [SECONDS, default 30]: wait until job JOB has
# been in rsa-state STATE, even for a moment (its eventlog, its record's
# history): a short state is not missed
rsa_wait_through() {
	flux job wait-event -q -t ${3:-30} -m state="$2" "$1" rsa-state 2>/dev/null ||
	rsa_wait_for ${3:-30} "job $1 through rsa-state $2" rsa_went_through "$1" "$2" ||
	{ flux rsa status -a -o json "$1" >&2; return 1; }
}

# on-deck passes the service has made (its queue reads)
rsa_passes() {
	flux rsa stats | flux python -c "
import json, sys
print(json.load(sys.stdin)[\"queue_read_ms\"][\"count\"])"
}
_rsa_passes_above() {
	test "$(rsa_passes)" -gt "$1"
}
# ask the service for an on-deck pass (what a job leaving the queue does)
rsa_poke() {
	flux python -c "
import flux
from flux.constants import FLUX_RPC_NORESPONSE
flux.Flux().rpc(\"rsa.queue-moved\", flags=FLUX_RPC_NORESPONSE)"
}

# rsa_settled [SECONDS, default 30]: wait until the service has made two
# on-deck passes that began after now (the first may have read the queue
# before): what a pass would do for what happened until now is done.  For
# checks that something did NOT happen (a job left off the deck, not
# placed): settle, then look.
rsa_settled() {
	_st_n=$(rsa_passes) &&
	rsa_poke &&
	rsa_wait_for ${1:-30} "an on-deck pass" _rsa_passes_above $_st_n &&
	_st_n=$(rsa_passes) &&
	rsa_poke &&
	rsa_wait_for ${1:-30} "a second on-deck pass" _rsa_passes_above $_st_n
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
print(\"\" if v is None else \",\".join(map(str, v)) if isinstance(v, list) else v)"
}

# rsa_on_node RANK COMMAND...: COMMAND as root on node RANK of the test
# instance, entering its namespaces as an admin logs into a host (also a
# node whose broker is lost); here when the nodes share this machine's
# mount table
rsa_on_node() {
	_on_rank=$1
	shift
	if test -n "$RSA_INSTANCE_NODES"; then
		"$RSA_SRCDIR"/t/rsa-nodes exec "$RSA_INSTANCE_NODES" "$_on_rank" "$@"
	else
		"$@"
	fi
}

# rsa_on_nodes COMMAND...: COMMAND on every node (its output, sorted, once)
rsa_on_nodes() {
	_on_n=$(flux getattr size) &&
	_on_r=0 &&
	while test $_on_r -lt $_on_n; do
		rsa_on_node $_on_r "$@" || return 1
		_on_r=$((_on_r + 1))
	done | sort -u
}

# rsa_on_ramdisk JOB COMMAND...: COMMAND where job JOB's RAM disk is (its
# first RSA node): nodes share no mount table, so the RAM disk's path means
# something there only.  A RAM disk that is an image is read where it is
# mounted: on the compute node that holds it now (the one writer; its path
# there given for the RSA node's in COMMAND), else on its RSA node, where
# every image nobody writes is mounted read-only for COMMAND alone
# (flux_rsa.ramdisk look)
rsa_on_ramdisk() {
	_or_where=$(flux rsa status -a -o json "$1" | flux python -c "
import json, sys
r = json.load(sys.stdin)[0]
image = (r.get(\"volume\") or {}).get(\"image\")
where = \"compute\" if image and r.get(\"mount\") == \"attached\" else \"image\" if image else \"rsa\"
print(where, (r.get(\"nodes\") or [\"-\"])[0], (r.get(\"ranks\") or [\"-\"])[0],
      r.get(\"ramdisk\") or \"-\", r.get(\"mount_path\") or \"-\", sep=\"\\n\")
") &&
	shift &&
	# (a line each: the paths may hold spaces)
	_or_kind=$(echo "$_or_where" | sed -n 1p) && _or_node=$(echo "$_or_where" | sed -n 2p) &&
	_or_rank=$(echo "$_or_where" | sed -n 3p) && _or_path=$(echo "$_or_where" | sed -n 4p) &&
	_or_mount=$(echo "$_or_where" | sed -n 5p) &&
	test "$_or_node" != - &&
	case $_or_kind in
	compute)
		rsa_on_node "$_or_rank" /usr/bin/python3 -c "
import os, sys
old, new = sys.argv[1:3]
argv = [a.replace(old, new) for a in sys.argv[3:]]
os.execvp(argv[0], argv)" "$_or_path" "$_or_mount" "$@" ;;
	image)
		rsa_on_node "$(flux hostlist -F "$_or_node" instance)" \
			env PYTHONPATH="$RSA_SRCDIR/src/python" /usr/bin/python3 -m flux_rsa.ramdisk \
			look "${_or_path%/*}" -- "$@" 2>/dev/null ;;
	*)
		rsa_on_node "$(flux hostlist -F "$_or_node" instance)" "$@" ;;
	esac
}

# rsa_job_fstype JOB: the file system job JOB's RAM disk is, as its compute
# nodes see it: ext4 (an image), fuse.glusterfs (served) or tmpfs (seen
# where the site shows it: [rsa] attach = "site")
rsa_job_fstype() {
	if test "$(rsa_field image "$1")" = True; then
		echo ext4
	elif test "$(flux config get rsa.attach 2>/dev/null)" = '"site"'; then
		echo tmpfs
	else
		echo fuse.glusterfs
	fi
}

# rsa_same_tree_on JOB A B: as rsa_same_tree, on job JOB's RSA node
rsa_same_tree_on() {
	rsa_on_ramdisk "$1" rsync -n -a -i --checksum "$2/" "$3/" | grep -v " \./\$" >tree.diff
	test_must_be_empty tree.diff
}

# rsa_at_rest JOB [SECONDS, default 120]: wait until the job has ended
# (its clean event) and its record is at rest
_rsa_rests() {
	case "$(flux rsa status -a -n -o "{job_state}/{rsa_state}" $1)" in
	FINISHED/DESTROYED|CANCELED/DESTROYED|FINISHED/INITIAL|CANCELED/INITIAL) return 0 ;;
	esac
	return 1
}
rsa_at_rest() {
	flux job wait-event -q -t ${2:-120} "$1" clean &&
	rsa_wait_for ${2:-120} "job $1 at rest" _rsa_rests "$1" ||
	{ echo "job $1 stuck in $(flux rsa status -a -n -o "{job_state}/{rsa_state}" $1)" >&2
	  return 1; }
}

# a job holding both compute nodes, once it runs (prints its id):
# blocker=$(rsa_hold_compute), so that the jobs submitted next pend
rsa_hold_compute() {
	_hc_id=$(flux submit -N2 sleep inf) &&
	flux job wait-event -t 30 "$_hc_id" start >/dev/null &&
	echo "$_hc_id"
}

# no record of an active job is left (those left are listed in ./remaining)
rsa_none_active() {
	flux rsa status -n -o "{id.f58} {job_state} {rsa_state} {note}" >remaining &&
	! test -s remaining
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
# disks attached under its mount root, anything mounted under either, on
# every node, images still in an RSA node's store, and loop devices over
# an image.  The pool's image stores and the compute nodes' clients of
# them are the pool's own, there for as long as it runs: not listed.
rsa_ramdisks() {
	rsa_on_nodes sh -c '
		find "$1/ramdisk" "$1/mnt" -mindepth 1 -maxdepth 1 -name "*.*" \
			! -name ".store-*" ! -name ".stores" 2>/dev/null
		find "$1"/ramdisk/.store-*/images -mindepth 1 -maxdepth 1 -name "*.img*" 2>/dev/null
		findmnt -n -l -o TARGET | grep -F -e "$1/ramdisk/" -e "$1/mnt/" |
			grep -v -e "/\.store-[^/]*\$" -e "/\.stores/[^/]*\$"
		cat /sys/block/loop*/loop/backing_file 2>/dev/null | grep -F "$1/"
		true' rsa-ramdisks "$RSA_INSTANCE_TMP"
}

# rsa_job_ramdisk PATH [AREA]: PATH is a RAM disk (or its AREA, in or out)
# as a job is given it: where its compute nodes attach it (under the mount
# root), or where the site shows it (under the RAM-disk root)
rsa_job_ramdisk() {
	case "$1" in
	"$RSA_INSTANCE_TMP"/mnt/*.*|"$RSA_INSTANCE_TMP"/ramdisk/*.*) ;;
	*) echo "$1 is not a RAM disk as jobs see it" >&2; return 1 ;;
	esac
	test -z "$2" || test "${1##*/}" = "$2"
}

# RAM disks attached where jobs run (mounts under the test mount root), on
# every node; not the compute nodes' clients of the image stores (the pool's)
rsa_attached() {
	rsa_on_nodes sh -c 'findmnt -n -l -o TARGET | grep -F "$1/mnt/" |
		grep -v -F "$1/mnt/.stores/" || true' rsa-attached "$RSA_INSTANCE_TMP"
}

# wait until file $1 has something in it (at most 60 s): a job's shell
# creates the file of a redirection before the command writes to it
rsa_wait_file() {
	rsa_wait_for 60 "something in $1" test -s "$1"
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

# rsa_crash_node RANK: node RANK goes down as a host does (rsa-nodes crash:
# every process in it killed, what it mounted let go without writing back)
rsa_crash_node() {
	"$RSA_SRCDIR"/t/rsa-nodes crash "$RSA_INSTANCE_NODES" "$1"
}

# rsa_crash_rank RANK: the broker of RANK and everything under it die at
# once (kill -9), as when its node is lost (an instance started with
# --survive-lost-nodes goes on)
rsa_crash_rank() {
	_cr_pid=$(flux exec -r $1 flux getattr broker.pid) &&
	ps -e -o pid=,ppid= >procs &&
	_cr_all=$_cr_pid && _cr_new=$_cr_pid &&
	while test -n "$_cr_new"; do
		_cr_new=$(awk -v p=" $_cr_new " "index(p, \" \" \$2 \" \") {print \$1}" procs | tr "\n" " ") &&
		_cr_all="$_cr_all $_cr_new"
	done &&
	kill -9 $_cr_all 2>/dev/null
	true
}
