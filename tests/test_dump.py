"""DUMP and RESTORE against redis-server 7.0, RESP2 and RESP3: DUMP replies byte-equal
for every value whose layout both servers know, payloads of each server restoring in
the other for every type, and RESTORE's options and error texts."""

from __future__ import annotations

import contextlib
import random
import time
from collections import deque
from collections.abc import Iterator
from itertools import zip_longest
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commands.rdb import (
    RdbError,
    Reader,
    crc64,
    load_payload,
    load_value,
    module_type_name,
    payload_ok,
)
from commands.rdb_write import dump_payload, lp_of, rdb_len, trailer
from store.values import HashSet, ZSet, new_hash, new_set
from tests.conftest import Differ, ServerProcess, start_temporalstore
from tests.resp_client import RawClient, canonical, parse
from tests.test_notifications import END, drain
from tests.test_pubsub import Pair


def bulk(raw: bytes) -> bytes:
    assert raw.startswith(b"$"), raw
    return raw.split(b"\r\n", 1)[1][:-2]


def both(diff: Differ, script: str) -> None:
    """Commands sent to both servers whose replies are compared."""
    diff.run(script)


def dump_equal(diff: Differ, *keys: str) -> None:
    for k in keys:
        diff.check("DUMP", k)


def cross(diff: Differ, key: str, *reads: tuple[object, ...], unordered: int = 0) -> None:
    """The other server's payload of `key` restores in each server as `key`:x, and
    every read (`{}` for the key) answers the same there as on the original."""
    ref_payload = bulk(diff.ref.call("DUMP", key))
    ours_payload = bulk(diff.ours.call("DUMP", key))
    assert diff.ref.call("RESTORE", key + ":x", 0, ours_payload, "REPLACE") == b"+OK\r\n"
    assert diff.ours.call("RESTORE", key + ":x", 0, ref_payload, "REPLACE") == b"+OK\r\n"
    for read in reads:
        for k in (key, key + ":x"):
            args = [a.replace("{}", k) if isinstance(a, str) else a for a in read]
            diff.check(*args, unordered=unordered)


# -- DUMP byte for byte ------------------------------------------------------------------


def test_dump_strings(diff: Differ) -> None:
    both(
        diff,
        """
        SET a hello
        SET i1 0
        SET i2 -128
        SET i3 127
        SET i4 128
        SET i5 -32769
        SET i6 2147483647
        SET i7 2147483648
        SET i8 -2147483648
        SET i9 12345678901
        SET i10 007
        SET i11 -0
        SET i12 " 1"
        SET i13 9223372036854775807
        SET e ""
        SET c21 aaaaaaaaaaaaaaaaaaaaa
        SET c20 aaaaaaaaaaaaaaaaaaaa
        SET c30 abcabcabcabcabcabcabcabcabcabc
        SET r1 "the quick brown fox jumps over the lazy dog"
        APPEND r2 "appended raw string, long enough to compress compress compress"
        SETRANGE r3 40 x
        INCR counter
        INCRBYFLOAT f 1.5
        """,
    )
    dump_equal(diff, "a", "e", "c21", "c20", "c30", "r1", "r2", "r3", "counter", "f")
    dump_equal(diff, *[f"i{n}" for n in range(1, 14)])
    diff.check("DUMP", "missing")
    rnd = random.Random(14)
    for n in (21, 22, 40, 64, 100, 1000, 20000, 70000):
        for alphabet in ("ab", "abcdefgh", "".join(map(chr, range(33, 127)))):
            v = "".join(rnd.choice(alphabet) for _ in range(n))
            if rnd.random() < 0.5:
                v = v[: n // 4] * 4
            diff.ours.call("SET", "rs", v)
            diff.ref.call("SET", "rs", v)
            diff.check("DUMP", "rs")


def test_dump_lists(diff: Differ) -> None:
    both(
        diff,
        """
        RPUSH l a b c 1 2 300 -5000 70000 -9000000 3000000000 -9223372036854775808 x
        LPUSH l2 first
        RPUSH l3 "a long element that is long enough to be compressed by lzf aaaaaaaaaaaa"
        """,
    )
    dump_equal(diff, "l", "l2", "l3")
    rnd = random.Random(8)
    for key, n, width in (("big1", 2000, 10), ("big2", 500, 200), ("big3", 40, 5000)):
        items = [
            "".join(rnd.choice("xyz0123") for _ in range(rnd.randint(1, width))) for _ in range(n)
        ]
        for i in range(0, n, 100):
            diff.ours.call("RPUSH", key, *items[i : i + 100])
            diff.ref.call("RPUSH", key, *items[i : i + 100])
        diff.check("DUMP", key)
    diff.ours.call("RPUSH", "huge", "x" * 9000, "y")
    diff.ref.call("RPUSH", "huge", "x" * 9000, "y")
    diff.check("DUMP", "huge")


def test_dump_hashes_sets_zsets(diff: Differ) -> None:
    both(
        diff,
        """
        HSET h f v n 42 neg -7 long "a value of more than twenty bytes for lzf lzf lzf lzf"
        HSET h f v2
        HDEL h n
        HSET h n 43
        SADD s16 1 2 3 -4
        SADD s32 1 70000
        SADD s64 1 5000000000 -3
        ZADD z 1 a 2.5 b -0 c inf d -inf e 1e300 f 3 g 3 aa 0.1 h
        ZADD z 5 a
        ZREM z g
        ZADD zint 4503599627370496 big 4611686018427387904 huge -4611686018427387904 neg
        """,
    )
    dump_equal(diff, "h", "s16", "s32", "s64", "z", "zint")
    # A sorted set past the listpack limits: the skiplist is written greatest first.
    for n in range(200):
        diff.ours.call("ZADD", "zbig", n % 17 + n / 7, f"m{n}")
        diff.ref.call("ZADD", "zbig", n % 17 + n / 7, f"m{n}")
    diff.ours.call("ZADD", "zlong", 1, "x" * 65)
    diff.ref.call("ZADD", "zlong", 1, "x" * 65)
    dump_equal(diff, "zbig", "zlong")
    # SORT converts a sorted set to a skiplist in Redis, for good.
    both(
        diff,
        """
        ZADD zs 1 a 2 b
        SORT zs LIMIT 0 1
        OBJECT ENCODING zs
        ZADD zs 3 c
        OBJECT ENCODING zs
        """,
    )
    dump_equal(diff, "zs")
    diff.check("CONFIG", "SET", "rdbcompression", "no")
    try:
        dump_equal(diff, "h", "z", "zbig")
        diff.ours.call("SET", "nc", "b" * 100)
        diff.ref.call("SET", "nc", "b" * 100)
        diff.check("DUMP", "nc")
    finally:
        diff.check("CONFIG", "SET", "rdbcompression", "yes")


def test_dump_streams(diff: Differ) -> None:
    script = ["XADD x 1-1 f v g w", "XADD x 1-2 f v2 g w2", "XADD x 2-0 other 1"]
    script += [f"XADD x {3 + i}-{i} f {i} g {'z' * (i % 40)}" for i in range(250)]
    script += [
        "XADD x 9000-0 n1 v1 n2 v2 n3 v3",
        "XGROUP CREATE x g1 0",
        "XGROUP CREATE x g0 $",
        "XGROUP CREATECONSUMER x g1 idle",
        "XREADGROUP GROUP g1 alice COUNT 3 STREAMS x >",
        "XREADGROUP GROUP g1 bob COUNT 2 STREAMS x >",
        "XACK x g1 1-2",
        "XADD empty MAXLEN 0 1-1 a b",
        "XSETID empty 5-5 ENTRIESADDED 9 MAXDELETEDID 3-3",
    ]
    both(diff, "\n".join(script))
    # Times in the PEL and consumers differ between the servers: compare the rest.
    for key in ("x", "empty"):
        ref, ours = bulk(diff.ref.call("DUMP", key)), bulk(diff.ours.call("DUMP", key))
        diff.record(1, len(ref) == len(ours))
        assert len(ref) == len(ours)
    diff.ours.call("XGROUP", "DESTROY", "x", "g1")
    diff.ref.call("XGROUP", "DESTROY", "x", "g1")
    dump_equal(diff, "x", "empty")
    cross(diff, "x", ("XRANGE", "{}", "-", "+"), ("XINFO", "STREAM", "{}"), ("XLEN", "{}"))


# -- payloads restore in the other server ------------------------------------------------


def test_cross_restore_every_type(diff: Differ) -> None:
    rnd = random.Random(3)
    fields = [f"f{i}" for i in range(600)]
    both(
        diff,
        """
        SET s "a string value that is long enough to be compressed: aaaaaaaaaaaaaaaaaaaa"
        RPUSH l 1 2 3 a b c
        HSET h a 1 b 2
        SADD si 5 3 1
        SADD ss a b c
        ZADD z 1 a 2 b
        XADD x 1-1 a b
        XADD x 2-1 c d
        XDEL x 1-1
        XGROUP CREATE x g 0
        XREADGROUP GROUP g c1 STREAMS x >
        """,
    )
    for f in fields:
        v = "v" * rnd.randint(1, 80)
        diff.ours.call("HSET", "hbig", f, v)
        diff.ref.call("HSET", "hbig", f, v)
        diff.ours.call("SADD", "sbig", f)
        diff.ref.call("SADD", "sbig", f)
    cross(diff, "s", ("GET", "{}"))
    cross(diff, "l", ("LRANGE", "{}", 0, -1), ("OBJECT", "ENCODING", "{}"))
    cross(diff, "h", ("HGETALL", "{}"), ("OBJECT", "ENCODING", "{}"))
    cross(diff, "si", ("SMEMBERS", "{}"), ("OBJECT", "ENCODING", "{}"))
    cross(diff, "ss", ("SCARD", "{}"), ("OBJECT", "ENCODING", "{}"))
    cross(diff, "ss", ("SMEMBERS", "{}"), unordered=1)
    cross(diff, "z", ("ZRANGE", "{}", 0, -1, "WITHSCORES"), ("OBJECT", "ENCODING", "{}"))
    cross(diff, "hbig", ("HLEN", "{}"), ("OBJECT", "ENCODING", "{}"))
    cross(diff, "hbig", ("HGETALL", "{}"), unordered=1)
    cross(diff, "sbig", ("SMEMBERS", "{}"), unordered=1)
    cross(
        diff,
        "x",
        ("XRANGE", "{}", "-", "+"),
        ("XLEN", "{}"),
        ("XINFO", "GROUPS", "{}"),
        ("XPENDING", "{}", "g"),
    )
    # Our stream's payload keeps its deleted entry's ID (with no fields): XADD after
    # it behaves the same in both servers.
    diff.check("XADD", "x:x", "*", "k", "v", normalize=lambda r: r[:3])
    diff.check("XLEN", "x:x")


# -- RESTORE's options and errors --------------------------------------------------------


def test_restore_options_and_errors(diff: Differ) -> None:
    diff.check("SET", "src", "value")
    payload = bulk(diff.ref.call("DUMP", "src"))
    assert payload == bulk(diff.ours.call("DUMP", "src"))
    bad_crc = payload[:-1] + bytes([payload[-1] ^ 1])
    v11 = payload[:-10] + b"\x0b\x00"
    v11 += crc64(v11).to_bytes(8, "little")
    bad_type = trailer(b"\x08\x00")
    truncated = trailer(payload[:3])
    module = trailer(b"\x07" + rdb_len(0x1234567890ABC << 10 | 3))
    empty_hash = trailer(b"\x10" + bytes((len(lp_of([])),)) + lp_of([]))
    for args in (
        ("RESTORE", "src", 0, payload),
        ("RESTORE", "src", 0, payload, "REPLACE"),
        ("GET", "src"),
        ("RESTORE", "k", -1, payload),
        ("RESTORE", "k", "abc", payload),
        ("RESTORE", "k", 0, "short"),
        ("RESTORE", "k", 0, bad_crc),
        ("RESTORE", "k", 0, v11),
        ("RESTORE", "k", 0, bad_type),
        ("RESTORE", "k", 0, truncated),
        ("RESTORE", "k", 0, module),
        ("RESTORE", "k", 0, empty_hash),
        ("RESTORE", "k", 0, payload, "BOGUS"),
        ("RESTORE", "k", 0, payload, "IDLETIME"),
        ("RESTORE", "k", 0, payload, "IDLETIME", -1),
        ("RESTORE", "k", 0, payload, "IDLETIME", "x"),
        ("RESTORE", "k", 0, payload, "FREQ", 256),
        ("RESTORE", "k", 0, payload, "FREQ", -1),
        ("RESTORE", "k", 0, payload, "FREQ", 5, "IDLETIME", 5),
        ("RESTORE", "k", 0, payload, "IDLETIME", 5, "FREQ", 5),
        ("RESTORE", "k", 0, payload, "IDLETIME", 5, "REPLACE"),
        ("GET", "k"),
        ("RESTORE", "k", 0, payload, "FREQ", 255, "REPLACE", "ABSTTL"),
        ("TTL", "k"),
        ("RESTORE", "k", 0),
        ("RESTORE", "k2", 100000, payload),
        ("RESTORE", "k3", int(time.time() * 1000) + 100000, payload, "ABSTTL"),
        ("RESTORE", "k4", 1, payload, "ABSTTL"),
        ("EXISTS", "k4"),
        ("RESTORE", "src", 1, payload, "ABSTTL", "REPLACE"),
        ("EXISTS", "src"),
        ("DUMP", "src"),
        ("DUMP",),
        ("DUMP", "a", "b"),
    ):
        diff.check(*args)
    for key in ("k2", "k3"):
        # To the nearest 10 s, not floored: 100000 (read in the millisecond of the
        # RESTORE) and 99999 (one later) are the same TTL.
        diff.check("PTTL", key, normalize=lambda r: (int(r[1:-2]) + 5000) // 10000)
    diff.check("HSET", "hh", "a", "b")
    diff.check("RESTORE", "hh", 0, payload)
    diff.check("RESTORE", "hh", 0, payload, "REPLACE")
    diff.check("TYPE", "hh")


def test_restore_is_one_version(diff: Differ) -> None:
    diff.ours.call("RPUSH", "lv", *range(50))
    payload = bulk(diff.ours.call("DUMP", "lv"))
    diff.ours.call("DEL", "lv")
    before = diff.ours.call("TS.HISTORY", "lv")
    diff.ours.call("RESTORE", "lv", 0, payload)
    after = diff.ours.call("TS.HISTORY", "lv")
    assert after.count(b"restore") == before.count(b"restore") + 1
    diff.record(1, True)


@pytest.fixture
def sub(diff: Differ) -> Iterator[Pair]:
    p = Pair(diff)
    p.check("PSUBSCRIBE", "__key*__:*")
    yield p
    diff.check("CONFIG", "SET", "notify-keyspace-events", "")
    p.close()


def test_restore_notifications(diff: Differ, sub: Pair) -> None:
    diff.check("SET", "n", "v")
    payload = bulk(diff.ref.call("DUMP", "n"))
    diff.check("CONFIG", "SET", "notify-keyspace-events", "KEA")
    diff.check("RESTORE", "n2", 0, payload)
    diff.check("RESTORE", "n2", 0, payload, "REPLACE")
    diff.check("RESTORE", "n2", 1, payload, "REPLACE", "ABSTTL")
    diff.check("RESTORE", "n3", 5000, payload)
    diff.check("PUBLISH", END, "x")
    ref, ours = drain(sub.ref), drain(sub.ours)
    diff.record(len(ref), ours == ref)
    assert ours == ref, "\n".join(f"{a!r:70} {b!r}" for a, b in zip_longest(ref, ours))


def test_function_dump_compressed(diff: Differ) -> None:
    code = "#!lua name=dumplib\n" + "".join(
        f"redis.register_function('f{i}', function() return {i} end)\n" for i in range(20)
    )
    for c in (diff.ref, diff.ours):
        c.call("FUNCTION", "FLUSH")
    diff.check("FUNCTION", "LOAD", code)
    diff.check("FUNCTION", "DUMP")
    diff.check("FUNCTION", "RESTORE", bulk(diff.ref.call("FUNCTION", "DUMP")), "REPLACE")
    diff.check("FCALL", "f7", 0)
    for c in (diff.ref, diff.ours):
        c.call("FUNCTION", "FLUSH")


# -- the decoder on its own --------------------------------------------------------------


def test_reader_refuses_garbage() -> None:
    """Corrupted payloads of every type give a value or RdbError, never another error."""
    from store.stream import Stream

    z = ZSet()
    for i in range(5):
        z.add(b"m%d" % i, i / 3)
    st = Stream()
    st._append((1, 1), (b"f", b"v"))
    st._append((1, 2), (b"f", b"w", b"g", b"12"))
    values = [
        {b"a": b"1", b"b": b"two"},
        deque([b"1", b"abc", b"x" * 30]),
        {b"1", b"-7", b"300000"},
        z,
        st,
        b"y" * 40,
    ]
    rnd = random.Random(5)
    for value in values:
        good = dump_payload(value)
        assert type(load_value(Reader(good, 1), good[0])) is type(value)
        for _ in range(300):
            body = bytearray(good[:-10])
            for _ in range(rnd.randint(1, 3)):
                body[rnd.randrange(len(body))] = rnd.randrange(256)
            cut = bytes(body[: rnd.randint(1, len(body))]) if rnd.random() < 0.3 else body
            with contextlib.suppress(RdbError):
                load_value(Reader(bytes(cut), 1), cut[0])
    assert module_type_name(0) == "AAAAAAAAA"


def test_redis_ref_and_ours_agree_on_random_values(diff: Differ) -> None:
    """Random values of every type written the same way to both: DUMP equal."""
    rnd = random.Random(21)

    def word() -> str:
        kind = rnd.random()
        if kind < 0.3:
            return str(rnd.randint(-(2**40), 2**40))
        if kind < 0.4:
            return str(rnd.randint(-200, 200))
        return "".join(rnd.choice("abc0123 xyz") for _ in range(rnd.randint(0, 90)))

    for i in range(60):
        key = f"r{i}"
        kind = i % 5
        n = rnd.randint(1, 300)
        if kind == 0:
            cmd = ["RPUSH", key, *[word() for _ in range(n)]]
        elif kind == 1:
            cmd = ["HSET", key, *[w for _ in range(min(n, 100)) for w in (word(), word())]]
        elif kind == 2:
            cmd = ["SADD", key, *[str(rnd.randint(-(2**62), 2**62)) for _ in range(n)]]
        elif kind == 3:
            cmd = ["ZADD", key]
            for _ in range(min(n, 120)):
                cmd += [str(rnd.choice([rnd.randint(-9, 9), rnd.random() * 100])), word()]
        else:
            cmd = ["SET", key, word() * rnd.randint(1, 5)]
        diff.ours.call(*cmd)
        diff.ref.call(*cmd)
        if diff.ours.call("OBJECT", "ENCODING", key) == b"$9\r\nhashtable\r\n":
            # Redis writes a hash table in its (per-process random) hash order.
            reads = {1: ("HGETALL", "{}"), 2: ("SMEMBERS", "{}")}[kind]
            cross(diff, key, reads, unordered=1)
        else:
            diff.check("DUMP", key)


def test_raw_client_payload_roundtrip(diff: Differ) -> None:
    """A payload of ours with every width of listpack entry restores in redis-server."""
    items = [str(v) for v in (0, 127, 128, -4096, 4095, 4096, -32768, 32767, 32768)]
    items += [str(v) for v in (-8388608, 8388607, 8388608, -(2**31), 2**31, -(2**63))]
    items += ["s" * 63, "s" * 64, "s" * 4095, "s" * 4096, "s" * 70000]
    ref: RawClient = diff.ref
    diff.ours.call("RPUSH", "widths", *items)
    assert ref.call("RESTORE", "widths", 0, bulk(diff.ours.call("DUMP", "widths"))) == b"+OK\r\n"
    diff.check("LRANGE", "widths", 0, -1)
    diff.check("DUMP", "widths")


# -- property: what we write, we read back -----------------------------------------------

_BYTES = st.one_of(
    st.binary(max_size=80),
    st.integers(-(2**63), 2**63 - 1).map(lambda n: b"%d" % n),
    st.sampled_from([b"-0", b"007", b" 1", b"1e3", b"a" * 30]),
)


@st.composite
def _values(draw: st.DrawFn) -> Any:
    kind = draw(st.sampled_from(["str", "list", "hash", "set", "zset"]))
    if kind == "str":
        return draw(_BYTES)
    if kind == "list":
        return deque(draw(st.lists(_BYTES, min_size=1, max_size=300)))
    if kind == "hash":
        return new_hash(draw(st.dictionaries(_BYTES, _BYTES, min_size=1, max_size=40)))
    if kind == "set":
        return new_set(draw(st.sets(_BYTES, min_size=1, max_size=40)))
    z = ZSet()
    scores = st.floats(allow_nan=False) | st.sampled_from([0.0, -0.0, 2.0**53, -1.5])
    for m, sc in draw(st.dictionaries(_BYTES, scores, min_size=1, max_size=200)).items():
        z.add(m, sc)
    return z


@settings(max_examples=300, deadline=None)
@given(value=_values(), compress=st.booleans())
def test_payload_roundtrip(value: Any, compress: bool) -> None:
    """Every payload we write verifies and loads back to an equal value of the same
    encoding (and the same bytes once written again)."""
    payload = dump_payload(value, compress)
    assert payload_ok(payload)
    back = load_payload(payload)
    assert type(back) is type(value)
    assert back == value
    if isinstance(value, ZSet):
        assert back.big == value.big
    if type(value) is not HashSet:  # (a large set's order is Python's set order)
        assert dump_payload(back, compress) == payload


# -- older encodings Redis 7.0 still loads (RDB 9 payloads) ------------------------------


def _zl_entry(prev: int, v: bytes | int) -> bytes:
    head = bytes((prev,)) if prev < 254 else b"\xfe" + prev.to_bytes(4, "little")
    if isinstance(v, int):
        if 0 <= v <= 12:
            return head + bytes((0xF1 + v,))
        for tag, width in ((0xFE, 1), (0xC0, 2), (0xF0, 3), (0xD0, 4), (0xE0, 8)):
            if -(1 << (8 * width - 1)) <= v < 1 << (8 * width - 1):
                return head + bytes((tag,)) + v.to_bytes(width, "little", signed=True)
    assert isinstance(v, bytes)
    n = len(v)
    if n < 64:
        return head + bytes((n,)) + v
    if n < 16384:
        return head + bytes((0x40 | (n >> 8), n & 0xFF)) + v
    return head + b"\x80" + n.to_bytes(4, "big") + v


def ziplist(items: list[bytes | int]) -> bytes:
    body = b""
    prev = tail = 0
    for v in items:
        entry = _zl_entry(prev, v)
        tail = 10 + len(body)
        body += entry
        prev = len(entry)
    total = 10 + len(body) + 1
    head = total.to_bytes(4, "little") + (tail or 10).to_bytes(4, "little")
    return head + len(items).to_bytes(2, "little") + body + b"\xff"


def zipmap(pairs: list[tuple[bytes, bytes]]) -> bytes:
    out = bytes((len(pairs),))
    for f, v in pairs:
        out += bytes((len(f),)) + f + bytes((len(v),)) + b"\x00" + v
    return out + b"\xff"


def rdb9(body: bytes) -> bytes:
    body += b"\x09\x00"
    return body + crc64(body).to_bytes(8, "little")


def _raw(b: bytes) -> bytes:
    return rdb_len(len(b)) + b


def test_legacy_encodings_restore(diff: Differ) -> None:
    """Payloads in the encodings of Redis 2.6 to 6.2 (ziplist, zipmap, quicklist of
    ziplists, linked list, zset with text scores) restore in both servers alike: the
    same values, the same new encoding, the same DUMP bytes afterwards."""
    items: list[bytes | int] = [b"a", 0, 12, 13, -1, 300, -70000, 2**40, b"x" * 70, b"y" * 300]
    pairs = [b"f1", b"v1", b"n", 7, b"big", b"z" * 100]
    # As Redis wrote them: sorted, scores as d2string printed them.
    members = [
        b"m3",
        b"-inf",
        b"m1",
        b"1.5",
        b"m2",
        3,
        b"m4",
        2500,
        b"m5",
        b"1.0000000000000001e+300",
    ]
    cases = {
        "zl:list": b"\x0a" + _raw(ziplist(items)),
        "zl:hash": b"\x0d" + _raw(ziplist(pairs)),
        "zl:zset": b"\x0c" + _raw(ziplist(members)),
        "zm:hash": b"\x09" + _raw(zipmap([(b"a", b"1"), (b"bb", b"22"), (b"c", b"")])),
        "ql:list": b"\x0e\x02" + _raw(ziplist(items[:4])) + _raw(ziplist(items[4:])),
        "ll:list": b"\x01\x03" + _raw(b"one") + b"\xc0\x02" + _raw(b"three"),
        "old:zset": b"\x03\x02" + _raw(b"a") + b"\x031.5" + _raw(b"b") + b"\xfe",
        "is:set": b"\x0b" + _raw(b"\x02\x00\x00\x00\x03\x00\x00\x00\x01\x00\x05\x00\x09\x00"),
        "ht:set": b"\x02\x02" + _raw(b"x") + _raw(b"y"),
    }
    for key, body in cases.items():
        diff.check("RESTORE", key, 0, rdb9(body))
        diff.check("OBJECT", "ENCODING", key)
        # Redis keeps a payload's quicklist nodes (we cut anew); a hash table's order
        # is each server's own.
        if key not in ("ql:list", "ht:set"):
            diff.check("DUMP", key)
    diff.check("LRANGE", "zl:list", 0, -1)
    diff.check("LRANGE", "ql:list", 0, -1)
    diff.check("LRANGE", "ll:list", 0, -1)
    diff.check("HGETALL", "zl:hash")
    diff.check("HGETALL", "zm:hash")
    diff.check("ZRANGE", "zl:zset", 0, -1, "WITHSCORES")
    diff.check("ZRANGE", "old:zset", 0, -1, "WITHSCORES")
    diff.check("SMEMBERS", "is:set")
    diff.check("SMEMBERS", "ht:set", unordered=1)
    # Broken ones: Redis' error, here too.
    diff.check("RESTORE", "bad1", 0, rdb9(b"\x0a" + _raw(ziplist(items)[:-1] + b"\x00")))
    diff.check("RESTORE", "bad2", 0, rdb9(b"\x0b" + _raw(b"\x03\x00\x00\x00\x01\x00\x00\x00")))
    diff.check("RESTORE", "bad3", 0, rdb9(b"\x0d" + _raw(ziplist(pairs[:3]))))
    diff.check("RESTORE", "empty", 0, rdb9(b"\x0a" + _raw(ziplist([]))))


def test_random_streams_cross_restore(diff: Differ) -> None:
    """Streams shaped by random XADD, XDEL, XTRIM (exact and ~) and group reads on both
    servers: each server's payload restores in the other to a stream with the same
    entries, metadata, groups and PELs (XINFO STREAM FULL) and the same DUMP bytes once
    re-dumped there, deleted entries still inside nodes included; without the groups,
    both servers' own streams dump the same bytes (every other round has no XDEL and
    only ~ trims, which drop whole nodes)."""
    rnd = random.Random(77)
    checked = 0
    for round_ in range(8):
        key = f"xs{round_}"
        seq = 0
        script = []
        for _ in range(rnd.randint(50, 400)):
            r = rnd.random()
            if r < 0.75:
                seq += rnd.randint(1, 3)
                nf = rnd.randint(1, 3)
                names = rnd.choice(
                    [["a", "b", "c"][:nf], [f"f{rnd.randint(0, 9)}" for _ in range(nf)]]
                )
                fv = " ".join(
                    f"{n} {rnd.choice(['1', '-7', 'v' * rnd.randint(0, 30)])}" for n in names
                )
                script.append(f"XADD {key} 1-{seq} {fv}")
            elif r < 0.85 and seq and round_ % 2:
                script.append(f"XDEL {key} 1-{rnd.randint(1, seq)} 1-{rnd.randint(1, seq)}")
            elif r < 0.9:
                approx = rnd.choice(["", "~ "]) if round_ % 2 else "~ "
                script.append(f"XTRIM {key} MAXLEN {approx}{rnd.randint(0, 300)}")
            elif r < 0.93:
                script.append(f"XGROUP CREATE {key} g{rnd.randint(0, 2)} 0 MKSTREAM")
            elif r < 0.97:
                g, c = rnd.randint(0, 2), rnd.choice(["alice", "bob"])
                script.append(
                    f"XREADGROUP GROUP g{g} {c} COUNT {rnd.randint(1, 5)} STREAMS {key} >"
                )
            else:
                script.append(f"XACK {key} g{rnd.randint(0, 2)} 1-{rnd.randint(1, seq + 1)}")
        for line in script:
            a, b = diff.both(*line.split())
            assert a.split(b"\r\n")[0][:1] == b.split(b"\r\n")[0][:1], (line, a, b)
        if diff.ref.call("EXISTS", key) == b":0\r\n":
            continue
        ref_payload = bulk(diff.ref.call("DUMP", key))
        ours_payload = bulk(diff.ours.call("DUMP", key))
        for c in (diff.ref, diff.ours):
            assert c.call("RESTORE", key + ":r", 0, ref_payload) == b"+OK\r\n"
            assert c.call("RESTORE", key + ":o", 0, ours_payload) == b"+OK\r\n"
        full = ("XINFO", "STREAM", key + ":r", "FULL")
        diff.check(*full)
        diff.check("XINFO", "STREAM", key + ":o", "FULL", normalize=_no_times)
        diff.check("XRANGE", key + ":o", "-", "+")
        # A payload redis-server wrote, re-dumped here: the same bytes, deleted
        # entries inside nodes (with their fields) included.
        tombstones = any(n.deleted for n in load_payload(ref_payload).nodes)
        diff.check("DUMP", key + ":r")
        checked += tombstones
        # Without the groups (whose PELs hold each server's delivery times) the
        # streams the same commands made are the same bytes too.
        for g in range(3):
            diff.check("XGROUP", "DESTROY", key, f"g{g}")
        diff.check("DUMP", key)
    assert checked >= 2  # some streams had deleted entries inside nodes


def _no_times(raw: bytes) -> Any:
    """XINFO STREAM FULL without the seen and delivery times (each server's clock)."""
    return canonical(parse(raw), 1) if b"seen-time" not in raw else len(raw)


def test_stream_deleted_fields_survive_restarts(redis_ref: ServerProcess, tmp_path: Path) -> None:
    """The fields of deleted entries still inside a node (which DUMP writes, as Redis
    keeps them) come back after a SIGKILL (replayed from the log) and after a
    checkpoint: DUMP stays redis-server's bytes."""
    script = [("XADD", "xk", f"1-{i}", "f", f"v{i}", "g", "w" * i) for i in range(1, 9)]
    script += [("XDEL", "xk", "1-3", "1-5"), ("XTRIM", "xk", "MAXLEN", "5")]
    ref = RawClient(redis_ref.port)
    ref.call("DEL", "xk")
    for args in script:
        ref.call(*args)
    expected = ref.call("DUMP", "xk")
    ref.close()
    ours = start_temporalstore(workdir=tmp_path)
    try:
        c = RawClient(ours.port)
        for args in script:
            c.call(*args)
        assert c.call("DUMP", "xk") == expected
        c.call("TS.WAITDURABLE", 5000)  # in storage before the SIGKILL
        c.close()
        ours.proc.kill()
        ours.proc.wait()
    finally:
        ours.stop()
    for stop in ("kill", "shutdown"):
        again = start_temporalstore(workdir=tmp_path)
        try:
            c = RawClient(again.port)
            assert c.call("DUMP", "xk") == expected, stop
            if stop == "kill":
                with contextlib.suppress(ConnectionError):  # no reply: it exits
                    c.call("SHUTDOWN")  # a checkpoint for the next start
                again.proc.wait(30)
                assert any("checkpoint at" in line for line in again.log_lines)
            c.close()
        finally:
            again.stop()


def test_restore_idletime_and_freq_set_the_access_clock(ts_dbg: ServerProcess) -> None:
    """RESTORE ... IDLETIME under an LRU policy sets OBJECT IDLETIME (until the key is
    written again); FREQ under an LFU policy sets OBJECT FREQ."""
    c = RawClient(ts_dbg.port)
    try:
        c.call("SET", "lru:src", "v")
        payload = parse(c.call("DUMP", "lru:src"))[1]
        c.call("CONFIG", "SET", "maxmemory-policy", "allkeys-lru")
        assert c.call("RESTORE", "lru:k", "0", payload, "IDLETIME", "1000") == b"+OK\r\n"
        idle = int(c.call("OBJECT", "IDLETIME", "lru:k")[1:-2])
        assert 1000 <= idle <= 1010
        time.sleep(1.1)  # access times are whole seconds
        c.call("SET", "lru:k", "new")  # a write is an access
        assert int(c.call("OBJECT", "IDLETIME", "lru:k")[1:-2]) <= 2
        c.call("CONFIG", "SET", "maxmemory-policy", "allkeys-lfu")
        assert c.call("RESTORE", "lfu:k", "0", payload, "FREQ", "100") == b"+OK\r\n"
        assert c.call("OBJECT", "FREQ", "lfu:k") == b":100\r\n"
        bad = payload[:-1] + bytes([payload[-1] ^ 1])
        assert c.call("RESTORE", "crc:k", "0", bad).startswith(b"-ERR DUMP payload")
        assert c.call("DEBUG", "SET-SKIP-CHECKSUM-VALIDATION", "1") == b"+OK\r\n"
        assert c.call("RESTORE", "crc:k", "0", bad) == b"+OK\r\n"
    finally:
        c.call("DEBUG", "SET-SKIP-CHECKSUM-VALIDATION", "0")
        c.call("CONFIG", "SET", "maxmemory-policy", "noeviction")
        c.close()
