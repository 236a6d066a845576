# rsa-wait.sh - the one way tests wait (sourced by sharness-rsa.sh, and by
# scripts that tests run inside an instance without sharness).
#
# rsa_wait_for SECONDS WHAT COMMAND...: wait until COMMAND succeeds (tried
# every 0.1 s, at most SECONDS), or say that WHAT did not happen.  The one
# polling loop of these helpers, for what no event announces (the record of
# a job that has ended, the service's figures); tests wait on job events
# (flux job wait-event) or on these helpers, never on sleep.
rsa_wait_for() {
	_wf_secs=$1
	_wf_max=$(( $1 * 10 ))
	_wf_what=$2
	shift 2
	_wf_i=0
	until "$@"; do
		_wf_i=$((_wf_i + 1))
		if test $_wf_i -gt $_wf_max; then
			echo "$_wf_what: not after ${_wf_secs}s" >&2
			return 1
		fi
		sleep 0.1
	done
}
