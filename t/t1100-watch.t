#!/bin/sh
test_description='flux rsa status --watch and flux rsa wait --progress, on a terminal

Driven under tmux: the screens show a pending job staging in, its
percentage growing (a gated stage-in script lets one part of the inputs
through at a time), then READY; the table is redrawn in place (one
header on the screen, none in the scroll-back); the command returns when
the job is at rest.  Off a terminal the same command prints plain lines.'

. $(dirname $0)/sharness-rsa.sh

if ! command -v tmux >/dev/null; then
	skip_all="tmux is not installed (Debian: tmux)"
	test_done
fi

test_under_rsa_instance

TMUX_SERVER="rsa-watch-$$"
tm() {
	tmux -L "$TMUX_SERVER" "$@"
}
# the screen of tmux session $1 now (with its scroll-back when $2 is "all")
screen() {
	if test "$2" = all; then
		tm capture-pane -p -S - -t "$1"
	else
		tm capture-pane -p -t "$1"
	fi
}
shows() {
	screen "$1" >"$3" && grep -E -q "$2" "$3"
}
# wait until the screen of session $1 matches extended regexp $2; keep it in $3
wait_screen() {
	rsa_wait_for 60 "session $1 showing /$2/" shows "$@" || { echo "session $1 never showed /$2/:" >&2; cat "$3" >&2; false; }
}
# wait until file $1 has a line matching extended regexp $2
wait_file() {
	rsa_wait_for 60 "$1 having /$2/" grep -E -q "$2" "$1" || { echo "$1 never had /$2/:" >&2; cat "$1" >&2; false; }
}

test_expect_success 'setup: inputs in four parts, a stage-in script that waits for gates' '
	rsa_wait_pool 60 &&
	mkdir in &&
	for i in 1 2 3 4; do head -c 4194304 /dev/urandom >in/part$i || return 1; done &&
	cat >gated-in.sh <<-EOF &&
	#!/bin/sh
	# \$1: the RAM-disk directory, \$2: rsa.data_in
	for i in 1 2 3 4; do
		while ! test -e "$PWD/gate\$i"; do sleep 0.05; done
		cp "\$2/part\$i" "\$1/"
	done
	EOF
	chmod +x gated-in.sh
'
test_expect_success 'a job holds the compute nodes; the RSA job queues behind it' '
	blocker=$(flux submit -N2 -t 30m sleep inf) &&
	flux job wait-event -t 30 $blocker start &&
	id=$(flux submit -N1 --setattr=rsa.data_in="$PWD/in" \
		--setattr=rsa.stage_in="$PWD/gated-in.sh" true) &&
	f58=$(flux job id --to=f58 $id)
'
test_expect_success 'watch it on a terminal (tmux), on a pipe, and wait for it with --progress' '
	tm new-session -d -s status -x 150 -y 30 \
		"flux rsa status --watch $id; echo WATCH-EXIT=\$?; sleep 600" &&
	tm new-session -d -s wait -x 150 -y 30 \
		"flux rsa wait --progress $id; echo WAIT-EXIT=\$?; sleep 600" &&
	{ flux rsa status --watch $id >plain.out 2>&1 & } &&
	wait_screen status "STAGING_IN" screen.0
'
test_expect_success 'STAGING_IN at 0%: a progress bar with rate and ETA under the job' '
	wait_screen status "stage-in .*  0\.0% +0/16M" screen.1 &&
	grep -E "$f58 +ONDECK +STAGING_IN" screen.1 &&
	grep -E "stage-in +[^ ]+ +0\.0% +0/16M .* ETA " screen.1
'
test_expect_success 'one part in: 25%' '
	touch gate1 &&
	wait_screen status " 25\.0%" screen.2 &&
	wait_file plain.out "STAGING_IN 25%" &&
	grep -E "$f58 +ONDECK +STAGING_IN .* 25% 4M/16M" screen.2
'
test_expect_success 'two parts in: 50%' '
	touch gate2 &&
	wait_screen status " 50\.0%" screen.3 &&
	wait_file plain.out "STAGING_IN 50%" &&
	grep -E "STAGING_IN .* 50% 8M/16M" screen.3
'
test_expect_success 'three parts in: 75% (and flux rsa wait --progress shows it too)' '
	touch gate3 &&
	wait_screen status " 75\.0%" screen.4 &&
	wait_file plain.out "STAGING_IN 75%" &&
	grep -E "STAGING_IN .* 75% 12M/16M" screen.4 &&
	wait_screen wait " 75\.0%" wait.4 &&
	grep -E "$f58 +ONDECK +STAGING_IN" wait.4
'
test_expect_success 'all in: READY, and no bar any more' '
	touch gate4 &&
	wait_screen status "$f58 +ONDECK +READY" screen.5 &&
	wait_file plain.out "ONDECK READY$" &&
	test_must_fail grep "stage-in " screen.5
'
test_expect_success 'the table was redrawn in place: one header, none in the scroll-back' '
	screen status all >history.5 &&
	test $(grep -c "RSASTATE" history.5) -eq 1 &&
	test $(grep -c "$f58" history.5) -eq 1
'
test_expect_success 'the job runs and ends: both commands return, exit 0' '
	flux cancel $blocker &&
	wait_screen status "WATCH-EXIT=0" screen.6 &&
	grep -E "$f58 +FINISHED +DESTROYED" screen.6 &&
	wait_screen wait "WAIT-EXIT=0" wait.6 &&
	grep "$f58: nothing to stage out (no rsa.data_out)" wait.6
'
test_expect_success 'off a terminal: plain lines, one per change, no escape codes' '
	wait &&
	cat plain.out &&
	grep -E "^[0-9:]{8} $f58 ONDECK STAGING_IN 25% 4M/16M [^ ]+/s ETA [0-9:]+$" plain.out &&
	grep -E "^[0-9:]{8} $f58 ONDECK STAGING_IN 50% 8M/16M" plain.out &&
	grep -E "^[0-9:]{8} $f58 ONDECK STAGING_IN 75% 12M/16M" plain.out &&
	grep -E "^[0-9:]{8} $f58 ONDECK READY$" plain.out &&
	grep -E "^[0-9:]{8} $f58 FINISHED DESTROYED$" plain.out &&
	test_must_fail grep "$(printf "\033")" plain.out
'
test_expect_success 'stop tmux' '
	tm kill-server
'
test_done
