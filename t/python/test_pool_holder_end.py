"""What an ended holder leaves behind: swept when a task may have left a
partial RAM disk, and no error when it was asked to end."""

import pytest

flux = pytest.importorskip(
    "flux",
    reason="no Flux (flux-core and flux-sched not installed): the pool tests need a real instance",
)


def ended_holder(nodelist, status, stderr=None, asked=True):
    """A holder of the pool as it is after ``clean`` (nothing submitted)."""
    from flux_rsa.pool.holders import Asked, Holder

    h = Holder.__new__(Holder)
    h.simulated, h.started, h.ended = False, True, True
    h.kept, h.asked = None, Asked.RELEASE if asked else None
    h.sweeper, h.unreachable = None, None
    h.exception, h.exception_type = "cancel: flux-rsa: reservation released", "cancel"
    h.status, h.stderr = status, stderr
    h.R = {"version": 1, "execution": {"R_lite": [], "nodelist": [nodelist]}}
    return h


def test_a_holder_over_two_nodes_killed_mid_build_is_swept():
    # a cancel in BOOTING: one task died of SIGTERM before it blocked the
    # signals, the shell killed the other mid-build (SIGKILL): the status
    # is 15, the worst by number, and hides what the second task left
    assert ended_holder("rsa[0-1]", status=15).leftovers()
    # one task, killed by SIGTERM before it blocked the signals: nothing built
    assert not ended_holder("rsa0", status=15).leftovers()
    # every task stopped in order
    assert not ended_holder("rsa[0-1]", status=0).leftovers()
    assert ended_holder("rsa0", status=9).leftovers()


def test_a_swept_holder_that_was_asked_to_end_reports_no_error():
    class Swept:
        def __init__(self, failure):
            self._failure = failure

        def failure(self):
            return self._failure

    h = ended_holder("rsa[0-1]", status=15)
    h.sweeper = Swept(None)
    assert h.error() is None
    h.sweeper = Swept("rm: cannot remove /ram/5.1.b0: busy")
    assert "cannot remove /ram/5.1.b0" in h.error()
