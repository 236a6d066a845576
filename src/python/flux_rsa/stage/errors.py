"""Exit codes and the one-line failure messages of the stager."""

import errno
import os

PROG = "flux-rsa-stage"

EXIT_OK = 0
EXIT_FAILED = 1  # anything not classified below
EXIT_USAGE = 2  # bad command line
EXIT_NOSPACE = 3  # ENOSPC / EDQUOT on the destination
EXIT_PERMISSION = 4  # EACCES / EPERM, or an identity switch that is refused
EXIT_NOSOURCE = 5  # the source (directory, archive or script) does not exist
EXIT_VERIFY = 6  # copy finished but a verification found a difference
EXIT_SCRIPT = 7  # a user stage-in/stage-out script exited non-zero

# errno sets by what they say about the failure
NO_SPACE = frozenset({errno.ENOSPC, errno.EDQUOT})  # the destination is full
DENIED = frozenset({errno.EACCES, errno.EPERM})  # the owner may not do this
# errors a write reports about the destination (never the source's fault)
DESTINATION_ERRNOS = NO_SPACE | {errno.EFBIG, errno.EROFS}

_HINTS = {
    EXIT_NOSPACE: "the destination file system is full: for stage-in request "
    "more RAM-disk capacity with rsa.capacity, for stage-out free space in data_out",
    EXIT_PERMISSION: "the job owner may not access this path",
}


class StageError(Exception):
    """A failure that ends a stage run: one line for a person, one exit code."""

    def __init__(self, code, path, cause, hint=None):
        super().__init__(cause)
        self.code = code
        self.path = path
        self.cause = cause
        self.hint = hint

    def line(self):
        """The single stderr line: 'flux-rsa-stage: PATH: CAUSE (HINT)'."""
        parts = [PROG]
        if self.path is not None:
            parts.append(show(self.path))
        parts.append(self.cause)
        text = ": ".join(parts)
        if self.hint:
            text += f" ({self.hint})"
        return text

    def __reduce__(self):
        return (StageError, (self.code, self.path, self.cause, self.hint))


def show(value):
    """A path or name (bytes or str) as text for a one-line message:
    undecodable bytes are escaped (\\xff), as are newlines."""
    if isinstance(value, str):
        try:
            value = value.encode("utf-8", "surrogateescape")
        except UnicodeEncodeError:
            value = value.encode("utf-8", "backslashreplace")
    return value.decode("utf-8", "backslashreplace").replace("\n", "\\n")


def from_oserror(exc, path, missing_is_source=False):
    """Classify an OSError raised while working on PATH."""
    err = exc.errno
    cause = os.strerror(err) if err else str(exc)
    if err in NO_SPACE:
        return StageError(EXIT_NOSPACE, path, cause, _HINTS[EXIT_NOSPACE])
    if err in DENIED:
        return StageError(EXIT_PERMISSION, path, cause, _HINTS[EXIT_PERMISSION])
    if err == errno.ENOENT and missing_is_source:
        return StageError(EXIT_NOSOURCE, path, cause)
    if err == errno.ELOOP:
        return StageError(
            EXIT_FAILED,
            path,
            "is a symbolic link where a directory was expected",
            "links are never followed",
        )
    return StageError(EXIT_FAILED, path, cause)
