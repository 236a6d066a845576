"""--progress-json lines and the Python API."""

import json
import os
import subprocess

from test_stage_helpers import PY, PYPATH, make_tree, stage

from flux_rsa.stage import StageRequest, run
from flux_rsa.stage.progress import Meter

KEYS = {
    "bytes_done",
    "bytes_total",
    "files_done",
    "files_total",
    "rate",
    "phase",
    "quiet",
}


def test_progress_json_lines(tmp_path):
    src = make_tree(tmp_path / "src")
    proc = stage("copy", src, tmp_path / "dst", "--progress-json", check=0)
    lines = [json.loads(x) for x in proc.stdout.splitlines()]
    assert all(set(x) == KEYS for x in lines)
    assert [x["phase"] for x in lines][0] == "scan"
    last = lines[-1]
    assert last["phase"] == "done"
    assert last["bytes_done"] == last["bytes_total"] > 8 << 20
    assert last["files_done"] == last["files_total"] == 7
    phases = [x["phase"] for x in lines]
    assert phases.index("copy") < phases.index("verify") < phases.index("done")


def test_progress_that_cannot_be_written_fails_the_run(tmp_path):
    """Progress lines to a full device: the run says so and fails; it does
    not end as if it had reported what it did."""
    src = make_tree(tmp_path / "src")
    env = dict(os.environ, PYTHONPATH=PYPATH)
    with open("/dev/full", "wb") as full:
        proc = subprocess.run(
            [
                PY,
                "-m",
                "flux_rsa.stage",
                "copy",
                str(src),
                str(tmp_path / "dst"),
                "--progress-json",
            ],
            env=env,
            stdout=full,
            stderr=subprocess.PIPE,
        )
    assert proc.returncode == 1
    assert b"No space left on device" in proc.stderr


def test_meter_rate_limits_to_one_a_second():
    now = [0.0]
    got = []
    m = Meter(got.append, clock=lambda: now[0])
    m.update("copy", 0, 100, 0, 10)
    for i in range(1, 50):
        now[0] = i * 0.1
        m.update("copy", i, 100, 0, 10)
    assert 5 <= len(got) <= 6
    assert got[-1].rate == 10  # 10 bytes per 1 s


def test_api_run_returns_result(tmp_path):
    src = make_tree(tmp_path / "src")
    snaps = []
    r = run(
        StageRequest(
            "copy",
            os.fsdecode(src),
            str(tmp_path / "dst"),
            workers=2,
            verify="checksum",
        ),
        snaps.append,
    )
    assert r.files_copied == r.files_total == 7 and r.verified == "checksum"
    assert snaps[-1].phase == "done"
    r2 = run(StageRequest("copy", src, str(tmp_path / "dst"), workers=2))
    assert (r2.bytes_copied, r2.files_skipped) == (0, 7)
