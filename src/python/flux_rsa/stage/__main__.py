"""python3 -m flux_rsa.stage ... (see doc/stage.md).

The process ends with os._exit once its output is flushed: everything the
stager opened is closed and its workers reaped by then, and tearing the
interpreter down (freeing every module's objects) is a cost worth saving
(doc/stage.md, How it is fast).
"""

import os
import sys

from .cli import main
from .errors import EXIT_FAILED

code = main()
try:
    sys.stdout.flush()
    sys.stderr.flush()
except OSError:  # output that could not be written is a failed run
    code = code or EXIT_FAILED
os._exit(code)
