"""Differential tests of SORT, SORT_RO, LCS and SUBSTR against redis-server, RESP2 and
RESP3."""

from __future__ import annotations

import random

from tests.conftest import Differ


def test_sort_basics(diff: Differ) -> None:
    diff.run("""
        RPUSH l 3 1 2 10 -5 1.5 0x10 inf -inf 1e3 " 7"
        SORT l
        SORT l DESC
        SORT l ASC LIMIT 2 3
        SORT l LIMIT 0 0
        SORT l LIMIT -5 3
        SORT l LIMIT 3 -1
        SORT l LIMIT 100 5
        SORT l LIMIT 1
        SORT l LIMIT a 1
        SORT l LIMIT 1 b
        SORT l ALPHA
        SORT l ALPHA DESC LIMIT 1 4
        SORT l DESC ALPHA ASC
        SORT l BOGUS
        SORT_RO l DESC
        SORT_RO l STORE dst
        SORT l STORE dst
        LRANGE dst 0 -1
        SORT l DESC STORE dst LIMIT 0 3
        LRANGE dst 0 -1
        SORT nokey
        SORT nokey STORE dst
        EXISTS dst
        RPUSH bad 1 2 abc
        SORT bad
        SORT bad ALPHA
        SORT bad STORE dst2
        EXISTS dst2
        RPUSH nan 1 nan
        SORT nan
        RPUSH odd 3 "  5" +5 .5 5. infinity 0X1P3 -0 ""
        SORT odd
        SORT odd DESC
        RPUSH odd2 "5 "
        SORT odd2
        RPUSH tie 2 b 2 a 2.0 1
        SORT tie ALPHA
        DEL tie
        RPUSH tie 2 2.0 02 1e0 1
        SORT tie
        SORT tie DESC
        SET str x
        SORT str
        SORT str ALPHA BY nosort
        SORT_RO str
        SORT
    """)
    # Last: Redis reads strtod's errno without clearing it, so after an ERANGE a later
    # SORT on the same connection may fail too (until some system call resets errno).
    diff.run("""
        RPUSH sub 1 0x1p-1074
        SORT sub
        RPUSH sub1 1 4e-320
        SORT sub1
        RPUSH sub2 1 1e-310
        SORT sub2
        RPUSH sub3 1 1e-400
        SORT sub3
    """)


def test_sort_sets_and_zsets(diff: Differ) -> None:
    diff.run("""
        SADD ints 5 3 9 -1 100
        SORT ints
        SORT ints DESC LIMIT 1 2
        SORT ints BY nosort
        SORT ints BY nosort DESC
        SORT ints BY nosort STORE dst
        LRANGE dst 0 -1
        SADD words banana apple cherry date
        SORT words ALPHA
        SORT words ALPHA DESC
        SORT words
        SORT words BY nosort STORE dst
        LRANGE dst 0 -1
        ZADD z 3 c 1 a 2 b 5 e 4 d
        SORT z ALPHA
        SORT z BY nosort
        SORT z BY nosort DESC
        SORT z BY nosort LIMIT 1 2
        SORT z BY nosort DESC LIMIT 1 2
        SORT z BY nosort LIMIT 10 2
        SORT z BY nosort STORE dst
        LRANGE dst 0 -1
        SORT z
        ZADD zn 3 10 1 30 2 20
        SORT zn
        SORT zn BY nosort
        SORT zn BY nosort DESC
    """)
    diff.run("~SORT words BY nosort")


def test_sort_by_and_get(diff: Differ) -> None:
    diff.run("""
        RPUSH ids 1 2 3 4
        MSET w_1 40 w_2 10 w_3 30 w_4 20
        MSET name_1 alice name_2 bob name_3 carol
        HSET h_1 f 3 g x
        HSET h_2 f 1 g y
        HSET h_3 f 2
        HSET h_4 f 4 g w
        SORT ids BY w_*
        SORT ids BY w_* DESC
        SORT ids BY w_* GET name_*
        SORT ids BY w_* GET # GET name_* GET h_*->g
        SORT ids BY h_*->f GET # GET h_*->f
        SORT ids BY h_*->f DESC LIMIT 1 2 GET #
        SORT ids BY h_*->g ALPHA GET h_*->g
        SORT ids BY name_* ALPHA GET name_*
        SORT ids BY name_* ALPHA DESC
        SORT ids BY missing_* GET #
        SORT ids BY nosort GET name_* GET nofield
        SORT ids BY nosort DESC GET #
        SORT ids BY nosort LIMIT 1 2 GET name_*
        SORT ids GET h_*->
        SORT ids GET h_*->nosuch
        SORT ids GET name_*->g
        SORT ids GET h_* GET #
        SORT ids BY w_* GET name_* STORE dst
        LRANGE dst 0 -1
        SORT ids BY w_* GET name_* GET h_*->g STORE dst LIMIT 1 10
        LRANGE dst 0 -1
        SORT ids BY name_*
        SORT ids BY w_*->x
        MSET pre1post 3 pre2post 1 pre3post 2 pre4post 0
        SORT ids BY pre*post GET pre*post
        SORT ids BY * GET *
        SORT ids GET
        SORT ids BY
        SORT ids GET # STORE
        SORT_RO ids BY w_* GET # GET name_*
        SORT_RO ids BY w_* GET # GET name_* STORE x
    """)


def test_sort_random_lists(diff: Differ) -> None:
    rng = random.Random(5)
    for _ in range(6):
        values = [str(rng.randrange(-50, 50) / rng.choice([1, 2, 4])) for _ in range(40)]
        diff.check("DEL", "r", "dst")
        diff.check("RPUSH", "r", *values)
        for i, v in enumerate(values):
            diff.check("SET", f"k_{v}", str(rng.randrange(1000)) + f".{i}")
        diff.check("SORT", "r")
        diff.check("SORT", "r", "DESC", "ALPHA")
        diff.check("SORT", "r", "BY", "k_*", "GET", "#", "GET", "k_*", "LIMIT", 3, 20)
        diff.check("SORT", "r", "BY", "k_*", "DESC", "STORE", "dst")
        diff.check("LRANGE", "dst", 0, -1)


def test_sort_acl_patterns(diff: Differ) -> None:
    """A user who cannot read every key may not use BY patterns or GET."""
    for c in (diff.ref, diff.ours):
        c.call("ACL", "SETUSER", "sorter", "on", "nopass", "+@all", "~l*", "~w*")
        c.call("RPUSH", "l1", "2", "1")
        c.call("AUTH", "sorter", "x")
    try:
        diff.run("""
            SORT l1
            SORT l1 BY nosort
            SORT l1 BY w_*
            SORT l1 GET #
            SORT l1 LIMIT 0 1 BY w_* GET #
        """)
    finally:
        for c in (diff.ref, diff.ours):
            c.call("AUTH", "default", "x")
            c.call("ACL", "DELUSER", "sorter")


def test_lcs(diff: Differ) -> None:
    diff.run("""
        MSET key1 ohmytext key2 mynewtext
        LCS key1 key2
        LCS key1 key2 LEN
        LCS key1 key2 IDX
        LCS key1 key2 IDX MINMATCHLEN 4
        LCS key1 key2 IDX MINMATCHLEN 4 WITHMATCHLEN
        LCS key1 key2 IDX WITHMATCHLEN
        LCS key1 key2 idx minmatchlen -3 withmatchlen
        LCS key1 key2 LEN IDX
        LCS key1 key2 MINMATCHLEN
        LCS key1 key2 MINMATCHLEN x
        LCS key1 key2 BOGUS
        LCS key1 nokey
        LCS nokey nokey2 IDX
        LCS key1 key1 IDX WITHMATCHLEN
        RPUSH list a
        LCS key1 list
        LCS list key1 LEN
        LCS key1
        MSET a1 ACCGGTCGAGTGCGCGGAAGCCGGCCGAA a2 GTCGTTCGGAATGCCGTTGCTCTGTAAA
        LCS a1 a2
        LCS a1 a2 IDX WITHMATCHLEN
        LCS a2 a1 IDX MINMATCHLEN 2
    """)
    rng = random.Random(9)
    for _ in range(10):
        a = "".join(rng.choice("abc") for _ in range(rng.randrange(0, 60)))
        b = "".join(rng.choice("abc") for _ in range(rng.randrange(0, 60)))
        diff.check("MSET", "x", a, "y", b)
        diff.check("LCS", "x", "y")
        diff.check("LCS", "x", "y", "IDX", "WITHMATCHLEN", "MINMATCHLEN", rng.randrange(4))


def test_substr(diff: Differ) -> None:
    diff.run("""
        SET s "Hello World"
        SUBSTR s 0 4
        SUBSTR s -5 -1
        SUBSTR s 6 100
        SUBSTR s 5 2
        SUBSTR s -100 -50
        SUBSTR s a 1
        SUBSTR nokey 0 1
        SUBSTR s 0
        RPUSH l a
        SUBSTR l 0 1
        SET n 12345
        SUBSTR n 1 2
    """)


def test_sort_limit_with_equal_weights(diff: Differ) -> None:
    """BY with LIMIT uses Redis' partial quicksort, which is not stable: elements with
    equal weights come out in the order it leaves them."""
    rng = random.Random(12)
    n = 90
    diff.check("RPUSH", "e", *[f"e{i:02d}" for i in range(n)])
    for i in range(n):
        if rng.random() < 0.8:
            diff.check("SET", f"w_e{i:02d}", rng.choice(["a", "b", "c"]))
    for start, count in ((0, 5), (3, 10), (10, 41), (0, 89), (50, 100), (89, 1)):
        for order in ("ASC", "DESC"):
            diff.check("SORT", "e", "BY", "w_*", "ALPHA", order, "LIMIT", start, count)
            diff.check("SORT", "e", "BY", "w_*", order, "LIMIT", start, count, "GET", "w_*")
