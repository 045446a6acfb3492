"""Keyspace notifications against redis-server, RESP2 and RESP3: a subscriber on
each server (PSUBSCRIBE __key*__:*), the same commands sent to both, and every
message each subscriber receives compared in order."""

from __future__ import annotations

import time
from collections.abc import Iterator
from itertools import zip_longest

import pytest

from tests.conftest import Differ, ServerProcess
from tests.resp_client import RawClient, parse
from tests.test_pubsub import Pair

END = "__key__:end"  # a channel the pattern matches: published to close each batch


@pytest.fixture
def sub(diff: Differ) -> Iterator[Pair]:
    """A subscriber to every keyspace and keyevent channel; the classes are reset to
    none afterwards (the servers are shared by the whole session)."""
    p = Pair(diff)
    p.check("PSUBSCRIBE", "__key*__:*")
    yield p
    diff.check("CONFIG", "SET", "notify-keyspace-events", "")
    p.close()


def events(diff: Differ, sub: Pair, script: str, classes: str = "KEA") -> int:
    """Run `script` with `classes` in force; compare the messages both subscribers got
    (up to the END marker), and return how many there were."""
    diff.check("CONFIG", "SET", "notify-keyspace-events", classes)
    diff.run(script)
    diff.check("PUBLISH", END, "x")
    ref, ours = drain(sub.ref), drain(sub.ours)
    diff.record(len(ref), ours == ref)
    assert ours == ref, "\n".join(f"{a!r:70} {b!r}" for a, b in zip_longest(ref, ours))
    return len(ref)


# (name, classes, commands, fewest messages, most messages or None)
CASES = [
    (
        "strings",
        "KEA",
        """
        SET s v
        SET s v2 EX 100
        SET s v3 KEEPTTL
        SET s v4 PX 100000 GET
        SETNX s x
        SETNX s2 x
        SETEX s3 100 x
        PSETEX s4 100000 x
        GETSET s x
        MSET m1 a m2 b
        MSETNX m3 a m4 b
        APPEND s tail
        APPEND s5 new
        SETRANGE s 1 zz
        SETRANGE s6 2 zz
        INCR c
        DECR c
        INCRBY c 5
        DECRBY c 2
        INCRBYFLOAT f 1.5
        INCR s
        GETDEL s
        GETDEL nothing
        SETBIT b 7 1
        SETBIT b 7 1
        """,
        40,
        None,
    ),
    (
        "generic",
        "KEA",
        """
        SET a 1
        SET b 2
        DEL a b nothing
        SET a 1
        UNLINK a
        SET k v
        EXPIRE k 100
        PEXPIRE k 100000
        EXPIREAT k 99999999999
        PEXPIREAT k 99999999999999
        PERSIST k
        PERSIST k
        EXPIRE k 100 NX
        EXPIRE k 10 NX
        EXPIRE k -1
        SET k v
        PEXPIREAT k 1
        SET k v
        GETEX k EX 100
        GETEX k PERSIST
        GETEX k
        GETEX k PXAT 1
        SET r v
        RENAME r r2
        SET r3 x
        RENAME r2 r3
        RENAMENX r3 r4
        SET r5 x
        RENAMENX r4 r5
        SET mv x
        MOVE mv 3
        COPY r4 c1
        COPY r4 c1
        COPY r4 c1 REPLACE
        """,
        40,
        None,
    ),
    (
        "lists",
        "KEA",
        """
        LPUSH l a b c d e f
        RPUSH l g
        LPUSHX l h
        RPUSHX l i
        LPUSHX nol x
        LINSERT l BEFORE a z
        LSET l 0 y
        LPOP l
        RPOP l 2
        LREM l 1 z
        LTRIM l 0 2
        RPOPLPUSH l l2
        LMOVE l l2 LEFT RIGHT
        LMOVE l2 l2 LEFT RIGHT
        LMOVE l l3 RIGHT LEFT
        LTRIM l2 5 10
        RPUSH one x
        LPOP one
        RPUSH one x
        LREM one 0 x
        RPUSH bl x
        BLPOP bl 0
        RPUSH bl x y
        BRPOP bl 0
        BLMOVE bl l4 LEFT LEFT 0
        """,
        40,
        None,
    ),
    (
        "hashes_sets_zsets",
        "KEA",
        """
        HSET h a 1 b 2
        HMSET h c 3
        HSETNX h a 9
        HSETNX h d 4
        HINCRBY h a 5
        HINCRBYFLOAT h a 0.5
        HDEL h a nothing
        HDEL h b c d
        SADD s a b c
        SADD s a
        SREM s a
        SMOVE s s2 b
        SMOVE s s2 c
        SADD s x y
        SINTERSTORE d s s2
        SUNIONSTORE d s s2
        SDIFFSTORE d s s2
        SINTERSTORE d s nothing
        SINTERSTORE d s nothing
        ~SPOP s 5
        SADD one x
        SPOP one
        ZADD z 1 a 2 b 3 c 4 d 5 e
        ZADD z 1 a
        ZADD z INCR 2 a
        ZINCRBY z 1 b
        ZREM z a
        ZREMRANGEBYSCORE z 0 2
        ZREMRANGEBYRANK z 0 0
        ZADD z 1 a 1 b 1 c
        ZREMRANGEBYLEX z [a [a
        ZPOPMIN z
        ZPOPMAX z
        ZADD z 1 a 2 b
        ZUNIONSTORE zd 1 z
        ZINTERSTORE zd 2 z nothing
        ZDIFFSTORE zd 1 z
        ZRANGESTORE zr z 0 -1
        BZPOPMIN z 0
        BZPOPMAX z 0
        """,
        50,
        None,
    ),
    (
        "streams_geo",
        "KEA",
        """
        XADD x 1-1 f v
        XADD x 2-1 f v
        XADD x 3-1 f v
        XDEL x 1-1
        XTRIM x MAXLEN 1
        GEOADD g 13.361389 38.115556 Palermo 15.087269 37.502669 Catania
        GEOSEARCHSTORE g2 g FROMLONLAT 15 37 BYRADIUS 200 km
        GEORADIUS g 15 37 200 km STORE g3
        GEOSEARCHSTORE g2 g FROMLONLAT 0 0 BYRADIUS 1 km
        """,
        14,
        None,
    ),
    (
        "multi_exec",
        "KEAm",
        """
        MULTI
        SET a 1
        INCR a
        LPUSH l x
        DEL a
        EXEC
        EVAL "redis.call('set',KEYS[1],1) redis.call('get','x') return redis.call('del','k')" 1 k
        """,
        14,
        14,
    ),
    # Sort stores, bitmaps, HyperLogLog, the MPOP verbs, streams' trimming, SMOVE.
    (
        "newer_families",
        "KEAn",
        """
        RPUSH l1 a b c
        LMPOP 2 nol l1 LEFT COUNT 2
        LMPOP 1 l1 RIGHT
        RPUSH l1 q
        BLMPOP 0 1 l1 LEFT
        ZADD z 1 a 2 b 3 c
        ZMPOP 1 z MIN COUNT 2
        ZMPOP 1 z MAX
        ZADD z 1 a
        BZMPOP 0 1 z MIN
        RPUSH sl 3 1 2
        SORT sl STORE sd
        SORT sl STORE sd
        SORT nol STORE sd
        SET b1 abc
        BITOP NOT bd b1
        BITOP AND bd nob nob2
        BITFIELD bf SET u8 0 255
        BITFIELD bf GET u8 0
        BITFIELD bf INCRBY u8 0 1
        PFADD h a b c
        PFADD h a
        PFADD h2
        PFMERGE hm h h2
        PFCOUNT h h2
        XADD x MAXLEN 1 1-1 f v
        XADD x MAXLEN 1 2-1 f v
        XADD x NOMKSTREAM 3-1 f v
        XADD nox NOMKSTREAM 3-1 f v
        XTRIM x MAXLEN 5
        XDEL x 9-9 3-1
        SADD s1 a
        SADD s2 a b
        SMOVE s1 s2 a
        SADD s1 z
        SMOVE s1 s3 z
        SMOVE s3 s3 z
        """,
        70,
        None,
    ),
    (
        "keymiss",
        "KEm",
        """
        SET a 1
        GET nokey
        MGET a nokey b
        EXISTS nokey a nokey2
        TYPE nokey
        TTL nokey
        HGET nokey f
        LRANGE nokey 0 -1
        STRLEN nokey
        TOUCH nokey a
        ZSCORE nokey m
        SINTERSTORE dd nokey nokey2
        SET nokey x
        GET nokey
        """,
        28,
        28,
    ),
]


@pytest.mark.parametrize(
    ("classes", "script", "fewest", "most"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_events(
    diff: Differ, sub: Pair, classes: str, script: str, fewest: int, most: int | None
) -> None:
    n = events(diff, sub, script, classes)
    assert n >= fewest and (most is None or n <= most)


def drain(c: RawClient, end: bytes = END.encode()) -> list[tuple[bytes, bytes]]:
    """(channel, message) of every message up to the `end` marker."""
    got = []
    while True:
        _kind, items = parse(c.read_reply())
        channel, message = (item[1] for item in items[2:])
        if channel == end:
            return got
        got.append((channel, message))


def test_flags_print_as_redis(diff: Differ) -> None:
    for flags in ("KEA", "AnKE", "Am", "gnm", "n", "E", "Ex$lshzteKgd", "KEAmn", "AAA", ""):
        diff.check("CONFIG", "SET", "notify-keyspace-events", flags)
        diff.check("CONFIG", "GET", "notify-keyspace-events")
    diff.check("CONFIG", "SET", "notify-keyspace-events", "KEb")


def test_classes_and_dbs(diff: Differ, sub: Pair) -> None:
    """Only the classes asked for, each channel kind alone, other databases, `new`."""
    script = """
        SET a 1
        LPUSH l x
        SELECT 2
        SET a 1
        DEL a
        SELECT 0
        DEL a l
    """
    counts = [events(diff, sub, script, c) for c in ("K$", "El", "Eg", "KEn", "KEA", "KEAn")]
    assert counts == [2, 1, 3, 6, 12, 18]


def test_expired_lazy_and_active(diff: Differ, sub: Pair) -> None:
    diff.check("CONFIG", "SET", "notify-keyspace-events", "KEx")
    diff.check("SET", "lazy", "v", "PX", "1")
    time.sleep(0.01)
    diff.check("GET", "lazy")
    sub.read()
    sub.read()
    diff.check("SET", "active", "v", "PX", "1")
    # Nobody reads the key: the servers' active expiry removes it (within seconds).
    assert b"expired" in sub.read()
    assert b"active" in sub.read()


def test_temporal_verbs(ts_server: ServerProcess) -> None:
    """TS.REVERT, TS.RESTORE and TS.MERGE (no Redis counterpart): `new` for a key they
    create, `del` for a key they bring back to absence, else the verb's own name."""
    c, sub = RawClient(ts_server.port), RawClient(ts_server.port)
    try:
        c.call("FLUSHALL")
        sub.call("PSUBSCRIBE", "__keyevent@0__:*")
        c.call("CONFIG", "SET", "notify-keyspace-events", "Egn")
        c.call("SET", "a", "1")
        assert c.call("TS.SEAL", "nt-snap").startswith(b":")
        c.call("SET", "a", "2")
        c.call("SET", "gone", "x")
        c.call("DEL", "a")
        c.call("TS.REVERT", "a", "BACK", "1")  # back to 2: re-created
        c.call("TS.RESTORE", "SNAPSHOT", "nt-snap")  # a back to 1, gone deleted
        c.call("TS.BRANCH", "CREATE", "nt-b")
        c.call("TS.CHECKOUT", "nt-b")
        c.call("SET", "m", "x")
        c.call("TS.CHECKOUT", "HEAD")
        c.call("TS.MERGE", "nt-b")
        c.call("PUBLISH", "__keyevent@0__:end", "x")
        got = drain(sub, b"__keyevent@0__:end")
        assert got[:5] == [
            (b"__keyevent@0__:new", b"a"),
            (b"__keyevent@0__:new", b"gone"),
            (b"__keyevent@0__:del", b"a"),
            (b"__keyevent@0__:new", b"a"),
            (b"__keyevent@0__:ts.revert", b"a"),
        ], got
        # TS.RESTORE writes its keys in the keyspace's order
        assert sorted(got[5:7]) == [
            (b"__keyevent@0__:del", b"gone"),
            (b"__keyevent@0__:ts.restore", b"a"),
        ], got
        assert got[7:] == [
            (b"__keyevent@0__:new", b"m"),
            (b"__keyevent@0__:ts.merge", b"m"),
        ], got
    finally:
        c.call("CONFIG", "SET", "notify-keyspace-events", "")
        c.close()
        sub.close()


def test_blocked_clients_served(diff: Differ, sub: Pair) -> None:
    """A push that serves a blocked BLPOP / BLMOVE / BZPOPMIN: the push's events, then
    the pop's (and its `del`)."""
    blocked = Pair(diff)
    try:
        for block, write in (
            (("BLPOP", "bl", "0"), "LPUSH bl x"),
            (("BLMOVE", "bl", "dst", "LEFT", "RIGHT", "0"), "RPUSH bl x y"),
            (("BZPOPMIN", "bz", "0"), "ZADD bz 1 a"),
        ):
            blocked.send(*block)
            # Both servers have the client blocked before the write (CLIENT LIST shows
            # it); then the write's events and the served pop's come in order.
            wait_blocked(diff)
            n = events(diff, sub, write, "KEAn")
            blocked.read()
            assert n >= 6
    finally:
        blocked.close()


def wait_blocked(diff: Differ) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        ref, ours = diff.ref.call("INFO", "clients"), diff.ours.call("INFO", "clients")
        if b"blocked_clients:1" in ref and b"blocked_clients:1" in ours:
            return
        time.sleep(0.01)
    raise AssertionError("the client did not block on both servers")


def test_writer_subscribed_resp3(diff: Differ, sub: Pair) -> None:
    """A RESP3 client subscribed to its own writes' events: the pushes come before
    the reply, as Redis writes them while the command runs."""
    me = Pair(diff, resp=3)
    try:
        me.check("PSUBSCRIBE", "__keyspace@0__:*")
        diff.check("CONFIG", "SET", "notify-keyspace-events", "KA")
        me.check("SET", "mine", "v", "EX", "100", frames=3)
        me.check("DEL", "mine", "other", frames=2)
        me.check("GET", "mine")
        diff.record(3, True)
    finally:
        me.close()
