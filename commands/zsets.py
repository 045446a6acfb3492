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
normalise -0 (see `zset_ranges.build_zset` and ZADD). Lex ranges assume equal scores, as Redis
does; with mixed scores they follow the listpack's linear walk.
"""

from __future__ import annotations

import random
import re
import struct
from collections.abc import Iterable
from typing import Any

from commands.common import (
    SET_TYPES,
    get_typed,
    get_zset,
    parse_scan_cursor,
    parse_scan_options,
    store_result,
)
from commands.errors import (
    COUNT_POSITIVE,
    NUMKEYS_POSITIVE,
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
)
from commands.registry import Flag, command
from commands.replies import NULL_ARRAY, Blocked, Reply
from commands.resp import encode_reply
from commands.sampling import fragments, sample_reply
from commands.session import Session
from commands.zset_ranges import (
    _INCR,
    LONG_MAX,
    TOP,
    _zadd,
    build_zset,
    entries_reply,
    get_positive_long,
    lex_empty,
    lex_select,
    lex_span,
    listpack_score,
    parse_lex_range,
    parse_score_range,
    rank_span,
    score_span,
    uniform,
    walk,
)
from store.ops import ZREM
from store.values import LIMITS, ZSet

LIMIT_NEEDS_RANGE = (
    "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX"
)
WITHSCORES_BYLEX = "ERR syntax error, WITHSCORES not supported in combination with BYLEX"
NEED_ONE_KEY = "ERR at least 1 input key is needed for '{}' command"
LIMIT_NEGATIVE = "ERR LIMIT can't be negative"
OUT_OF_RANGE = "ERR value is out of range"

W = Flag.WRITE | Flag.DENYOOM
R = Flag.READONLY | Flag.FAST


def _zset_or_set(s: Session, key: bytes) -> Any:
    return get_typed(s, key, (ZSet, *SET_TYPES))


# -- ZADD / ZINCRBY / ZREM ----------------------------------------------------------------


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
    if z is None or lex_empty(z, r):
        return 0
    if uniform(z):
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
        return [] if dst is None else store_result(s, dst, None)
    big = False
    if rangetype == _RANK:
        lo, hi = rank_span(len(z), start, end)
        if reverse:
            lo, hi = len(z) - hi, len(z) - lo
        items = walk(z, lo, hi, reverse, 0, -1)
        big = len(items) > LIMITS.zset_entries
    elif rangetype == _SCORE:
        lo, hi = score_span(z, sr)
        items = walk(z, lo, hi, reverse, offset, limit)
    else:
        items = lex_select(z, lr, reverse, offset, limit)
    if dst is not None:
        return store_result(s, dst, build_zset(items, big) if items else None)
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
    return _zrem_entries(s, argv[1], walk(z, lo, hi, False, 0, -1))


@command("zremrangebyscore", 4, Flag.WRITE, 1, 1, 1)
def cmd_zremrangebyscore(s: Session, argv: list[bytes]) -> Reply:
    r = parse_score_range(argv[2], argv[3])
    z = get_zset(s, argv[1])
    if z is None:
        return 0
    lo, hi = score_span(z, r)
    return _zrem_entries(s, argv[1], walk(z, lo, hi, False, 0, -1))


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
            return store_result(s, dst, None)
        big = len(items) > LIMITS.zset_entries or any(len(m) > LIMITS.zset_value for m in result)
        return store_result(s, dst, build_zset(items, big))
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
    if count < -size:  # many picks: each entry encoded once (commands.sampling)
        if not withscores:
            return sample_reply(s, fragments(s, [m for _, m in order]), -count)
        if s.resp == 2:
            frags = [encode_reply(m, 2) + encode_reply(sc, 2) for sc, m in order]
            return sample_reply(s, frags, -count, 2)
        return sample_reply(s, fragments(s, [[m, sc] for sc, m in order]), -count)
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
