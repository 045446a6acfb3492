"""Sorted set commands, Redis 7.0 exact.

ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member [score member ...]
ZINCRBY key increment member · ZREM key member [member ...]
ZCARD key · ZSCORE key member · ZMSCORE key member [member ...]
ZRANK key member · ZREVRANK key member
ZCOUNT key min max · ZLEXCOUNT key min max
ZRANGE key start stop [BYSCORE|BYLEX] [REV] [LIMIT offset count] [WITHSCORES]
ZRANGESTORE dst src min max [BYSCORE|BYLEX] [REV] [LIMIT offset count]
ZREVRANGE key start stop [WITHSCORES]
ZRANGEBYSCORE key min max [WITHSCORES] [LIMIT offset count]
ZREVRANGEBYSCORE key max min [WITHSCORES] [LIMIT offset count]
ZRANGEBYLEX key min max [LIMIT offset count] · ZREVRANGEBYLEX key max min [LIMIT offset count]
ZREMRANGEBYRANK key start stop · ZREMRANGEBYSCORE key min max · ZREMRANGEBYLEX key min max
ZUNIONSTORE dst numkeys key [key ...] [WEIGHTS w [w ...]] [AGGREGATE SUM|MIN|MAX]
ZINTERSTORE dst numkeys key [key ...] [WEIGHTS w [w ...]] [AGGREGATE SUM|MIN|MAX]
ZUNION numkeys key [key ...] [WEIGHTS w [w ...]] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]
ZINTER numkeys key [key ...] [WEIGHTS w [w ...]] [AGGREGATE SUM|MIN|MAX] [WITHSCORES]
ZDIFF numkeys key [key ...] [WITHSCORES] · ZDIFFSTORE dst numkeys key [key ...]
ZINTERCARD numkeys key [key ...] [LIMIT limit]
ZPOPMIN key [count] · ZPOPMAX key [count]
BZPOPMIN key [key ...] timeout · BZPOPMAX key [key ...] timeout
ZMPOP numkeys key [key ...] MIN|MAX [COUNT count]
BZMPOP timeout numkeys key [key ...] MIN|MAX [COUNT count]
ZRANDMEMBER key [count [WITHSCORES]] · ZSCAN key cursor [MATCH pattern] [COUNT count]

Scores are doubles. Redis keeps small sets in a listpack, which stores a score as
text: a -0 score kept there reads back as 0, so writes to a listpack-encoded set
normalise -0 (see `_build` and ZADD). Lex ranges assume equal scores, as Redis
does; with mixed scores they follow the listpack's linear walk.
"""

from __future__ import annotations

import math
import random
import re
import struct
from collections.abc import Iterable
from typing import Any

from sortedcontainers import SortedList

from commands.common import (
    SET_TYPES,
    get_typed,
    get_zset,
    parse_scan_cursor,
    parse_scan_options,
)
from commands.errors import (
    COUNT_POSITIVE,
    MIN_MAX_NOT_FLOAT,
    MIN_MAX_NOT_STRING,
    NOT_POSITIVE,
    NUMKEYS_POSITIVE,
    SCORE_NAN,
    SYNTAX,
    WEIGHT_NOT_FLOAT,
    CommandError,
)
from commands.parsing import (
    format_double,
    get_float,
    get_int,
    get_range_long,
    parse_timeout,
    strtod,
)
from commands.registry import Flag, command
from commands.replies import NULL_ARRAY, Blocked, Reply
from commands.session import Session
from store.ops import DEL, SET, ZADD, ZREM
from store.values import ZSET_MAX_LISTPACK_ENTRIES, ZSET_MAX_LISTPACK_VALUE, ZSet

# Error texts of this family (Redis' words).
XX_AND_NX = "ERR XX and NX options at the same time are not compatible"
GT_LT_NX = "ERR GT, LT, and/or NX options at the same time are not compatible"
INCR_ONE_PAIR = "ERR INCR option supports a single increment-element pair"
LIMIT_NEEDS_RANGE = (
    "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"
)
WITHSCORES_BYLEX = "ERR syntax error, WITHSCORES not supported in combination with BYLEX"
NEED_ONE_KEY = "ERR at least 1 input key is needed for '{}' command"
LIMIT_NEGATIVE = "ERR LIMIT can't be negative"
OUT_OF_RANGE = "ERR value is out of range"

W = Flag.WRITE | Flag.DENYOOM
R = Flag.READONLY | Flag.FAST

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


def _lex_empty(z: ZSet, r: LexRange) -> bool:
    """zzlIsInLexRange negated: the range is empty or misses the set entirely."""
    c = _cmplex(r[0], r[2])
    if c > 0 or (c == 0 and (r[1] or r[3])):
        return True
    order = z.order
    return not order or not _gte_min(order[-1][1], r) or not _lte_max(order[0][1], r)


def _uniform(z: ZSet) -> bool:
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


def _walk(
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
    if _lex_empty(z, r):
        return []
    if _uniform(z):
        lo, hi = lex_span(z, r)
        return _walk(z, lo, hi, reverse, offset, limit)
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


def _build(items: Iterable[tuple[float, bytes]], big: bool = False) -> ZSet:
    """A new sorted set filled in order, converting to skiplist as Redis would;
    -0 scores written while it is still a listpack read back as 0."""
    z = ZSet()
    scores = z.scores
    for sc, m in items:
        if not big and (
            len(scores) >= ZSET_MAX_LISTPACK_ENTRIES or len(m) > ZSET_MAX_LISTPACK_VALUE
        ):
            big = True
        if not big and sc == 0.0:
            sc = 0.0
        scores[m] = sc
    z.order = SortedList((sc, m) for m, sc in scores.items())
    z.big = big
    return z


def _store(s: Session, dst: bytes, z: ZSet | None) -> int:
    """Write a *STORE result (or delete the destination when it is empty)."""
    if z:
        s.store.apply(s.db, dst, (SET, z, None))
        return len(z)
    if s.db.get(dst) is not None:
        s.store.apply(s.db, dst, (DEL,))
    return 0


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


def _zset_or_set(s: Session, key: bytes) -> Any:
    return get_typed(s, key, (ZSet, *SET_TYPES))


# -- ZADD / ZINCRBY / ZREM ----------------------------------------------------------------

_NX, _XX, _GT, _LT, _INCR = 1, 2, 4, 8, 16
_ZADD_OPTS = {b"nx": _NX, b"xx": _XX, b"gt": _GT, b"lt": _LT, b"incr": _INCR}


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
        big = len(argv[i + 1]) > ZSET_MAX_LISTPACK_VALUE
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
            if not big and (
                size + 1 > ZSET_MAX_LISTPACK_ENTRIES or len(m) > ZSET_MAX_LISTPACK_VALUE
            ):
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


@command("zadd", -4, W | Flag.FAST, 1, 1, 1)
def cmd_zadd(s: Session, argv: list[bytes]) -> Reply:
    return _zadd(s, argv, 0)


@command("zincrby", 4, W | Flag.FAST, 1, 1, 1)
def cmd_zincrby(s: Session, argv: list[bytes]) -> Reply:
    return _zadd(s, argv, _INCR)


@command("zrem", -3, Flag.WRITE | Flag.FAST, 1, 1, 1)
def cmd_zrem(s: Session, argv: list[bytes]) -> Reply:
    z = get_zset(s, argv[1])
    if z is None:
        return 0
    scores = z.scores
    gone = tuple(dict.fromkeys(m for m in argv[2:] if m in scores))
    if gone:
        s.store.apply(s.db, argv[1], (ZREM, gone))
    return len(gone)


# -- point reads ---------------------------------------------------------------------------


@command("zcard", 2, R, 1, 1, 1)
def cmd_zcard(s: Session, argv: list[bytes]) -> Reply:
    z = get_zset(s, argv[1])
    return len(z) if z is not None else 0


@command("zscore", 3, R, 1, 1, 1)
def cmd_zscore(s: Session, argv: list[bytes]) -> Reply:
    z = get_zset(s, argv[1])
    return None if z is None else z.scores.get(argv[2])


@command("zmscore", -3, R, 1, 1, 1)
def cmd_zmscore(s: Session, argv: list[bytes]) -> Reply:
    z = get_zset(s, argv[1])
    if z is None:
        return [None] * (len(argv) - 2)
    get = z.scores.get
    return [get(m) for m in argv[2:]]


def _rank(s: Session, argv: list[bytes], reverse: bool) -> Reply:
    z = get_zset(s, argv[1])
    if z is None:
        return None
    sc = z.scores.get(argv[2])
    if sc is None:
        return None
    r: int = z.order.bisect_left((sc, argv[2]))
    return len(z) - 1 - r if reverse else r


@command("zrank", 3, R, 1, 1, 1)
def cmd_zrank(s: Session, argv: list[bytes]) -> Reply:
    return _rank(s, argv, False)


@command("zrevrank", 3, R, 1, 1, 1)
def cmd_zrevrank(s: Session, argv: list[bytes]) -> Reply:
    return _rank(s, argv, True)


@command("zcount", 4, R, 1, 1, 1)
def cmd_zcount(s: Session, argv: list[bytes]) -> Reply:
    r = parse_score_range(argv[2], argv[3])
    z = get_zset(s, argv[1])
    if z is None:
        return 0
    lo, hi = score_span(z, r)
    return max(0, hi - lo)


@command("zlexcount", 4, R, 1, 1, 1)
def cmd_zlexcount(s: Session, argv: list[bytes]) -> Reply:
    r = parse_lex_range(argv[2], argv[3])
    z = get_zset(s, argv[1])
    if z is None or _lex_empty(z, r):
        return 0
    if _uniform(z):
        lo, hi = lex_span(z, r)
        return max(0, hi - lo)
    return len(lex_select(z, r))


# -- ZRANGE and friends ------------------------------------------------------------------

_AUTO, _RANK, _SCORE, _LEX = 0, 1, 2, 3
_FORWARD, _REVERSE = 1, 2


def _zrange(
    s: Session,
    argv: list[bytes],
    k: int,
    dst: bytes | None,
    rangetype: int = _AUTO,
    direction: int = _AUTO,
) -> Reply:
    """zrangeGenericCommand: argv[k] is the source, then min, max and options."""
    withscores = False
    offset, limit = 0, -1
    n = len(argv)
    j = k + 3
    while j < n:
        opt = argv[j].lower()
        if dst is None and opt == b"withscores":
            withscores = True
        elif opt == b"limit" and n - j - 1 >= 2:
            offset = get_int(argv[j + 1])
            limit = get_int(argv[j + 2])
            j += 2
        elif direction == _AUTO and opt == b"rev":
            direction = _REVERSE
        elif rangetype == _AUTO and opt == b"bylex":
            rangetype = _LEX
        elif rangetype == _AUTO and opt == b"byscore":
            rangetype = _SCORE
        else:
            raise CommandError(SYNTAX)
        j += 1
    reverse = direction == _REVERSE
    if rangetype == _AUTO:
        rangetype = _RANK
    if limit != -1 and rangetype == _RANK:
        raise CommandError(LIMIT_NEEDS_RANGE)
    if withscores and rangetype == _LEX:
        raise CommandError(WITHSCORES_BYLEX)
    a, b = argv[k + 1], argv[k + 2]
    if reverse and rangetype != _RANK:
        a, b = b, a
    if rangetype == _RANK:
        start, end = get_int(a), get_int(b)
    elif rangetype == _SCORE:
        sr = parse_score_range(a, b)
    else:
        lr = parse_lex_range(a, b)
    z = get_zset(s, argv[k])
    if z is None:
        return [] if dst is None else _store(s, dst, None)
    big = False
    if rangetype == _RANK:
        lo, hi = rank_span(len(z), start, end)
        if reverse:
            lo, hi = len(z) - hi, len(z) - lo
        items = _walk(z, lo, hi, reverse, 0, -1)
        big = len(items) > ZSET_MAX_LISTPACK_ENTRIES
    elif rangetype == _SCORE:
        lo, hi = score_span(z, sr)
        items = _walk(z, lo, hi, reverse, offset, limit)
    else:
        items = lex_select(z, lr, reverse, offset, limit)
    if dst is not None:
        return _store(s, dst, _build(items, big) if items else None)
    return entries_reply(s, items, withscores)


@command("zrange", -4, Flag.READONLY, 1, 1, 1)
def cmd_zrange(s: Session, argv: list[bytes]) -> Reply:
    return _zrange(s, argv, 1, None)


@command("zrangestore", -5, W, 1, 2, 1)
def cmd_zrangestore(s: Session, argv: list[bytes]) -> Reply:
    return _zrange(s, argv, 2, argv[1])


@command("zrevrange", -4, Flag.READONLY, 1, 1, 1)
def cmd_zrevrange(s: Session, argv: list[bytes]) -> Reply:
    return _zrange(s, argv, 1, None, _RANK, _REVERSE)


@command("zrangebyscore", -4, Flag.READONLY, 1, 1, 1)
def cmd_zrangebyscore(s: Session, argv: list[bytes]) -> Reply:
    return _zrange(s, argv, 1, None, _SCORE, _FORWARD)


@command("zrevrangebyscore", -4, Flag.READONLY, 1, 1, 1)
def cmd_zrevrangebyscore(s: Session, argv: list[bytes]) -> Reply:
    return _zrange(s, argv, 1, None, _SCORE, _REVERSE)


@command("zrangebylex", -4, Flag.READONLY, 1, 1, 1)
def cmd_zrangebylex(s: Session, argv: list[bytes]) -> Reply:
    return _zrange(s, argv, 1, None, _LEX, _FORWARD)


@command("zrevrangebylex", -4, Flag.READONLY, 1, 1, 1)
def cmd_zrevrangebylex(s: Session, argv: list[bytes]) -> Reply:
    return _zrange(s, argv, 1, None, _LEX, _REVERSE)


# -- ZREMRANGEBY* -------------------------------------------------------------------------


def _zrem_entries(s: Session, key: bytes, items: list[tuple[float, bytes]]) -> int:
    if items:
        s.store.apply(s.db, key, (ZREM, tuple(m for _, m in items)))
    return len(items)


@command("zremrangebyrank", 4, Flag.WRITE, 1, 1, 1)
def cmd_zremrangebyrank(s: Session, argv: list[bytes]) -> Reply:
    start, end = get_int(argv[2]), get_int(argv[3])
    z = get_zset(s, argv[1])
    if z is None:
        return 0
    lo, hi = rank_span(len(z), start, end)
    return _zrem_entries(s, argv[1], _walk(z, lo, hi, False, 0, -1))


@command("zremrangebyscore", 4, Flag.WRITE, 1, 1, 1)
def cmd_zremrangebyscore(s: Session, argv: list[bytes]) -> Reply:
    r = parse_score_range(argv[2], argv[3])
    z = get_zset(s, argv[1])
    if z is None:
        return 0
    lo, hi = score_span(z, r)
    return _zrem_entries(s, argv[1], _walk(z, lo, hi, False, 0, -1))


@command("zremrangebylex", 4, Flag.WRITE, 1, 1, 1)
def cmd_zremrangebylex(s: Session, argv: list[bytes]) -> Reply:
    r = parse_lex_range(argv[2], argv[3])
    z = get_zset(s, argv[1])
    if z is None:
        return 0
    return _zrem_entries(s, argv[1], lex_select(z, r))


# -- ZUNION / ZINTER / ZDIFF ---------------------------------------------------------------

_UNION, _INTER, _DIFF = 0, 1, 2
_AGGREGATES = {b"sum": 0, b"min": 1, b"max": 2}


def _source_items(v: Any) -> Iterable[tuple[bytes, float]]:
    """(member, score) of a sorted set in order, or of a set with score 1."""
    if type(v) is ZSet:
        return ((m, sc) for sc, m in v.order)
    return ((m, 1.0) for m in v)


def _source_score(v: Any, m: bytes) -> float | None:
    if type(v) is ZSet:
        sc: float | None = v.scores.get(m)
        return sc
    return 1.0 if m in v else None


def _setop(s: Session, argv: list[bytes], op: int, dst: bytes | None, card: bool = False) -> Reply:
    """zunionInterDiffGenericCommand: numkeys at argv[1] (argv[2] for *STORE)."""
    ki = 1 if dst is None else 2
    numkeys = get_int(argv[ki])
    if numkeys < 1:
        raise CommandError(NEED_ONE_KEY.format(argv[0].decode(errors="replace").lower()))
    n = len(argv)
    if numkeys > n - (ki + 1):
        raise CommandError(SYNTAX)
    srcs: list[Any] = [_zset_or_set(s, argv[ki + 1 + i]) for i in range(numkeys)]
    weights = [1.0] * numkeys
    aggregate = 0
    withscores = False
    limit = 0
    j = ki + 1 + numkeys
    while j < n:
        remaining = n - j
        opt = argv[j].lower()
        if op != _DIFF and not card and remaining >= numkeys + 1 and opt == b"weights":
            weights = [get_float(argv[j + 1 + i], WEIGHT_NOT_FLOAT) for i in range(numkeys)]
            j += 1 + numkeys
        elif op != _DIFF and not card and remaining >= 2 and opt == b"aggregate":
            agg = _AGGREGATES.get(argv[j + 1].lower())
            if agg is None:
                raise CommandError(SYNTAX)
            aggregate = agg
            j += 2
        elif dst is None and not card and opt == b"withscores":
            withscores = True
            j += 1
        elif card and remaining >= 2 and opt == b"limit":
            limit = get_range_long(argv[j + 1], 0, LONG_MAX, LIMIT_NEGATIVE)
            j += 2
        else:
            raise CommandError(SYNTAX)
    result: dict[bytes, float] = {}
    if op == _DIFF:
        first = srcs[0]
        if first:
            rest = [v for v in srcs[1:] if v]
            if any(v is first for v in rest):
                rest = []
                first = None
            if first is not None:
                for m, sc in _source_items(first):
                    if not any(_source_score(v, m) is not None for v in rest):
                        result[m] = sc
    else:
        order = sorted(range(numkeys), key=lambda i: len(srcs[i]) if srcs[i] else 0)
        if op == _INTER:
            i0 = order[0]
            first = srcs[i0]
            count = 0
            if first:
                w0 = weights[i0]
                others = [(srcs[i], weights[i]) for i in order[1:]]
                for m, sc in _source_items(first):
                    score = w0 * sc
                    if score != score:
                        score = 0.0
                    for v, w in others:
                        found = _source_score(v, m)
                        if found is None:
                            break
                        score = _aggregate(score, found * w, aggregate)
                    else:
                        if card:
                            count += 1
                            if limit and count >= limit:
                                break
                        else:
                            result[m] = score
            if card:
                return count
        else:
            for i in order:
                v = srcs[i]
                if not v:
                    continue
                w = weights[i]
                for m, sc in _source_items(v):
                    score = w * sc
                    if score != score:
                        score = 0.0
                    old = result.get(m)
                    result[m] = score if old is None else _aggregate(old, score, aggregate)
    items = sorted((sc, m) for m, sc in result.items())
    if dst is not None:
        if not items:
            return _store(s, dst, None)
        big = len(items) > ZSET_MAX_LISTPACK_ENTRIES or any(
            len(m) > ZSET_MAX_LISTPACK_VALUE for m in result
        )
        return _store(s, dst, _build(items, big))
    return entries_reply(s, items, withscores)


def _aggregate(target: float, val: float, aggregate: int) -> float:
    if aggregate == 0:
        r = target + val
        return 0.0 if r != r else r
    if aggregate == 1:
        return val if val < target else target
    return val if val > target else target


@command("zunionstore", -4, W, 1, 1, 1)
def cmd_zunionstore(s: Session, argv: list[bytes]) -> Reply:
    return _setop(s, argv, _UNION, argv[1])


@command("zinterstore", -4, W, 1, 1, 1)
def cmd_zinterstore(s: Session, argv: list[bytes]) -> Reply:
    return _setop(s, argv, _INTER, argv[1])


@command("zdiffstore", -4, W, 1, 1, 1)
def cmd_zdiffstore(s: Session, argv: list[bytes]) -> Reply:
    return _setop(s, argv, _DIFF, argv[1])


@command("zunion", -3, Flag.READONLY)
def cmd_zunion(s: Session, argv: list[bytes]) -> Reply:
    return _setop(s, argv, _UNION, None)


@command("zinter", -3, Flag.READONLY)
def cmd_zinter(s: Session, argv: list[bytes]) -> Reply:
    return _setop(s, argv, _INTER, None)


@command("zdiff", -3, Flag.READONLY)
def cmd_zdiff(s: Session, argv: list[bytes]) -> Reply:
    return _setop(s, argv, _DIFF, None)


@command("zintercard", -3, Flag.READONLY)
def cmd_zintercard(s: Session, argv: list[bytes]) -> Reply:
    return _setop(s, argv, _INTER, None, card=True)


# -- pops --------------------------------------------------------------------------------


def _pop(s: Session, key: bytes, z: ZSet, count: int, at_max: bool) -> list[tuple[float, bytes]]:
    """Remove up to `count` lowest (or highest) entries, returned in pop order."""
    n = min(count, len(z))
    order = z.order
    items = list(order.islice(len(order) - n, reverse=True) if at_max else order.islice(0, n))
    s.store.apply(s.db, key, (ZREM, tuple(m for _, m in items)))
    return items


def _zpop(s: Session, argv: list[bytes], at_max: bool) -> Reply:
    if len(argv) > 3:
        raise CommandError(SYNTAX)
    count = get_positive_long(argv[2]) if len(argv) == 3 else -1
    z = get_zset(s, argv[1])
    if z is None or count == 0:
        return []
    items = _pop(s, argv[1], z, 1 if count == -1 else count, at_max)
    return entries_reply(s, items, True) if count != -1 else [items[0][1], items[0][0]]


@command("zpopmin", -2, Flag.WRITE | Flag.FAST, 1, 1, 1)
def cmd_zpopmin(s: Session, argv: list[bytes]) -> Reply:
    return _zpop(s, argv, False)


@command("zpopmax", -2, Flag.WRITE | Flag.FAST, 1, 1, 1)
def cmd_zpopmax(s: Session, argv: list[bytes]) -> Reply:
    return _zpop(s, argv, True)


def _blocking_pop(s: Session, keys: list[bytes], timeout: float, at_max: bool, count: int) -> Reply:
    """BZPOPMIN/BZPOPMAX (count -1: flat [key, member, score]) and BZMPOP.
    While blocked (a retry after a write), a key of another type is not an error:
    Redis only serves the client once a key holds a sorted set."""
    for key in keys:
        if s.blocked:
            v = s.db.get(key)
            z = v if type(v) is ZSet else None
        else:
            z = get_zset(s, key)
        if z is None:
            continue
        items = _pop(s, key, z, 1 if count == -1 else count, at_max)
        if count == -1:
            return [key, items[0][1], items[0][0]]
        return [key, [[m, sc] for sc, m in items]]
    if s.in_exec:
        return NULL_ARRAY
    return Blocked(keys=[(s.dbi, k) for k in keys], timeout=timeout, on_timeout=NULL_ARRAY)


@command("bzpopmin", -3, Flag.WRITE | Flag.NOSCRIPT | Flag.FAST | Flag.BLOCKING, 1, -2, 1)
def cmd_bzpopmin(s: Session, argv: list[bytes]) -> Reply:
    return _blocking_pop(s, argv[1:-1], parse_timeout(argv[-1]), False, -1)


@command("bzpopmax", -3, Flag.WRITE | Flag.NOSCRIPT | Flag.FAST | Flag.BLOCKING, 1, -2, 1)
def cmd_bzpopmax(s: Session, argv: list[bytes]) -> Reply:
    return _blocking_pop(s, argv[1:-1], parse_timeout(argv[-1]), True, -1)


def _mpop_args(argv: list[bytes], ki: int) -> tuple[list[bytes], bool, int]:
    """numkeys at argv[ki], the keys, MIN|MAX, [COUNT count]."""
    numkeys = get_range_long(argv[ki], 1, LONG_MAX, NUMKEYS_POSITIVE)
    where = ki + numkeys + 1
    n = len(argv)
    if where >= n:
        raise CommandError(SYNTAX)
    side = argv[where].lower()
    if side not in (b"min", b"max"):
        raise CommandError(SYNTAX)
    count = -1
    j = where + 1
    while j < n:
        if count == -1 and argv[j].lower() == b"count" and j < n - 1:
            count = get_range_long(argv[j + 1], 1, LONG_MAX, COUNT_POSITIVE)
            j += 2
        else:
            raise CommandError(SYNTAX)
    return argv[ki + 1 : where], side == b"max", 1 if count == -1 else count


@command("zmpop", -4, Flag.WRITE)
def cmd_zmpop(s: Session, argv: list[bytes]) -> Reply:
    keys, at_max, count = _mpop_args(argv, 1)
    for key in keys:
        z = get_zset(s, key)
        if z is None:
            continue
        items = _pop(s, key, z, count, at_max)
        return [key, [[m, sc] for sc, m in items]]
    return NULL_ARRAY


@command("bzmpop", -5, Flag.WRITE | Flag.BLOCKING)
def cmd_bzmpop(s: Session, argv: list[bytes]) -> Reply:
    keys, at_max, count = _mpop_args(argv, 2)
    return _blocking_pop(s, keys, parse_timeout(argv[1]), at_max, count)


# -- ZRANDMEMBER / ZSCAN -------------------------------------------------------------------


@command("zrandmember", -2, Flag.READONLY, 1, 1, 1)
def cmd_zrandmember(s: Session, argv: list[bytes]) -> Reply:
    n = len(argv)
    if n < 3:
        z = get_zset(s, argv[1])
        if z is None:
            return None
        e: bytes = z.order[random.randrange(len(z))][1]
        return e
    count = get_range_long(argv[2], -LONG_MAX, LONG_MAX)
    withscores = n == 4
    if n > 4 or (withscores and argv[3].lower() != b"withscores"):
        raise CommandError(SYNTAX)
    if withscores and not -(LONG_MAX // 2) <= count <= LONG_MAX // 2:
        raise CommandError(OUT_OF_RANGE)
    z = get_zset(s, argv[1])
    if z is None or count == 0:
        return []
    order = z.order
    size = len(order)
    if count < 0 or count == 1:
        rr = random.randrange
        items = [order[rr(size)] for _ in range(-count if count < 0 else 1)]
    elif count >= size:
        items = list(reversed(order))  # Redis walks sorted sets from the tail
    else:
        items = [order[i] for i in sorted(random.sample(range(size), count))]
    return entries_reply(s, items, withscores)


_MAX_CURSOR = 2**64 - 1
_SCAN_CURSOR = re.compile(rb"([+-]?)([0-9]+)")


def _score_key(sc: float) -> int:
    """An order-preserving map of doubles to positive integers (the ZSCAN cursor)."""
    bits: int = struct.unpack(">Q", struct.pack(">d", sc + 0.0))[0]
    return (bits ^ _MAX_CURSOR) if bits >> 63 else bits | (1 << 63)


def _key_score(key: int) -> float:
    bits = key & ~(1 << 63) if key >> 63 else key ^ _MAX_CURSOR
    v: float = struct.unpack(">d", struct.pack(">Q", bits))[0]
    return v


@command("zscan", -3, Flag.READONLY, 1, 1, 1)
def cmd_zscan(s: Session, argv: list[bytes]) -> Reply:
    cursor = parse_scan_cursor(argv[2])
    z = get_zset(s, argv[1])
    if z is None:
        return [b"0", []]
    count, match = parse_scan_options(argv, 3)
    order = z.order
    if not z.big:
        # A listpack is returned whole, with its scores as stored, and cursor 0.
        items = [(listpack_score(sc), m) for sc, m in order]
        nxt = 0
    else:
        # The cursor is the (encoded) score to resume from; a run of equal scores is
        # never split, so every member present throughout is returned at least once.
        lo = 0
        if cursor:
            start = _key_score(cursor)
            lo = len(order) if start != start else order.bisect_left((start,))
        hi = min(lo + count, len(order))
        if hi < len(order):
            hi = order.bisect_right((order[hi - 1][0], TOP))
        items = [(format_double(sc), m) for sc, m in order.islice(lo, hi)]
        nxt = _score_key(order[hi][0]) if hi < len(order) else 0
    out: list[bytes] = []
    for text, m in items:
        if match is None or match(m):
            out.append(m)
            out.append(text)
    return [b"%d" % nxt, out]
