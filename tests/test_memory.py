"""MEMORY and OBJECT against redis-server, RESP2 and RESP3: exact replies and errors
where they can be equal, the shape and honesty of our own figures where they cannot
(memory sizes), encodings that follow the configured limits and stay converted until
DEBUG RELOAD, real idle times, and a real LFU counter."""

from __future__ import annotations

import time
from typing import Any

from tests.conftest import Differ, ServerProcess
from tests.resp_client import RawClient, parse


def _int(raw: bytes) -> int:
    assert raw.startswith(b":"), raw
    return int(raw[1:-2])


# -- MEMORY ------------------------------------------------------------------------


def test_memory_replies_and_errors(ddiff: Differ) -> None:
    ddiff.run("""
        MEMORY HELP
        MEMORY help extra
        MEMORY bogus
        MEMORY
        MEMORY USAGE
        MEMORY USAGE nokey
        MEMORY USAGE nokey SAMPLES 5
        SET k v
        MEMORY USAGE k SAMPLES
        MEMORY USAGE k SAMPLES -1
        MEMORY USAGE k SAMPLES x
        MEMORY USAGE k BOGUS 1
        MEMORY STATS extra
        MEMORY DOCTOR extra
        MEMORY PURGE
        MEMORY PURGE extra
        MEMORY MALLOC-STATS extra
        COMMAND GETKEYS MEMORY USAGE k
        COMMAND GETKEYS MEMORY USAGE k SAMPLES 3
    """)


def test_memory_usage_is_honest(ts_dbg: ServerProcess) -> None:
    c = RawClient(ts_dbg.port)
    try:
        c.call("FLUSHALL")
        c.call("SET", "small", "x")
        c.call("SET", "big", "a" * 100_000)
        small, big = (
            _int(c.call("MEMORY", "USAGE", "small")),
            _int(c.call("MEMORY", "USAGE", "big")),
        )
        assert 30 < small < 1000
        assert 100_000 < big < 100_000 + 2000
        for i in range(1000):
            c.call("HSET", "h", f"field:{i:04}", "v" * 100)
        h = _int(c.call("MEMORY", "USAGE", "h"))
        assert 1000 * 100 < h < 1000 * 600
        # Sampling: every element, or 5, give close figures for uniform elements.
        h_all = _int(c.call("MEMORY", "USAGE", "h", "SAMPLES", "0"))
        assert abs(h_all - h) < h // 10
        c.call("RPUSH", "l", *[b"x" * 50] * 200)
        c.call("SADD", "s", *[str(i) for i in range(300)])
        c.call("ZADD", "z", *[x for i in range(300) for x in (str(i), f"m{i}")])
        c.call("XADD", "st", "*", "f", "v" * 200)
        for key, lo in (("l", 200 * 50), ("s", 300 * 28), ("z", 300 * 50), ("st", 200)):
            n = _int(c.call("MEMORY", "USAGE", key))
            assert lo < n < lo * 10 + 5000, (key, n)
        # A TTL adds its entry.
        before = _int(c.call("MEMORY", "USAGE", "small"))
        c.call("EXPIRE", "small", "100")
        assert _int(c.call("MEMORY", "USAGE", "small")) > before
    finally:
        c.close()


def test_memory_stats_fields_as_redis(ddiff: Differ) -> None:
    ddiff.check("SET", "a", "1")
    ddiff.check("SELECT", "4")
    ddiff.check("SET", "b", "1")
    ddiff.check("SELECT", "0")
    ref, ours = ddiff.both("MEMORY", "STATS")
    r, o = parse(ref), parse(ours)

    def pairs(v: Any) -> list[tuple[Any, Any]]:
        items = v[1]  # a map parses as a flat list in both protocols
        return list(zip(items[::2], items[1::2], strict=True))

    rp, op = pairs(r), pairs(o)
    assert [k for k, _ in rp] == [k for k, _ in op]
    for (_k, rv), (_k2, ov) in zip(rp, op, strict=True):
        assert rv[0] == ov[0]  # the same reply types
    stats = {k[1]: v[1] for k, v in op}
    assert int(stats[b"keys.count"]) == 2
    assert int(stats[b"total.allocated"]) > 10 * 1024 * 1024  # this process' RSS
    assert int(stats[b"peak.allocated"]) >= int(stats[b"total.allocated"])


def test_memory_doctor_and_malloc_stats(ts_dbg: ServerProcess) -> None:
    c = RawClient(ts_dbg.port)
    try:
        doctor = c.call("MEMORY", "DOCTOR")
        assert b"Sam" in doctor and doctor.startswith(b"$")
        assert c.call("MEMORY", "MALLOC-STATS") == (
            b"$45\r\nStats not supported for the current allocator\r\n"
        )
    finally:
        c.close()


# -- OBJECT ------------------------------------------------------------------------


def test_encodings_follow_the_limits(ddiff: Differ) -> None:
    try:
        ddiff.run("""
            CONFIG SET zset-max-ziplist-entries 0
            ZADD z 1 a
            OBJECT ENCODING z
            CONFIG SET zset-max-ziplist-entries 128
            ZADD z2 1 a
            OBJECT ENCODING z2
            CONFIG SET zset-max-listpack-value 3
            ZADD z3 1 abcd
            ZADD z4 1 abc
            OBJECT ENCODING z3
            OBJECT ENCODING z4
            ZADD z4 2 abcde
            OBJECT ENCODING z4
            CONFIG SET zset-max-listpack-value 64
            CONFIG SET zset-max-listpack-entries 2
            ZADD z5 1 a 2 b
            OBJECT ENCODING z5
            ZADD z5 3 c
            OBJECT ENCODING z5
            ZREM z5 c b
            OBJECT ENCODING z5
            ZUNIONSTORE u 1 z5
            OBJECT ENCODING u
            ZRANGESTORE r z2 0 -1
            OBJECT ENCODING r
            CONFIG SET zset-max-listpack-entries 128
            CONFIG SET hash-max-ziplist-entries 2
            HSET h a 1 b 2
            OBJECT ENCODING h
            HSET h c 3
            OBJECT ENCODING h
            CONFIG SET hash-max-ziplist-entries 512
            CONFIG SET hash-max-listpack-value 4
            HSET h2 f abcde
            OBJECT ENCODING h2
            CONFIG SET hash-max-listpack-value 64
            CONFIG SET set-max-intset-entries 2
            SADD s 1 2
            OBJECT ENCODING s
            SADD s 3
            OBJECT ENCODING s
            SREM s 3 2
            OBJECT ENCODING s
            SINTERSTORE si s s
            OBJECT ENCODING si
            CONFIG SET set-max-intset-entries 512
            SADD s2 1 2 3
            OBJECT ENCODING s2
            DEBUG RELOAD
            OBJECT ENCODING z
            OBJECT ENCODING z3
            OBJECT ENCODING z5
            OBJECT ENCODING h
            OBJECT ENCODING s
            OBJECT ENCODING si
            ZADD zl 1 abcdef
            HSET hl f abcdef
            CONFIG SET zset-max-listpack-value 3
            CONFIG SET hash-max-listpack-value 3
            DEBUG RELOAD
            OBJECT ENCODING zl
            OBJECT ENCODING hl
            OBJECT ENCODING z3
            CONFIG SET zset-max-listpack-entries 1
            CONFIG SET set-max-intset-entries 1
            DEBUG RELOAD
            OBJECT ENCODING z2
            OBJECT ENCODING zl
            OBJECT ENCODING s2
        """)
    finally:
        ddiff.both("CONFIG", "SET", "zset-max-listpack-entries", "128")
        ddiff.both("CONFIG", "SET", "zset-max-listpack-value", "64")
        ddiff.both("CONFIG", "SET", "hash-max-listpack-entries", "512")
        ddiff.both("CONFIG", "SET", "hash-max-listpack-value", "64")
        ddiff.both("CONFIG", "SET", "set-max-intset-entries", "512")


def test_object_replies(ddiff: Differ) -> None:
    ddiff.run("""
        OBJECT HELP
        OBJECT IDLETIME nokey
        OBJECT FREQ nokey
        OBJECT REFCOUNT nokey
        SET k v
        OBJECT FREQ k
        OBJECT IDLETIME k
        OBJECT REFCOUNT k
        SET n 100
        OBJECT REFCOUNT n
    """)


def test_idletime_is_real(redis_dbg: ServerProcess, ts_dbg: ServerProcess) -> None:
    """The Redis suite's introspection-2 tests, on both servers at once."""
    clients = [RawClient(redis_dbg.port), RawClient(ts_dbg.port)]
    try:
        for c in clients:
            c.call("SET", "foo", "bar")
            c.call("SET", "bar", "x")
        time.sleep(2.2)
        for c in clients:
            c.call("TTL", "foo")
            c.call("TYPE", "foo")
            c.call("EXISTS", "foo")
            c.call("OBJECT", "ENCODING", "foo")
            c.call("TOUCH", "bar")
        for c in clients:
            assert _int(c.call("OBJECT", "IDLETIME", "foo")) >= 2
            assert _int(c.call("OBJECT", "IDLETIME", "bar")) < 2
            c.call("GET", "foo")
            assert _int(c.call("OBJECT", "IDLETIME", "foo")) < 2
    finally:
        for c in clients:
            c.close()


def test_lfu_counter(ddiff: Differ) -> None:
    try:
        ddiff.run("""
            OBJECT FREQ k
            CONFIG SET maxmemory-policy allkeys-lfu
            SET k v
            OBJECT FREQ k
            OBJECT IDLETIME k
            CONFIG SET lfu-log-factor 0
        """)
        for _ in range(20):
            ddiff.both("GET", "k")
        # With lfu-log-factor 0 every access counts: 5 + 20.
        ddiff.check("OBJECT", "FREQ", "k")
        ddiff.check("CONFIG", "SET", "lfu-log-factor", "10")
        for _ in range(200):
            ddiff.both("GET", "k")
        ref, ours = ddiff.both("OBJECT", "FREQ", "k")
        # Logarithmic from there: p = 1 / ((25 - 5) * 10 + 1) per access.
        assert 25 <= _int(ours) < 35 and 25 <= _int(ref) < 35
    finally:
        ddiff.both("CONFIG", "SET", "maxmemory-policy", "noeviction")
        ddiff.both("CONFIG", "SET", "lfu-log-factor", "10")
    ddiff.check("OBJECT", "FREQ", "k")
