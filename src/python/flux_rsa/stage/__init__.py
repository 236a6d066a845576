"""flux_rsa.stage: the RSA data mover.

    from flux_rsa.stage import StageRequest, run
    result = run(StageRequest("copy", "/p/in", "/ramdisk/job1", workers=2))

Modes: copy (rsync -a semantics), tar (one archive), untar (unpack *.tar,
copy the rest), script (a user script RAMDISK_DIR DATA_DIR).  Failures raise
StageError, whose .code is the documented exit status and .line() the
message; ``command`` runs a request as the stager's process does (messages,
exit status).  See doc/stage.md.
"""

from .api import MODES, Result, StageRequest, command, run
from .errors import StageError

__all__ = ["MODES", "Result", "StageError", "StageRequest", "command", "run"]
