"""bench/pipeline's ceiling: the end to end of a hand-off that costs
nothing, made of an afterstaged chain's measured parts."""

import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bench"))

from benchlib.pipeline_report import perfect_handoff  # noqa: E402


def chain(t0, steps):
    """An afterstaged chain of (stage-in begin, stage-in end, stage-out
    begin, stage-out end) per step, as bench/pipeline records it (lists:
    it went through JSON)."""
    return {
        "t0": t0,
        "steps": [{"stage_in": [a, b], "stage_out": [c, d]} for a, b, c, d in steps],
    }


def afterstaged(r, t, w, n=3, setup=1.0):
    """Each step: stage in for r, run for t, stage out for w, the next one
    staging in once the last is home."""
    steps, now = [], 100.0 + setup
    for _ in range(n):
        steps.append((now, now + r, now + r + t, now + r + t + w))
        now += r + t + w
    return chain(100.0, steps)


def test_steps_as_long_as_a_stage_out_hide_all_but_the_last():
    # 1 + 10 in, 3 steps of 10, the last stage-out 10: the 1.8x of 3 steps
    assert perfect_handoff(afterstaged(10, 10, 10)) == 51.0


def test_short_steps_wait_for_the_stage_outs_one_after_another():
    # the stage-outs, 3 x 10, begin when step 1 ends (1 + 10 + 2)
    assert perfect_handoff(afterstaged(10, 2, 10)) == 43.0


def test_long_steps_are_the_chain():
    assert perfect_handoff(afterstaged(10, 30, 10)) == 1 + 10 + 90 + 10


def test_a_step_without_a_stage_out_gives_no_ceiling():
    c = afterstaged(10, 10, 10)
    c["steps"][1]["stage_out"] = [None, None]
    assert perfect_handoff(c) is None
    assert perfect_handoff({"steps": afterstaged(1, 1, 1)["steps"]}) is None
