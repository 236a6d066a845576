#!/bin/sh
test_description='2,000 queued RSA jobs and a burst of cancels stall nothing

The service keeps answering while the jobs are submitted and cancelled,
and every record reaches a final state.'

. $(dirname $0)/sharness-rsa.sh

test_under_rsa_instance

count=2000

# the service has at least $1 records
records_at_least() {
	test "$(flux rsa stats | flux python -c "import json,sys; print(json.load(sys.stdin)[\"records\"])")" -ge $1
}

test_expect_success 'setup: inputs, the compute nodes busy' '
	rsa_wait_pool 60 &&
	mkdir in out && echo data >in/file &&
	blocker=$(rsa_hold_compute)
'
test_expect_success "$count RSA jobs are queued" '
	flux submit --cc=1-$count --quiet --setattr=rsa.data_in="$PWD/in" \
		--setattr=rsa.data_out="$PWD/out" --setattr=rsa.capacity=4M \
		--setattr=system.exec.test.run_duration=0.01s true &&
	flux jobs -n --count=0 -f pending -o "{id}" >pending &&
	test $(wc -l <pending) -eq $count
'
# (a liveness check, not a timing: how fast it answers under load is
# bench/scale'"'"'s figure; 30 s only tells a stall from a busy machine)
test_expect_success 'the service answers while it takes them in' '
	timeout 30 flux rsa stats >stats.json &&
	flux python -c "import json; print(json.load(open(\"stats.json\"))[\"records\"])"
'
test_expect_success 'every job has its record; the first ones are staged' '
	rsa_wait_for 60 "$count records" records_at_least $count &&
	flux rsa status -n -o "{rsa_state}" >states &&
	grep -c READY states
'
# Half of the jobs are cancelled by id, the other half at once by state.
# By id in runs of 250: flux cancel waits on its answers one by one, and
# with 2,000 ids at once it aborted here under load (libev: "I/O watcher
# with invalid fd found in epoll_ctl", the kernel's limit on how many
# epoll sets one descriptor may join) - a limit of the command, not of the
# job-manager or of RSA.
test_expect_success 'a burst of cancels' '
	head -n $((count / 2)) pending | xargs -n 250 flux cancel --quiet &&
	flux cancel --all --states=pending 2>cancelled &&
	cat cancelled &&
	grep -x "flux-cancel: Canceled $((count / 2)) jobs (0 errors)" cancelled
'
test_expect_success 'every record reaches a final state within 3 minutes' '
	rsa_wait_for 180 "every record final" rsa_none_active ||
	{ head remaining; false; }
'
# Python starts no full garbage collection in the service (its pause grows
# with the queue); the service runs them itself once it is quiet
full_collections_at_least() {
	test "$(flux rsa stats | flux python -c "import json,sys; print(json.load(sys.stdin)[\"full_gc_ms\"][\"count\"])")" -ge $1
}
test_expect_success 'once quiet, the service ran the full collections it put off' '
	rsa_wait_for 30 "a full collection" full_collections_at_least 1
'
test_expect_success 'the service still answers; nothing is held in the pool' '
	flux rsa stats >after.json &&
	flux python -c "
import json
s = json.load(open(\"after.json\"))
print(s[\"latency_ms\"], s[\"maxrss_kb\"], s[\"states\"])
assert set(s[\"states\"]) <= {\"INITIAL\", \"DESTROYED\", \"INELIGIBLE\"}, s[\"states\"]
" &&
	test -z "$(rsa_ramdisks)" &&
	flux rsa pool -o json >pool.json &&
	flux python -c "
import json
assert all(n[\"reserved\"] == 0 for n in json.load(open(\"pool.json\"))[\"nodes\"])
"
'
test_done
