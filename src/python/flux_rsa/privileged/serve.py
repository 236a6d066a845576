"""``RSA_OP=serve``: a compute node's resident helper.

An attach and a detach run on every compute node of every job, and a
fresh process for each (the rexec, the interpreter, its imports, the wait
for its end) costs several times what the attach itself does.  The
service therefore keeps one helper per compute node, started the way any
operation is (through ``flux-imp run rsa`` when the pool's operations
are), and sends it the requests, one JSON line each on its stdin:

    {"id": 7, "env": {"RSA_OP": "attach", "RSA_ROOT": ..., ...}}

Each request is checked and carried out exactly as a one-shot operation
with that environment would be (``handle``: ``main.imp_main`` or
``main.direct``), in a child process forked for it, with the helper's own
environment but for the ``RSA_*`` variables, which are the request's
alone.  Only ``SERVED`` operations are taken.  Its answer, one JSON line on
the helper's stdout:

    {"id": 7, "status": 0, "stdout": "...", "stderr": "..."}

Requests run side by side, as one-shot operations would.  The helper ends
when its stdin closes (the service let it go, or its broker connection
is gone), once the requests under way have answered.
"""

import json
import os
import selectors
import sys
import traceback

from flux_rsa.privileged.variables import PREFIX

#: the operations a helper carries out
SERVED = frozenset({"attach", "detach"})
#: the most of a request's output (each stream) its answer carries
KEEP = 4096


def serve(handle, environ, stdin=0, stdout=1):
    """Read requests from ``stdin`` until it closes, answer each on
    ``stdout``; ``handle(env)`` carries one out (in a child) and returns
    its exit status."""
    base = {k: v for k, v in environ.items() if not k.startswith(PREFIX)}
    sel = selectors.DefaultSelector()
    sel.register(stdin, selectors.EVENT_READ, None)
    pending = b""
    children = 0
    open_ = True
    while open_ or children:
        for key, _ in sel.select():
            if key.data is not None:  # a child ended
                sel.unregister(key.fd)
                _answer(stdout, *key.data)
                os.close(key.fd)
                children -= 1
                continue
            data = os.read(stdin, 65536)
            if not data:
                open_ = False
                sel.unregister(stdin)
                continue
            pending += data
            *lines, pending = pending.split(b"\n")
            for line in lines:
                if line.strip():
                    child = _start(handle, base, line)
                    if isinstance(child, dict):
                        _write(stdout, child)
                    else:
                        sel.register(child[0], selectors.EVENT_READ, child)
                        children += 1
    return 0


def _start(handle, base, line):
    """Fork the child for request ``line``: (pidfd, pid, id, out, err), or
    the answer at once when the request is refused."""
    try:
        request = json.loads(line)
    except ValueError as exc:
        return _refused(None, f"a request that is not JSON: {exc}")
    rid = request.get("id") if isinstance(request, dict) else None
    env = request.get("env") if isinstance(request, dict) else None
    if not isinstance(env, dict) or not all(
        isinstance(k, str) and k.startswith(PREFIX) and isinstance(v, str)
        for k, v in env.items()
    ):
        return _refused(rid, 'a request whose "env" is not only RSA_* strings')
    op = env.get(f"{PREFIX}OP")
    if op not in SERVED:
        return _refused(
            rid, f"{PREFIX}OP={op!r}: the helper runs only {', '.join(sorted(SERVED))}"
        )
    out = os.memfd_create("stdout")
    err = os.memfd_create("stderr")
    pid = os.fork()
    if pid == 0:
        _child(handle, {**base, **env}, out, err)
    return os.pidfd_open(pid), pid, rid, out, err


def _child(handle, env, out, err):
    """Carry the request out in this forked child, its output to ``out``
    and ``err``; never returns."""
    code = 1
    try:
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        os.environ.clear()
        os.environ.update(env)
        code = handle(env)
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:
        traceback.print_exc()
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code or 0)


def _answer(stdout, pidfd, pid, rid, out, err):
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    _write(
        stdout,
        {
            "id": rid,
            "status": code if code >= 0 else 128 - code,
            "stdout": _tail(out),
            "stderr": _tail(err),
        },
    )
    os.close(out)
    os.close(err)


def _tail(fd):
    size = os.fstat(fd).st_size
    return os.pread(fd, KEEP, max(0, size - KEEP)).decode(errors="replace")


def _refused(rid, message):
    return {
        "id": rid,
        "status": 2,
        "stdout": "",
        "stderr": f"flux-rsa-helper: {message}\n",
    }


def _write(stdout, answer):
    data = (json.dumps(answer) + "\n").encode()
    while data:
        data = data[os.write(stdout, data) :]
