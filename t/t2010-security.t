#!/bin/sh
test_description='each user sees and acts on their own RSA jobs; staging runs as the job owner

Two unprivileged users, A and B, in an instance that admits guests
([access] allow-guest-user) and lets their jobs use test execution (guest
jobs cannot really run without the IMP; their RSA stage-in and stage-out
still really run as them in the pool).  They act through the instance
owner connection with FLUX_HANDLE_USERID and the guest role
(FLUX_HANDLE_ROLEMASK=0x2), as the guest-access tests of flux-core do; a
job is submitted for a user as a jobspec signed as that user.

B sees none of the jobs of A and cannot retry, release or drop the inputs
of them; B cannot name the directories of A at submit; links and scripts
in the jobs of B cannot make the service read or write the files of A;
only the instance owner stops the pool and drains RSA nodes.'

. $(dirname $0)/sharness-rsa.sh

A=rsa-sec-a
B=rsa-sec-b
if test "$(id -u)" != 0; then
	skip_all="needs root: creates users $A and $B and stages as them"
	test_done
fi
for u in $A $B; do
	id -u $u >/dev/null 2>&1 ||
		useradd --no-create-home --shell /usr/sbin/nologin $u >/dev/null 2>&1
done
if ! id -u $A >/dev/null 2>&1 || ! id -u $B >/dev/null 2>&1; then
	skip_all="cannot create users $A and $B (useradd)"
	test_done
fi

mkdir -p conf &&
cat >conf/access.toml <<'EOF' &&
[access]
allow-guest-user = true
EOF
cat >conf/exec.toml <<'EOF' &&
[exec.testexec]
allow-guests = true
EOF
# a HELD job stays HELD until its owner acts (no automatic retry 5 s later,
# which a slow machine reached between two steps)
cat >conf/rsa.toml <<'EOF'
[rsa]
stage-retries = 0
EOF
test_under_rsa_instance --config "$PWD/conf"

T=$PWD
SECRET="A's secret: B must never see this"

# as USER COMMAND...: COMMAND as USER with the guest role
as() {
	_uid=$(id -u "$1") && shift &&
	FLUX_HANDLE_USERID=$_uid FLUX_HANDLE_ROLEMASK=0x2 "$@"
}
# submit_as USER ARGS...: flux submit ARGS for USER; the job is USER's
submit_as() {
	_uid=$(id -u "$1") && shift &&
	flux submit --dry-run "$@" >"$T/$_uid.jobspec" &&
	flux python -c '
import base64, sys
uid, spec = sys.argv[1], open(sys.argv[2], "rb").read().strip()
head = b"\0".join([b"version", b"i1", b"userid", b"i" + uid.encode(), b"mechanism", b"snone", b""])
print(base64.b64encode(head).decode() + "." + base64.b64encode(spec).decode() + ".none")
' "$_uid" "$T/$_uid.jobspec" >"$T/$_uid.J" &&
	FLUX_HANDLE_USERID=$_uid flux job submit --flags=signed "$T/$_uid.J"
}
# a test-execution job that runs until canceled
RUN=--setattr=system.exec.test.run_duration=600s
# field FIELD JOBID: a field of the job's RSA record (as the owner sees it)
field() {
	flux rsa status -a -o json "$2" | flux python -c "
import json, sys
print(json.load(sys.stdin)[0][\"$1\"])"
}

test_expect_success "setup: A and B, their directories and scripts" '
	rsa_wait_pool 60 &&
	mkdir a-private a-private/inbox a-in a-out b-in b-out b-out2 b-out3 &&
	echo "$SECRET" >a-private/secret.txt &&
	echo "A input" >a-in/a.txt &&
	echo "B input" >b-in/b.txt &&
	ln -s "$T/a-private/secret.txt" b-in/leak &&
	chown -R $A a-private a-in a-out &&
	chmod 700 a-private a-in a-out && chmod 600 a-private/secret.txt &&
	chown -R $B b-in b-out b-out2 b-out3 && chown -h $B b-in/leak &&
	cat >a-stage-out.sh <<-EOF &&
	#!/bin/sh
	if test -e "$T/hold-a"; then echo "held on purpose" >&2; exit 1; fi
	cp -a "\$1/." "\$2/" && id -un >"\$2/staged-by"
	EOF
	cat >b-stage-out.sh <<-EOF &&
	#!/bin/sh
	cp -a "\$1/." "\$2/" && echo "B was here" >"$T/a-private/inbox/pwned"
	EOF
	chmod 755 . a-stage-out.sh b-stage-out.sh
'

# --- A's job, and what B sees of it ----------------------------------------
test_expect_success "A submits an RSA job: it is staged in as A" '
	ja=$(submit_as $A $RUN --setattr=rsa.data_in="$T/a-in" \
		--setattr=rsa.data_out="$T/a-out" --setattr=rsa.stage_out="$T/a-stage-out.sh" \
		--setattr=rsa.on_late=wait true) &&
	rsa_wait_state $ja INUSE_IN 60 &&
	test "$(field userid $ja)" = "$(id -u $A)" &&
	rd_a=$(field ramdisk $ja) &&
	test "$(rsa_on_ramdisk $ja cat "$rd_a/in/a.txt")" = "A input" &&
	test "$(rsa_on_ramdisk $ja stat -c %U "$rd_a/in/a.txt")" = $A
'
test_expect_success "A sees the job in flux rsa status" '
	as $A flux rsa status -n -o "{id}" >a.status &&
	flux job id --to=f58 $ja >expected &&
	test_cmp expected a.status
'
test_expect_success "B sees none of A's jobs" '
	as $B flux rsa status -a -n -o "{id}" >b.status &&
	test_must_be_empty b.status &&
	as $B flux rsa status -a -o json >b.json &&
	echo "[]" >expected &&
	test_cmp expected b.json
'
test_expect_success "flux rsa status A_JOBID as B reveals nothing: as for a job that does not exist" '
	test_must_fail as $B flux rsa status $ja >b.out 2>b.err &&
	test_must_fail as $B flux rsa status -o json $ja >b.json.out 2>b.json.err &&
	cat b.out b.err b.json.out b.json.err >b.all &&
	test_must_fail grep -e a-in -e a-out -e ramdisk -e INUSE -e RUNNING -e "$A" b.all &&
	nojob=$(flux job id --to=f58 $(($(flux job id --to=dec $ja) + 1))) &&
	test_must_fail as $B flux rsa status $nojob >none.out 2>none.err &&
	sed "s/$nojob/JOBID/" none.err >expected &&
	sed "s/$(flux job id --to=f58 $ja)/JOBID/" b.err >actual &&
	test_cmp expected actual &&
	test_cmp none.out b.out &&
	grep "JOBID: no such job (or not yours)" actual
'
test_expect_success "nor can B read A's record in the KVS or A's eventlog" '
	test_must_fail as $B flux kvs get rsa.jobs.$(flux job id --to=dec $ja) 2>kvs.err &&
	grep "Operation not permitted" kvs.err &&
	test_must_fail as $B flux kvs ls rsa.jobs 2>kvsls.err &&
	grep "Operation not permitted" kvsls.err &&
	test_must_fail as $B flux job eventlog $ja
'
test_expect_success "B cannot release A's inputs; A can" '
	test_must_fail as $B flux rsa release-input $ja 2>err &&
	echo "flux-rsa: ERROR: $(flux job id --to=f58 $ja): no RSA record for this job (or not yours)" >expected &&
	test_cmp expected err &&
	test "$(rsa_state $ja)" = INUSE_IN &&
	as $A flux rsa release-input $ja &&
	rsa_wait_state $ja INUSE_OUT 30
'
test_expect_success "A's job ends; its stage-out fails on purpose: HELD" '
	touch hold-a &&
	as $A flux cancel $ja &&
	rsa_wait_state $ja HELD 60 &&
	field error $ja | grep "held on purpose" &&
	rsa_on_ramdisk $ja test -d "$rd_a"
'
test_expect_success "B can neither retry nor release A's HELD job" '
	test_must_fail as $B flux rsa retry $ja 2>retry.err &&
	test_must_fail as $B flux rsa release $ja 2>release.err &&
	echo "flux-rsa: ERROR: $(flux job id --to=f58 $ja): no RSA record for this job (or not yours)" >expected &&
	test_cmp expected retry.err &&
	test_cmp expected release.err &&
	test "$(rsa_state $ja)" = HELD &&
	rsa_on_ramdisk $ja test -d "$rd_a" &&
	test_must_fail as $B flux rsa wait -t 1 $ja 2>wait.err &&
	grep "no RSA record (not an RSA job, or not yours)" wait.err
'
test_expect_success "A can retry: the outputs arrive, staged out as A" '
	rm hold-a &&
	as $A flux rsa retry $ja &&
	as $A flux rsa wait -t 60 $ja &&
	test "$(cat a-out/staged-by)" = $A &&
	test "$(rsa_state $ja)" = DESTROYED &&
	test -z "$(rsa_on_nodes sh -c "test ! -e $rd_a || echo $rd_a")"
'

# --- B names A's directories ------------------------------------------------
refused_for_b() {
	test_must_fail submit_as $B $RUN "$@" true 2>err &&
	sed -e "s/^flux-job: //" err >actual &&
	test_cmp expected actual
}
test_expect_success "B's submit naming A's data_in is refused" '
	echo "rsa.data_in: $T/a-in: Permission denied (user $B cannot read it) (must be an existing directory you can read)" >expected &&
	refused_for_b --setattr=rsa.data_in="$T/a-in"
'
test_expect_success "B's submit naming A's data_out is refused" '
	echo "rsa.data_out: $T/a-out: Permission denied (user $B cannot write to it) (must be an existing directory you can write)" >expected &&
	refused_for_b --setattr=rsa.data_out="$T/a-out"
'
test_expect_success "B's data_in linked into A's private directory is refused there" '
	ln -s "$T/a-private/inbox" b-sneaky &&
	echo "rsa.data_in: $T/a-private: Permission denied (user $B cannot enter it) (must be an existing directory you can read)" >expected &&
	refused_for_b --setattr=rsa.data_in="$T/b-sneaky"
'

# --- links and scripts in B's own jobs --------------------------------------
test_expect_success "a link in B's data_in to A's file arrives as a link, never with A's content" '
	jb=$(submit_as $B $RUN --setattr=rsa.data_in="$T/b-in" \
		--setattr=rsa.data_out="$T/b-out" --setattr=rsa.on_late=wait true) &&
	rsa_wait_state $jb INUSE_IN 60 &&
	rd_b=$(field ramdisk $jb) &&
	test "$(rsa_on_ramdisk $jb cat "$rd_b/in/b.txt")" = "B input" &&
	rsa_on_ramdisk $jb test -L "$rd_b/in/leak" &&
	test "$(rsa_on_ramdisk $jb readlink "$rd_b/in/leak")" = "$T/a-private/secret.txt" &&
	test_must_fail rsa_on_ramdisk $jb grep -r -F "$SECRET" "$rd_b/in" "$rd_b/out"
'
test_expect_success "a link B's job leaves in its outputs reaches data_out as a link" '
	rsa_on_ramdisk $jb ln -s "$T/a-private/secret.txt" "$rd_b/out/leak2" &&
	rsa_on_ramdisk $jb chown -h $B "$rd_b/out/leak2" &&
	as $B flux cancel $jb &&
	as $B flux rsa wait -t 60 $jb &&
	test -L b-out/leak2 &&
	test "$(readlink b-out/leak2)" = "$T/a-private/secret.txt" &&
	test_must_fail grep -r -F "$SECRET" b-out &&
	test "$(cat a-private/secret.txt)" = "$SECRET"
'
test_expect_success "B's stage-out script cannot write into A's directory: HELD, RAM disk kept, path named" '
	jb2=$(submit_as $B $RUN --setattr=rsa.data_in="$T/b-in" \
		--setattr=rsa.data_out="$T/b-out2" --setattr=rsa.stage_out="$T/b-stage-out.sh" \
		--setattr=rsa.on_late=wait true) &&
	rsa_wait_state $jb2 INUSE_IN 60 &&
	rd_b2=$(field ramdisk $jb2) &&
	as $B flux cancel $jb2 &&
	rsa_wait_state $jb2 HELD 60 &&
	test ! -e a-private/inbox/pwned &&
	rsa_on_ramdisk $jb2 test -d "$rd_b2" &&
	field error $jb2 >error &&
	cat error &&
	grep -F "$T/a-private/inbox/pwned: Permission denied" error
'
test_expect_success "B releases its own HELD job: the RAM disk goes" '
	as $B flux rsa release $jb2 &&
	rsa_wait_state $jb2 DESTROYED 30 &&
	test -z "$(rsa_on_nodes sh -c "test ! -e $rd_b2 || echo $rd_b2")" &&
	test ! -e a-private/inbox/pwned
'
test_expect_success "B's data_out swapped for a link into A's directory after submit is not followed" '
	jb3=$(submit_as $B $RUN --setattr=rsa.data_in="$T/b-in" \
		--setattr=rsa.data_out="$T/b-out3" --setattr=rsa.on_late=wait true) &&
	rsa_wait_state $jb3 INUSE_IN 60 &&
	rsa_on_ramdisk $jb3 sh -c "echo \"B output\" >$(field ramdisk $jb3)/out/b-result" &&
	rmdir b-out3 && ln -s "$T/a-private/inbox" b-out3 && chown -h $B b-out3 &&
	as $B flux cancel $jb3 &&
	rsa_wait_state $jb3 HELD 60 &&
	field error $jb3 >error &&
	cat error &&
	grep -F "$T/b-out3: Not a directory" error &&
	ls -A a-private/inbox >inbox &&
	test_must_be_empty inbox
'
test_expect_success "B puts the directory back and retries: the outputs arrive" '
	rm b-out3 && mkdir b-out3 && chown $B b-out3 &&
	as $B flux rsa retry $jb3 &&
	as $B flux rsa wait -t 60 $jb3 &&
	test "$(cat b-out3/b-result)" = "B output" &&
	test "$(stat -c %U b-out3/b-result)" = $B
'

# --- the pool and the RSA nodes are the instance owner's ---------------------
test_expect_success "flux rsa pool --shutdown as a guest is refused; the pool runs on" '
	test_must_fail as $B flux rsa pool --shutdown 2>err &&
	echo "flux-rsa: pool --shutdown: only the instance owner can stop the RSA pool" >expected &&
	test_cmp expected err &&
	flux rsa pool -n >pool &&
	test $(wc -l <pool) -eq 2 &&
	rsa_pool flux jobs -n -o "{name}" -f running >/dev/null
'
# pool_shows PATTERN / pool_lacks PATTERN: flux rsa pool shows PATTERN
# (does not), within 10s
pool_has() {
	flux rsa pool -n >pool && grep -q "$1" pool
}
pool_has_not() {
	flux rsa pool -n >pool && ! grep -q "$1" pool
}
pool_shows() {
	rsa_wait_for 10 "flux rsa pool showing /$1/" pool_has "$1" || { cat pool; false; }
}
pool_lacks() {
	rsa_wait_for 10 "flux rsa pool without /$1/" pool_has_not "$1" || { cat pool; false; }
}
test_expect_success "only the instance owner can drain or undrain RSA nodes" '
	echo "flux-rsa: only the instance owner can drain or undrain RSA nodes" >expected &&
	test_must_fail as $B flux rsa drain rsa0 B wants it 2>err &&
	test_cmp expected err &&
	flux rsa pool -n >pool &&
	test_must_fail grep drained pool &&
	flux rsa drain rsa0 maintenance &&
	pool_shows "^rsa0 .* drained" &&
	test_must_fail as $B flux rsa undrain rsa0 2>err &&
	test_cmp expected err &&
	flux rsa pool -n >pool &&
	grep "^rsa0 .* drained" pool &&
	flux rsa undrain rsa0 &&
	pool_lacks drained
'
test_done
