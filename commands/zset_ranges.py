"""Sorted-set ranges and results, shared by the ZRANGE family, ZCOUNT/ZLEXCOUNT,
ZREMRANGEBY*, the set operations and the pops (`commands.zsets`), and ZADD's core
(`_zadd`: ZADD, ZINCRBY and GEOADD, which `commands.geo` builds on it).

Score, lex and rank ranges as Redis parses them and the spans of a `ZSet` they select;
building a result set (as Redis encodes it: listpack or skiplist) and its reply.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any, Final

from sortedcontainers import SortedList

from commands.common import get_zset
from commands.errors import (
    MIN_MAX_NOT_FLOAT,
    MIN_MAX_NOT_STRING,
    NOT_POSITIVE,
    SCORE_NAN,
    SYNTAX,
    CommandError,
)
from commands.parsing import get_float, get_range_long, strtod
from commands.replies import Reply
from commands.session import Session
from store.ops import ZADD
from store.values import LIMITS, ZSet

LONG_MAX = 2**63 - 1

# -- numbers ----------------------------------------------------------------------------


def get_positive_long(b: bytes) -> int:
    return get_range_long(b, 0, LONG_MAX, NOT_POSITIVE)


def listpack_score(d: float) -> bytes:
    """A score as the listpack stores it (d2string, integers when exact)."""
    if -(2.0**62) <= d <= 2.0**62 and d == int(d):
        return b"%d" % int(d)
    if math.isinf(d):
        return b"inf" if d > 0 else b"-inf"
    return b"%.17g" % d


# -- ranges -----------------------------------------------------------------------------


class _Top:
    """Sorts after every member: (score, TOP) bounds all entries with that score."""

    __slots__ = ()

    def __lt__(self, other: object) -> bool:
        return False

    def __gt__(self, other: object) -> bool:
        return True


TOP = _Top()
# The lex bounds "-" and "+" (shared.minstring/maxstring): below and above every member.
_LEX_MIN_OBJ: Any = object()
_LEX_MAX_OBJ: Any = object()

ScoreRange = tuple[float, bool, float, bool]
LexRange = tuple[Any, bool, Any, bool]


def _score_item(b: bytes) -> tuple[float, bool]:
    ex = b[:1] == b"("
    text = b[1:] if ex else b
    v, end, _ = strtod(text)
    if end != len(text) or v != v:
        raise CommandError(MIN_MAX_NOT_FLOAT)
    return v, ex


def parse_score_range(mn: bytes, mx: bytes) -> ScoreRange:
    lo, loex = _score_item(mn)
    hi, hiex = _score_item(mx)
    return lo, loex, hi, hiex


def _lex_item(b: bytes) -> tuple[Any, bool]:
    c = b[:1]
    if c == b"+" and len(b) == 1:
        return _LEX_MAX_OBJ, True
    if c == b"-" and len(b) == 1:
        return _LEX_MIN_OBJ, True
    if c == b"(":
        return b[1:], True
    if c == b"[":
        return b[1:], False
    raise CommandError(MIN_MAX_NOT_STRING)


def parse_lex_range(mn: bytes, mx: bytes) -> LexRange:
    lo, loex = _lex_item(mn)
    hi, hiex = _lex_item(mx)
    return lo, loex, hi, hiex


def _cmplex(a: Any, b: Any) -> int:
    if a is b:
        return 0
    if a is _LEX_MIN_OBJ or b is _LEX_MAX_OBJ:
        return -1
    if a is _LEX_MAX_OBJ or b is _LEX_MIN_OBJ:
        return 1
    return int(a > b) - int(a < b)


def _gte_min(v: bytes, r: LexRange) -> bool:
    c = _cmplex(v, r[0])
    return c > 0 if r[1] else c >= 0


def _lte_max(v: bytes, r: LexRange) -> bool:
    c = _cmplex(v, r[2])
    return c < 0 if r[3] else c <= 0


def score_span(z: ZSet, r: ScoreRange) -> tuple[int, int]:
    """Indexes [lo, hi) of `z.order` whose scores fall in the range."""
    order = z.order
    lo = order.bisect_right((r[0], TOP)) if r[1] else order.bisect_left((r[0],))
    hi = order.bisect_left((r[2],)) if r[3] else order.bisect_right((r[2], TOP))
    return lo, hi


def lex_empty(z: ZSet, r: LexRange) -> bool:
    """zzlIsInLexRange negated: the range is empty or misses the set entirely."""
    c = _cmplex(r[0], r[2])
    if c > 0 or (c == 0 and (r[1] or r[3])):
        return True
    order = z.order
    return not order or not _gte_min(order[-1][1], r) or not _lte_max(order[0][1], r)


def uniform(z: ZSet) -> bool:
    order = z.order
    return bool(order[0][0] == order[-1][0])


def lex_span(z: ZSet, r: LexRange) -> tuple[int, int]:
    """For a set whose scores are all equal (members in order): indexes [lo, hi)."""
    order = z.order
    sc = order[0][0]
    if r[0] is _LEX_MIN_OBJ:
        lo = 0
    else:
        lo = order.bisect_right((sc, r[0])) if r[1] else order.bisect_left((sc, r[0]))
    if r[2] is _LEX_MAX_OBJ:
        hi = len(order)
    else:
        hi = order.bisect_left((sc, r[2])) if r[3] else order.bisect_right((sc, r[2]))
    return lo, hi


def walk(
    z: ZSet, lo: int, hi: int, reverse: bool, offset: int, limit: int
) -> list[tuple[float, bytes]]:
    """Entries of the in-range run [lo, hi) after `offset`, at most `limit` (<0: all)."""
    if offset < 0 or lo >= hi:
        return []
    n = hi - lo - offset
    if n <= 0:
        return []
    if 0 <= limit < n:
        n = limit
    if reverse:
        return list(z.order.islice(hi - offset - n, hi - offset, reverse=True))
    return list(z.order.islice(lo + offset, lo + offset + n))


def lex_select(
    z: ZSet, r: LexRange, reverse: bool = False, offset: int = 0, limit: int = -1
) -> list[tuple[float, bytes]]:
    """The entries a lex range walk yields, as the listpack walk does."""
    if lex_empty(z, r):
        return []
    if uniform(z):
        lo, hi = lex_span(z, r)
        return walk(z, lo, hi, reverse, offset, limit)
    # Mixed scores: members are not in order; follow the listpack's linear walk.
    if offset < 0:
        return []
    entries = list(reversed(z.order)) if reverse else list(z.order)
    inside = _lte_max if reverse else _gte_min  # finds the walk's starting entry
    keep = _gte_min if reverse else _lte_max  # the walk goes on while this holds
    n = len(entries)
    i = 0
    while i < n and not inside(entries[i][1], r):
        i += 1
    if i >= n or not keep(entries[i][1], r):
        return []
    out: list[tuple[float, bytes]] = []
    for e in entries[i + offset :]:
        if limit == 0 or not keep(e[1], r):
            break
        out.append(e)
        limit -= 1
    return out


def rank_span(length: int, start: int, end: int) -> tuple[int, int]:
    """Redis' index sanitising: [start, end] to a half-open [lo, hi) (empty: lo >= hi)."""
    if start < 0:
        start += length
    if end < 0:
        end += length
    if start < 0:
        start = 0
    if start > end or start >= length:
        return 0, 0
    if end >= length:
        end = length - 1
    return start, end + 1


# -- values and replies -----------------------------------------------------------------


def build_zset(items: Iterable[tuple[float, bytes]], big: bool = False) -> ZSet:
    """A new sorted set filled in order, converting to skiplist as Redis would;
    -0 scores written while it is still a listpack read back as 0."""
    z = ZSet()
    scores = z.scores
    for sc, m in items:
        if not big and (len(scores) >= LIMITS.zset_entries or len(m) > LIMITS.zset_value):
            big = True
        if not big and sc == 0.0:
            sc = 0.0
        scores[m] = sc
    z.order = SortedList((sc, m) for m, sc in scores.items())
    z.big = big
    return z


def entries_reply(s: Session, items: Iterable[tuple[float, bytes]], withscores: bool) -> Reply:
    """Members, or member/score pairs: flat in RESP2, nested pairs in RESP3."""
    if not withscores:
        return [m for _, m in items]
    out: list[Any] = []
    if s.resp == 2:
        for sc, m in items:
            out.append(m)
            out.append(sc)
    else:
        for sc, m in items:
            out.append([m, sc])
    return out


# Error texts of this family (Redis' words).
XX_AND_NX = "ERR XX and NX options at the same time are not compatible"


GT_LT_NX = "ERR GT, LT, and/or NX options at the same time are not compatible"


INCR_ONE_PAIR = "ERR INCR option supports a single increment-element pair"


# Final: compiled, constants (and a C static), not reads of the module's dict.
_NX: Final = 1


_XX: Final = 2


_GT: Final = 4


_LT: Final = 8


_INCR: Final = 16


_ZADD_OPTS: Final = {b"nx": _NX, b"xx": _XX, b"gt": _GT, b"lt": _LT, b"incr": _INCR}


def _zadd(s: Session, argv: list[bytes], flags: int) -> Reply:
    key = argv[1]
    ch = False
    i = 2
    n = len(argv)
    while i < n:
        opt = argv[i].lower()
        f = _ZADD_OPTS.get(opt)
        if f is not None:
            flags |= f
        elif opt == b"ch":
            ch = True
        else:
            break
        i += 1
    elements = n - i
    if elements % 2 or not elements:
        raise CommandError(SYNTAX)
    nx = flags & _NX
    xx = flags & _XX
    gt = flags & _GT
    lt = flags & _LT
    incr = flags & _INCR
    if nx and xx:
        raise CommandError(XX_AND_NX)
    if (gt and nx) or (lt and nx) or (gt and lt):
        raise CommandError(GT_LT_NX)
    if incr and elements > 2:
        raise CommandError(INCR_ONE_PAIR)
    scores = [get_float(argv[j]) for j in range(i, n, 2)]
    z = get_zset(s, key)
    if z is None:
        if xx:
            return None if incr else 0
        current: dict[bytes, float] = {}
        big = LIMITS.zset_entries == 0 or len(argv[i + 1]) > LIMITS.zset_value
        size = 0
    else:
        current = z.scores
        big = z.big
        size = len(z)
    changes: dict[bytes, float] = {}
    added = updated = processed = 0
    score = 0.0
    for j, score in enumerate(scores):
        m = argv[i + 1 + 2 * j]
        cur = changes.get(m)
        if cur is None:
            cur = current.get(m)
        if cur is not None:
            if nx:
                continue
            if incr:
                score += cur
                if score != score:
                    raise CommandError(SCORE_NAN)
            if (lt and score >= cur) or (gt and score <= cur):
                continue
            processed += 1
            if score != cur:
                changes[m] = 0.0 if not big and score == 0.0 else score
                updated += 1
        elif not xx:
            if not big and (size + 1 > LIMITS.zset_entries or len(m) > LIMITS.zset_value):
                big = True
            size += 1
            changes[m] = 0.0 if not big and score == 0.0 else score
            added += 1
            processed += 1
    if changes:
        s.store.apply(s.db, key, (ZADD, tuple(changes.items())))
    if incr:
        return score if processed else None
    return added + updated if ch else added
