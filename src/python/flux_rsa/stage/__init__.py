"""flux_rsa.stage: the RSA data mover.

    from flux_rsa.stage import run
    result = run("copy", b"/p/in", b"/ramdisk/job1", workers=2, verify="size")

Modes: copy (rsync -a semantics), tar (one archive), untar (unpack *.tar,
copy the rest), script (a user script RAMDISK_DIR DATA_DIR).  Failures raise
StageError, whose .code is the documented exit status and .line() the
message.  See doc/stage.md.
"""

from .api import MODES, Result, run
from .errors import StageError

__all__ = ["MODES", "Result", "StageError", "run"]
