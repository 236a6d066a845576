"""Shared pytest setup: flux_rsa from this tree, and one summary line per
reason for skipped tests (e.g. how many Flux tests were skipped and why)."""

import collections
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(HERE)), "src", "python"))


def pytest_terminal_summary(terminalreporter):
    reasons = collections.Counter()
    for report in terminalreporter.stats.get("skipped", []):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        reasons[reason.removeprefix("Skipped: ")] += 1
    for reason, count in reasons.most_common():
        terminalreporter.write_line(f"flux-rsa: SKIPPED {count} test(s): {reason}")
