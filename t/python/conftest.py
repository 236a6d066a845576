"""Shared pytest setup: flux_rsa from this tree, one summary line per
reason for skipped tests (e.g. how many Flux tests were skipped and why),
and helpers several test files use (``from conftest import ...``)."""

import collections
import json
import os
import pwd
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(
    0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "src", "python")
)


def pytest_terminal_summary(terminalreporter):
    reasons = collections.Counter()
    for report in terminalreporter.stats.get("skipped", []):
        reason = (
            report.longrepr[2]
            if isinstance(report.longrepr, tuple)
            else str(report.longrepr)
        )
        reasons[reason.removeprefix("Skipped: ")] += 1
    for reason, count in reasons.most_common():
        terminalreporter.write_line(f"flux-rsa: SKIPPED {count} test(s): {reason}")


# --- shared helpers and fixtures ---


def wait_until(predicate, timeout, what, every=0.05):
    """The tests' one wait: call ``predicate()`` every ``every`` seconds
    until it returns something true (returned), failing with ``what`` after
    ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout}s")
        time.sleep(every)


#: the account RAM disks and stages are made for when the tests run as root
TEST_USER = "rsa-stage-test"


@pytest.fixture(scope="module")
def owner():
    """The owner of test RAM disks: TEST_USER (made if missing) as root,
    else the caller."""
    if os.geteuid() != 0:
        return pwd.getpwuid(os.getuid())
    try:
        return pwd.getpwnam(TEST_USER)
    except KeyError:
        subprocess.run(
            ["useradd", "--no-create-home", "--shell", "/bin/sh", TEST_USER], check=True
        )
        return pwd.getpwnam(TEST_USER)


def ramdisk_marker(path):
    """The marker a RAM disk at path carries (.rsa-ramdisk, JSON)."""
    with open(os.path.join(path, ".rsa-ramdisk")) as f:
        return json.load(f)


def stop_pool(pool):
    """End a test pool instance (shut down if it still runs) and clean up."""
    if pool.instance.proc.poll() is None:
        pool.shutdown()
    pool.cleanup()


def freed_status(pool, timeout=30.0):
    """The pool's status once no node has capacity reserved.  Fluxion takes
    a job's resources back after the job-manager's ``clean`` (it frees them
    asynchronously), so a status asked right after a holder-end may still
    count them for a moment; fails if they stay reserved for TIMEOUT s."""
    status = {}

    def freed():
        status.update(pool.service.call("status"))
        return not any(n["reserved"] for n in status["nodes"])

    try:
        pool.service.poll(freed, timeout, every=0.05)
    except AssertionError:
        raise AssertionError(
            f"still reserved after {timeout}s: {status['nodes']}"
        ) from None
    return status


def release_holders(pool, *jobids):
    """Cancel the holders (generation 1) of jobids; each ends without error."""
    for jobid in jobids:
        pool.service.call("cancel", jobid=jobid, gen=1)
    for jobid in jobids:
        end = pool.service.wait_for("holder-end", jobid=jobid, gen=1)
        assert end["error"] is None, end
