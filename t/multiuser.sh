# multiuser.sh: a real multi-user Flux instance for a sharness test run by
# root, as a site runs its system instance: the brokers run as an
# unprivileged user, other users submit munge-signed jobs that run as
# themselves through a setuid flux-imp, and flux-rsa does what needs root
# through `flux-imp run rsa`.
#
#   . $(dirname $0)/sharness-rsa.sh
#   . "$RSA_SRCDIR/t/multiuser.sh"
#   mu_require            # skip_all, saying why, when this machine cannot
#   mu_setup              # test users, munge, the IMP's config, the entry point
#   mu_start [rsa-instance options]   # the instance, in the background
#   mu_as USER CMD...     # CMD as USER, talking to the instance
#   mu_stop               # end the instance
#
# Everything mu_setup adds to the machine (users, the IMP config file, a
# munged it started) is removed when the test script exits, pass or fail;
# what was there before is never touched.

MU_FLUX=rsa-t-flux      # the instance owner (the site's "flux" user)
MU_A=rsa-t-alice        # two users with jobs
MU_B=rsa-t-bob
FLUX=${FLUX:-$(sed -n 's/^FLUX="\${FLUX:-\(.*\)}"$/\1/p' "$RSA_BUILDDIR/t/rsa-instance" 2>/dev/null)}
MU_FLUXPY="$FLUX python"
MU_LIBEXEC=$($MU_FLUXPY -c 'from flux.conf_builtin import conf_builtin_get as g; print(g("libexecdir"))' 2>/dev/null)
MU_CONFDIR=$($MU_FLUXPY -c 'from flux.conf_builtin import conf_builtin_get as g; print(g("confdir"))' 2>/dev/null)
MU_IMP="$MU_LIBEXEC/flux-imp"
MU_IMPCONF="$MU_CONFDIR/imp/conf.d/rsa-t-multiuser.toml"
MU_ADDED=""             # what to remove at exit, one word each
# root talks to the instance as its owner, with this tree's flux rsa
export PATH="$(dirname "$FLUX"):$PATH"
export FLUX_EXEC_PATH_PREPEND="$RSA_SRCDIR/src/cmd"
export PYTHONPATH="$RSA_SRCDIR/src/python${PYTHONPATH:+:$PYTHONPATH}"

mu_require() {
	_why=
	if test "$(id -u)" -ne 0; then
		_why="needs root (test users, munge, the IMP's config)"
	elif test -z "$MU_LIBEXEC" || ! test -x "$MU_IMP"; then
		_why="no flux-imp at '$MU_IMP' (build flux-security, configure flux-core --with-flux-security)"
	elif test "$(stat -c %u%A "$MU_IMP" | cut -c1,5)" != 0s; then
		_why="$MU_IMP is not setuid root (chmod 4755 it)"
	elif ! command -v munged >/dev/null || ! command -v munge >/dev/null; then
		_why="munge is not installed (Debian: munge)"
	elif ! command -v useradd >/dev/null || ! command -v runuser >/dev/null; then
		_why="useradd or runuser is missing (Debian: passwd, util-linux)"
	elif test -e "$MU_IMPCONF"; then
		_why="$MU_IMPCONF exists: not clobbering a file this test did not create"
	fi
	if test -n "$_why"; then
		skip_all="multi-user instance: $_why"
		test_done
	fi
}

mu_cleanup() {
	mu_stop
	for _what in $MU_ADDED; do
		case $_what in
		user:*) pkill -KILL -u "${_what#user:}"; sleep 0.5; userdel "${_what#user:}" ;;
		munged) pkill -u munge -x munged ;;
		file:*) rm -f "${_what#file:}" ;;
		dir:*) rm -rf "${_what#dir:}" ;;
		esac
	done
	MU_ADDED=""
}
trap 'mu_rc=$?; mu_cleanup; (exit $mu_rc); die' EXIT
trap 'exit 1' INT TERM HUP

mu_add_user() {
	if ! id "$1" >/dev/null 2>&1; then
		useradd --system --no-create-home --shell /bin/sh "$1" || return 1
		MU_ADDED="$MU_ADDED user:$1"
	fi
}

# munge signs the users' jobs: start Debian's munged if none runs
mu_munge() {
	munge -n </dev/null | unmunge >/dev/null 2>&1 && return 0
	mkdir -p /run/munge && chown munge:munge /run/munge && chmod 755 /run/munge &&
	runuser -u munge -- munged &&
	MU_ADDED="$MU_ADDED munged" &&
	munge -n </dev/null | unmunge >/dev/null
}

# the entry point as a site installs it (root-owned, in a root-owned
# directory), reading its [rsa] table from $1, flux_rsa from this tree and
# flux (its flux-security bindings) from flux-core's Python directory
mu_entry_point() {
	_dir=$(mktemp -d /tmp/rsa-t-imp.XXXXXX) && chmod 755 "$_dir" &&
	MU_ADDED="$MU_ADDED dir:$_dir" &&
	MU_ENTRY="$_dir/rsa-imp-run" &&
	_fluxpy=$($MU_FLUXPY -c "import flux, os; print(os.path.dirname(list(flux.__path__).pop()))") &&
	sed -e "s|@PYTHON@|${PYTHON:-/usr/bin/python3}|" \
	    -e "s|@fluxpylibdir@|$RSA_SRCDIR/src/python:$_fluxpy|" \
	    -e "s|@rsaconfdir@|$1|" \
	    "$RSA_SRCDIR/src/libexec/rsa-imp-run.in" >"$MU_ENTRY" &&
	chmod 755 "$MU_ENTRY"
}

# mu_setup CONFDIR: users, munge, the entry point (trusting CONFDIR, the
# instance's root-owned configuration) and the IMP's config
mu_setup() {
	mu_add_user $MU_FLUX && mu_add_user $MU_A && mu_add_user $MU_B &&
	mu_munge &&
	mu_entry_point "$1" &&
	mkdir -p "$(dirname "$MU_IMPCONF")" &&
	cat >"$MU_IMPCONF" <<-EOF &&
	[exec]
	allowed-users = [ "$MU_FLUX" ]
	allowed-shells = [ "$MU_LIBEXEC/flux-shell" ]

	[run.rsa]
	allowed-users = [ "$MU_FLUX" ]
	allowed-environment = [ "RSA_*" ]
	path = "$MU_ENTRY"
	EOF
	MU_ADDED="$MU_ADDED file:$MU_IMPCONF" &&
	chmod 644 "$MU_IMPCONF"
}

# the instance, its brokers run by $MU_FLUX; FLUX_URI is exported
mu_start() {
	MU_RUN="$PWD/mu-run"
	mkdir -p "$MU_RUN" && chown $MU_FLUX "$MU_RUN" && rm -f "$MU_RUN"/* || return 1
	"$RSA_BUILDDIR/t/rsa-instance" --user $MU_FLUX "$@" -- sh -c '
		echo "$RSA_INSTANCE_NODES" >"$1/nodes"
		echo "$FLUX_URI" >"$1/uri.new" && mv "$1/uri.new" "$1/uri"
		while ! test -e "$1/stop"; do sleep 0.2; done' mu "$MU_RUN" \
		>"$PWD/mu-instance.log" 2>&1 &
	MU_PID=$!
	_i=0
	while ! test -s "$MU_RUN/uri"; do
		_i=$((_i + 1))
		if test $_i -gt 300 || ! kill -0 $MU_PID 2>/dev/null; then
			cat "$PWD/mu-instance.log" >&2
			return 1
		fi
		sleep 0.2
	done
	FLUX_URI=$(cat "$MU_RUN/uri") && export FLUX_URI &&
	# its nodes, where the tests look as an admin would (rsa_on_node)
	RSA_INSTANCE_NODES=$(cat "$MU_RUN/nodes") && export RSA_INSTANCE_NODES
}

mu_stop() {
	test -n "$MU_PID" || return 0
	touch "$MU_RUN/stop"
	wait $MU_PID
	_rc=$?
	MU_PID=
	return $_rc
}

# CMD as USER, with this tree's flux rsa, talking to the instance
mu_as() {
	_user=$1; shift
	(cd / && runuser -u "$_user" -- env FLUX_URI="$FLUX_URI" \
		PATH="$(dirname "$FLUX"):/usr/bin:/bin" \
		FLUX_EXEC_PATH_PREPEND="$RSA_SRCDIR/src/cmd" \
		PYTHONPATH="$RSA_SRCDIR/src/python" "$@")
}

# mu_user_dir USER DIR [MODE]: DIR (made if missing) belongs to USER, mode MODE (755)
mu_user_dir() {
	mkdir -p "$2" && chown "$1:" "$2" && chmod ${3:-755} "$2"
}
