"""A compute node's resident helper (RSA_OP=serve, flux_rsa.privileged.serve):
requests in on stdin, one JSON line each, answers out; each carried out in
a child of its own with the helper's environment but for the RSA_*
variables, which are the request's alone; side by side; refused when they
are not attach or detach; over when stdin closes and every request is
answered.  The handle here stands in for the real operations (the sharness
tests t1300 and t4000 run the real ones through it)."""

import json
import os
import subprocess
import sys
import time

SRC = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(__file__))), "src", "python"
)

# the helper, with a handle that says what it was given and acts as the
# request asks: RSA_NAME=sleep-N sleeps N seconds first, fail-N exits N,
# raise raises, kill kills itself
HELPER = r"""
import os, signal, sys, time
from flux_rsa.privileged.serve import serve

def handle(env):
    name = env.get("RSA_NAME", "")
    if name.startswith("sleep-"):
        time.sleep(float(name[6:]))
    if name == "raise":
        raise RuntimeError("the operation broke")
    if name == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    print(env["RSA_OP"], name, sorted(k for k in os.environ if k.startswith("RSA_")),
          os.environ.get("KEPT"))
    print("said on stderr", file=sys.stderr)
    return int(name[5:]) if name.startswith("fail-") else 0

sys.exit(serve(handle, dict(os.environ)))
"""


def start():
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PYTHONPATH": SRC,
        "KEPT": "yes",
        "RSA_OP": "serve",  # the helper's own RSA_* variables go to no request
        "RSA_EXTRA": "not passed on",
    }
    return subprocess.Popen(
        [sys.executable, "-S", "-c", HELPER],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
        text=True,
        bufsize=1,
    )


def ask(proc, rid, **env):
    proc.stdin.write(json.dumps({"id": rid, "env": env}) + "\n")
    proc.stdin.flush()


def answer(proc):
    return json.loads(proc.stdout.readline())


def finish(proc):
    proc.stdin.close()
    rest = [json.loads(line) for line in proc.stdout]
    assert proc.wait(timeout=30) == 0
    return rest


def test_each_request_gets_its_answer_with_only_its_own_rsa_variables():
    proc = start()
    ask(proc, 1, RSA_OP="attach", RSA_NAME="one")
    got = answer(proc)
    assert got["id"] == 1 and got["status"] == 0
    assert got["stdout"] == "attach one ['RSA_NAME', 'RSA_OP'] yes\n"
    assert got["stderr"] == "said on stderr\n"
    ask(proc, 2, RSA_OP="detach", RSA_NAME="fail-3")
    got = answer(proc)
    assert (got["id"], got["status"]) == (2, 3)
    assert got["stdout"].startswith("detach fail-3")
    assert finish(proc) == []


def test_requests_run_side_by_side_and_stdin_closing_waits_for_them():
    proc = start()
    began = time.monotonic()
    ask(proc, 1, RSA_OP="attach", RSA_NAME="sleep-1.5")
    ask(proc, 2, RSA_OP="attach", RSA_NAME="quick")
    assert answer(proc)["id"] == 2  # not held up by the slow one
    assert time.monotonic() - began < 1.5
    rest = finish(proc)  # closing stdin: the slow one still answers
    assert [(a["id"], a["status"]) for a in rest] == [(1, 0)]


def test_only_attach_and_detach_are_taken_and_bad_lines_are_answered_not_fatal():
    proc = start()
    ask(proc, 1, RSA_OP="stage", RSA_NAME="x")
    got = answer(proc)
    assert (got["id"], got["status"]) == (1, 2)
    assert "RSA_OP='stage': the helper runs only attach, detach" in got["stderr"]
    proc.stdin.write("not json\n")
    proc.stdin.flush()
    got = answer(proc)
    assert got["id"] is None and got["status"] == 2 and "not JSON" in got["stderr"]
    ask(proc, 3, RSA_OP="attach", PATH="/tmp/evil")
    got = answer(proc)
    assert (got["id"], got["status"]) == (3, 2)
    assert "only RSA_* strings" in got["stderr"]
    ask(proc, 4, RSA_OP="attach", RSA_NAME="still-here")
    assert answer(proc)["status"] == 0
    assert finish(proc) == []


def test_an_operation_that_raises_or_dies_is_answered_and_the_helper_goes_on():
    proc = start()
    ask(proc, 1, RSA_OP="attach", RSA_NAME="raise")
    got = answer(proc)
    assert got["status"] == 1 and "RuntimeError: the operation broke" in got["stderr"]
    ask(proc, 2, RSA_OP="attach", RSA_NAME="kill")
    got = answer(proc)
    assert got["status"] == 128 + 9
    ask(proc, 3, RSA_OP="detach", RSA_NAME="after")
    assert answer(proc)["status"] == 0
    assert finish(proc) == []


def test_a_long_output_is_cut_to_its_end():
    proc = start()
    ask(proc, 1, RSA_OP="attach", RSA_NAME="x" * 10000)
    got = answer(proc)
    assert len(got["stdout"]) == 4096 and got["stdout"].endswith("yes\n")
    finish(proc)
