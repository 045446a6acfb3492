"""commands.parsing.string2ll against its definition (Redis' string2ll): the regex
it used to be, plus the int64 range and the refusal of "-0"; and string2d's shortcut
through it for integer scores."""

from __future__ import annotations

import math
import random
import re

from commands.parsing import LLONG_MAX, LLONG_MIN, string2d, string2ll

_CANONICAL = re.compile(rb"-?(?:0|[1-9][0-9]{0,18})")


def reference(b: bytes) -> int | None:
    if len(b) > 20 or _CANONICAL.fullmatch(b) is None or b == b"-0":
        return None
    n = int(b)
    return n if LLONG_MIN <= n <= LLONG_MAX else None


EDGES = [
    b"",
    b"-",
    b"0",
    b"-0",
    b"00",
    b"01",
    b"-01",
    b"1",
    b"-1",
    b"+1",
    b" 1",
    b"1 ",
    b"1_000",
    b"12a",
    b"\xd9\xa1",
    b"\xef\xbc\x91",
    b"9" * 18,  # the longest parsed on a native int64
    b"-" + b"9" * 18,
    b"1" + b"0" * 17,
    b"9" * 19,
    b"9" * 20,
    b"-" + b"9" * 19,
    b"9223372036854775807",
    b"9223372036854775808",
    b"-9223372036854775808",
    b"-9223372036854775809",
    b"18446744073709551616",
    b"--1",
    b"1-",
    b"0x10",
    b"1e3",
    b"1.0",
    b"\n",
    b"\x00",
    b"-\x00",
]


def test_edges() -> None:
    for b in EDGES:
        assert string2ll(b) == reference(b), b


def test_random_inputs() -> None:
    rng = random.Random(13)
    alphabet = b"0123456789-+ .x\x00"
    for _ in range(20_000):
        b = bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 22)))
        assert string2ll(b) == reference(b), b
    for _ in range(5_000):
        n = rng.randint(-(2**64), 2**64)
        b = b"%d" % n
        assert string2ll(b) == reference(b), b


def test_string2d_of_integers_is_strtods_value() -> None:
    """string2d takes an argument string2ll accepts as float(int): the value (and
    sign) strtod gives, to the last bit at 19 digits; "-0" (refused by string2ll)
    stays negative zero."""
    rng = random.Random(14)
    texts = [*EDGES, *(b"%d" % rng.randint(LLONG_MIN, LLONG_MAX) for _ in range(5_000))]
    texts += [b"%d" % rng.randint(-(2**53), 2**53) for _ in range(5_000)]
    for b in texts:
        if string2ll(b) is not None:
            v = string2d(b)
            assert v == float(b), b
            assert v is not None and math.copysign(1, v) == math.copysign(1, float(b)), b
    neg_zero = string2d(b"-0")
    assert neg_zero == 0.0 and math.copysign(1, neg_zero) == -1
