"""Glob matching (`commands.glob`): Redis 7.0's stringmatchlen semantics, bounded time.

Redis' own cases, the pathological patterns that froze the server when matching was a
backtracking regular expression, and a Hypothesis comparison with redis-server on random
patterns and subjects drawn from an alphabet full of the syntax's special bytes.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from commands.glob import glob_match, glob_matcher, tokenize
from tests.conftest import ServerProcess
from tests.resp_client import RawClient, parse


def bulks(raw: bytes) -> list[bytes]:
    """An array reply of bulk strings, as the strings."""
    _, items = parse(raw)
    return [value for _, value in items]


# -- Redis' semantics, case by case -------------------------------------------------------


CASES = [
    (b"", b"", True),
    (b"", b"a", False),
    (b"*", b"", False),  # the empty subject matches only the empty pattern
    (b"**", b"", False),
    (b"*", b"anything", True),
    (b"a*", b"a", True),
    (b"*a", b"a", True),
    (b"a*b", b"ab", True),
    (b"a*b", b"axxb", True),
    (b"a*b", b"axxbx", False),
    (b"h?llo", b"hello", True),
    (b"h?llo", b"hllo", False),
    (b"h[ae]llo", b"hallo", True),
    (b"h[ae]llo", b"hillo", False),
    (b"h[^e]llo", b"hallo", True),
    (b"h[^e]llo", b"hello", False),
    (b"h[a-b]llo", b"hbllo", True),
    (b"h[b-a]llo", b"hallo", True),  # a reversed range is swapped
    (b"[z-a]", b"m", True),
    (b"h\\*llo", b"h*llo", True),
    (b"h\\*llo", b"hallo", False),
    (b"\\", b"\\", True),  # a trailing backslash is a literal backslash
    (b"a\\", b"a\\", True),
    (b"[\\]]", b"]", True),  # escapes inside a class
    (b"[\\-]", b"-", True),
    (b"[]", b"a", False),  # an empty class matches nothing
    (b"[^]", b"a", True),
    (b"[", b"[", False),  # `[` that ends the pattern: an empty class
    (b"[^", b"x", True),
    (b"[ab", b"b", True),  # the end of the pattern closes the class
    (b"[ab", b"[", False),
    (b"[a-", b"-", True),
    (b"[a-]", b"]", True),  # the range's end is `]`, and the class runs to the end
    (b"[a-]", b"_", True),
    (b"[a-]b", b"b", True),
    (b"[\\", b"\\", True),
    (b"[a-c]x", b"bx", True),
    (b"[\x80-a]", b"\x00", True),  # bytes from 0x80 sort below NUL, as signed chars
    (b"[\x80-a]", b"\xff", True),
    (b"[\x80-a]", b"b", False),
    (b"a*a*a*a*a*a*a*a*a*a*b", b"a" * 64, False),
    (b"*a" * 1000, b"a" * 1000, True),
    (b"*a" * 1001, b"a" * 1001, False),  # Redis gives up past 1,000 nested groups
    (b"*a" * 1000 + b"*", b"a" * 1000, True),  # a trailing group does not nest
    (b"*" * 20 + b"b", b"a" * 64, False),
]


@pytest.mark.parametrize(("pattern", "subject", "expected"), CASES)
def test_stringmatchlen(pattern: bytes, subject: bytes, expected: bool) -> None:
    assert glob_match(pattern, subject) is expected


@pytest.mark.parametrize(
    ("pattern", "subject", "expected"),
    [
        (b"HeLLo", b"hello", True),
        (b"h[A-Z]llo", b"hello", True),  # range ends and the byte are folded
        (b"[Z-a]", b"m", False),  # swapped first, folded after: z..a is empty
        (b"[\\E]", b"e", False),  # an escaped byte in a class keeps its case
        (b"[\\E]", b"E", True),
        (b"\\E", b"e", True),  # ... but not outside a class
        (b"[^E]", b"e", False),
    ],
)
def test_stringmatchlen_nocase(pattern: bytes, subject: bytes, expected: bool) -> None:
    assert glob_match(pattern, subject, nocase=True) is expected


def test_star_groups_collapse() -> None:
    assert tokenize(b"a***b") == tokenize(b"a*b")


@pytest.mark.timeout(60)
def test_pathological_patterns_answer() -> None:
    """The patterns that took minutes as a backtracking regex (Redis' own `KEYS` test:
    many stars over a long subject)."""
    key = b"a" * 64
    assert not glob_match(b"*" * 20 + b"b", key)
    assert not glob_match(b"a*" * 20 + b"b", key)
    assert not glob_match(b"*a" * 32 + b"*b", key)
    assert not glob_match(b"?*" * 30 + b"[b]", key)
    assert glob_match(b"a*" * 32, key)
    long_key = b"a" * 10_000
    assert not glob_match(b"*a" * 200 + b"*b", long_key)
    assert not glob_match(b"*a" * 200 + b"*b", long_key, nocase=True)


def test_matcher_is_reused() -> None:
    assert glob_matcher(b"user:*", False) is glob_matcher(b"user:*", False)


# -- against redis-server ----------------------------------------------------------------

ALPHABET = b"ab*?[]^-\\A"
SUBJECT_ALPHABET = b"ab*?[]^-\\AB"
patterns = st.binary(max_size=8).map(lambda b: bytes(ALPHABET[x % len(ALPHABET)] for x in b))
subjects = st.binary(min_size=0, max_size=6).map(
    lambda b: bytes(SUBJECT_ALPHABET[x % len(SUBJECT_ALPHABET)] for x in b)
)


@pytest.fixture
def ref(redis_ref: ServerProcess) -> Iterator[RawClient]:
    c = RawClient(redis_ref.port)
    c.call("SELECT", "9")
    yield c
    c.call("FLUSHDB")
    c.close()


@settings(
    max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(pattern=patterns, keys=st.lists(subjects, min_size=1, max_size=6, unique=True))
def test_keys_match_redis(ref: RawClient, pattern: bytes, keys: list[bytes]) -> None:
    """KEYS pattern on redis-server selects exactly the keys our matcher accepts (KEYS *
    itself lists every key, the empty one included, without matching)."""
    ref.call("FLUSHDB")
    for k in keys:
        ref.call("SET", k, b"1")
    expected = set(bulks(ref.call("KEYS", pattern)))
    ours = {k for k in keys if pattern == b"*" or glob_match(pattern, k)}
    assert ours == expected


def test_cases_match_redis(ref: RawClient) -> None:
    """Every case above is what redis-server answers (through KEYS, whose only shortcut
    is the pattern `*` itself)."""
    for pattern, subject, expected in CASES:
        if pattern == b"*":
            continue
        ref.call("FLUSHDB")
        ref.call("SET", subject, b"1")
        assert bulks(ref.call("KEYS", pattern)) == ([subject] if expected else []), pattern


NOCASE_ALPHABET = b"aAcCpPsS*?[]^-\\"
nocase_patterns = st.binary(min_size=1, max_size=7).map(
    lambda b: bytes(NOCASE_ALPHABET[x % len(NOCASE_ALPHABET)] for x in b)
)


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(pattern=nocase_patterns)
def test_config_get_nocase_matches_redis(ref: RawClient, pattern: bytes) -> None:
    """CONFIG GET matches parameter names without case (Redis' only nocase caller we can
    reach): the names it returns for a glob are exactly those our matcher accepts."""
    if not any(c in pattern for c in b"*?["):
        return  # a name without glob bytes is looked up, not matched
    names = bulks(ref.call("CONFIG", "GET", "*"))[::2]
    expected = set(bulks(ref.call("CONFIG", "GET", pattern))[::2])
    ours = {n for n in names if glob_match(pattern, n, nocase=True)}
    assert ours == expected
