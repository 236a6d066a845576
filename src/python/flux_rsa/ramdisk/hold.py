"""``hold``: build the RAM disk, report it, keep it until signalled.

In a holder job every node runs one task; the task on the first node
(``FLUX_TASK_RANK`` 0, or no Flux at all) builds the RAM disk, the others
only keep the node's capacity reserved until the job is cancelled.
"""

import json
import os
import signal
import sys

from flux_rsa.ramdisk import layout

STOP_SIGNALS = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}


def _say(line):
    print(line, file=sys.stderr, flush=True)


def hold(root, name, size, owner, provider, prog="flux-rsa-ramdisk"):
    # block the stop signals first: one arriving while we build is kept
    # and ends the wait at once, so nothing is ever left behind
    signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    if os.environ.get("FLUX_TASK_RANK", "0") != "0":
        signal.sigwait(STOP_SIGNALS)
        return 0
    try:
        path = layout.build(root, name, size, owner, provider)
    except layout.RamdiskError as exc:
        _say(f"{prog}: {exc}")
        return 1
    print(json.dumps({"event": "built", "path": path}), flush=True)
    signal.sigwait(STOP_SIGNALS)
    try:
        layout.destroy(path)
    except layout.RamdiskError as exc:
        _say(f"{prog}: {exc}")
        return 1
    return 0
