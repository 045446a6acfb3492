"""Glob patterns as Redis 7.0's stringmatchlen reads them, matched in bounded time.

Every pattern the server matches goes through `glob_match` or `glob_matcher`: KEYS, the
SCAN family's MATCH, PSUBSCRIBE and PUBSUB, ACL key and channel patterns, CONFIG GET,
COMMAND LIST FILTERBY PATTERN, and the TS.* verbs' MATCH.

Syntax (Redis' exactly): `*` any run of bytes, `?` one byte, `[...]` one byte of a class
(`^` first negates; `a-z` is a range, reversed ranges are swapped; `\\x` is `x`), `\\x`
outside a class is `x`. A backslash that ends the pattern is a literal backslash; a `[`
class the pattern ends inside is closed there. With `nocase`, ASCII letters compare
without case, except a backslash-escaped byte inside a class. Bytes from 0x80 compare
in ranges as C's signed `char` does (they sort below NUL). Two Redis rules go beyond
the glob: the empty subject matches only the empty pattern (`*` does not match it), and
a pattern with more than 1,000 `*` groups followed by more pattern matches nothing
(Redis' guard against abusive patterns).

Redis matches recursively, backtracking at every `*`. Here the pattern is read once into
segments, the runs of one-byte tokens between `*` groups; since each segment has a
fixed length, the leftmost place each one matches is the right one, so one pass over
the subject answers: O(len(pattern) * len(subject)) at worst.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache

Matcher = Callable[[bytes], bool]

_STAR = 42  # *
_ANY = 63  # ?
_OPEN = 91  # [
_CLOSE = 93  # ]
_NEGATE = 94  # ^
_RANGE = 45  # -
_ESCAPE = 92  # \
_MAX_NESTING = 1000  # Redis' stringmatchlen_impl gives up deeper than this
_EVERY_BYTE = frozenset(range(256))


def _signed(b: int) -> int:
    """A byte as C's (signed) `char` holds it."""
    return b - 256 if b >= 128 else b


def _lower(c: int) -> int:
    """C's tolower in the "C" locale: ASCII letters only."""
    return c + 32 if 65 <= c <= 90 else c


def _literal(x: int, nocase: bool) -> frozenset[int]:
    if not nocase:
        return frozenset((x,))
    folded = _lower(x)
    return frozenset(s for s in range(256) if _lower(s) == folded)


def _class_member(items: list[tuple[int, int, int]], s: int, nocase: bool) -> bool:
    """Whether byte `s` is in a class; items are (kind, a, b): 0 escaped byte a,
    1 literal byte a, 2 range a-b."""
    for kind, a, b in items:
        if kind == 0:
            if s == a:  # escaped bytes compare exactly, even with nocase
                return True
        elif kind == 1:
            if (_lower(a) == _lower(s)) if nocase else a == s:
                return True
        else:
            lo, hi, c = _signed(a), _signed(b), _signed(s)
            if lo > hi:
                lo, hi = hi, lo
            if nocase:
                lo, hi, c = _lower(lo), _lower(hi), _lower(c)
            if lo <= c <= hi:
                return True
    return False


def _read_class(p: bytes, i: int, nocase: bool) -> tuple[frozenset[int], int]:
    """The class whose `[` is at p[i]: (bytes it matches, index of its last byte)."""
    n = len(p)
    i += 1
    negate = i < n and p[i] == _NEGATE
    if negate:
        i += 1
    items: list[tuple[int, int, int]] = []
    while True:
        if i < n and p[i] == _ESCAPE and n - i >= 2:
            i += 1
            items.append((0, p[i], 0))
        elif i < n and p[i] == _CLOSE:
            break
        elif i >= n:  # the pattern ended inside the class: that closes it
            i = n - 1
            break
        elif n - i >= 3 and p[i + 1] == _RANGE:
            items.append((2, p[i], p[i + 2]))  # the end may be `]`: Redis reads it so
            i += 2
        else:
            items.append((1, p[i], 0))
        i += 1
    members = frozenset(s for s in range(256) if _class_member(items, s, nocase))
    return (_EVERY_BYTE - members if negate else members), i


def tokenize(pattern: bytes, nocase: bool = False) -> list[frozenset[int] | None]:
    """The pattern as tokens: None for a `*` group, else the set of bytes one token
    matches."""
    tokens: list[frozenset[int] | None] = []
    n = len(pattern)
    i = 0
    while i < n:
        c = pattern[i]
        if c == _STAR:
            if not tokens or tokens[-1] is not None:
                tokens.append(None)
        elif c == _ANY:
            tokens.append(_EVERY_BYTE)
        elif c == _OPEN:
            members, i = _read_class(pattern, i, nocase)
            tokens.append(members)
        else:
            if c == _ESCAPE and n - i >= 2:
                i += 1
            tokens.append(_literal(pattern[i], nocase))
        i += 1
    return tokens


def _segment(tokens: list[frozenset[int]]) -> bytes | re.Pattern[bytes]:
    """A run of one-byte tokens as the bytes it must equal, or a fixed-length regex."""
    if all(len(t) == 1 for t in tokens):
        return bytes(next(iter(t)) for t in tokens)
    parts = []
    for t in tokens:
        if len(t) == 256:
            parts.append(b".")
        else:
            parts.append(b"[" + b"".join(b"\\x%02x" % x for x in sorted(t)) + b"]")
    return re.compile(b"".join(parts), re.DOTALL)


def _at(seg: bytes | re.Pattern[bytes], text: bytes, pos: int) -> bool:
    """Whether the segment matches text at pos (the caller checked the length)."""
    if type(seg) is bytes:
        return text.startswith(seg, pos)
    return seg.match(text, pos) is not None  # type: ignore[union-attr]


def _find(seg: bytes | re.Pattern[bytes], size: int, text: bytes, pos: int, end: int) -> int:
    """Where the segment next ends at or after pos within text[:end], or -1."""
    if type(seg) is bytes:
        j = text.find(seg, pos, end)
        return -1 if j < 0 else j + size
    m = seg.search(text, pos, end)  # type: ignore[union-attr]
    return -1 if m is None else m.end()


def _compile(pattern: bytes, nocase: bool) -> Matcher:
    tokens = tokenize(pattern, nocase)
    if not tokens:
        return lambda text: not text
    if any(t is not None and not t for t in tokens):
        return lambda text: False  # an empty class matches no byte
    segments: list[list[frozenset[int]]] = [[]]
    for t in tokens:
        if t is None:
            segments.append([])
        else:
            segments[-1].append(t)
    if sum(1 for seg in segments[1:] if seg) > _MAX_NESTING:
        return lambda text: False
    sizes = [len(seg) for seg in segments]
    compiled = [_segment(seg) for seg in segments]
    if len(compiled) == 1:  # no star
        only, size = compiled[0], sizes[0]
        if type(only) is bytes:
            return only.__eq__
        return lambda text: len(text) == size and _at(only, text, 0)
    first, last = compiled[0], compiled[-1]
    head, tail = sizes[0], sizes[-1]
    middle = list(zip(compiled[1:-1], sizes[1:-1], strict=True))
    least = sum(sizes)
    # Common shapes of literal segments, answered by one or two bytes methods.
    if type(first) is bytes and type(last) is bytes:
        if not middle:
            if not tail:
                if not head:  # `*`
                    return bool
                return lambda text: text.startswith(first)  # `prefix*`
            if not head:
                return lambda text: text.endswith(last)  # `*suffix`
            return lambda text: (
                len(text) >= least and text.startswith(first) and text.endswith(last)
            )
        if not head and not tail and len(middle) == 1 and type(middle[0][0]) is bytes:
            inner = middle[0][0]
            return lambda text: inner in text  # `*infix*`

    def match(text: bytes) -> bool:
        n = len(text)
        if n < least or not n:
            return False
        if head and not _at(first, text, 0):
            return False
        end = n - tail
        if tail and not _at(last, text, end):
            return False
        pos = head
        for seg, size in middle:
            pos = _find(seg, size, text, pos, end)
            if pos < 0:
                return False
        return True

    return match


glob_matcher: Callable[[bytes, bool], Matcher] = lru_cache(maxsize=1024)(_compile)


def glob_match(pattern: bytes, text: bytes, nocase: bool = False) -> bool:
    """Redis' stringmatchlen(pattern, text, nocase)."""
    return glob_matcher(pattern, nocase)(text)


def match_filter(pattern: bytes | None) -> Matcher | None:
    """A MATCH option's test, None where it selects everything: no pattern, or `*`
    (as SCAN reads it: `*` takes every key, the empty one included, without matching)."""
    if pattern is None or pattern == b"*":
        return None
    return glob_matcher(pattern, False)
