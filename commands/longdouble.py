"""Redis' INCRBYFLOAT/HINCRBYFLOAT arithmetic: x87 80-bit long doubles, read with
strtold and printed with "%.17Lf" minus trailing zeros. Emulated exactly with
rationals so replies match Redis byte for byte on every platform."""

from __future__ import annotations

import re
from decimal import ROUND_HALF_EVEN, Context, Decimal
from fractions import Fraction

MANT_BITS = 64  # x87 extended precision significand
MAX_EXP = 16384  # values at or above 2**16384 overflow
MIN_EXP = -16445  # smallest subnormal exponent
MAX_CHARS = 5 * 1024

_DEC = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_HEX = re.compile(r"[+-]?0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)(?:[pP][+-]?\d+)?")
_INF = re.compile(r"[+-]?(?:inf|infinity)", re.IGNORECASE)

INF = "inf"
ZERO = Fraction(0)


def _round(x: Fraction) -> Fraction | str:
    """Round to the nearest long double (ties to even); 'inf' on overflow."""
    if x == 0:
        return x
    sign = -1 if x < 0 else 1
    a = abs(x)
    e = a.numerator.bit_length() - a.denominator.bit_length()
    if Fraction(2) ** e > a:
        e -= 1
    shift = max(e - (MANT_BITS - 1), MIN_EXP)
    scaled = a / (Fraction(2) ** shift)
    m = scaled.numerator // scaled.denominator
    rem = scaled - m
    if rem > Fraction(1, 2) or (rem == Fraction(1, 2) and m % 2 == 1):
        m += 1
    r = Fraction(m) * (Fraction(2) ** shift)
    if r >= Fraction(2) ** MAX_EXP:
        return INF
    return sign * r


def _hex_fraction(s: str) -> Fraction | None:
    """The exact value of a C hexadecimal float literal, or None far out of range."""
    neg = s.startswith("-")
    body = s.lstrip("+-")[2:].lower()
    mant, _, exp = body.partition("p")
    whole, _, frac = mant.partition(".")
    digits = int(whole + frac or "0", 16)
    e2 = int(exp or "0") - 4 * len(frac)
    if not digits:
        return Fraction(0)
    if not -16500 <= digits.bit_length() + e2 <= 16400:
        return None
    v = Fraction(digits) * Fraction(2) ** e2
    return -v if neg else v


def round_ld(x: Fraction) -> Fraction | str:
    """Round an exact value to the nearest long double ('inf' on overflow)."""
    return _round(x)


def parse(b: bytes) -> Fraction | str | None:
    """strtold as Redis' string2ld accepts it: a value, 'inf'/'-inf', or None."""
    if not b or len(b) >= MAX_CHARS:
        return None
    try:
        s = b.decode("ascii")
    except UnicodeDecodeError:
        return None
    if _INF.fullmatch(s):
        return "-inf" if s.startswith("-") else INF
    if _DEC.fullmatch(s):
        d = Decimal(s)
        if d and not -4970 <= d.adjusted() <= 4940:
            return None  # ERANGE: far outside the long double range
        v = _round(Fraction(d))
    elif _HEX.fullmatch(s):
        exact = _hex_fraction(s)
        if exact is None:
            return None
        v = _round(exact)
    else:
        return None
    if isinstance(v, str):
        return None  # ERANGE overflow is rejected by string2ld
    if v == 0 and any(c in "123456789" for c in s.split("e")[0].split("E")[0]):
        return None  # underflow to zero: ERANGE
    return v


def add(a: Fraction | str, b: Fraction | str) -> Fraction | None:
    """a + b in long double, or None if the result is NaN or infinite."""
    if isinstance(a, str) or isinstance(b, str):
        return None
    r = _round(a + b)
    return None if isinstance(r, str) else r


def format_human(v: Fraction) -> bytes:
    """'%.17Lf' with trailing zeros (and a bare '.') removed; '-0' becomes '0'."""
    ctx = Context(prec=6000)
    d = ctx.divide(Decimal(v.numerator), Decimal(v.denominator))
    q = d.quantize(Decimal("1e-17"), rounding=ROUND_HALF_EVEN, context=ctx)
    s = f"{q:f}"
    if "." in s:
        s = s.rstrip("0").rstrip(".")
    if s == "-0":
        s = "0"
    return s.encode()
