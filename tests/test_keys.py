"""Differential tests of the keys family (DEL ... OBJECT) against redis-server, RESP2 and
RESP3, plus in-process checks of SCAN's guarantee under concurrent writes."""

from __future__ import annotations

import time
from typing import Any

import pytest

import commands.families  # noqa: F401  (fills the command table)
from commands.dispatch import DISPATCHER
from commands.session import Session
from tests.conftest import Differ
from tests.helpers import make_session
from tests.resp_client import parse


def _plain(tagged: Any) -> Any:
    """A parsed reply without its type tags: bytes, int, list or None."""
    kind = tagged[0]
    if kind in ("null", "null-array", "_"):
        return None
    if kind in ("*", "~"):
        return [_plain(item) for item in tagged[1]]
    if kind == ":":
        return int(tagged[1])
    return tagged[1]


def _value(raw: bytes) -> Any:
    return _plain(parse(raw))


def _int(raw: bytes) -> int:
    value = _value(raw)
    assert isinstance(value, int), raw
    return value


def _scan_all(diff: Differ, *options: str) -> tuple[set[bytes], set[bytes]]:
    """Iterate SCAN to the end on both servers; the key sets each returned."""
    found: list[set[bytes]] = []
    for client in (diff.ref, diff.ours):
        keys: set[bytes] = set()
        cursor = b"0"
        for _ in range(10_000):
            reply = _value(client.call("SCAN", cursor, *options))
            assert isinstance(reply, list) and len(reply) == 2, reply
            cursor, batch = reply
            assert isinstance(cursor, bytes) and isinstance(batch, list)
            keys.update(batch)
            if cursor == b"0":
                break
        else:
            raise AssertionError("SCAN never returned cursor 0")
        found.append(keys)
    diff.record(1, found[0] == found[1])
    return found[0], found[1]


def _populate(diff: Differ) -> None:
    diff.run("""
        MSET s1 a s2 b s3 c hello 1 hallo 2 hxllo 3 hllo 4 heeello 5 h*llo 6
        HSET h1 f v
        HSET h2 f v
        SADD set1 1 2 3
        ZADD z1 1 a
        XADD x1 1-1 f v
    """)


def test_del_unlink_exists_touch(diff: Differ) -> None:
    diff.run("""
        MSET a 1 b 2 c 3 d 4
        EXISTS a
        EXISTS a a b nope
        EXISTS nope
        TOUCH a b nope a
        DEL a nope
        DEL a
        DEL b b c
        UNLINK d d nope
        UNLINK d
        EXISTS a b c d
        DBSIZE
        HSET h f v
        SADD s m
        DEL h s
        EXISTS h s
        DEL
        UNLINK
        EXISTS
        TOUCH
    """)


def test_type(diff: Differ) -> None:
    diff.run("""
        SET str v
        APPEND raw v
        HSET hash f v
        SADD set 1
        SADD set2 a
        ZADD zset 1 a
        XADD stream 1-1 f v
        TYPE str
        TYPE raw
        TYPE hash
        TYPE set
        TYPE set2
        TYPE zset
        TYPE stream
        TYPE missing
        TYPE
        TYPE a b
    """)


def test_keys(diff: Differ) -> None:
    _populate(diff)
    diff.run(r"""
        ~KEYS *
        ~KEYS h?llo
        ~KEYS h*llo
        ~KEYS h[ae]llo
        ~KEYS h[^e]llo
        ~KEYS h[a-b]llo
        ~KEYS h\*llo
        ~KEYS s*
        ~KEYS *1
        KEYS nomatch*
        KEYS
        KEYS a b
    """)


@pytest.mark.timeout(120)
def test_keys_pathological_patterns(diff: Differ) -> None:
    """Patterns that took minutes when matching backtracked (and froze the server): the
    same answers as redis-server, promptly. Also the empty key, which only `*` itself
    (KEYS' shortcut) lists."""
    long_key = "a" * 64
    diff.check("SET", long_key, "v")
    for pattern in ("*" * 20 + "b", "a*" * 20 + "b", "*a" * 32 + "*b", "a*" * 32, "*a" * 1001):
        diff.check("KEYS", pattern)
        diff.check("SCAN", "0", "MATCH", pattern, "COUNT", "100")
    diff.check("SET", "", "v")
    diff.run("""
        ~KEYS *
        KEYS **
        ~SCAN 0 MATCH * COUNT 100
        SCAN 0 MATCH ** COUNT 100
    """)


def test_keys_skips_expired(diff: Differ) -> None:
    diff.run("""
        SET live v
        SET gone v PX 30
        SET later v PX 100000
    """)
    time.sleep(0.06)
    diff.run("""
        ~KEYS *
        EXISTS gone
        DBSIZE
    """)


def test_scan_full_iterations(diff: Differ) -> None:
    _populate(diff)
    for i in range(300):
        diff.both("SET", f"key:{i}", i)
    for options in (
        (),
        ("COUNT", "1"),
        ("COUNT", "7"),
        ("COUNT", "1000"),
        ("MATCH", "key:1*"),
        ("MATCH", "h?llo", "COUNT", "3"),
        ("MATCH", "*"),
        ("MATCH", "nothing*"),
        ("TYPE", "string", "COUNT", "50"),
        ("TYPE", "HASH"),
        ("type", "set"),
        ("TYPE", "zset"),
        ("TYPE", "stream"),
        ("TYPE", "list"),
        ("TYPE", "nosuchtype"),
        ("match", "s*", "type", "string", "count", "2"),
        ("MATCH", "a*", "MATCH", "s*"),
    ):
        ref, ours = _scan_all(diff, *options)
        assert ours == ref, options


def test_scan_small_and_empty(diff: Differ) -> None:
    diff.run("""
        SCAN 0
        SCAN 0 COUNT 100
        SET k v
        SCAN 0
        SCAN 0 MATCH k*
        SCAN 0 MATCH x*
        SCAN 0 TYPE string
        SCAN 0 TYPE hash
    """)


def test_scan_errors(diff: Differ) -> None:
    diff.run("""
        SET k v
        SCAN abc
        SCAN " 1"
        SCAN 1x
        SCAN 0x10
        SCAN -
        SCAN +
        SCAN 18446744073709551616
        SCAN 99999999999999999999999
        SCAN 0 COUNT 0
        SCAN 0 COUNT -1
        SCAN 0 COUNT abc
        SCAN 0 COUNT 9223372036854775808
        SCAN 0 COUNT
        SCAN 0 MATCH
        SCAN 0 TYPE
        SCAN 0 FOO bar
        SCAN 0 COUNT 10 extra
        SCAN
    """)
    # Valid cursor texts (their results depend on the hash order, so just no error).
    for cursor in ("", "+0", "-0", "-1", "00000000000000000000000005", "18446744073709551615"):
        ref, ours = diff.both("SCAN", cursor)
        assert not ref.startswith(b"-") and not ours.startswith(b"-"), (cursor, ref, ours)
        assert ours.startswith(b"*2\r\n"), ours


def test_randomkey(diff: Differ) -> None:
    diff.run("""
        RANDOMKEY
        SET only v
        RANDOMKEY
        RANDOMKEY extra
    """)
    names = {b"k%d" % i for i in range(20)}
    for name in names:
        diff.both("SET", name, "v")
    seen: set[bytes] = set()
    for _ in range(60):
        ref, ours = diff.both("RANDOMKEY")
        r, o = _value(ref), _value(ours)
        assert isinstance(r, bytes) and isinstance(o, bytes)
        assert r in names | {b"only"} and o in names | {b"only"}
        seen.add(o)
    assert len(seen) > 5


def test_randomkey_expired_only(diff: Differ) -> None:
    diff.run("""
        SET a v PX 20
        SET b v PX 20
    """)
    time.sleep(0.05)
    diff.run("""
        RANDOMKEY
        DBSIZE
    """)


def test_rename(diff: Differ) -> None:
    diff.run("""
        SET a 1
        RENAME a b
        GET a
        GET b
        RENAME a b
        RENAME b b
        GET b
        RENAME missing missing
        SET c 2
        RENAME b c
        GET c
        EXISTS b
        SET e v EX 1000
        RENAME e f
        TTL f
        SET g v EX 500
        SET h v
        RENAME h g
        TTL g
        HSET hash f v
        RENAME hash hash2
        HGETALL hash2
        TYPE hash
        ZADD z 1 a 2 b
        RENAME z str
        TYPE str
        ZRANGE str 0 -1 WITHSCORES
        RENAME
        RENAME a
        RENAME a b c
    """)


def test_renamenx(diff: Differ) -> None:
    diff.run("""
        SET a 1
        SET b 2
        RENAMENX a b
        GET a
        RENAMENX a a
        RENAMENX a c
        GET c
        EXISTS a
        RENAMENX missing x
        RENAMENX missing missing
        SET t v EX 100
        RENAMENX t u
        TTL u
        RENAMENX x
    """)


def test_rename_over_expired_destination(diff: Differ) -> None:
    diff.run("""
        SET src v
        SET dst old PX 20
    """)
    time.sleep(0.05)
    diff.run("""
        RENAMENX src dst
        GET dst
        TTL dst
    """)


def test_copy(diff: Differ) -> None:
    diff.run("""
        SET a 1
        COPY a b
        GET b
        COPY a b
        COPY a b REPLACE
        COPY a a
        COPY a a DB 0
        COPY a a DB 1
        COPY missing b
        COPY missing missing
        SET t v EX 100
        COPY t t2
        TTL t2
        SET b x EX 100
        COPY a b replace
        TTL b
        COPY a b REPLACE REPLACE
        COPY a b DB
        COPY a b DB 16
        COPY a b DB -1
        COPY a b DB abc
        COPY a b DB 2147483648
        COPY a b DB -2147483649
        COPY a b DB 1.5
        COPY a b FOO
        COPY a b DB 1 BAR
        COPY a b DB 99 FOO
        COPY a b FOO DB 99
        COPY a
        COPY
        HSET h f v
        COPY h h2
        HGETALL h2
        HSET h2 g w
        HGETALL h
        SADD s 1 2 3
        COPY s s2
        SADD s2 4
        SCARD s
        ZADD z 1 a
        COPY z z2
        ZADD z2 2 b
        ZCARD z
        XADD x 1-1 f v
        COPY x x2
        XLEN x2
        TYPE x2
    """)


def test_copy_across_databases(diff: Differ) -> None:
    diff.run("""
        SET a v EX 100
        COPY a a DB 1
        COPY a a DB 1
        EXISTS a
        SELECT 1
        GET a
        TTL a
        SET a other
        SELECT 0
        COPY a a DB 1 REPLACE
        SELECT 1
        GET a
        TTL a
        COPY a b DB 0
        SELECT 0
        GET b
        TTL b
        FLUSHALL
    """)


def test_move(diff: Differ) -> None:
    diff.run("""
        SET a v EX 100
        MOVE a 1
        EXISTS a
        MOVE a 1
        MOVE missing 1
        SET a again
        MOVE a 1
        GET a
        MOVE a 0
        MOVE a 16
        MOVE a -1
        MOVE a x
        MOVE a 2147483648
        MOVE a 99999999999999999999
        MOVE missing 0
        MOVE missing 16
        SELECT 1
        GET a
        TTL a
        MOVE a 0
        HSET h f v
        MOVE h 2
        SELECT 2
        HGETALL h
        TYPE h
        MOVE
        MOVE a
        MOVE a 1 2
        FLUSHALL
    """)


def test_expire_and_ttl(diff: Differ) -> None:
    diff.run("""
        SET k v
        TTL k
        PTTL k
        EXPIRETIME k
        PEXPIRETIME k
        TTL missing
        PTTL missing
        EXPIRETIME missing
        PEXPIRETIME missing
        EXPIRE k 100
        TTL k
        EXPIRE missing 100
        PEXPIRE k 200000
        TTL k
        EXPIREAT k 32503680000
        EXPIRETIME k
        PEXPIRETIME k
        PEXPIREAT k 32503680000123
        PEXPIRETIME k
        EXPIRETIME k
        PEXPIREAT k 32503680000499
        EXPIRETIME k
        PEXPIREAT k 32503680000500
        EXPIRETIME k
        TTL k
        EXPIRE k abc
        EXPIRE k 1.5
        EXPIRE k ""
        PEXPIRE k 9223372036854775808
        TTL
        TTL a b
        PTTL
        EXPIRETIME
        PEXPIRETIME a b
        EXPIRE k
        EXPIRE
    """)


def test_expire_options(diff: Differ) -> None:
    diff.run("""
        SET k v
        EXPIRE k 100 XX
        TTL k
        EXPIRE k 100 GT
        TTL k
        EXPIRE k 100 LT
        TTL k
        EXPIRE k 200 NX
        TTL k
        EXPIRE k 300 LT
        TTL k
        EXPIRE k 50 LT
        TTL k
        EXPIRE k 40 GT
        EXPIRE k 400 GT
        TTL k
        EXPIRE k 500 xx
        TTL k
        EXPIRE k 600 nx
        EXPIRE k 600 XX GT
        TTL k
        EXPIRE k 10 XX LT
        TTL k
        EXPIRE k 10 NX XX
        EXPIRE k 10 NX GT
        EXPIRE k 10 NX LT
        EXPIRE k 10 GT LT
        EXPIRE k 10 XX XX
        TTL k
        EXPIRE k 10 FOO
        EXPIRE k 10 NX FOO
        EXPIRE k abc FOO
        EXPIRE k abc NX XX
        EXPIRE k abc NX
        EXPIRE missing 10 NX XX
        EXPIRE missing abc
        EXPIRE missing 10 NX
        PEXPIRE k 1000000 GT
        TTL k
        PEXPIREAT k 99999999999999 LT
        TTL k
        EXPIREAT k 32503680000 GT
        EXPIRETIME k
        PERSIST k
        EXPIRE k 10 LT
        TTL k
        PERSIST k
        EXPIRE k 10 GT
        TTL k
        EXPIRE k -1 GT
        EXISTS k
        EXPIRE k -1 LT
        EXISTS k
    """)


def test_expire_unsupported_option_text(diff: Differ) -> None:
    diff.check("SET", "k", "v")
    diff.check("EXPIRE", "k", "10", "bad\r\nopt")
    diff.check("EXPIRE", "k", "10", "nx\x00tail")
    diff.check("EXPIRE", "k", "10", "zz\x00tail")
    diff.check("TTL", "k")


def test_expire_in_the_past_deletes(diff: Differ) -> None:
    diff.run("""
        SET a v
        EXPIRE a 0
        EXISTS a
        SET a v
        EXPIRE a -100
        EXISTS a
        SET a v
        PEXPIRE a -1
        EXISTS a
        SET a v
        EXPIREAT a 1
        EXISTS a
        SET a v
        PEXPIREAT a 0
        EXISTS a
        SET a v
        PEXPIREAT a -9223372036854775808
        EXISTS a
        SET a v
        EXPIRE a -9223372036854775
        EXISTS a
        HSET h f v
        EXPIRE h 0
        TYPE h
    """)


def test_expire_overflow(diff: Differ) -> None:
    diff.run("""
        SET a v
        EXPIRE a 9223372036854775
        EXPIRE a 9223372036854776
        EXPIRE a -9223372036854776
        EXPIREAT a 9223372036854776
        EXPIREAT a -9223372036854776
        EXPIREAT a 9223372036854775
        EXPIRETIME a
        PEXPIRE a 9223372036854775807
        PEXPIRE a 9223372036854000000
        PEXPIREAT a 9223372036854775807
        PEXPIRETIME a
        PEXPIRE a -9223372036854775808
        EXISTS a
        SET b v
        EXPIRE b 9223372036854775807
        EXPIRE missing 9223372036854775807
        PEXPIRE missing 9223372036854775807
        PEXPIREAT missing 9223372036854775807
        EXISTS b
    """)


def test_pttl_values(diff: Differ) -> None:
    diff.run("""
        SET k v PX 5000
        PEXPIRE k 3000
    """)
    ref, ours = diff.both("PTTL", "k")
    assert 2900 <= _int(ours) <= 3000 and 2900 <= _int(ref) <= 3000
    ref, ours = diff.both("TTL", "k")
    assert _int(ours) == _int(ref) == 3
    ref, ours = diff.both("PEXPIRETIME", "k")
    assert abs(_int(ours) - _int(ref)) < 1000
    now = int(time.time() * 1000)
    assert now + 2000 < _int(ours) <= now + 3000
    # TTL rounds to the nearest second.
    diff.check("PEXPIRE", "k", "1600")
    diff.check("TTL", "k")
    diff.check("PEXPIRE", "k", "1400")
    diff.check("TTL", "k")


def test_persist(diff: Differ) -> None:
    diff.run("""
        SET k v EX 100
        PERSIST k
        TTL k
        PERSIST k
        PERSIST missing
        SADD s a
        EXPIRE s 100
        PERSIST s
        TTL s
        PERSIST
        PERSIST a b
    """)


def test_lazy_expiry(diff: Differ) -> None:
    diff.run("""
        SET k v PX 50
        HSET h f v
        PEXPIRE h 50
        SET keep v PX 100000
        EXISTS k
        GET k
    """)
    time.sleep(0.08)
    diff.run("""
        GET k
        EXISTS k h
        TTL k
        PTTL h
        TYPE h
        OBJECT ENCODING k
        PERSIST k
        EXPIRE k 100
        TOUCH k
        DEL k
        COPY k k2
        MOVE k 1
        RENAME k k2
        EXISTS keep
    """)


def test_active_expiry(diff: Differ) -> None:
    for i in range(20):
        diff.both("SET", f"vol:{i}", "v", "PX", "40")
    diff.both("SET", "stay", "v")
    diff.check("DBSIZE")
    deadline = time.monotonic() + 3
    sizes: tuple[int, int] = (-1, -1)
    while time.monotonic() < deadline:
        time.sleep(0.1)
        ref, ours = diff.both("DBSIZE")
        sizes = (_int(ref), _int(ours))
        if sizes == (1, 1):
            break
    assert sizes == (1, 1), sizes


def test_object_encoding(diff: Differ) -> None:
    long = "x" * 45
    diff.run(f"""
        SET int 12345
        SET neg -12
        SET bigint 12345678901234567890
        SET embstr hello
        SET emb44 {"y" * 44}
        SET raw {long}
        APPEND appended x
        SETRANGE ranged 0 x
        OBJECT ENCODING int
        OBJECT ENCODING neg
        OBJECT ENCODING bigint
        OBJECT ENCODING embstr
        OBJECT ENCODING emb44
        OBJECT ENCODING raw
        OBJECT ENCODING appended
        OBJECT ENCODING ranged
        HSET h f v
        OBJECT ENCODING h
        HSET h f {"v" * 65}
        OBJECT ENCODING h
        HSET h2 f v
        SADD si 1 2 3
        OBJECT ENCODING si
        SADD si x
        OBJECT ENCODING si
        SREM si x
        OBJECT ENCODING si
        ZADD z 1 a
        OBJECT ENCODING z
        ZADD z 2 {long}{long}
        OBJECT ENCODING z
        XADD x 1-1 f v
        OBJECT ENCODING x
        OBJECT ENCODING missing
        object encoding int
        OBJECT ENCODING
        OBJECT ENCODING a b
    """)
    fields = " ".join(f"f{i} v" for i in range(513))
    members = " ".join(str(i) for i in range(513))
    zmembers = " ".join(f"{i} m{i}" for i in range(129))
    diff.run(f"""
        HSET big {fields}
        OBJECT ENCODING big
        SADD bigset {members}
        OBJECT ENCODING bigset
        ZADD bigz {zmembers}
        OBJECT ENCODING bigz
    """)


def test_object_encoding_after_copy(diff: Differ) -> None:
    """COPY, RENAME and MOVE keep a value's encoding, as Redis' dup functions do."""
    diff.run(f"""
        HSET big f {"v" * 65}
        SADD hs a b
        SADD is 1 2
        ZADD z 1 {"m" * 65}
        APPEND raw x
        COPY big big2
        COPY hs hs2
        COPY is is2
        COPY z z2
        COPY raw raw2
        OBJECT ENCODING big2
        OBJECT ENCODING hs2
        OBJECT ENCODING is2
        OBJECT ENCODING z2
        OBJECT ENCODING raw2
        RENAME big big3
        RENAME hs hs3
        OBJECT ENCODING big3
        OBJECT ENCODING hs3
        MOVE big3 1
        MOVE hs3 1
        SELECT 1
        OBJECT ENCODING big3
        OBJECT ENCODING hs3
        FLUSHALL
    """)


def test_object_other_subcommands(diff: Differ) -> None:
    diff.run("""
        SET small 100
        SET zero 0
        SET edge 9999
        SET over 10000
        SET neg -1
        SET word hello
        SET padded 0100
        INCR counter
        HSET h f v
        OBJECT REFCOUNT small
        OBJECT REFCOUNT zero
        OBJECT REFCOUNT edge
        OBJECT REFCOUNT over
        OBJECT REFCOUNT neg
        OBJECT REFCOUNT word
        OBJECT REFCOUNT padded
        OBJECT REFCOUNT counter
        OBJECT REFCOUNT h
        OBJECT REFCOUNT missing
        OBJECT IDLETIME word
        OBJECT IDLETIME h
        OBJECT IDLETIME missing
        OBJECT FREQ word
        OBJECT FREQ missing
        OBJECT HELP
        object help
        OBJECT HELP extra
        OBJECT
        OBJECT FOO
        OBJECT FOO bar
        OBJECT REFCOUNT
        OBJECT IDLETIME a b
        OBJECT FREQ
    """)


def test_transactions_and_watch(diff: Differ) -> None:
    diff.run("""
        SET a 1
        MULTI
        RENAME a b
        EXPIRE b 100
        COPY b c
        DEL b
        TTL c
        EXEC
        EXISTS a b c
        SET w 1
        WATCH w
        EXPIRE w 100
        MULTI
        GET w
        EXEC
        WATCH c
        RENAME c d
        MULTI
        GET c
        EXEC
    """)


# -- in-process checks of SCAN's guarantee ------------------------------------------


def _session(databases: int = 2) -> Session:
    return make_session(databases)[0]


def _call(s: Session, *args: str | bytes) -> object:
    argv = [a.encode() if isinstance(a, str) else a for a in args]
    return DISPATCHER.execute(s, argv)


def test_scan_returns_every_stable_key_despite_writes() -> None:
    s = _session()
    other = Session(s.server)
    stable = {b"stable:%d" % i for i in range(500)}
    for k in stable:
        _call(s, "SET", k, "v")
    for i in range(500):
        _call(s, "SET", f"doomed:{i}", "v")
    seen: list[bytes] = []
    cursor = b"0"
    step = 0
    while True:
        reply = _call(s, "SCAN", cursor, "COUNT", "17")
        assert isinstance(reply, list)
        cursor, batch = reply
        seen.extend(batch)
        # Meanwhile: keys come and go, and another client starts its own iterations.
        _call(s, "DEL", f"doomed:{step}")
        _call(s, "SET", f"new:{step}", "v")
        _call(other, "SCAN", "0", "COUNT", "3")
        step += 1
        if cursor == b"0":
            break
    assert stable <= set(seen)
    assert len(seen) == len(set(seen))  # hash order: no key is returned twice
    assert step < 200


def test_scan_skips_deleted_and_reports_expired_as_type_none() -> None:
    s = _session()
    for i in range(50):
        _call(s, "SET", f"k{i}", "v")
    reply = _call(s, "SCAN", "0", "COUNT", "5")
    assert isinstance(reply, list)
    _call(s, "DEL", *[f"k{i}" for i in range(50)])
    rest: list[bytes] = []
    cursor = reply[0]
    while cursor != b"0":
        r = _call(s, "SCAN", cursor, "COUNT", "5")
        assert isinstance(r, list)
        cursor, batch = r
        rest.extend(batch)
    assert rest == []
    _call(s, "SET", "old", "v", "PX", "1")
    _call(s, "SET", "other", "v")
    time.sleep(0.01)
    assert _call(s, "SCAN", "0", "TYPE", "none", "COUNT", "1000") == [b"0", [b"old"]]
    assert _call(s, "DBSIZE") == 1  # the expired key is gone, "other" stays


def test_lists(diff: Differ) -> None:
    """Needs the list family (RPUSH, LRANGE)."""
    diff.run("""
        RPUSH l a b c
        TYPE l
        OBJECT ENCODING l
        COPY l l2
        RPUSH l2 d
        LRANGE l 0 -1
        LRANGE l2 0 -1
        RENAME l2 l3
        TYPE l3
        EXPIRE l3 100
        TTL l3
        MOVE l3 1
        EXISTS l3
        SCAN 0 TYPE list
        DEL l
        TYPE l
        FLUSHALL
    """)


def test_list_values_in_process() -> None:
    s = _session()
    s.store.apply(s.db, b"l", ("rpush", (b"a", b"b")))
    s.store.commit()
    assert _call(s, "TYPE", "l") == b"list"
    assert _call(s, "OBJECT", "ENCODING", "l") == b"quicklist"
    assert _call(s, "COPY", "l", "l2") == 1
    assert _call(s, "SCAN", "0", "TYPE", "list") == [b"0", [b"l", b"l2"]]
    assert s.db.data[b"l2"] == s.db.data[b"l"] and s.db.data[b"l2"] is not s.db.data[b"l"]


def test_object_under_lfu_and_lru_policies(diff: Differ) -> None:
    try:
        diff.run("""
            CONFIG SET maxmemory-policy allkeys-lfu
            SET k v
            OBJECT FREQ k
            OBJECT IDLETIME k
            OBJECT FREQ missing
            OBJECT IDLETIME missing
            CONFIG SET maxmemory-policy volatile-lfu
            OBJECT IDLETIME k
            CONFIG SET maxmemory 16gb
            CONFIG SET maxmemory-policy allkeys-lru
            SET small 42
            OBJECT REFCOUNT small
            OBJECT ENCODING small
            OBJECT FREQ k
            CONFIG SET maxmemory-policy volatile-random
            SET small2 42
            OBJECT REFCOUNT small2
            CONFIG SET maxmemory 0
            CONFIG SET maxmemory-policy noeviction
            SET small3 42
            OBJECT REFCOUNT small3
        """)
    finally:
        for client in (diff.ref, diff.ours):
            client.call("CONFIG", "SET", "maxmemory", "0")
            client.call("CONFIG", "SET", "maxmemory-policy", "noeviction")
