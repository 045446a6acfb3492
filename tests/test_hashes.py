"""Differential tests of the hash family against redis-server, RESP2 and RESP3.

Small hashes (listpack in Redis, a dict here) keep insertion order, so their
replies compare byte for byte. Past the listpack limits the order is Redis' hash
table order: those replies are compared as field/value pairs, HSCAN by the union
of its pages, HRANDFIELD by its properties.
"""

from __future__ import annotations

from typing import Any

from store.ops import HDEL, HSET, HSETF, apply_op
from store.values import HashTable
from tests.conftest import Differ
from tests.helpers import make_session
from tests.resp_client import RawClient, parse

LISTPACK_MAX = 512  # Redis 7.0's built-in hash-max-listpack-entries
BIG = 600  # fields: past it


def fields(n: int, prefix: str = "f") -> list[str]:
    """field/value arguments: f0 v0 f1 v1 ..."""
    out: list[str] = []
    for i in range(n):
        out += [f"{prefix}{i}", f"v{i}"]
    return out


def strings(node: Any) -> Any:
    """A parsed reply reduced to Python values: bulk strings to bytes, aggregates
    to lists (null to None), other scalars to their raw text."""
    kind = node[0]
    if kind in ("null", "null-array"):
        return None
    if kind in ("*", "~", "%", ">", "|"):
        return [strings(x) for x in node[1]]
    return node[1]


def as_pairs(raw: bytes) -> Any:
    """A hash-shaped reply (RESP2 flat array or RESP3 map) as a sorted pair list."""
    value = parse(raw)
    if value[0] not in ("*", "%"):
        return value
    flat = strings(value)
    return (value[0], sorted(zip(flat[0::2], flat[1::2], strict=True)))


def scan_all(client: RawClient, key: str, *opts: str) -> tuple[dict[bytes, bytes], int]:
    """Page through HSCAN to cursor 0: the fields seen and how many calls it took."""
    seen: dict[bytes, bytes] = {}
    cursor = b"0"
    calls = 0
    while True:
        cur, flat = strings(parse(client.call("HSCAN", key, cursor, *opts)))
        calls += 1
        seen.update(zip(flat[0::2], flat[1::2], strict=True))
        if cur == b"0":
            return seen, calls
        cursor = cur
        assert calls < 10_000


def cursor_is_zero(raw: bytes) -> Any:
    """HSCAN's first reply reduced to: whole (cursor 0, with its content) or paged."""
    cur, flat = strings(parse(raw))
    return ("whole", flat) if cur == b"0" else "paged"


def test_set_and_get(diff: Differ) -> None:
    diff.run("""
        HSET h a 1
        HSET h b 2 c 3
        HSET h a 10 d 4
        HSET h x 1 x 2 y 3
        HGET h x
        HSET h ""  ""
        HGET h ""
        HGET h a
        HGET h nope
        HGET missing a
        HMGET h a b nope c
        HMGET missing a b
        HGETALL h
        HGETALL missing
        HKEYS h
        HKEYS missing
        HVALS h
        HVALS missing
        HLEN h
        HLEN missing
        HEXISTS h a
        HEXISTS h nope
        HEXISTS missing a
        HSTRLEN h a
        HSTRLEN h nope
        HSTRLEN missing a
        HMSET h a 100 z 26
        HGETALL h
        HMSET n k v
        HGETALL n
        HSETNX h a 5
        HSETNX h new 5
        HSETNX fresh f v
        HGETALL h
        HGETALL fresh
        HSET num 1 2 -3 -4 007 9223372036854775808
        HGETALL num
        HSTRLEN num 007
    """)


def test_arity_and_wrong_type(diff: Differ) -> None:
    diff.run("""
        SET s x
        HSET s a 1
        HMSET s a 1
        HSETNX s a 1
        HGET s a
        HMGET s a
        HGETALL s
        HKEYS s
        HVALS s
        HLEN s
        HEXISTS s a
        HSTRLEN s a
        HDEL s a
        HINCRBY s a 1
        HINCRBYFLOAT s a 1
        HSCAN s 0
        HRANDFIELD s
        HRANDFIELD s 2
        HRANDFIELD s 0
        HSET
        HSET h
        HSET h a
        HSET h a 1 b
        HMSET h a 1 b
        HMSET h a
        HSETNX h a
        HSETNX h a 1 2
        HGET h
        HGET h a b
        HMGET h
        HGETALL
        HGETALL h x
        HKEYS
        HVALS h x
        HLEN
        HEXISTS h
        HSTRLEN h
        HDEL h
        HINCRBY h a
        HINCRBYFLOAT h a 1 2
        HSCAN h
        HRANDFIELD
        DBSIZE
    """)


def test_hdel(diff: Differ) -> None:
    diff.run("""
        HSET h a 1 b 2 c 3 d 4
        HDEL h a
        HDEL h a
        HDEL h nope
        HDEL missing a
        HDEL h b b c nope
        HGETALL h
        HSET h e 5 f 6
        HGETALL h
        HDEL h d e f
        HLEN h
        HGETALL h
        GET h
        DBSIZE
        HSET h a 1
        HDEL h a a
        DBSIZE
    """)


def test_hincrby(diff: Differ) -> None:
    diff.run("""
        HINCRBY h n 1
        HINCRBY h n 41
        HINCRBY h n -100
        HINCRBY h m -5
        HGETALL h
        HINCRBY h n abc
        HINCRBY h n 1.5
        HINCRBY h n ""
        HINCRBY h n 9223372036854775808
        HSET h big 9223372036854775807 small -9223372036854775808
        HINCRBY h big 1
        HINCRBY h big 0
        HINCRBY h big -1
        HINCRBY h small -1
        HINCRBY h small 1
        HSET h s abc z 007 sp " 1" e ""  f 1.0
        HINCRBY h s 1
        HINCRBY h z 1
        HINCRBY h sp 1
        HINCRBY h e 1
        HINCRBY h f 1
        HINCRBY h s abc
        SET str x
        HINCRBY str f abc
        HINCRBY str f 1
        HINCRBY new f -9223372036854775808
        HINCRBY new f -1
        HGETALL h
        HGETALL new
    """)


def test_hincrbyfloat(diff: Differ) -> None:
    diff.run("""
        HINCRBYFLOAT h f 10.5
        HINCRBYFLOAT h f 0.1
        HINCRBYFLOAT h f -5
        HINCRBYFLOAT h g 0.1
        HINCRBYFLOAT h g 0.2
        HINCRBYFLOAT h g 3.0e3
        HINCRBYFLOAT h g -3000.3
        HINCRBYFLOAT h i 5
        HINCRBYFLOAT h i 1.5e-3
        HINCRBYFLOAT h x 0x10
        HINCRBYFLOAT h f abc
        HINCRBYFLOAT h f ""
        HINCRBYFLOAT h f inf
        HINCRBYFLOAT h f -inf
        HINCRBYFLOAT h f nan
        HINCRBYFLOAT h f " 1"
        HSET h s abc n 10 sp " 2" inf inf e ""
        HINCRBYFLOAT h s 1
        HINCRBYFLOAT h sp 1
        HINCRBYFLOAT h e 1
        HINCRBYFLOAT h n 0.25
        HINCRBYFLOAT h inf 1
        HINCRBYFLOAT h s inf
        HINCRBYFLOAT h s abc
        HINCRBYFLOAT h h 1e308
        HINCRBYFLOAT h h 1e308
        HGET h h
        SET str x
        HINCRBYFLOAT str f abc
        HINCRBYFLOAT str f inf
        HINCRBYFLOAT str f 1
    """)
    diff.check("HGETALL", "h", normalize=as_pairs)


def test_hscan_small(diff: Differ) -> None:
    diff.run("""
        HSCAN missing 0
        HSCAN missing 0 COUNT 0
        HSCAN missing 0 BOGUS
        HSCAN missing abc
        HSET h a 1 b 2 ab 3 ba 4 n 5 11 6
        HSCAN h 0
        HSCAN h 12345
        HSCAN h 0 COUNT 1
        HSCAN h 0 count 2 match a*
        HSCAN h 0 MATCH *a*
        HSCAN h 0 MATCH * COUNT 100
        HSCAN h 0 MATCH 1?
        HSCAN h 0 MATCH [ab]
        HSCAN h 0 MATCH zzz
        HSCAN h 0 MATCH a* MATCH b*
        HSCAN h 0 COUNT 0
        HSCAN h 0 COUNT -1
        HSCAN h 0 COUNT abc
        HSCAN h 0 COUNT
        HSCAN h 0 MATCH
        HSCAN h 0 BOGUS 1
        HSCAN h 0 COUNT 1 extra
        HSCAN h 0 TYPE string
        HSCAN h -1
        HSCAN h +5
        HSCAN h ""
        HSCAN h " 1"
        HSCAN h "1 "
        HSCAN h 0x10
        HSCAN h abc
        HSCAN h +
        HSCAN h -
        HSCAN h 18446744073709551615
        HSCAN h 18446744073709551616
        HSCAN h -18446744073709551615
        HSCAN h 99999999999999999999999
        SET s x
        HSCAN s abc
        HSCAN s 0 COUNT 0
    """)
    # The cursor is read as a C string: it ends at a NUL byte.
    for cursor in ("5\x00abc", "\x00", "\x00 ", " \x00", "x\x00"):
        diff.check("HSCAN", "h", cursor)


def test_hash_table_encoding(diff: Differ) -> None:
    """Past the listpack limits: compare content as pairs, and whether HSCAN
    returns the whole hash in one call (listpack) or pages (hash table)."""
    diff.check("HSET", "big", *fields(BIG))
    for cmd in ("HGETALL", "HKEYS", "HVALS"):
        diff.check(cmd, "big", normalize=as_pairs if cmd == "HGETALL" else _sorted)
    diff.run("""
        HLEN big
        HGET big f150
        HMGET big f0 f199 nope
        HEXISTS big f77
        HSTRLEN big f100
        HINCRBY big f0 1
        HDEL big f1 f2 nope
        HLEN big
        HSETNX big f3 x
        HSETNX big f1 x
        HGET big f1
    """)
    first = ("HSCAN", "big", "0", "COUNT", "1")
    diff.check(*first, normalize=cursor_is_zero)
    # Exactly LISTPACK_MAX fields stays a listpack; one more converts.
    diff.check("HSET", "lp", *fields(LISTPACK_MAX))
    diff.check(*first[:1], "lp", *first[2:], normalize=cursor_is_zero)
    diff.check("HSET", "lp", "one-more", "x")
    diff.check(*first[:1], "lp", *first[2:], normalize=cursor_is_zero)
    # Shrinking never converts back.
    diff.check("HDEL", "lp", *[f"f{i}" for i in range(400)])
    diff.check(*first[:1], "lp", *first[2:], normalize=cursor_is_zero)
    diff.check("HGETALL", "lp", normalize=as_pairs)


def _sorted(raw: bytes) -> Any:
    value = parse(raw)
    return sorted(strings(value)) if value[0] == "*" else value


def test_long_field_or_value_converts(diff: Differ) -> None:
    long64, long65 = "x" * 64, "y" * 65
    fill = fields(40)
    cases: list[tuple[str, ...]] = [
        ("HSET", "a", *fill, "k", long64),
        ("HSET", "b", *fill, "k", long65),
        ("HSET", "c", *fill, long65, "v"),
        ("HMSET", "d", *fill, long65, "v"),
        ("HSETNX", "e", long65, "v"),
    ]
    for args in cases:
        diff.check(*args)
        if args[0] == "HSETNX":
            diff.check("HSET", "e", *fill)
        diff.check("HSCAN", args[1], "0", "COUNT", "1", normalize=cursor_is_zero)
        diff.check("HGETALL", args[1], normalize=as_pairs)
    # HINCRBYFLOAT's long result and HINCRBY on a small hash.
    diff.check("HSET", "f", *fill)
    diff.check("HINCRBYFLOAT", "f", "g", "1e80")
    diff.check("HSCAN", "f", "0", "COUNT", "1", normalize=cursor_is_zero)
    diff.check("HSET", "g", *fill)
    diff.check("HINCRBY", "g", "n", "9223372036854775807")
    diff.check("HSCAN", "g", "0", "COUNT", "1", normalize=cursor_is_zero)


def test_hscan_pages_hash_table(diff: Differ) -> None:
    diff.check("HSET", "big", *fields(BIG), *fields(50, "other"))
    expected = {f"f{i}".encode(): f"v{i}".encode() for i in range(BIG)}
    expected.update({f"other{i}".encode(): f"v{i}".encode() for i in range(50)})
    for client in (diff.ref, diff.ours):
        seen, calls = scan_all(client, "big")
        assert seen == expected and calls > 5
        seen, calls = scan_all(client, "big", "COUNT", "1000")
        assert seen == expected and calls == 1
        seen, _ = scan_all(client, "big", "MATCH", "other*", "COUNT", "7")
        assert seen == {k: v for k, v in expected.items() if k.startswith(b"other")}
        seen, _ = scan_all(client, "big", "MATCH", "f1?")
        assert sorted(seen) == sorted(f"f1{i}".encode() for i in range(10))
    # COUNT and MATCH errors are the same on a hash table.
    diff.run("""
        HSCAN big 0 COUNT 0
        HSCAN big 0 MATCH
        HSCAN big 0 FOO bar
        HSCAN big x
    """)


def test_hscan_survives_changes(diff: Differ) -> None:
    """Fields present for the whole scan are returned though the hash grows and
    shrinks between calls (the reverse-binary cursor's guarantee)."""
    ours = diff.ours
    ours.call("HSET", "h", *fields(300))
    stable = {f"f{i}".encode() for i in range(0, 300, 3)}
    seen: set[bytes] = set()
    cursor = b"0"
    step = 0
    while True:
        cur, flat = strings(parse(ours.call("HSCAN", "h", cursor, "COUNT", "20")))
        seen.update(flat[0::2])
        if cur == b"0":
            break
        cursor = cur
        step += 1
        if step == 2:
            ours.call("HSET", "h", *fields(2000, "g"))
        elif step == 4:
            ours.call("HDEL", "h", *[f"g{i}" for i in range(2000)])
            ours.call("HDEL", "h", *[f"f{i}" for i in range(300) if i % 3])
    assert stable <= seen


def test_hrandfield_exact(diff: Differ) -> None:
    """What is not random compares byte for byte: errors, empty and whole replies."""
    diff.run("""
        HRANDFIELD missing
        HRANDFIELD missing 5
        HRANDFIELD missing -5 WITHVALUES
        HRANDFIELD missing 0
        HSET one f v
        HRANDFIELD one
        HRANDFIELD one 1
        HRANDFIELD one -3
        HRANDFIELD one -2 WITHVALUES
        HRANDFIELD one 1 withvalues
        HSET h a 1 b 2 c 3
        HRANDFIELD h 0
        HRANDFIELD h 0 WITHVALUES
        HRANDFIELD h 3
        HRANDFIELD h 100
        HRANDFIELD h 100 WITHVALUES
        HRANDFIELD h 9223372036854775807
        HRANDFIELD h 4611686018427387903 WITHVALUES
        HRANDFIELD h 4611686018427387904 WITHVALUES
        HRANDFIELD h -4611686018427387904 WITHVALUES
        HRANDFIELD h -9223372036854775808
        HRANDFIELD h 9223372036854775808
        HRANDFIELD h abc
        HRANDFIELD h 1.5
        HRANDFIELD h 1 WITHVALUE
        HRANDFIELD h 1 WITHVALUES x
        HRANDFIELD h abc WITHVALUES
        HRANDFIELD h abc foo
        SET s x
        HRANDFIELD s abc
        HRANDFIELD s 1 foo
    """)


def _hrandfield(diff: Differ, *args: str) -> list[Any]:
    """The parsed replies of both servers (each checked for the same shape)."""
    out = []
    for raw in diff.both("HRANDFIELD", *args):
        out.append(strings(parse(raw)))
    return out


def test_hrandfield_random(diff: Differ) -> None:
    for key, n in (("small", 10), ("big", BIG)):
        diff.check("HSET", key, *fields(n))
        members = {f"f{i}".encode(): f"v{i}".encode() for i in range(n)}
        for reply in _hrandfield(diff, key):
            assert reply in members
        for count in (1, 2, 4, n - 1, n // 2):
            for reply in _hrandfield(diff, key, str(count)):
                assert len(reply) == count == len(set(reply))
                assert set(reply) <= set(members)
            for reply in _hrandfield(diff, key, str(count), "WITHVALUES"):
                if diff.resp == 2:
                    assert len(reply) == 2 * count
                    pairs = list(zip(reply[0::2], reply[1::2], strict=True))
                else:
                    assert all(isinstance(p, list) and len(p) == 2 for p in reply)
                    pairs = [tuple(p) for p in reply]
                assert len(pairs) == count == len({f for f, _ in pairs})
                assert all(members[f] == v for f, v in pairs)
        for count in (1, 5, 3 * n):
            for reply in _hrandfield(diff, key, str(-count)):
                assert len(reply) == count and set(reply) <= set(members)
            for reply in _hrandfield(diff, key, str(-count), "WITHVALUES"):
                if diff.resp == 2:
                    pairs = list(zip(reply[0::2], reply[1::2], strict=True))
                else:
                    pairs = [tuple(p) for p in reply]
                assert len(pairs) == count and all(members[f] == v for f, v in pairs)
        # A count past the size returns every field once.
        for reply in _hrandfield(diff, key, str(n + 5)):
            assert len(reply) == n and set(reply) == set(members)
        # A negative count repeats: with 10 fields, 100 picks cannot be distinct.
        ours = _hrandfield(diff, key, "-100")[1]
        if n < 100:
            assert len(set(ours)) < 100
        # Every field can come out.
        picked: set[bytes] = set()
        for _ in range(20):
            picked.update(strings(parse(diff.ours.call("HRANDFIELD", key, "-50"))))
        if n == 10:
            assert picked == set(members)


def test_one_pair_hset_undo_restores_the_hash() -> None:
    """HSET of one field builds its undo without the loop over pairs (store.ops): on a
    new field, an existing one (same or another value), in a small and a big hash,
    the undo deletes the new field or sets the old value back (HSETF, the one-field
    form), and rolling back restores the hash."""
    s, _ = make_session(1)
    db = s.db
    small = {b"f": b"1", b"g": b"2"}
    big = HashTable({b"f%d" % i: b"%d" % i for i in range(1000)})
    for start in (small, big):
        for field, value in ((b"new", b"x"), (b"f", b"1"), (b"f", b"changed"), (b"f7", b"y")):
            db.data[b"h"] = type(start)(start)
            before = dict(db.data[b"h"])
            undo = apply_op(db, b"h", (HSET, ((field, value),)))
            expected = ((HSETF, field, before[field]),) if field in before else ((HDEL, (field,)),)
            assert undo == expected
            assert db.data[b"h"][field] == value
            for u in reversed(undo):
                apply_op(db, b"h", u)
            assert dict(db.data[b"h"]) == before
