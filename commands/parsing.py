"""Redis' strict number parsing (string2ll, string2ld) and option matching,
shared by the request parser and every command family."""

from __future__ import annotations

import math
import re

from commands.errors import NOT_FLOAT, NOT_INTEGER, CommandError

_INT_RE = re.compile(rb"-?(?:0|[1-9][0-9]{0,18})")
LLONG_MIN = -(2**63)
LLONG_MAX = 2**63 - 1


def string2ll(b: bytes) -> int | None:
    """Redis' string2ll: canonical decimal within int64, else None."""
    if len(b) > 20 or _INT_RE.fullmatch(b) is None:
        return None
    n = int(b)
    if n < LLONG_MIN or n > LLONG_MAX or b == b"-0":
        return None
    return n


def get_int(b: bytes, error: str = NOT_INTEGER) -> int:
    n = string2ll(b)
    if n is None:
        raise CommandError(error)
    return n


_FLOAT_BAD = re.compile(rb"^\s|\s$")


def string2d(b: bytes) -> float | None:
    """Redis' string2d/strtod acceptance: no spaces, no NaN, 'inf' allowed."""
    if not b or len(b) > 5000 or _FLOAT_BAD.search(b):
        return None
    try:
        s = b.decode("ascii")
    except UnicodeDecodeError:
        return None
    low = s.lower()
    if low in ("inf", "+inf", "infinity", "+infinity"):
        return math.inf
    if low in ("-inf", "-infinity"):
        return -math.inf
    if "_" in s or "nan" in low:
        return None
    try:
        v = float(s)
    except ValueError:
        # strtod also reads hexadecimal floats
        try:
            v = float.fromhex(s)
        except ValueError:
            return None
    if math.isnan(v):
        return None
    return v


def get_float(b: bytes, error: str = NOT_FLOAT) -> float:
    v = string2d(b)
    if v is None:
        raise CommandError(error)
    return v


def format_double(d: float) -> bytes:
    """How Redis 7.0 prints a double in a reply (%.17g, inf as inf)."""
    if d == math.inf:
        return b"inf"
    if d == -math.inf:
        return b"-inf"
    return b"%.17g" % d
