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
	quiet=
	test "$verbose" = t || quiet=--quiet
	exec "$RSA_BUILDDIR/t/rsa-instance" "$@" -- \
		sh "$RSA_TEST_FILE" $quiet ${verbose:+--verbose} ${debug:+--debug} \
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
			echo "job $1 is $(rsa_state "$1"), not $2, after ${3:-30}s" >&2
			return 1
		fi
		sleep 0.1
	done
}
