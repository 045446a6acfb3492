"""Differential tests of the set family against redis-server, RESP2 and RESP3.

Intsets are listed in numeric order by Redis, so their replies compare byte for
byte; hash-table sets compare unordered (`~`). SPOP/SRANDMEMBER are random: their
replies are checked for properties, and the key's state compared afterwards.
"""

from __future__ import annotations

import shlex
from typing import Any

from commands import families  # noqa: F401  (fills the command table)
from commands.dispatch import DISPATCHER
from commands.session import Session
from store import now_ms
from store.ops import EXPIRE
from store.values import HashSet
from tests.conftest import Differ
from tests.helpers import make_session
from tests.resp_client import parse

INTS = [str(i) for i in range(-300, 300, 2)]  # 300 members: an intset


def items(raw: bytes) -> list[bytes]:
    """The bulk strings of an aggregate reply."""
    kind, elems = parse(raw)
    assert kind in ("*", "~"), raw
    return [e[1] for e in elems]


def members(diff: Differ, key: str) -> tuple[set[bytes], set[bytes]]:
    ref, ours = diff.both("SMEMBERS", key)
    return set(items(ref)), set(items(ours))


def test_sadd_srem_and_reads(diff: Differ) -> None:
    diff.run("""
        SADD s 3 1 2
        SADD s 2 3 4 4
        SADD s 1
        SADD s 5
        SMEMBERS s
        SCARD s
        SCARD missing
        SISMEMBER s 1
        SISMEMBER s 9
        SISMEMBER s 01
        SISMEMBER missing 1
        SMISMEMBER s 1 9 2 a
        SMISMEMBER missing a b
        SREM s 9
        SREM s 1 1 2 9
        SMEMBERS s
        SREM missing a
        SREM s 3 4 5
        GET s
        SMEMBERS s
        SMEMBERS missing
        SADD h a b c a
        ~SMEMBERS h
        SADD h a
        SREM h a x
        SCARD h
        SREM h b c
        GET h
        SET str v
        SADD str a
        SREM str a
        SMEMBERS str
        SISMEMBER str a
        SMISMEMBER str a
        SCARD str
        SADD s
        SREM s
        SMEMBERS
        SMEMBERS a b
        SISMEMBER s
        SISMEMBER s a b
        SMISMEMBER s
        SCARD
        SCARD a b
    """)


def test_intset_order(diff: Differ) -> None:
    diff.run("""
        SADD i 10 -5 9223372036854775807 -9223372036854775808 0 7 100 -100
        SMEMBERS i
        SADD j 9223372036854775808 1 2
        ~SMEMBERS j
        SADD k 01 1 -0 +3
        ~SMEMBERS k
        SADD l 1 2 3
        SADD l x
        SREM l x
        ~SMEMBERS l
        SRANDMEMBER i 100
        SRANDMEMBER i 8
    """)
    diff.check("SADD", "many", *INTS)
    diff.check("SMEMBERS", "many")
    diff.check("SADD", "big", *[str(i) for i in range(600)])
    diff.check("SMEMBERS", "big", unordered=2)
    diff.check("SCARD", "big")
    diff.check("SSCAN", "many", "0" * 5000 + "1")
    diff.check("SREM", "big", *[str(i) for i in range(100, 600)])
    diff.check("SMEMBERS", "big", unordered=2)


def test_sets_algebra(diff: Differ) -> None:
    diff.run("""
        SADD a 1 2 3 4 5
        SADD b 4 5 6 7
        SADD c 5 7 9
        SADD x a b c 5
        SADD y b c d 1
        SET str v
        SINTER a b
        SINTER a b c
        SINTER b a
        SINTER a
        SINTER a missing
        SINTER missing a
        SINTER a a
        ~SINTER x y
        SINTER x a
        SINTER a str
        SINTER missing str
        SUNION a b c
        SUNION a missing
        SUNION missing
        ~SUNION a x
        ~SUNION x y
        SUNION a str
        SDIFF a b
        SDIFF a b c
        SDIFF a a
        SDIFF a b a
        SDIFF missing a
        SDIFF a missing
        SDIFF b missing c
        ~SDIFF x y
        ~SDIFF x a
        SDIFF a str
        SDIFF missing str
        SINTER
        SUNION
        SDIFF
    """)


def test_store_variants(diff: Differ) -> None:
    diff.run("""
        SADD a 1 2 3 4 5
        SADD b 4 5 6 7
        SADD x a b c 5
        SADD y b c d 1
        SET str v
        SINTERSTORE d a b
        SMEMBERS d
        SINTERSTORE d a missing
        GET d
        SINTERSTORE d a missing
        SINTERSTORE d x y
        ~SMEMBERS d
        SINTERSTORE d x a
        SMEMBERS d
        SINTERSTORE str a b
        SMEMBERS str
        SET str v
        SINTERSTORE d a str
        SMEMBERS d
        SUNIONSTORE d a b
        SMEMBERS d
        SUNIONSTORE d x y
        ~SMEMBERS d
        SUNIONSTORE d missing
        GET d
        SUNIONSTORE a a b
        SMEMBERS a
        SDIFFSTORE d a b
        SMEMBERS d
        SDIFFSTORE d x y
        ~SMEMBERS d
        SDIFFSTORE d x x
        GET d
        SDIFFSTORE d missing a
        SDIFFSTORE b b a
        GET b
        SDIFFSTORE d a str
        SUNIONSTORE d str
        SINTERSTORE d
        SUNIONSTORE d
        SDIFFSTORE d
    """)


def test_sintercard(diff: Differ) -> None:
    diff.run("""
        SADD a 1 2 3 4 5
        SADD b 2 3 4 5 6
        SADD c x y 3 4
        SET str v
        SINTERCARD 2 a b
        SINTERCARD 3 a b c
        SINTERCARD 1 a
        SINTERCARD 2 a missing
        SINTERCARD 2 a b LIMIT 0
        SINTERCARD 2 a b LIMIT 2
        SINTERCARD 2 a b LIMIT 4
        SINTERCARD 2 a b LIMIT 100
        SINTERCARD 2 a b limit 1 LIMIT 3
        SINTERCARD 2 a b LIMIT -1
        SINTERCARD 2 a b LIMIT x
        SINTERCARD 2 a b LIMIT
        SINTERCARD 2 a b FOO 1
        SINTERCARD 1 a b
        SINTERCARD 0 a
        SINTERCARD -1 a
        SINTERCARD x a
        SINTERCARD 01 a
        SINTERCARD 3 a b
        SINTERCARD 9223372036854775808 a
        SINTERCARD 2 a str
        SINTERCARD 2 missing str
        SINTERCARD 2 a str LIMIT -1
        SINTERCARD 1
        SINTERCARD
    """)


def test_smove(diff: Differ) -> None:
    diff.run("""
        SADD src 1 2 3
        SADD dst 3 4
        SET str v
        SMOVE src dst 1
        SMEMBERS src
        SMEMBERS dst
        SMOVE src dst 3
        SMEMBERS src
        SMEMBERS dst
        SMOVE src dst 9
        SMOVE src src 2
        SMOVE src src 9
        SMOVE missing dst 1
        SMOVE missing str 1
        SMOVE src str 2
        SMOVE str dst 2
        SMOVE src str 9
        SMOVE src new 2
        GET src
        SMEMBERS new
        SMOVE dst new a
        SADD h a b
        SMOVE h new a
        ~SMEMBERS new
        SMOVE h dst b
        GET h
        ~SMEMBERS dst
        SMOVE src dst
        SMOVE src dst a b
    """)


def test_spop(diff: Differ) -> None:
    diff.run("""
        SET str v
        SPOP missing
        SPOP missing 3
        SPOP missing 0
        SPOP missing -1
        SPOP str
        SPOP str 1
        SPOP str -1
        SPOP str x
        SADD s 1 2 3
        SPOP s 0
        SPOP s -1
        SPOP s x
        SPOP s 9223372036854775808
        SPOP s 1 2
        SPOP
        SPOP s 5
        GET s
        SADD s 5 3 1
        SPOP s 3
        GET s
        SADD h a b c
        ~SPOP h 3
        GET h
        SADD h 3 2 1 10 20 30 30
        SPOP h 100
    """)
    # One member at a time until the set is gone.
    diff.check("SADD", "p", *INTS[:20])
    for n in range(20, 0, -1):
        ref, ours = diff.both("SPOP", "p")
        assert ref.startswith(b"$") and ours.startswith(b"$")
        assert parse(ours)[1] in {m.encode() for m in INTS[:20]}
        r, o = diff.both("SCARD", "p")
        assert r == o == b":%d\r\n" % (n - 1)
    diff.check("GET", "p")
    # Few, many (the survivors-set strategy) and all of a set, intset and hashtable.
    fills = (INTS, [f"m{i}" for i in range(150)], [*INTS[:40], "a"])
    for n, fill in enumerate(fills):
        universe = set(map(str.encode, fill))
        for count in (5, len(fill) - 3):
            key = f"p{n}-{count}"
            diff.check("SADD", key, *fill)
            ref, ours = diff.both("SPOP", key, count)
            assert ref[:1] == ours[:1]
            popped = items(ours)
            assert len(popped) == len(set(popped)) == count
            assert set(popped) <= universe
            r_left, o_left = members(diff, key)
            assert len(o_left) == len(r_left) == len(fill) - count
            assert o_left == universe - set(popped)


def test_srandmember(diff: Differ) -> None:
    diff.run("""
        SET str v
        SRANDMEMBER missing
        SRANDMEMBER missing 5
        SRANDMEMBER missing -5
        SRANDMEMBER missing 0
        SRANDMEMBER missing x
        SRANDMEMBER str
        SRANDMEMBER str 1
        SRANDMEMBER str x
        SADD s 1 2 3
        SRANDMEMBER s 0
        SRANDMEMBER s 3
        SRANDMEMBER s 4
        SRANDMEMBER s 9223372036854775807
        SRANDMEMBER s -9223372036854775808
        SRANDMEMBER s 9223372036854775808
        SRANDMEMBER s x
        SRANDMEMBER s 1 2
        SRANDMEMBER
        SADD h a b c
        ~SRANDMEMBER h 3
        ~SRANDMEMBER h 10
        SMEMBERS s
    """)
    fill = [f"m{i}" for i in range(100)]
    diff.check("SADD", "r", *fill)
    universe = set(map(str.encode, fill))
    ref, ours = diff.both("SRANDMEMBER", "r")
    assert ours.startswith(b"$") and parse(ours)[1] in universe
    for count in (1, 2, 40, 90, 99, -1, -5, -300):
        ref, ours = diff.both("SRANDMEMBER", "r", count)
        assert ref[:1] == ours[:1] == b"*"
        got = items(ours)
        assert len(got) == abs(count) == len(items(ref))
        assert set(got) <= universe
        if count > 0:
            assert len(set(got)) == count
    diff.check("SCARD", "r")
    # Negative counts repeat members; a big sample sees more than one member.
    assert len(set(items(diff.both("SRANDMEMBER", "s", -50)[1]))) > 1


def test_sscan(diff: Differ) -> None:
    diff.run("""
        SET str v
        SSCAN missing 0
        SSCAN missing 0 COUNT 0
        SSCAN missing 0 FOO
        SSCAN missing x
        SSCAN str 0
        SSCAN str x
        SSCAN str 0 FOO
        SADD i 5 1 30 -2 4 11 12 100
        SSCAN i 0
        SSCAN i 7
        SSCAN i 0 COUNT 1
        SSCAN i 0 MATCH 1*
        SSCAN i 0 match * count 2
        SSCAN i 0 MATCH x*
        SSCAN i 0 COUNT 0
        SSCAN i 0 COUNT -1
        SSCAN i 0 COUNT x
        SSCAN i 0 COUNT
        SSCAN i 0 MATCH
        SSCAN i 0 TYPE string
        SSCAN i 0 FOO bar
        SSCAN i ""
        SSCAN i +5
        SSCAN i -1
        SSCAN i 18446744073709551615
        SSCAN i -18446744073709551615
        SSCAN i 18446744073709551616
        SSCAN i " 1"
        SSCAN i "1 "
        SSCAN i 0x1
        SSCAN i +
        SSCAN i -
        SSCAN i 1.5
        SSCAN i -0
        SSCAN i 000000000000000000000000000000000000000007
        SSCAN i 000000000000000000000000000000000000000000
        SSCAN i 99999999999999999999999999999999999999999999
        SADD h a b c d
        ~SSCAN h 0
        ~SSCAN h 0 MATCH [ab]
        ~SSCAN h 0 MATCH *
        SSCAN i
    """)
    fill = [f"member:{i}" for i in range(1000)]
    diff.check("SADD", "big", *fill)
    for count, pattern in ((10, None), (7, "member:1*"), (300, None)):
        seen: dict[str, set[bytes]] = {}
        for name, client in (("ref", diff.ref), ("ours", diff.ours)):
            got: set[bytes] = set()
            cursor = b"0"
            calls = 0
            while True:
                args: list[Any] = ["SSCAN", "big", cursor, "COUNT", count]
                if pattern:
                    args += ["MATCH", pattern]
                kind, (cur, batch) = parse(client.call(*args))
                assert kind == "*"
                cursor = cur[1]
                got |= {e[1] for e in batch[1]}
                calls += 1
                if cursor == b"0":
                    break
            assert calls > 1
            seen[name] = got
        assert seen["ours"] == seen["ref"]
        want = {m.encode() for m in fill if not pattern or m.startswith("member:1")}
        assert seen["ours"] == want


def test_sscan_survives_changes(diff: Differ) -> None:
    """Members present for the whole scan are returned, however the set changes."""
    fill = [f"k{i}" for i in range(600)]
    diff.check("SADD", "big", *fill)
    got: set[bytes] = set()
    cursor = b"0"
    step = 0
    while True:
        _kind, (cur, batch) = parse(diff.ours.call("SSCAN", "big", cursor, "COUNT", 25))
        got |= {e[1] for e in batch[1]}
        cursor = cur[1]
        step += 1
        diff.ours.call("SADD", "big", *[f"new{step}-{i}" for i in range(30)])
        diff.ours.call("SREM", "big", f"new{step - 1}-0", f"new{step - 1}-1")
        if cursor == b"0":
            break
    assert {m.encode() for m in fill} <= got


# -- encodings: ours (in process) against OBJECT ENCODING of redis-server -----------


def local_session() -> Session:
    return make_session()[0]


def check_encodings(diff: Differ, script: str, keys: list[str]) -> None:
    s = local_session()
    for line in script.strip().splitlines():
        args = shlex.split(line.strip())
        if not args:
            continue
        diff.ref.call(*args)
        DISPATCHER.execute(s, [a.encode() for a in args])
    for k in keys:
        raw = diff.ref.call("OBJECT", "ENCODING", k)
        value = s.db.data.get(k.encode())
        ours = (
            "none"
            if value is None
            else "hashtable"
            if type(value) is HashSet
            else "intset"
            if type(value) is set
            else "other"
        )
        want = "none" if raw.startswith(b"$-1") or raw == b"_\r\n" else parse(raw)[1].decode()
        assert ours == want, (k, want, ours)


def test_encodings(diff: Differ) -> None:
    ints = " ".join(str(i) for i in range(513))
    check_encodings(
        diff,
        f"""
        SADD i1 1 2 3
        SADD h1 1 a
        SADD h2 a
        SADD h3 1 2
        SADD h3 x
        SREM h3 x
        SADD h4 {ints}
        SADD i2 {ints}
        SREM i2 512
        SADD h5 -0
        SADD h6 9223372036854775808
        SADD i3 -9223372036854775808
        SMOVE h1 i4 1
        SMOVE h1 h7 a
        SADD i5 5
        SMOVE h2 i5 a
        SINTERSTORE i6 h3 i1
        SUNIONSTORE i7 i1 i3
        SDIFFSTORE i8 h3 i1
        SPOP i1
        """,
        ["i1", "h1", "h2", "h3", "h4", "i2", "h5", "h6", "i3", "i4", "h7", "i5", "i6", "i7", "i8"],
    )


def test_store_encodings(diff: Differ) -> None:
    """Stored results take the encoding Redis builds them with, including SDIFFSTORE's
    copy of a large first set that shrinks back into intset range (a hashtable)."""
    ints = " ".join(str(i) for i in range(600))
    drop = " ".join(str(i) for i in range(100, 600))
    check_encodings(
        diff,
        f"""
        SADD a 1 2 x
        SADD b 1 2 y
        SINTERSTORE d1 a b
        SADD c x y
        SINTERSTORE d2 a c
        SUNIONSTORE d3 a b
        SDIFFSTORE d4 a b
        SADD big {ints}
        SADD drop {drop}
        SDIFFSTORE d5 big drop
        SADD s1 {" ".join(str(i) for i in range(0, 40))}
        SADD s2 {" ".join(str(i) for i in range(40, 80))}
        SADD s3 {" ".join(str(i) for i in range(80, 120))}
        SDIFFSTORE d6 big s1 s2 s3
        SADD small 1 2 3
        SDIFFSTORE d7 big small drop
        SUNIONSTORE d8 big
        SUNIONSTORE d9 d6
        SINTERSTORE d10 big d6
        """,
        ["d1", "d2", "d3", "d4", "d5", "d6", "d7", "d8", "d9", "d10"],
    )


def test_spop_survivors_encoding(diff: Differ) -> None:
    """Popping most of a hashtable set keeps its survivors in a fresh set: an intset
    when they are all integers (random survivors, so checked as a property)."""
    fill = ["a", "b", *map(str, range(1, 11))]
    s = local_session()
    outcomes: dict[str, set[bool]] = {"ref": set(), "ours": set()}
    for _ in range(40):
        diff.ref.call("SREM", "p", *fill)
        diff.ref.call("SADD", "p", *fill)
        diff.ref.call("SPOP", "p", 10)
        left = items(diff.ref.call("SMEMBERS", "p"))
        all_ints = all(m.isdigit() for m in left)
        enc = parse(diff.ref.call("OBJECT", "ENCODING", "p"))[1]
        assert enc == (b"intset" if all_ints else b"hashtable")
        outcomes["ref"].add(all_ints)
        for argv in (["SREM", "p", *fill], ["SADD", "p", *fill], ["SPOP", "p", "10"]):
            DISPATCHER.execute(s, [a.encode() for a in argv])
        value = s.db.data[b"p"]
        all_ints = all(m.isdigit() for m in value)
        assert len(value) == 2
        assert type(value) is (set if all_ints else HashSet)
        outcomes["ours"].add(all_ints)
    assert outcomes == {"ref": {True, False}, "ours": {True, False}}


def test_ttl_kept_or_cleared(diff: Differ) -> None:
    """SPOP keeps the key's TTL, even when it rebuilds the set; *STORE clears it."""
    s = local_session()
    at = now_ms() + 100_000
    fill = ["a", "b", *map(str, range(1, 11))]
    script = [
        ["SADD", "p", *fill],
        ["EXPIRE", "p", "100"],
        ["SPOP", "p", "10"],
        ["SPOP", "p"],
        ["SADD", "d", "x"],
        ["EXPIRE", "d", "100"],
        ["SUNIONSTORE", "d", "p"],
        ["SADD", "e", "x"],
        ["EXPIRE", "e", "100"],
        ["SINTERSTORE", "e", "e", "missing"],
    ]
    for argv in script:
        diff.ref.call(*argv)
        if argv[0] == "EXPIRE":
            s.store.apply(s.db, argv[1].encode(), (EXPIRE, at))
            s.store.commit()
        else:
            DISPATCHER.execute(s, [a.encode() for a in argv])
    ttl = {k: parse(diff.ref.call("TTL", k))[1] for k in ("p", "d", "e")}
    assert int(ttl["p"]) > 0 and s.db.ttl_ms(b"p") == at
    assert ttl["d"] == b"-1" and s.db.ttl_ms(b"d") is None
    assert ttl["e"] == b"-2" and b"e" not in s.db.data
