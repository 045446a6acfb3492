"""The commonest writes run by the dispatcher's direct path (commands.hotwrites): INCR
and DECR, LPUSH/RPUSH of one element, HSET of one field. Their replies and errors
against redis-server, the integer replies the pipeline encodes without formatting
(a table below 1024, INCR's own encoding), the value INCR reuses without parsing, and
the key access a write's read stores (or, under LRU, leaves to the write's version)."""

from __future__ import annotations

import time

from commands import hotwrites
from commands.access import LfuCounters, idle_seconds, use_lfu
from commands.registry import COMMANDS
from store import database
from tests.conftest import Differ
from tests.helpers import make_session, run


def test_direct_writes_against_redis(diff: Differ) -> None:
    diff.run("""
        INCR c
        INCR c
        DECR c
        DECR c
        DECR c
        INCRBY c 1500
        INCR c
        DECRBY c 3000
        DECR c
        INCRBY big 9223372036854775806
        INCR big
        INCR big
        DECRBY neg 9223372036854775807
        DECR neg
        DECR neg
        SET s notanumber
        INCR s
        DECR s
        SET s 12
        INCR s
        SET s " 12"
        INCR s
        APPEND a 41
        INCR a
        INCR a
        GET a
        LPUSH l a
        RPUSH l b
        LPUSHX l c
        RPUSHX nolist c
        LPUSH l d e f
        LRANGE l 0 -1
        INCR l
        DECR l
        HSET l f v
        HSET h f v
        HSET h f v
        HSET h f w
        HSET h g v h w
        HSET h g
        HSET h g v h
        HGETALL h
        LPUSH h x
        RPUSH h x
        INCR h
        LPUSH
        LPUSH l
        INCR
        INCR a b
        DECR a b
        HSET h
        GET c
    """)


def test_integer_replies_past_the_table(diff: Differ) -> None:
    """Lengths and values around 1024 (the pipeline's table of encoded replies),
    negative ones, and INCR's reply right after another command's."""
    elements = " ".join(f"e{i}" for i in range(1030))
    diff.run(f"""
        RPUSH l {elements}
        LPUSH l x
        RPUSH l y
        LLEN l
        SET n 1020
        INCR n
        INCR n
        INCR n
        INCR n
        INCR n
        LLEN l
        INCR n
        DECRBY n 2050
        DECR n
        HSET h f v
        INCR n
    """)


def test_incr_reuses_only_the_value_it_stored() -> None:
    """INCR finds the digits the last INCR stored and takes their value unparsed;
    any other value at the key (even with equal digits) is parsed."""
    s, _ = make_session()
    assert run(s, "INCR", "a") == 1
    assert run(s, "INCR", "a") == 2
    assert s.db.data[b"a"] is hotwrites.LAST_INTEGER.digits
    assert run(s, "INCR", "b") == 1  # another counter in between
    assert run(s, "INCR", "a") == 3
    run(s, "SET", "a", "41")
    assert run(s, "INCR", "a") == 42
    run(s, "RENAME", "a", "c")  # the digits object moves: still its value
    assert run(s, "INCR", "c") == 43
    assert run(s, "DECR", "c") == 42
    assert run(s, "GET", "c") == b"42"


def test_a_failed_write_counts_as_an_access() -> None:
    """Under LRU a write's read stores no access time (its version is newer); a write
    that fails after reading the key stores it, as Redis' lookupKeyWrite touches the
    key before the type or value check."""
    s, _ = make_session()
    db = s.db
    try:
        run(s, "SET", "str", "abc")
        run(s, "SET", "max", "9223372036854775807")
        run(s, "RPUSH", "list", "a")
        cases = [
            ("INCR", "str"),  # not an integer
            ("DECR", "list"),  # WRONGTYPE
            ("INCR", "max"),  # overflow
            ("LPUSH", "str", "x"),
            ("RPUSHX", "str", "x"),
            ("HSET", "list", "f", "v"),
        ]
        for cmd, key, *rest in cases:
            k = key.encode()
            db.atime.pop(k, None)
            database.LRU_CLOCK.now = int(time.time()) + 100  # 100 s after its write
            assert idle_seconds(db, k) >= 99
            run(s, cmd, key, *rest)  # an error reply
            assert db.atime[k] == database.LRU_CLOCK.now, cmd
            assert idle_seconds(db, k) == 0, cmd
    finally:
        database.tick_lru_clock()


def test_a_write_is_its_own_access() -> None:
    s, _ = make_session()
    db = s.db
    database.tick_lru_clock()
    for cmd, key, *rest in [("INCR", "c"), ("LPUSH", "l", "x"), ("HSET", "h", "f", "v")]:
        run(s, cmd, key, *rest)
        k = key.encode()
        db.atime.pop(k, None)
        run(s, cmd, key, *rest)  # reads the key, then writes it
        assert k not in db.atime, cmd  # no access time stored under LRU ...
        assert idle_seconds(db, k) == 0, cmd  # ... the version is the access


def test_under_lfu_a_write_counts_its_read() -> None:
    s, _ = make_session()
    db = s.db
    use_lfu(s.store.dbs, True)
    try:
        assert isinstance(db.atime, LfuCounters)
        for cmd, key, *rest in [("INCR", "c"), ("LPUSH", "l", "x"), ("HSET", "h", "f", "v")]:
            run(s, cmd, key, *rest)
            assert key.encode() not in db.atime  # a new key: not read
            run(s, cmd, key, *rest)
            assert key.encode() in db.atime, cmd
    finally:
        use_lfu(s.store.dbs, False)


def test_the_direct_commands() -> None:
    direct = {name for name, c in COMMANDS.items() if c.direct and name.islower()}
    assert direct == {b"get", b"set", b"incr", b"decr", b"lpush", b"rpush", b"hset"}
