#!/bin/sh
test_description='malformed rsa attributes are refused at submit

Each submission of the catalog is refused by `flux submit` with one line
naming the key, the value and what is accepted.  Afterwards no RSA record
exists under rsa.jobs, no job exists, and nothing ran in the RSA pool; a
well-formed job then goes through.  Permissions are judged as the
submitting user: those cases are submitted as an unprivileged user (root
only).  Text that is not UTF-8 never reaches the validator: job-ingest
refuses the jobspec JSON first, and those cases check its message.
The paths live in a new directory under ${TMPDIR:-/tmp}, not in the trash
directory: the expected messages hold whole paths, and must not depend on
where the tree is checked out.
The same catalog without Flux: t/python/test_bad_input.py.'

. $(dirname $0)/sharness-rsa.sh

test_under_rsa_instance

SUBMITTER=rsa-badin-test
if test "$(id -u)" = 0; then
	id -u $SUBMITTER >/dev/null 2>&1 ||
		useradd --no-create-home --shell /usr/sbin/nologin $SUBMITTER
	id -u $SUBMITTER >/dev/null 2>&1 && test_set_prereq GUEST
fi

# the files the cases name: a short path, wherever this tree lives
T=$(mktemp -d "${TMPDIR:-/tmp}/rsa-badin.XXXXXX") || exit 1
ME=$(id -un)
IN='an absolute path to a directory to stage in'
OUT='an absolute path to a directory to stage out to'
METHOD='"copy", "tar", or the absolute path of an executable script'
DELAY='how long the inputs stay after start: seconds or a duration such as "90s", "5m", "2h", at most "30d"'
SIZE='a RAM-disk size with a unit, such as "512M", "16G" or "2T"; K, M, G, T, P count in powers of 1024'
KNOWN='known keys: data_in, data_out, stage_in, stage_out, delay, capacity, on_late, verify, paths, handoff, fs'
TABLE='(use e.g. --setattr=rsa.data_in=/abs/dir --setattr=rsa.data_out=/abs/dir)'
CAN_READ='(must be an existing directory you can read)'
CAN_WRITE='(must be an existing directory you can write)'
SCRIPT='(must be an executable script you can read)'
LONG=/long/$(head -c 102400 /dev/zero | tr "\0" a)
HUGE_KEY=$(head -c 70000 /dev/zero | tr "\0" k)
# N copies of character C
repeat() {
	head -c $1 /dev/zero | tr "\0" "$2"
}

# the command of a case, kept byte for byte (NUL-separated), run by exec
cat >run-case <<'EOF'
import os, sys
argv = open(sys.argv[1], "rb").read().split(b"\0")[:-1]
os.execvp(argv[0], argv)
EOF

# submit-as USER ARGS...: flux submit ARGS as USER.  The instance owner
# may submit for a user a jobspec signed as that user (sign-type none:
# only the owner may use it, and only the owner can set FLUX_HANDLE_USERID);
# job-ingest then validates it with that user's userid, as for a guest.
cat >submit-as <<'EOF'
#!/bin/sh
uid=$(id -u "$1") && shift &&
flux submit --dry-run "$@" >"$uid.jobspec" &&
flux python -c '
import base64, sys
uid, spec = sys.argv[1], open(sys.argv[2], "rb").read().strip()
head = b"\0".join([b"version", b"i1", b"userid", b"i" + uid.encode(), b"mechanism", b"snone", b""])
print(base64.b64encode(head).decode() + "." + base64.b64encode(spec).decode() + ".none")
' "$uid" "$uid.jobspec" >"$uid.J" &&
FLUX_HANDLE_USERID=$uid flux job submit --flags=signed "$uid.J"
EOF
chmod +x submit-as

# a jobspec file with rsa.data_in set to JSON text $1 (escapes kept)
jobspec_with_data_in() {
	printf '%s' '{"version":1,"resources":[{"type":"slot","count":1,"with":[{"type":"core","count":1}]}],"tasks":[{"command":["true"],"slot":"task","count":{"per_slot":1}}],"attributes":{"system":{"duration":0,"rsa":{"data_in":'"$1"'}}}}'
}

# refused N: case N's command fails, and its one line on stderr, less the
# command's own prefix ("[Errno 22] ", "flux-job: "), is the expected one
refused() {
	test_must_fail flux python run-case case$1.cmd 2>case$1.err &&
	sed -e "s/^\[Errno [0-9]*\] //" -e "s/^flux-job: //" case$1.err >case$1.out &&
	test_cmp case$1.expected case$1.out
}

# bad [PREREQ] NAME -- COMMAND...: a case (expected message on stdin)
n=0
bad() {
	prereq=
	if test "$2" != "--"; then prereq=$1; shift; fi
	name=$1; shift 2
	n=$((n + 1))
	cat >case$n.expected
	printf "%s\0" "$@" >case$n.cmd
	test_expect_success $prereq "refused: $name" "refused $n"
}
submit() {
	bad "$1" -- flux submit "$2" true
}

test_expect_success 'setup: directories, files, scripts, links' '
	rsa_wait_pool 60 &&
	(
		cd "$T" &&
		mkdir -p in/sub out dir private/pub locked/deep &&
		echo data >in/file && echo file >file &&
		printf "#!/bin/sh\nexit 0\n" >noexec.sh && chmod 644 noexec.sh &&
		printf "#!/bin/sh\nexit 0\n" >ownerexec.sh && chmod 744 ownerexec.sh &&
		ln -s in/sub outlink &&
		ln -s private/pub sneaky &&
		chmod 700 private locked &&
		chmod 755 . out
	)
'

# --- the whole table -------------------------------------------------------
submit 'rsa=5' --setattr=rsa=5 <<EOF
rsa: 5 is not a table of settings $TABLE
EOF
submit 'rsa is a list' --setattr=rsa='["/p/in","/p/out"]' <<EOF
rsa: ["/p/in", "/p/out"] is not a table of settings $TABLE
EOF
submit 'rsa is a string' --setattr=rsa=/p/in <<EOF
rsa: '/p/in' is not a table of settings $TABLE
EOF

# --- keys ------------------------------------------------------------------
bad 'unknown key' -- flux submit "--setattr=rsa.data_in=$T/in" --setattr=rsa.speed=fast true <<EOF
rsa.speed: unknown key ($KNOWN)
EOF
submit 'a dotted key becomes a table: rsa.data.in' "--setattr=rsa.data.in=$T/in" <<EOF
rsa.data: unknown key ($KNOWN)
EOF
submit 'a 70 KB unknown key' --setattr=rsa.$HUGE_KEY=1 <<EOF
rsa.'$(repeat 512 k)...$(repeat 512 k)' (70000 characters): unknown key ($KNOWN)
EOF

# --- paths -----------------------------------------------------------------
submit 'relative data_in' --setattr=rsa.data_in=in <<EOF
rsa.data_in: 'in' is not absolute ($IN)
EOF
submit 'relative data_out' --setattr=rsa.data_out=./out <<EOF
rsa.data_out: './out' is not absolute ($OUT)
EOF
submit 'empty data_in' --setattr=rsa.data_in= <<EOF
rsa.data_in: '' is empty ($IN)
EOF
submit 'data_in is a number' --setattr=rsa.data_in=5 <<EOF
rsa.data_in: 5 is not a path ($IN)
EOF
submit 'data_in is a list' --setattr=rsa.data_in='["/a"]' <<EOF
rsa.data_in: ["/a"] is not a path ($IN)
EOF
submit 'data_in with ..' "--setattr=rsa.data_in=$T/in/../out" <<EOF
rsa.data_in: '$T/in/../out' contains '..' ($IN)
EOF
submit 'a 100 KB data_in' "--setattr=rsa.data_in=$LONG" <<EOF
rsa.data_in: '/long/$(repeat 506 a)...$(repeat 512 a)' (102406 characters) is too long: at most 4096 characters ($IN)
EOF
D320=$(repeat 320 d)
submit 'a 330-character data_in with .. is shown whole' "--setattr=rsa.data_in=$T/$D320/../out" <<EOF
rsa.data_in: '$T/$D320/../out' contains '..' ($IN)
EOF
submit 'missing data_in' "--setattr=rsa.data_in=$T/missing" <<EOF
rsa.data_in: $T/missing: No such directory $CAN_READ
EOF
submit 'data_in with a newline, missing' --setattr=rsa.data_in="$T/a
b" <<EOF
rsa.data_in: '$T/a\nb': No such directory $CAN_READ
EOF
submit 'data_in is a file' "--setattr=rsa.data_in=$T/file" <<EOF
rsa.data_in: $T/file: Not a directory $CAN_READ
EOF
submit 'data_out is a file' "--setattr=rsa.data_out=$T/file" <<EOF
rsa.data_out: $T/file: Not a directory $CAN_WRITE
EOF
bad 'missing data_out' -- flux submit "--setattr=rsa.data_in=$T/in" "--setattr=rsa.data_out=$T/missing" true <<EOF
rsa.data_out: $T/missing: No such directory $CAN_WRITE
EOF
bad 'data_out equals data_in' -- flux submit "--setattr=rsa.data_in=$T/in" "--setattr=rsa.data_out=$T/in/" true <<EOF
rsa.data_out: '$T/in' is inside rsa.data_in '$T/in' (stage out to a directory outside the inputs)
EOF
bad 'data_out inside data_in' -- flux submit "--setattr=rsa.data_in=$T/in" "--setattr=rsa.data_out=$T/in/sub" true <<EOF
rsa.data_out: '$T/in/sub' is inside rsa.data_in '$T/in' (stage out to a directory outside the inputs)
EOF
bad 'data_out inside data_in through a link' -- flux submit "--setattr=rsa.data_in=$T/in" "--setattr=rsa.data_out=$T/outlink" true <<EOF
rsa.data_out: $T/outlink is inside rsa.data_in $T/in once links are followed (stage out to a directory outside the inputs)
EOF

# --- permissions, judged as the submitting user ------------------------------
bad GUEST 'data_in the submitter cannot read' -- ./submit-as $SUBMITTER "--setattr=rsa.data_in=$T/private" true <<EOF
rsa.data_in: $T/private: Permission denied (user $SUBMITTER cannot read it) $CAN_READ
EOF
bad GUEST 'data_out the submitter cannot write' -- ./submit-as $SUBMITTER "--setattr=rsa.data_out=$T/out" true <<EOF
rsa.data_out: $T/out: Permission denied (user $SUBMITTER cannot write to it) $CAN_WRITE
EOF
bad GUEST 'data_in below a directory the submitter cannot enter' -- ./submit-as $SUBMITTER "--setattr=rsa.data_in=$T/locked/deep" true <<EOF
rsa.data_in: $T/locked: Permission denied (user $SUBMITTER cannot enter it) $CAN_READ
EOF
bad GUEST 'data_in linked into a directory the submitter cannot enter' -- ./submit-as $SUBMITTER "--setattr=rsa.data_in=$T/sneaky" true <<EOF
rsa.data_in: $T/private: Permission denied (user $SUBMITTER cannot enter it) $CAN_READ
EOF
bad GUEST 'a script only its owner may execute' -- ./submit-as $SUBMITTER "--setattr=rsa.data_in=$T/in" "--setattr=rsa.stage_in=$T/ownerexec.sh" true <<EOF
rsa.stage_in: $T/ownerexec.sh: Permission denied (user $SUBMITTER cannot execute it) $SCRIPT
EOF

# --- stage methods and scripts ---------------------------------------------
bad 'a script that is not executable' -- flux submit "--setattr=rsa.data_out=$T/out" "--setattr=rsa.stage_out=$T/noexec.sh" true <<EOF
rsa.stage_out: $T/noexec.sh: Permission denied (user $ME cannot execute it) $SCRIPT
EOF
bad 'a directory as the script' -- flux submit "--setattr=rsa.data_out=$T/out" "--setattr=rsa.stage_out=$T/dir" true <<EOF
rsa.stage_out: $T/dir: Not a regular file $SCRIPT
EOF
bad 'a missing script' -- flux submit "--setattr=rsa.data_in=$T/in" "--setattr=rsa.stage_in=$T/nope.sh" true <<EOF
rsa.stage_in: $T/nope.sh: No such file $SCRIPT
EOF
bad 'a relative script' -- flux submit "--setattr=rsa.data_in=$T/in" --setattr=rsa.stage_in=stage.sh true <<EOF
rsa.stage_in: 'stage.sh' is neither "copy", "tar" nor an absolute path ($METHOD)
EOF
bad 'stage_out without data_out' -- flux submit "--setattr=rsa.data_in=$T/in" --setattr=rsa.stage_out=tar true <<EOF
rsa.stage_out: 'tar' needs rsa.data_out too (the directory the stage-out works on)
EOF

# --- sizes -----------------------------------------------------------------
capacity() {
	bad "$1" -- flux submit "--setattr=rsa.data_in=$T/in" --setattr=rsa.capacity="$2" true
}
capacity 'negative capacity' -1G <<EOF
rsa.capacity: '-1G' is negative ($SIZE)
EOF
capacity 'capacity without a unit' 16 <<EOF
rsa.capacity: 16 has no unit ($SIZE)
EOF
capacity 'capacity with an unknown unit' 16X <<EOF
rsa.capacity: '16X' is not a size ($SIZE)
EOF
capacity 'zero capacity' 0 <<EOF
rsa.capacity: 0 is not a usable RAM-disk size ($SIZE)
EOF
capacity 'capacity larger than the whole pool' 169M <<EOF
rsa.capacity: '169M' is more than the RSA pool can ever hold (at most 168M: 2 RSA node(s) x 128M, less the headroom of a RAM disk over several nodes)
EOF
capacity 'absurd capacity' 1P <<EOF
rsa.capacity: '1P' is more than the RSA pool can ever hold (at most 168M: 2 RSA node(s) x 128M, less the headroom of a RAM disk over several nodes)
EOF

# --- durations -------------------------------------------------------------
delay() {
	bad "$1" -- flux submit "--setattr=rsa.data_in=$T/in" --setattr=rsa.delay="$2" true
}
delay 'negative delay' -5 <<EOF
rsa.delay: -5 is negative ($DELAY)
EOF
delay 'delay that is no duration' soon <<EOF
rsa.delay: 'soon' is not a duration ($DELAY)
EOF
delay 'delay in years' 10y <<EOF
rsa.delay: '10y' is not a duration ($DELAY)
EOF
delay 'delay of 10 years in seconds' 315360000 <<EOF
rsa.delay: 315360000 is more than 30 days ($DELAY)
EOF
delay 'delay is a boolean' true <<EOF
rsa.delay: true is not a duration ($DELAY)
EOF

# --- choices ---------------------------------------------------------------
submit 'unknown on_late' --setattr=rsa.on_late=never <<EOF
rsa.on_late: 'never' is not allowed ("ignore" to start on data_in, or "wait" to hold the job for its inputs)
EOF
submit 'unknown verify' --setattr=rsa.verify=md5 <<EOF
rsa.verify: 'md5' is not allowed ("size" or "checksum")
EOF
submit 'unknown paths' --setattr=rsa.paths=overlay <<EOF
rsa.paths: 'overlay' is not allowed ("bind" (the job sees the RAM disk at data_in's and data_out's own paths) or "env" (only RSA_DATA_IN and RSA_DATA_OUT point at it))
EOF

# --- what never reaches the validator: job-ingest refuses the JSON ---------
submit 'bytes that are not UTF-8 (flux submit sends them raw)' \
	--setattr=rsa.data_in="$(printf "/tmp/in-\377\376")" <<EOF
jobspec: invalid JSON: unable to decode byte 0xff near '"/tmp/in-'
EOF
submit 'a delay too big for a double (flux submit sends Infinity)' --setattr=rsa.delay=1e400 <<EOF
jobspec: invalid JSON: invalid token near 'Infinity'
EOF
jobspec_with_data_in '"/tmp/\ud800"' >surrogate.json
bad 'a lone surrogate escape in a jobspec file' -- flux job submit surrogate.json <<EOF
jobspec: invalid JSON: invalid Unicode '\uD800' near '"/tmp/\ud800"'
EOF
jobspec_with_data_in '"/tmp/a\u0000b"' >nul.json
bad 'a NUL escape in a jobspec file' -- flux job submit nul.json <<EOF
jobspec: invalid JSON: \u0000 is not allowed without JSON_ALLOW_NUL near '"/tmp/a\u0000b"'
EOF

test_expect_success "the catalog has at least 25 cases (it has $n)" '
	test $n -ge 25
'

# --- and nothing happened --------------------------------------------------
test_expect_success 'no RSA record exists under rsa.jobs' '
	if flux kvs ls rsa.jobs >records 2>err
	then
		test_must_be_empty records
	else
		grep "rsa.jobs: No such file or directory" err
	fi
'
test_expect_success 'no job exists but the RSA pool (launches of it)' '
	flux jobs -a -u all -n -o "{name}" >jobs &&
	grep -x rsa-pool jobs &&
	test_must_fail grep -v -x rsa-pool jobs
'
test_expect_success 'nothing ran in the RSA pool: no holder, no stage job, nothing reserved' '
	rsa_pool flux jobs -a -u all -n -o "{name}" >pool.jobs &&
	test_must_fail grep -v -x -e rsa-sweep -e "rsa-store-.*" pool.jobs &&
	flux rsa pool -o json >pool.json &&
	flux python -c "
import json
nodes = json.load(open(\"pool.json\"))[\"nodes\"]
assert len(nodes) == 2, nodes
assert all(n[\"reserved\"] == 0 and not n[\"holders\"] for n in nodes), nodes
"
'

# --- the control: the same submission done right ----------------------------
test_expect_success 'a well-formed request of the whole pool goes through' '
	id=$(flux submit -N1 "--setattr=rsa.data_in=$T/in" "--setattr=rsa.data_out=$T/out" \
		--setattr=rsa.capacity=168M --setattr=rsa.delay=30d --setattr=rsa.on_late=wait \
		--setattr=rsa.verify=checksum true) &&
	flux job wait-event -t 60 $id clean &&
	flux rsa wait -t 60 $id &&
	flux kvs ls rsa.jobs >records &&
	flux job id --to=dec $id >expected &&
	test_cmp expected records &&
	rsa_pool flux jobs -a -u all -n -o "{name}" >pool.jobs &&
	grep "^rsa-hold-$(cat expected)-" pool.jobs &&
	grep "^rsa-stage-$(cat expected)-" pool.jobs
'
test_expect_success 'remove the test files' '
	chmod -R u+rwx "$T" &&
	rm -rf "$T"
'
test_done
