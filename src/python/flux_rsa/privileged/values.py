"""The kinds of value a privileged request's ``RSA_*`` variables hold.

Each kind is a check ``kind(var, value)`` that returns the value (converted
where it is a number, a flag or a list) or raises ``Refused`` with one line
naming the variable, its value (unless it is a secret) and the fix.  Pure:
no files, no Flux, no clock.  variables.py says which variable of which
operation is of which kind.
"""

import os
import re

#: a RAM disk's name under the root, e.g. 1234.1 (no "/", no leading ".")
NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]*$")
HOST = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
SECRET = re.compile(r"^[A-Za-z0-9_-]{16,128}$")
FS_HOST = re.compile(r"^[A-Za-z0-9._-]*(\{host\}[A-Za-z0-9._-]*)?$")
SERVER = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*:[0-9]{1,5}$")


class Refused(ValueError):
    """A request the entry point will not carry out; str() is one line."""


def _text(var, value):
    if not value:
        raise Refused(f"{var}={value!r}: empty (give a value)")
    if "\0" in value:
        raise Refused(f"{var}={value!r}: contains a NUL character")
    return value


def path(var, value):
    """An absolute path (a user's data directory or script)."""
    _text(var, value)
    if not value.startswith("/"):
        raise Refused(
            f"{var}={value!r}: not an absolute path (give one starting with /)"
        )
    return value


def exact_path(var, value):
    """An absolute path spelt without '.', '..', '//' or a trailing '/'."""
    path(var, value)
    if os.path.normpath(value) != value or value.startswith("//"):
        raise Refused(
            f"{var}={value!r}: not a plain absolute path (no '.', '..', '//' or "
            f"trailing '/'; e.g. {os.path.normpath(value)!r})"
        )
    return value


def number(var, value):
    """A decimal integer >= 0."""
    if not value.isascii() or not value.isdigit() or len(value) > 19:
        raise Refused(f"{var}={value!r}: not a number (give decimal digits only)")
    return int(value)


def positive(var, value):
    n = number(var, value)
    if n == 0:
        raise Refused(f"{var}={value!r}: must be more than 0")
    return n


def flag(var, value):
    if value not in ("0", "1"):
        raise Refused(f"{var}={value!r}: must be 0 or 1")
    return value == "1"


def name(var, value):
    if not NAME.match(value or ""):
        raise Refused(
            f"{var}={value!r}: not a RAM disk's name (letters, digits, '.', '_', '-', "
            "not starting with '.'; e.g. 1234.1)"
        )
    return value


#: the longest signed job request taken (an environment variable holds at
#: most 128 KiB)
MAX_J = 128 * 1024


def job_request(var, value):
    """A job's signed request (J) as flux-security writes it: printable
    ASCII, no spaces.  Its signature is checked by ``signed.verify``."""
    if (
        not value
        or len(value) > MAX_J
        or not value.isascii()
        or not value.isprintable()
        or " " in value
    ):
        raise Refused(
            f"{var}: not a signed job request (J) of at most {MAX_J} printable "
            "characters (its value is not shown)"
        )
    return value


def host(var, value):
    if not HOST.match(value or ""):
        raise Refused(
            f"{var}={value!r}: not a host name (letters, digits, '.', '_', '-')"
        )
    return value


def secret(var, value):
    if not SECRET.match(value or ""):
        raise Refused(
            f"{var}: not a volume secret (16 to 128 letters, digits, '_' or '-'; "
            "its value is not shown)"
        )
    return value


def fs_host(var, value):
    if not value or not FS_HOST.match(value):
        raise Refused(
            f"{var}={value!r}: not an address pattern (a host name or address, "
            "{host} standing for the RSA node's name)"
        )
    return value


def _listing(var, value, pattern, what):
    items = value.split(",") if value else []
    bad = [item for item in items if not pattern.match(item)]
    if not items or bad:
        raise Refused(
            f"{var}={value!r}: not a comma-separated list of {what}"
            + (f" ({bad[0]!r})" if bad else "")
        )
    return tuple(items)


def hosts(var, value):
    return _listing(var, value, HOST, "host names")


def servers(var, value):
    return _listing(var, value, SERVER, "HOST:PORT")


def one_of(choices):
    def check(var, value):
        if value not in choices:
            raise Refused(f"{var}={value!r}: must be one of {', '.join(choices)}")
        return value

    check.choices = choices
    return check
