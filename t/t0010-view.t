#!/bin/sh
test_description='the job shell'"'"'s view: what it mounts, where, and what it refuses

t/view-check makes the view exactly as the job shell plugin does
(src/shell/view.c), on a tmpfs "RAM disk" in /dev/shm with its marker,
then runs a command in it as a task would.  It mounts only the areas of
this job'"'"'s RAM disk, only over the job'"'"'s own data_in and data_out,
and says why when it will not.  No Flux needed; root (for the other uid).'

. $(dirname $0)/sharness-rsa.sh

VIEW="$RSA_BUILDDIR/t/view-check"
if test "$(id -u)" -ne 0; then
	skip_all="needs root (a second user, the RAM disk's owner)"
	test_done
fi
if ! test -x "$VIEW"; then
	skip_all="t/view-check not built (make check builds it)"
	test_done
fi
command -v setpriv >/dev/null && command -v unshare >/dev/null && test_set_prereq UTIL_LINUX

RD=/dev/shm/rsa-t0010.$$
NOBODY=$(id -u nobody)
# ramdisk OWNER [JOBID [MOUNTED]]: a fresh RAM disk of job JOBID (42)
ramdisk() {
	rm -rf "$RD" && mkdir -p "$RD/rd/in/sub" "$RD/rd/out" && chmod 755 "$RD" "$RD/rd" &&
	echo staged >"$RD/rd/in/f" &&
	printf "{\"name\": \"%s.1\", \"jobid\": %s, \"owner\": %s, \"mounted\": %s}\n" \
		${2:-42} ${2:-42} $1 ${3:-true} >"$RD/rd/.rsa-ramdisk" &&
	chown -R $1 "$RD/rd/in" "$RD/rd/out" && chmod 700 "$RD/rd/in" "$RD/rd/out"
}
# view ARGS...: view-check for job 42 on $RD/rd, showing in/ and out/ over pin and pout
view() {
	"$VIEW" 42 "$RD/rd" "$RD/rd/in" "$RD/rd/out" "$PWD/pin" "$PWD/pout" "$@"
}

test_expect_success 'setup: the job'"'"'s own directories on persistent storage' '
	mkdir pin pout && echo persistent >pin/f &&
	chmod 750 pin && touch -d "2011-11-11 11:11:11" pin
'
test_expect_success 'as root: a plain namespace; the paths show the RAM disk, only inside' '
	ramdisk 0 &&
	view sh -c "cat pin/f; echo written >pout/w; findmnt -n -o FSTYPE --mountpoint \"$PWD/pin\";
		stat -c \"%a %Y\" pin" >out &&
	cat out &&
	printf "view: plain\nstaged\ntmpfs\n750 %s\n" $(stat -c %Y pin) >expect &&
	test_cmp expect out &&
	test "$(cat "$RD/rd/out/w")" = written && ! test -e pout/w &&
	test "$(cat pin/f)" = persistent &&
	! findmnt -n --mountpoint "$PWD/pin" && ! findmnt -n --mountpoint "$PWD/pout"
'
test_expect_success 'as another user: a user namespace mapping only that user' '
	ramdisk $NOBODY && chown nobody pin pout pin/f && chmod 755 . &&
	runuser -u nobody -- "$VIEW" 42 "$RD/rd" "$RD/rd/in" "$RD/rd/out" "$PWD/pin" "$PWD/pout" \
		sh -c "cat pin/f; echo written >pout/w; tr -s \" \" <\"/proc/self/uid_map\"" >out &&
	printf "view: user\nstaged\n %s %s 1\n" $NOBODY $NOBODY >expect &&
	test_cmp expect out &&
	test "$(cat "$RD/rd/out/w")" = written && ! test -e pout/w &&
	chown -R root pin pout
'
test_expect_success 'data_in with an ACL: its top shows only the owner bits (mode bits do not say all)' '
	ramdisk 0 && chmod 755 pin &&
	py=${PYTHON:-python3} &&
	$py -c "
import os, struct, sys
# user::rwx user:nobody:--- group::r-x mask::r-x other::r-x
entries = [(1, 7, 0xffffffff), (2, 0, int(sys.argv[2])), (4, 5, 0xffffffff),
           (0x10, 5, 0xffffffff), (0x20, 5, 0xffffffff)]
acl = struct.pack(\"<I\", 2) + b\"\".join(struct.pack(\"<HHI\", *e) for e in entries)
os.setxattr(sys.argv[1], \"system.posix_acl_access\", acl)
" pin $NOBODY &&
	view stat -c %a pin >out &&
	grep "^top: mode 0700, not 0755 (a directory above it is closed to others, or has an ACL)" out &&
	grep -x 700 out &&
	$py -c "import os, sys; os.removexattr(sys.argv[1], \"system.posix_acl_access\")" pin &&
	chmod 750 pin
'
test_expect_success 'the RAM disk of another job is refused' '
	ramdisk 0 43 &&
	test_must_fail view true >out &&
	grep "refused: the RAM disk $RD/rd is not this job.s (its marker names another job)" out
'
test_expect_success 'a RAM disk of another user is refused' '
	ramdisk $NOBODY &&
	test_must_fail view true >out &&
	grep "refused: the RAM disk $RD/rd does not belong to uid 0" out
'
test_expect_success 'the directory a RAM disk is not mounted on is refused' '
	ramdisk 0 42 false &&
	test_must_fail view true >out &&
	grep "refused: $RD/rd is not the RAM disk, only the directory it is mounted on" out
'
test_expect_success 'an area replaced by a symbolic link is not followed' '
	ramdisk 0 && mkdir "$RD/elsewhere" && rm -r "$RD/rd/in" && ln -s "$RD/elsewhere" "$RD/rd/in" &&
	test_must_fail view true >out &&
	grep "refused: the RAM disk.s in area $RD/rd/in is a symbolic link (not followed)" out
'
test_expect_success 'a source that is not an area of the RAM disk is refused' '
	ramdisk 0 &&
	test_must_fail "$VIEW" 42 "$RD/rd" /etc - "$PWD/pin" "$PWD/pout" true >out &&
	grep "refused: /etc is not the in area of the RAM disk $RD/rd" out
'
test_expect_success 'an area of another user is refused' '
	ramdisk 0 && chmod 755 "$RD/rd/in" "$RD/rd/out" &&
	printf "{\"name\": \"42.1\", \"jobid\": 42, \"owner\": %s, \"mounted\": true}\n" $NOBODY \
		>"$RD/rd/.rsa-ramdisk" &&
	test_must_fail runuser -u nobody -- "$VIEW" 42 "$RD/rd" "$RD/rd/in" - "$PWD/pin" "$PWD/pout" true >out &&
	grep "refused: the RAM disk.s in area $RD/rd/in is not a directory of uid $NOBODY on the RAM disk" out
'
test_expect_success 'a data_in that is not there is refused; so is one on the RAM disk itself' '
	ramdisk 0 &&
	test_must_fail "$VIEW" 42 "$RD/rd" "$RD/rd/in" - "$PWD/nothere" "$PWD/pout" true >out &&
	grep "refused: rsa.data_in $PWD/nothere: No such file or directory" out &&
	test_must_fail "$VIEW" 42 "$RD/rd" "$RD/rd/in" - "$RD/rd/in/sub" "$PWD/pout" true >out &&
	grep "refused: rsa.data_in $RD/rd/in/sub is on the RAM disk itself" out
'
test_expect_success UTIL_LINUX 'where no user namespace may be made, the reason names the sysctl' '
	ramdisk 0 &&
	unshare --user --map-root-user sh -c "echo 0 >/proc/sys/user/max_user_namespaces &&
		exec setpriv --inh-caps=-all --bounding-set=-all \"\$@\"" limited \
		"$VIEW" 42 "$RD/rd" "$RD/rd/in" "$RD/rd/out" "$PWD/pin" "$PWD/pout" true >out ||
	true &&
	cat out &&
	grep "refused: a user namespace cannot be made: none are left (sysctl user.max_user_namespaces is 0; the site must raise it)" out
'
test_expect_success 'nothing is left mounted; the test RAM disk goes' '
	! findmnt -n --mountpoint "$PWD/pin" && ! findmnt -n --mountpoint "$PWD/pout" &&
	rm -rf "$RD"
'
test_done
