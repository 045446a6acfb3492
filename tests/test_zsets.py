"""Differential tests of the sorted set family against redis-server, RESP2 and RESP3."""

from __future__ import annotations

import threading
import time
from typing import Any

from tests.conftest import Differ
from tests.resp_client import RawClient, encode_command, parse

LONG = "x" * 65


def plain(raw: bytes) -> Any:
    """A reply as plain values: bytes, numbers, lists (tags dropped)."""

    def strip(v: Any) -> Any:
        kind: str = v[0]
        body: Any = v[1] if len(v) == 2 else None
        if isinstance(body, list):
            return [strip(x) for x in body]
        if kind == ",":
            return float(body)
        return body

    return strip(parse(raw))


def _fill(diff: Differ, key: str, n: int, score: str = "i") -> None:
    """ZADD `n` members m0.. with score i (or a fixed score) on both servers."""
    args: list[str] = []
    for i in range(n):
        args += [str(i) if score == "i" else score, f"m{i}"]
    diff.check("ZADD", key, *args)


def test_zadd_basics_and_options(diff: Differ) -> None:
    diff.run("""
        ZADD z 1 a 2 b 3 c
        ZADD z 1 a
        ZADD z 5 a 6 d
        ZRANGE z 0 -1 WITHSCORES
        ZADD z CH 5 a 7 b 8 e
        ZADD z NX 100 a 100 f
        ZADD z XX 200 a 200 g
        ZADD z XX CH 201 a 200 g
        ZADD z GT 1 a
        ZADD z GT CH 300 a
        ZADD z LT CH 400 a 0 b
        ZADD z XX GT CH 500 a 500 nope
        ZADD z LT 1000 newlt
        ZADD z GT 1000 newgt
        ZRANGE z 0 -1 WITHSCORES
        ZADD z 1 a 2 a 3 a
        ZSCORE z a
        ZADD z CH 3 a 3 a
        ZADD z nx xx 1 a
        ZADD z NX GT 1 a
        ZADD z NX LT 1 a
        ZADD z GT LT 1 a
        ZADD z XX NX GT 1 a
        ZADD z INCR 1 a 2 b
        ZADD z 1
        ZADD z 1 a 2
        ZADD z NX
        ZADD z abc a
        ZADD z 1 a abc b
        ZADD z nan a
        ZADD z " 1" a
        ZADD z "1 " a
        ZADD z 1e400 a
        ZADD z 1e-400 a
        ZADD z 1f a
        ZADD z 0x10 hex
        ZADD z 4e-320 sub
        ZADD z inf pinf -inf ninf +inf pinf2 -Infinity ninf2
        ZADD z 1.5e3 e 0.1 tenth -.5 neghalf 1. one
        ZRANGE z 0 -1 WITHSCORES
        ZADD missing XX 1 a
        ZADD missing XX INCR 1 a
        EXISTS missing
        SET str x
        ZADD str 1 a
        ZADD str abc a
        ZADD str NX XX 1 a
        ZADD
        ZADD z
        ZADD z 1
    """)


def test_zadd_incr_and_zincrby(diff: Differ) -> None:
    diff.run("""
        ZADD z INCR 1.5 a
        ZADD z INCR 1.5 a
        ZADD z INCR NX 1 a
        ZADD z INCR NX 1 b
        ZADD z INCR XX 1 c
        ZADD z INCR XX 1 a
        ZADD z INCR GT -1 a
        ZADD z INCR LT -1 a
        ZADD z INCR GT 1 a
        ZADD z INCR CH 1 a
        ZINCRBY z 1 a
        ZINCRBY z -10 a
        ZINCRBY z 0.1 f
        ZINCRBY z 0.2 f
        ZINCRBY z abc a
        ZINCRBY z 1e400 a
        ZINCRBY new 5 m
        ZINCRBY z inf i
        ZINCRBY z -inf i
        ZSCORE z i
        ZADD z INCR -inf i
        ZINCRBY z inf n2
        ZINCRBY z inf n2
        ZINCRBY z nx a
        ZINCRBY z incr a
        ZINCRBY z 1
        ZRANGE z 0 -1 WITHSCORES
        SET str x
        ZINCRBY str 1 a
    """)


def test_zadd_negative_zero_and_encodings(diff: Differ) -> None:
    diff.run(f"""
        ZADD z -0 a
        ZSCORE z a
        ZSCAN z 0
        ZADD z 5 b
        ZADD z -0 b
        ZSCORE z b
        ZADD z INCR -0 c
        ZSCORE z c
        OBJECT ENCODING z
        ZADD big 1 {LONG} -0 a
        OBJECT ENCODING big
        ZSCORE big a
        ZADD big2 -0 a 1 {LONG} -0 b
        OBJECT ENCODING big2
        ZMSCORE big2 a b
        ZADD lp 1 {"y" * 64}
        OBJECT ENCODING lp
        ZADD lp 2 {LONG}
        OBJECT ENCODING lp
        ZREM lp {LONG}
        OBJECT ENCODING lp
    """)
    _fill(diff, "n", 128)
    diff.run("""
        OBJECT ENCODING n
        ZADD n 1 m1
        OBJECT ENCODING n
        ZADD n -0 extra
        OBJECT ENCODING n
        ZSCORE n extra
        ZPOPMAX n 2
        OBJECT ENCODING n
        ZCARD n
    """)


def test_zrem_zcard_zscore_zmscore(diff: Differ) -> None:
    diff.run("""
        ZADD z 1 a 2 b 3 c
        ZREM z a x a
        ZCARD z
        ZREM z nope
        ZREM missing a
        ZSCORE z b
        ZSCORE z nope
        ZSCORE missing a
        ZMSCORE z b nope c
        ZMSCORE missing a b
        ZREM z b c
        EXISTS z
        ZCARD z
        ZCARD missing
        SET str x
        ZREM str a
        ZCARD str
        ZSCORE str a
        ZMSCORE str a
        ZMSCORE z
        ZREM z
        ZCARD
        ZSCORE z
        ZADD f 0.1 a 1.1 b 1e22 c 123456789.123 d -3.5e-5 e
        ZMSCORE f a b c d e
        ZRANGE f 0 -1 WITHSCORES
    """)


def test_zrank_zcount_zlexcount(diff: Differ) -> None:
    diff.run("""
        ZADD z 1 a 2 b 2 c 3 d 5 e
        ZRANK z a
        ZRANK z c
        ZREVRANK z a
        ZREVRANK z e
        ZRANK z nope
        ZRANK missing a
        ZREVRANK missing a
        ZCOUNT z -inf +inf
        ZCOUNT z 2 3
        ZCOUNT z (2 3
        ZCOUNT z (2 (3
        ZCOUNT z 3 2
        ZCOUNT z (2 (2
        ZCOUNT z 2 2
        ZCOUNT z ( +inf
        ZCOUNT z "" 2
        ZCOUNT z " 2" 3
        ZCOUNT z "2 " 3
        ZCOUNT z abc 3
        ZCOUNT z 1 nan
        ZCOUNT z 0x2 1e400
        ZCOUNT z -1e400 ((1
        ZCOUNT missing 1 2
        ZCOUNT missing a b
        ZADD l 0 a 0 b 0 c 0 d 0 e
        ZLEXCOUNT l - +
        ZLEXCOUNT l [b [d
        ZLEXCOUNT l (b [d
        ZLEXCOUNT l (b (d
        ZLEXCOUNT l [d [b
        ZLEXCOUNT l + -
        ZLEXCOUNT l - -
        ZLEXCOUNT l + +
        ZLEXCOUNT l [b [b
        ZLEXCOUNT l (b [b
        ZLEXCOUNT l - (c
        ZLEXCOUNT l [ +
        ZLEXCOUNT l ( +
        ZLEXCOUNT l b d
        ZLEXCOUNT l +a -
        ZLEXCOUNT l "" +
        ZLEXCOUNT missing - +
        ZLEXCOUNT missing a b
        ZLEXCOUNT z [a [e
        SET str x
        ZRANK str a
        ZCOUNT str 1 2
        ZCOUNT str a 2
        ZLEXCOUNT str - +
        ZLEXCOUNT str a +
        ZRANK z
        ZCOUNT z 1
    """)


def test_zrange_by_rank(diff: Differ) -> None:
    diff.run("""
        ZADD z 1 a 2 b 3 c 4 d 5 e
        ZRANGE z 0 -1
        ZRANGE z 0 -1 WITHSCORES
        ZRANGE z 1 2 withscores
        ZRANGE z -2 -1
        ZRANGE z -100 100
        ZRANGE z 3 1
        ZRANGE z 5 10
        ZRANGE z -1 -100
        ZRANGE z 0 0 REV
        ZRANGE z 0 1 REV WITHSCORES
        ZRANGE z -2 -1 REV
        ZREVRANGE z 0 -1
        ZREVRANGE z 0 1 WITHSCORES
        ZREVRANGE z 1 0
        ZREVRANGE z 0 -1 REV
        ZREVRANGE z 0 -1 LIMIT 0 1
        ZRANGE z 0 -1 LIMIT 0 1
        ZRANGE z 0 -1 LIMIT 0 -1
        ZRANGE z 0 -1 LIMIT 0
        ZRANGE z a -1
        ZRANGE z 0 b
        ZRANGE z 0 9223372036854775808
        ZRANGE z 0 -1 FOO
        ZRANGE z 0 -1 LIMIT x 1
        ZRANGE z 0 -1 REV REV
        ZRANGE z 0 -1 BYSCORE BYLEX
        ZRANGE missing 0 -1
        ZRANGE missing a b
        ZRANGE missing 0 -1 WITHSCORES
        ZREVRANGE missing 0 -1
        SET str x
        ZRANGE str 0 -1
        ZRANGE str a b
        ZRANGE z 0
        ZREVRANGE z 0
    """)


def test_zrange_by_score(diff: Differ) -> None:
    diff.run("""
        ZADD z 1 a 2 b 2 c 3 d 5 e -inf n inf p
        ZRANGE z 2 3 BYSCORE
        ZRANGE z (2 3 BYSCORE WITHSCORES
        ZRANGE z -inf +inf BYSCORE WITHSCORES
        ZRANGE z 3 2 BYSCORE REV
        ZRANGE z +inf -inf BYSCORE REV WITHSCORES
        ZRANGE z -inf +inf BYSCORE LIMIT 1 2
        ZRANGE z -inf +inf BYSCORE LIMIT 1 -1
        ZRANGE z -inf +inf BYSCORE LIMIT -1 2
        ZRANGE z -inf +inf BYSCORE LIMIT 0 0
        ZRANGE z -inf +inf BYSCORE LIMIT 100 1
        ZRANGE z +inf -inf BYSCORE REV LIMIT 2 3 WITHSCORES
        ZRANGE z 2 3 BYSCORE LIMIT 1 10
        ZRANGE z 1 2 BYSCORE LIMIT
        ZRANGE z 1 2 BYSCORE LIMIT 1
        ZRANGE z a 2 BYSCORE
        ZRANGE z 1 (b BYSCORE
        ZRANGE z [1 2 BYSCORE
        ZRANGEBYSCORE z 2 3
        ZRANGEBYSCORE z -inf +inf WITHSCORES
        ZRANGEBYSCORE z -inf +inf WITHSCORES LIMIT 1 2
        ZRANGEBYSCORE z -inf +inf LIMIT 1 2 WITHSCORES
        ZRANGEBYSCORE z (1 (5
        ZRANGEBYSCORE z 5 1
        ZRANGEBYSCORE z -inf +inf BYSCORE
        ZRANGEBYSCORE z -inf +inf REV
        ZRANGEBYSCORE z inf inf
        ZRANGEBYSCORE z (inf inf
        ZRANGEBYSCORE z -inf (-inf
        ZREVRANGEBYSCORE z 3 2
        ZREVRANGEBYSCORE z +inf -inf WITHSCORES
        ZREVRANGEBYSCORE z +inf -inf LIMIT 1 3
        ZREVRANGEBYSCORE z (3 (1
        ZREVRANGEBYSCORE z 1 3
        ZREVRANGEBYSCORE z a 3
        ZRANGEBYSCORE missing 1 2
        ZRANGEBYSCORE missing a b
        SET str x
        ZRANGEBYSCORE str 1 2
        ZRANGEBYSCORE str a 2
    """)


def test_zrange_by_lex(diff: Differ) -> None:
    diff.run("""
        ZADD l 0 a 0 b 0 c 0 d 0 e 0 ff 0 g
        ZRANGE l [b [d BYLEX
        ZRANGE l - + BYLEX
        ZRANGE l - + BYLEX LIMIT 2 3
        ZRANGE l + - BYLEX REV
        ZRANGE l [d (b BYLEX REV
        ZRANGE l + - BYLEX REV LIMIT 1 2
        ZRANGE l - + BYLEX WITHSCORES
        ZRANGE l - + BYLEX LIMIT -1 2
        ZRANGE l - + BYLEX LIMIT 0 0
        ZRANGE l (f + BYLEX
        ZRANGE l [f + BYLEX
        ZRANGE l a + BYLEX
        ZRANGEBYLEX l - +
        ZRANGEBYLEX l [aa (e
        ZRANGEBYLEX l [b [d LIMIT 1 5
        ZRANGEBYLEX l - + WITHSCORES
        ZRANGEBYLEX l - + LIMIT 1
        ZRANGEBYLEX l - + BYLEX
        ZRANGEBYLEX l + -
        ZRANGEBYLEX l [e [b
        ZREVRANGEBYLEX l + -
        ZREVRANGEBYLEX l [d [b
        ZREVRANGEBYLEX l (d (b LIMIT 0 1
        ZREVRANGEBYLEX l - +
        ZREVRANGEBYLEX l a b
        ZRANGEBYLEX missing - +
        ZRANGEBYLEX missing a b
        ZADD mixed 1 d 2 a 3 c 4 b 5 e
        ZRANGEBYLEX mixed [b [d
        ZRANGEBYLEX mixed - +
        ZRANGEBYLEX mixed (a +
        ZRANGEBYLEX mixed [b [d LIMIT 1 10
        ZREVRANGEBYLEX mixed [d [b
        ZREVRANGEBYLEX mixed + (a
        ZREVRANGEBYLEX mixed [d [b LIMIT 1 10
        ZLEXCOUNT mixed [b [d
        ZLEXCOUNT mixed - +
        SET str x
        ZRANGEBYLEX str - +
        ZRANGEBYLEX str a b
    """)


def test_zrangestore(diff: Differ) -> None:
    diff.run(f"""
        ZADD z 1 a 2 b 3 c 4 d 5 e
        ZRANGESTORE dst z 0 -1
        ZRANGE dst 0 -1 WITHSCORES
        ZRANGESTORE dst z 1 2 REV
        ZRANGE dst 0 -1 WITHSCORES
        ZRANGESTORE dst z (1 4 BYSCORE LIMIT 1 2
        ZRANGE dst 0 -1 WITHSCORES
        ZRANGESTORE dst z 4 1 BYSCORE REV
        ZRANGE dst 0 -1 WITHSCORES
        ZRANGESTORE dst z [b (e BYLEX
        ZRANGE dst 0 -1 WITHSCORES
        ZRANGESTORE dst z 0 -1 WITHSCORES
        ZRANGESTORE dst z 0 -1 LIMIT 0 1
        ZRANGESTORE dst z 10 20
        EXISTS dst
        ZRANGESTORE dst z 10 20
        SET dst x
        ZRANGESTORE dst missing 0 -1
        EXISTS dst
        SET dst x
        EXPIRE dst 100
        ZRANGESTORE dst z 0 0
        TTL dst
        TYPE dst
        ZRANGESTORE z z 0 1
        ZRANGE z 0 -1 WITHSCORES
        SET str x
        ZRANGESTORE dst str 0 -1
        ZRANGESTORE dst z a b
        ZRANGESTORE dst z 0
        ZADD neg -0 a 1 {LONG}
        ZRANGESTORE dst neg 0 -1
        OBJECT ENCODING dst
        ZSCORE dst a
        ZRANGESTORE dst neg 0 0
        OBJECT ENCODING dst
        ZSCORE dst a
    """)
    _fill(diff, "big", 200)
    diff.run("""
        ZRANGESTORE dst big 0 127
        OBJECT ENCODING dst
        ZRANGESTORE dst big 0 128
        OBJECT ENCODING dst
        ZRANGESTORE dst big 0 127 BYSCORE
        OBJECT ENCODING dst
        ZRANGESTORE dst big 0 128 BYSCORE
        OBJECT ENCODING dst
        ZRANGESTORE dst big 0 -1
        ZCARD dst
    """)


def test_zremrangeby(diff: Differ) -> None:
    diff.run("""
        ZADD z 1 a 2 b 3 c 4 d 5 e
        ZREMRANGEBYRANK z 0 0
        ZREMRANGEBYRANK z -1 -1
        ZREMRANGEBYRANK z 5 10
        ZREMRANGEBYRANK z 2 1
        ZRANGE z 0 -1
        ZREMRANGEBYRANK z 0 -1
        EXISTS z
        ZADD z 1 a 2 b 3 c 4 d 5 e
        ZREMRANGEBYSCORE z (1 3
        ZREMRANGEBYSCORE z 10 20
        ZREMRANGEBYSCORE z -inf +inf
        EXISTS z
        ZADD l 0 a 0 b 0 c 0 d
        ZREMRANGEBYLEX l [b (d
        ZRANGE l 0 -1
        ZREMRANGEBYLEX l + -
        ZREMRANGEBYLEX l - +
        EXISTS l
        ZREMRANGEBYRANK missing 0 -1
        ZREMRANGEBYSCORE missing 0 1
        ZREMRANGEBYLEX missing - +
        ZREMRANGEBYRANK z a 1
        ZREMRANGEBYSCORE z a 1
        ZREMRANGEBYLEX z a b
        SET str x
        ZREMRANGEBYRANK str 0 1
        ZREMRANGEBYSCORE str 0 1
        ZREMRANGEBYLEX str - +
        ZREMRANGEBYLEX str a +
        ZREMRANGEBYRANK z 0
    """)


def test_zunionstore_zinterstore(diff: Differ) -> None:
    diff.run("""
        ZADD a 1 x 2 y 3 z
        ZADD b 10 y 20 z 30 w
        SADD s y w v
        ZUNIONSTORE dst 2 a b
        ZRANGE dst 0 -1 WITHSCORES
        ZUNIONSTORE dst 2 a b WEIGHTS 2 0.5
        ZRANGE dst 0 -1 WITHSCORES
        ZUNIONSTORE dst 2 a b AGGREGATE MIN
        ZRANGE dst 0 -1 WITHSCORES
        ZUNIONSTORE dst 2 a b AGGREGATE max WEIGHTS 1 -1
        ZRANGE dst 0 -1 WITHSCORES
        ZUNIONSTORE dst 3 a b s
        ZRANGE dst 0 -1 WITHSCORES
        ZUNIONSTORE dst 3 a missing s WEIGHTS 1 2 3
        ZRANGE dst 0 -1 WITHSCORES
        ZINTERSTORE dst 2 a b
        ZRANGE dst 0 -1 WITHSCORES
        ZINTERSTORE dst 3 a b s AGGREGATE MAX
        ZRANGE dst 0 -1 WITHSCORES
        ZINTERSTORE dst 2 a b WEIGHTS 1 2 AGGREGATE MIN
        ZRANGE dst 0 -1 WITHSCORES
        ZINTERSTORE dst 2 a a
        ZRANGE dst 0 -1 WITHSCORES
        ZINTERSTORE dst 2 a missing
        EXISTS dst
        ZINTERSTORE dst 2 a missing
        ZADD inf inf x -inf y
        ZADD ninf -inf x inf y
        ZUNIONSTORE dst 2 inf ninf
        ZRANGE dst 0 -1 WITHSCORES
        ZUNIONSTORE dst 2 inf ninf WEIGHTS 0 1
        ZRANGE dst 0 -1 WITHSCORES
        ZINTERSTORE dst 2 inf ninf
        ZRANGE dst 0 -1 WITHSCORES
        ZINTERSTORE dst 2 inf ninf WEIGHTS 0 0
        ZRANGE dst 0 -1 WITHSCORES
        ZUNIONSTORE dst 0 a
        ZUNIONSTORE dst -1 a
        ZUNIONSTORE dst x a
        ZUNIONSTORE dst 3 a b
        ZINTERSTORE dst 0 a
        ZUNIONSTORE dst 2 a b WEIGHTS 1
        ZUNIONSTORE dst 2 a b WEIGHTS 1 x
        ZUNIONSTORE dst 2 a b WEIGHTS 1 nan
        ZUNIONSTORE dst 2 a b AGGREGATE avg
        ZUNIONSTORE dst 2 a b AGGREGATE
        ZUNIONSTORE dst 2 a b WITHSCORES
        ZUNIONSTORE dst 2 a b FOO
        SET str x
        ZUNIONSTORE dst 2 a str
        ZUNIONSTORE dst 2 a str WEIGHTS x y
        ZINTERSTORE dst 2 str a
        ZUNIONSTORE str 1 a
        TYPE str
        ZUNIONSTORE dst 1 a
        EXPIRE dst 100
        ZUNIONSTORE dst 1 a
        TTL dst
        ZUNIONSTORE dst
        ZINTERSTORE dst 1
    """)


def test_zunion_zinter_zdiff(diff: Differ) -> None:
    diff.run("""
        ZADD a 1 x 2 y 3 z
        ZADD b 10 y 20 z 30 w
        SADD s y w v
        ZUNION 2 a b
        ZUNION 2 a b WITHSCORES
        ZUNION 2 a b WITHSCORES WEIGHTS 1 2 AGGREGATE MAX
        ZUNION 3 a b s withscores
        ZUNION 1 missing
        ZUNION 1 missing WITHSCORES
        ZINTER 2 a b
        ZINTER 2 a b WITHSCORES
        ZINTER 2 a s WITHSCORES AGGREGATE SUM WEIGHTS 1 5
        ZINTER 2 a missing
        ZDIFF 2 a b
        ZDIFF 2 a b WITHSCORES
        ZDIFF 1 a WITHSCORES
        ZDIFF 2 a a
        ZDIFF 3 b a s WITHSCORES
        ZDIFF 2 missing a
        ZDIFF 2 s a WITHSCORES
        ZDIFF 2 a b WEIGHTS 1 2
        ZDIFF 2 a b AGGREGATE MIN
        ZDIFFSTORE dst 2 b a
        ZRANGE dst 0 -1 WITHSCORES
        ZDIFFSTORE dst 2 a a
        EXISTS dst
        ZDIFFSTORE dst 1 s
        ZRANGE dst 0 -1 WITHSCORES
        ZDIFFSTORE dst 1 a WITHSCORES
        ZUNION 0 a
        ZINTER 0 a
        ZDIFF 0 a
        ZDIFFSTORE dst 0 a
        ZUNION 3 a b
        ZUNION a b
        SET str x
        ZUNION 2 a str
        ZINTER 2 str missing
        ZDIFF 2 a str
        ZDIFFSTORE dst 2 a str
        ZINTERCARD 2 a b
        ZINTERCARD 2 a b LIMIT 1
        ZINTERCARD 2 a b LIMIT 0
        ZINTERCARD 3 a b s
        ZINTERCARD 2 a missing
        ZINTERCARD 2 a b LIMIT -1
        ZINTERCARD 2 a b LIMIT x
        ZINTERCARD 2 a b WITHSCORES
        ZINTERCARD 2 a b WEIGHTS 1 1
        ZINTERCARD 0 a
        ZINTERCARD 2 a str
        ZUNION 1
    """)


def test_setop_encodings_and_zero(diff: Differ) -> None:
    diff.run(f"""
        ZADD a -0 x 1 y
        ZADD b 1 {LONG}
        ZUNIONSTORE dst 1 a
        OBJECT ENCODING dst
        ZSCORE dst x
        ZUNIONSTORE dst 2 a b
        OBJECT ENCODING dst
        ZSCORE dst x
        ZUNION 1 a WITHSCORES
        ZUNIONSTORE dst 2 a a WEIGHTS -1 1
        ZRANGE dst 0 -1 WITHSCORES
    """)
    _fill(diff, "n", 129)
    diff.run("""
        ZINTERSTORE dst 1 n
        OBJECT ENCODING dst
        ZREMRANGEBYRANK n 0 0
        ZINTERSTORE dst 1 n
        OBJECT ENCODING dst
    """)


def test_zpopmin_zpopmax(diff: Differ) -> None:
    diff.run("""
        ZADD z 1 a 2 b 3 c 4 d 5 e
        ZPOPMIN z
        ZPOPMAX z
        ZPOPMIN z 2
        ZPOPMAX z 0
        ZPOPMAX z 10
        EXISTS z
        ZPOPMIN z
        ZPOPMIN z 3
        ZPOPMIN z -1
        ZPOPMIN z abc
        ZPOPMIN z 1 2
        ZADD z 1.5 a
        ZPOPMIN z 1
        SET str x
        ZPOPMIN str
        ZPOPMIN str 0
        ZPOPMIN str -1
    """)


def test_zmpop(diff: Differ) -> None:
    diff.run("""
        ZADD z 1 a 2 b 3 c
        ZADD y 10 q
        ZMPOP 1 z MIN
        ZMPOP 1 z MAX COUNT 5
        EXISTS z
        ZMPOP 2 z y MIN
        ZMPOP 2 z y MIN
        ZMPOP 2 z y MAX COUNT 2
        SET str x
        ZADD w 1 a
        ZMPOP 2 w str MIN
        ZMPOP 2 str w MIN
        ZMPOP 2 missing str MIN
        ZMPOP 0 z MIN
        ZMPOP -1 z MIN
        ZMPOP x z MIN
        ZMPOP 2 z MIN
        ZMPOP 1 z LEFT
        ZMPOP 1 z MIN COUNT 0
        ZMPOP 1 z MIN COUNT x
        ZMPOP 1 z MIN COUNT
        ZMPOP 1 z MIN COUNT 1 COUNT 1
        ZMPOP 1 z MIN FOO
        ZMPOP 1 z
    """)


def test_bzpop_immediate_and_errors(diff: Differ) -> None:
    diff.run("""
        ZADD z 1 a 2 b 3 c
        BZPOPMIN z 0
        BZPOPMAX z 0
        BZPOPMIN missing z 1
        BZPOPMIN missing z 0.01
        EXISTS z
        ZADD z 1 a 2 b 3 c
        BZMPOP 0 1 z MIN
        BZMPOP 0 2 missing z MAX COUNT 10
        BZPOPMIN z abc
        BZPOPMIN z -1
        BZPOPMIN z ""
        BZPOPMIN z inf
        BZPOPMIN z 1e20
        BZMPOP -1 1 z MIN
        BZMPOP abc 1 z MIN
        BZMPOP 0 0 z MIN
        BZMPOP 0 1 z FOO
        BZMPOP x 1 z FOO
        SET str x
        BZPOPMIN str 0
        BZPOPMIN missing str 0
        BZMPOP 0 2 missing str MIN
        BZPOPMIN z
        BZMPOP 0 1 z
        MULTI
        BZPOPMIN missing 0
        BZPOPMAX missing 0.01
        BZMPOP 0 1 missing MIN
        BZPOPMIN missing 0x10
        BZPOPMIN missing -0.0001
        BZPOPMIN missing 1e-400
        BZPOPMIN missing -0
        BZPOPMIN missing 0x1p-16445
        BZPOPMIN missing 0x1p-16446
        BZPOPMIN missing 1e-4951
        BZPOPMIN missing 1.1e4932
        BZPOPMIN missing 1.2e4932
        BZPOPMIN missing 0x1p16384
        BZPOPMIN missing 1e99999999999
        BZPOPMIN missing 9223372036854775.807
        BZPOPMIN missing 9223372036854775.808
        BZPOPMIN missing " 1"
        BZPOPMIN missing nan
        EXEC
    """)


def _blocked_pop(port: int, resp: int, args: list[str], pushes: list[list[str]]) -> bytes:
    """Block with `args` on one connection, run `pushes` on another, return the reply."""
    blocker = RawClient(port)
    other = RawClient(port)
    try:
        if resp == 3:
            blocker.call("HELLO", "3")
        blocker.send(encode_command(*args))
        time.sleep(0.2)
        for push in pushes:
            other.call(*push)
            time.sleep(0.05)
        return blocker.read_reply()
    finally:
        blocker.close()
        other.close()


def test_bzpop_blocks_until_push(diff: Differ) -> None:
    ref_port = diff.ref.sock.getpeername()[1]
    ours_port = diff.ours.sock.getpeername()[1]
    cases = [
        (["BZPOPMIN", "bk1", "bk2", "5"], [["ZADD", "bk2", "3", "x", "1", "y"]]),
        (["BZPOPMAX", "bk3", "5"], [["ZADD", "bk3", "3", "x", "1", "y"]]),
        (["BZMPOP", "5", "2", "bk4", "bk5", "MAX", "COUNT", "2"], [["ZADD", "bk5", "1", "a"]]),
        # another type under the key does not wake it with an error
        (
            ["BZPOPMIN", "bk6", "5"],
            [["SET", "bk6", "x"], ["DEL", "bk6"], ["ZADD", "bk6", "1", "a"]],
        ),
    ]
    for args, pushes in cases:
        results: dict[str, bytes] = {}

        def run(
            name: str,
            port: int,
            args: list[str] = args,
            pushes: list[list[str]] = pushes,
            results: dict[str, bytes] = results,
        ) -> None:
            results[name] = _blocked_pop(port, diff.resp, args, pushes)

        threads = [
            threading.Thread(target=run, args=("ref", ref_port)),
            threading.Thread(target=run, args=("ours", ours_port)),
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results["ours"] == results["ref"], (args, results)
        diff.check("ZRANGE", pushes[-1][1], "0", "-1", "WITHSCORES")


def test_bzpop_timeout(diff: Differ) -> None:
    start = time.monotonic()
    diff.check("BZPOPMIN", "never", "0.1")
    diff.check("BZMPOP", "0.1", "1", "never", "MIN")
    assert time.monotonic() - start < 5


def test_zrandmember(diff: Differ) -> None:
    diff.run("""
        ZADD z 1 a 2 b 3 c 4 d 5 e
        ZRANDMEMBER missing
        ZRANDMEMBER missing 5
        ZRANDMEMBER missing -5 WITHSCORES
        ZRANDMEMBER z 0
        ZRANDMEMBER z 0 WITHSCORES
        ZRANDMEMBER z 5
        ZRANDMEMBER z 10 WITHSCORES
        ZRANDMEMBER z abc
        ZRANDMEMBER z 1 FOO
        ZRANDMEMBER z 1 WITHSCORES FOO
        ZRANDMEMBER z -9223372036854775808
        ZRANDMEMBER z 9223372036854775807 WITHSCORES
        ZRANDMEMBER z -4611686018427387904 WITHSCORES
        SET str x
        ZRANDMEMBER str
        ZRANDMEMBER str 1
        ZRANDMEMBER str abc
    """)
    members = {b"a": 1.0, b"b": 2.0, b"c": 3.0, b"d": 4.0, b"e": 5.0}
    ref, ours = diff.both("ZRANDMEMBER", "z")
    assert plain(ours) in members and plain(ref) in members
    for count in (1, 3, -3, -20):
        for ws in (False, True):
            args = ["ZRANDMEMBER", "z", str(count)] + (["WITHSCORES"] if ws else [])
            ref, ours = diff.both(*args)
            got = plain(ours)
            want = plain(ref)
            assert isinstance(got, list) and isinstance(want, list)
            assert len(got) == len(want), (args, ref, ours)
            if ws and diff.resp == 2:
                pairs = list(zip(got[::2], got[1::2], strict=True))
            elif ws:
                pairs = [tuple(p) for p in got]
            else:
                pairs = [(m, None) for m in got]
            for m, sc in pairs:
                assert m in members
                if ws:
                    assert float(sc) == members[m]
            if count > 0:
                assert len({m for m, _ in pairs}) == len(pairs)
            n = min(abs(count), 5) if count > 0 else abs(count)
            assert len(pairs) == n
            if ws:
                # the score encoding (bulk in RESP2, double in RESP3) matches
                assert ours.count(b",") == ref.count(b","), (ref, ours)


def test_zscan(diff: Differ) -> None:
    diff.run("""
        ZADD z 1 a 2.5 b -0 c 1e18 d 1e19 e inf f -inf g 0.1 h 4611686018427387904 i
        ZSCAN z 0
        ZSCAN z 12345
        ZSCAN z 0 COUNT 1
        ZSCAN z 0 MATCH a*
        ZSCAN z 0 MATCH * COUNT 100
        ZSCAN z 0 MATCH [a-c]
        ZSCAN z 0 COUNT 0
        ZSCAN z 0 COUNT -1
        ZSCAN z 0 COUNT x
        ZSCAN z 0 MATCH
        ZSCAN z 0 FOO bar
        ZSCAN z abc
        ZSCAN z -1
        ZSCAN z ""
        ZSCAN z 18446744073709551615
        ZSCAN z 18446744073709551616
        ZSCAN z " 1"
        ZSCAN missing 0
        ZSCAN missing 0 COUNT 0
        ZSCAN missing abc
        SET str x
        ZSCAN str 0
        ZSCAN str x
        ZSCAN z
    """)


def _scan_pairs(raw: bytes) -> Any:
    cursor, items = plain(raw)
    return cursor, sorted(zip(items[::2], items[1::2], strict=True))


def test_zscan_big_iterates_everything(diff: Differ) -> None:
    args: list[str] = []
    for i in range(300):
        args += [str(i % 37) if i % 5 else "-0", f"member:{i}"]
    diff.check("ZADD", "big", *args)
    for client in (diff.ref, diff.ours):
        seen: dict[bytes, float] = {}
        cursor = b"0"
        calls = 0
        while True:
            reply = plain(client.call("ZSCAN", "big", cursor, "COUNT", "20"))
            assert isinstance(reply, list)
            cursor, items = reply[0], reply[1]
            for m, sc in zip(items[::2], items[1::2], strict=True):
                seen[m] = float(sc)
            calls += 1
            if cursor == b"0":
                break
            # changes mid-scan: members present throughout must still be seen
            client.call("ZREM", "big", f"member:{calls}")
            client.call("ZADD", "big", "1000", f"late:{calls}")
        assert calls > 3
        for i in range(300):
            if not 1 <= i < calls:
                assert f"member:{i}".encode() in seen
        assert seen[b"member:0"] == 0.0 and seen[b"member:299"] == 299 % 37
    # scores of a skiplist-encoded set are printed with %.17g ("-0" survives)
    diff.check("ZADD", "sk", "-0", "a", "1e18", "b", "0.1", "c", "inf", "d", "-inf", "e", "1", LONG)
    diff.check("ZSCAN", "sk", "0", "COUNT", "1000", normalize=_scan_pairs)
    diff.check("ZSCAN", "sk", "0", "COUNT", "1000", "MATCH", "[a-c]", normalize=_scan_pairs)
    # and the MATCH filter applies to members only
    ref, ours = diff.both("ZSCAN", "big", "0", "MATCH", "nomatch*", "COUNT", "1000")
    assert plain(ours) == plain(ref) == [b"0", []]


def test_big_sets_ranges(diff: Differ) -> None:
    _fill(diff, "big", 300)
    _fill(diff, "lex", 200, score="0")
    diff.run("""
        OBJECT ENCODING big
        ZRANGE big 100 110 WITHSCORES
        ZRANGE big -5 -1 REV
        ZRANGEBYSCORE big (50 60 WITHSCORES
        ZREVRANGEBYSCORE big 60 (50 LIMIT 2 3
        ZCOUNT big 10 (20
        ZRANK big m250
        ZREVRANK big m250
        ZRANGEBYLEX lex [m10 (m11
        ZRANGEBYLEX lex (m150 + LIMIT 5 5
        ZREVRANGEBYLEX lex (m2 [m19
        ZLEXCOUNT lex [m1 (m2
        ZREMRANGEBYLEX lex [m1 (m2
        ZCARD lex
        ZREMRANGEBYSCORE big 100 199
        ZREMRANGEBYRANK big 0 9
        ZCARD big
        ZRANGE big 0 4
        ZPOPMIN big 3
        ZPOPMAX big 3
        OBJECT ENCODING big
        ZUNIONSTORE dst 2 big lex
        ZCARD dst
        ZRANGE dst 0 9 WITHSCORES
        ZINTERSTORE dst 2 big lex
        ZDIFFSTORE dst 2 big lex
        ZCARD dst
        ZINTERCARD 2 big lex LIMIT 10
    """)


def test_wrong_arity(diff: Differ) -> None:
    diff.run("""
        ZADD z
        ZINCRBY z 1
        ZREM z
        ZSCORE z
        ZMSCORE z
        ZCARD
        ZCOUNT z 1
        ZLEXCOUNT z -
        ZRANGE z 0
        ZRANGESTORE d z 0
        ZREVRANGE z 0
        ZRANGEBYSCORE z 0
        ZREVRANGEBYSCORE z 0
        ZRANGEBYLEX z -
        ZREVRANGEBYLEX z +
        ZRANK z
        ZREVRANK z
        ZPOPMIN
        ZPOPMAX
        BZPOPMIN z
        BZPOPMAX z
        ZUNIONSTORE d 1
        ZINTERSTORE d 1
        ZDIFFSTORE d 1
        ZUNION 1
        ZINTER 1
        ZDIFF 1
        ZINTERCARD 1
        ZMPOP 1 z
        BZMPOP 0 1 z
        ZSCAN z
        ZRANDMEMBER
        ZREMRANGEBYRANK z 0
        ZREMRANGEBYSCORE z 0
        ZREMRANGEBYLEX z -
    """)
