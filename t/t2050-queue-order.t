#!/bin/sh
test_description='more jobs pending than a read of the queue lists: the jobs staged ahead are still the first in the queue

The service reads only the head of the queue (1,024 jobs at least).  With
more jobs pending than that, the head it reads must be the first jobs in
queue order, whatever order Flux keeps its active jobs in: the jobs staged
ahead are the first ones.'

. $(dirname $0)/sharness-rsa.sh

test_under_rsa_instance

count=1500

# at least $1 jobs are READY
ready_at_least() {
	test "$(flux rsa status -n -o "{rsa_state}" | grep -c READY)" -ge $1
}
# the jobs past INITIAL (staging or staged) are the first ones in id order,
# which is queue order here (one priority, submitted one after another)
staged_are_the_first() {
	flux rsa status -n -o "{id.dec} {rsa_state}" >states &&
	flux python -c "
import sys
rows = sorted((int(i), s) for i, s in (line.split() for line in open(\"states\")))
staged = [k for k, (_, s) in enumerate(rows) if s != \"INITIAL\"]
print(len(rows), \"records;\", len(staged), \"staged, at places\", staged[:5], \"...\", staged[-5:])
sys.exit(not (len(rows) == $count and staged and staged == list(range(len(staged)))))
"
}

test_expect_success 'setup: inputs, the compute nodes busy' '
	rsa_wait_pool 60 &&
	mkdir in out && echo data >in/file &&
	blocker=$(rsa_hold_compute)
'
test_expect_success "with the service away, $count RSA jobs are queued" '
	flux module remove rsa &&
	flux submit --cc=1-$count --quiet --setattr=rsa.data_in="$PWD/in" \
		--setattr=rsa.data_out="$PWD/out" --setattr=rsa.capacity=4M \
		--setattr=system.exec.test.run_duration=0.01s true &&
	flux module load rsa &&
	rsa_wait_pool 60
'
test_expect_success 'the jobs staged ahead are the first in the queue' '
	rsa_wait_for 120 "8 jobs READY" ready_at_least 8 &&
	rsa_settled &&
	staged_are_the_first
'
test_expect_success 'cancelled, every job ends and nothing is left' '
	flux cancel --all --states=pending --quiet &&
	flux cancel $blocker &&
	rsa_wait_for 180 "every record final" rsa_none_active &&
	rsa_wait_for 60 "nothing left" rsa_nothing_left
'
test_done
