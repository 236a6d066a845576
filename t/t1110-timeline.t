#!/bin/sh
test_description='flux rsa demo, then flux rsa timeline: the picture of what happened

The demo stages three jobs in while a blocker holds the compute nodes,
runs them, stages them out, and ends by writing a timeline picture.
flux rsa timeline --json (what the picture is drawn from) matches the
records: each phase starts and ends at the record'"'"'s transition times,
each RAM disk holds capacity from ASSIGNED to DESTROYED, the reserved
capacity steps add up, and the compute-node rows show the blocker where
it ran.  The PNG and SVG files exist and have a sane size.'

. $(dirname $0)/sharness-rsa.sh

test_under_rsa_instance

flux python -c "import matplotlib" 2>/dev/null && test_set_prereq MATPLOTLIB

# WIDTH HEIGHT of PNG file $1 (from its IHDR chunk), or fail
png_size() {
	flux python -c "
import struct, sys
head = open(sys.argv[1], \"rb\").read(24)
assert head[:8] == b\"\\x89PNG\\r\\n\\x1a\\n\" and head[12:16] == b\"IHDR\", head
print(*struct.unpack(\">II\", head[16:24]))" "$1"
}

test_expect_success MATPLOTLIB 'flux rsa demo ends by writing a timeline and says where' '
	rsa_wait_pool 60 &&
	flux rsa demo --dir "$PWD/demo" >demo.out 2>&1 ||
	{ cat demo.out; false; } &&
	grep "^flux-rsa demo: 3 of 3 jobs staged in and out" demo.out &&
	grep -x "flux rsa timeline: what happened, as a picture: $PWD/demo/timeline.png" demo.out &&
	test -s demo/timeline.png
'
test_expect_success MATPLOTLIB 'the demo'"'"'s picture is a PNG of a sane size' '
	png_size demo/timeline.png >size &&
	read width height <size &&
	test $width -ge 800 && test $width -le 4000 &&
	test $height -ge 400 && test $height -le 4000 &&
	test $(stat -c %s demo/timeline.png) -gt 20000
'
test_expect_success MATPLOTLIB 'flux rsa timeline -o t.png draws it again, and -o t.svg as SVG' '
	flux rsa timeline -o t.png >t.out &&
	grep "timeline of 3 RSA job(s) written to $PWD/t.png" t.out &&
	png_size t.png &&
	flux rsa timeline -o t.svg &&
	head -c 200 t.svg | grep "<?xml" &&
	grep -c "<svg" t.svg
'
test_expect_success 'the data the picture is drawn from matches the records' '
	flux rsa timeline --json >timeline.json &&
	flux rsa status -a -o json >records.json &&
	flux jobs -a -n --name=compute-busy -o "{id.dec} {t_run} {t_cleanup}" >blocker &&
	flux python -c "
import json
pic = json.load(open(\"timeline.json\"))
recs = {r[\"jobid\"]: r for r in json.load(open(\"records.json\"))}
assert sorted(r[\"jobid\"] for r in pic[\"jobs\"]) == sorted(recs), (pic[\"jobs\"], recs)

def first(rec, state):
    return min(t for t, j, s in rec[\"history\"] if s == state or j == state)

for row in pic[\"jobs\"]:
    rec = recs[row[\"jobid\"]]
    phases = {s[\"phase\"]: (s[\"start\"], s[\"end\"]) for s in row[\"segments\"]}
    assert list(phases)[:1] == [\"pending\"] and phases[\"pending\"][0] == rec[\"history\"][0][0]
    assert phases[\"staging-in\"] == (first(rec, \"STAGING_IN\"), first(rec, \"READY\")), phases
    assert phases[\"on-deck\"] == (first(rec, \"READY\"), first(rec, \"RUNNING\")), phases
    assert phases[\"running\"] == (first(rec, \"RUNNING\"), first(rec, \"FINISHED\")), phases
    assert phases[\"staging-out\"] == (first(rec, \"STAGING_OUT\"), first(rec, \"TEARDOWN\")), phases
    assert phases[\"teardown\"] == (first(rec, \"TEARDOWN\"), first(rec, \"DESTROYED\")), phases
    assert row[\"ramdisk\"] == [{\"start\": first(rec, \"ASSIGNED\"), \"end\": first(rec, \"DESTROYED\"),
                                \"bytes\": rec[\"need\"]}], row[\"ramdisk\"]
    assert rec[\"need\"] == 16 << 20

# the reserved capacity: 16M per RAM disk held at a time, back to 0 at the end
steps = pic[\"capacity\"]
for s in steps:
    held = sum(r[\"ramdisk\"][0][\"bytes\"] for r in pic[\"jobs\"]
               if r[\"ramdisk\"][0][\"start\"] <= s[\"t\"] < r[\"ramdisk\"][0][\"end\"])
    assert s[\"bytes\"] == held, (s, held)
assert max(s[\"bytes\"] for s in steps) == 48 << 20 and steps[-1][\"bytes\"] == 0, steps
assert pic[\"pool_bytes\"] == 256 << 20  # 2 RSA nodes of 128M

# the blocker ran on both compute nodes, as flux jobs says
jobid, t_run, t_cleanup = open(\"blocker\").read().split()
rows = [c for c in pic[\"compute\"] if c[\"jobid\"] == int(jobid)]
assert len(rows) == 1 and sorted(rows[0][\"nodes\"]) == [\"node0\", \"node1\"], rows
assert abs(rows[0][\"start\"] - float(t_run)) < 1e-3 and abs(rows[0][\"end\"] - float(t_cleanup)) < 1e-3
# and so did each RSA job, after it
ran = {c[\"jobid\"] for c in pic[\"compute\"]}
assert set(recs) <= ran, (recs, ran)
"
'
test_expect_success '--since selects the jobs active since then' '
	flux rsa timeline --json --since=+1h >later.json &&
	flux python -c "import json; assert json.load(open(\"later.json\"))[\"jobs\"] == []" &&
	flux rsa timeline --json --since=-1h >hour.json &&
	flux python -c "import json; assert len(json.load(open(\"hour.json\"))[\"jobs\"]) == 3"
'
test_expect_success 'bad arguments are refused with what to do' '
	test_must_fail flux rsa timeline -o t.txt 2>ext.err &&
	grep "the picture is written as .png, .svg or .pdf" ext.err &&
	test_must_fail flux rsa timeline --since=whenever 2>since.err &&
	grep "give e.g. -1h, -30m or a date" since.err
'
test_done
