"""Transactions: differential tests of MULTI/EXEC/DISCARD/WATCH/UNWATCH against
redis-server (RESP2 and RESP3), with a second connection modifying watched keys,
and a store-level test that a whole EXEC block commits as one update record."""

from __future__ import annotations

import time
from typing import Any

from commands.replies import NULL_ARRAY, OK, QUEUED, ErrorReply
from commands.session import Session
from store import R_CMDS, R_LSN, R_OPS, V_LSN
from tests.conftest import Differ
from tests.helpers import make_session, run
from tests.test_pubsub import Pair, pairs

__all__ = ["pairs"]  # the fixture, shared with the pub/sub tests


def test_multi_exec_basics(diff: Differ) -> None:
    diff.run("""
        MULTI
        SET a 1
        INCR a
        GET a
        APPEND s xyz
        MGET a s missing
        EXEC
        GET a
        MULTI
        EXEC
        MULTI
        PING
        ECHO hi
        SELECT 1
        SET a in-db-1
        SELECT 0
        EXEC
        GET a
        SELECT 1
        GET a
        SELECT 0
    """)


def test_control_errors(diff: Differ) -> None:
    diff.run("""
        EXEC
        DISCARD
        UNWATCH
        MULTI x
        DISCARD x
        WATCH
        UNWATCH x
        MULTI
        MULTI
        WATCH a
        SET a 1
        EXEC
        GET a
        MULTI
        DISCARD
        EXEC
        MULTI
        SET a 2
        DISCARD
        GET a
        multi
        set a 3
        exec
    """)


def test_queue_time_errors_abort(diff: Differ) -> None:
    diff.run("""
        SET a 1
        MULTI
        SET a 2
        NOSUCHCOMMAND x
        SET a 3
        EXEC
        GET a
        MULTI
        SET a
        EXEC
        MULTI
        GET a b
        INCR a
        EXEC
        GET a
        MULTI
        MULTI x
        EXEC
        MULTI
        UNWATCH x
        DISCARD
        EXEC
    """)


def test_runtime_errors_do_not_stop_exec(diff: Differ) -> None:
    diff.run("""
        SET s notanumber
        HSET h f v
        MULTI
        INCR s
        SET x 1
        GET h
        APPEND h more
        INCRBY x 10
        SET x y EX -1
        SET x 5 NX
        GETDEL s
        EXEC
        MGET s x
        HGET h f
    """)


def test_watch(diff: Differ, pairs: Any) -> None:
    other: Pair = pairs()
    # Untouched: EXEC runs.
    diff.run("""
        SET k 1
        WATCH k
        WATCH k nosuch
        MULTI
        INCR k
        EXEC
    """)
    # Touched by another connection: EXEC replies a null array and runs nothing.
    diff.run("""
        WATCH k
        GET k
        MULTI
        INCR k
    """)
    other.check("SET", "k", "10")
    diff.run("""
        EXEC
        GET k
    """)
    # Writing the same value still counts; so does our own write before MULTI.
    diff.check("WATCH", "k")
    other.check("SET", "k", "10")
    diff.run("""
        MULTI
        EXEC
        WATCH k
        SET k 11
        MULTI
        PING
        EXEC
    """)
    # A key that did not exist and is created; one that stays missing.
    diff.check("WATCH", "new", "gone")
    other.check("GETDEL", "gone")
    diff.run("""
        MULTI
        PING
        EXEC
        WATCH new
    """)
    other.check("SET", "new", "x")
    diff.run("""
        MULTI
        PING
        EXEC
    """)
    # UNWATCH and DISCARD forget the watches.
    diff.check("WATCH", "k")
    diff.check("UNWATCH")
    other.check("SET", "k", "12")
    diff.run("""
        MULTI
        INCR k
        EXEC
        WATCH k
    """)
    other.check("SET", "k", "13")
    diff.run("""
        MULTI
        DISCARD
        MULTI
        INCR k
        EXEC
    """)
    # Writes inside our own EXEC do not dirty a later transaction.
    diff.run("""
        WATCH k
        MULTI
        INCR k
        EXEC
        WATCH k
        MULTI
        INCR k
        EXEC
        GET k
    """)


def test_watch_databases_and_flush(diff: Differ, pairs: Any) -> None:
    other: Pair = pairs()
    diff.run("""
        SET k 1
        WATCH k
    """)
    other.check("SELECT", "1")
    other.check("SET", "k", "other-db")
    diff.run("""
        MULTI
        GET k
        EXEC
        WATCH k missing
    """)
    other.check("FLUSHDB")  # database 1: not ours
    diff.run("""
        MULTI
        GET k
        EXEC
        WATCH missing
    """)
    other.check("FLUSHALL")  # `missing` did not exist: nothing changed for it
    diff.run("""
        MULTI
        PING
        EXEC
        SET k 1
        WATCH k
    """)
    other.check("FLUSHALL")
    diff.run("""
        MULTI
        PING
        EXEC
    """)


def test_watch_expiry(diff: Differ, pairs: Any) -> None:
    other: Pair = pairs()
    # A watched key that expires before EXEC fails it, even if nobody looked at it...
    diff.run("""
        SET k v PX 150
        WATCH k
        MULTI
        PING
    """)
    time.sleep(0.3)
    diff.check("EXEC")
    # ...or if another connection's read removed it in between.
    diff.run("""
        SET k v PX 150
        WATCH k
        MULTI
        PING
    """)
    time.sleep(0.3)
    other.check("GET", "k")
    diff.check("EXEC")
    # A key still alive at EXEC is fine; one already expired when watched is too.
    diff.run("""
        SET k v PX 100000
        WATCH k
        MULTI
        PING
        EXEC
        SET e v PX 50
    """)
    time.sleep(0.15)
    diff.run("""
        WATCH e
        MULTI
        PING
        EXEC
    """)


def test_pipelined_transaction(diff: Differ, pairs: Any) -> None:
    c: Pair = pairs()
    c.send_raw(
        b"MULTI\r\nSET p 1\r\nINCR p\r\nNOPE\r\nEXEC\r\nGET p\r\n"
        b"*1\r\n$5\r\nMULTI\r\n*2\r\n$4\r\nINCR\r\n$1\r\np\r\n*1\r\n$4\r\nEXEC\r\n"
    )
    for _ in range(9):
        c.read()


def test_rejected_exec_aborts(diff: Differ, pairs: Any) -> None:
    # Redis answers a rejected EXEC (arity, subscribe context) with EXECABORT and
    # discards the transaction.
    diff.run("""
        EXEC x
        MULTI
        SET a 1
        EXEC x
        EXEC
        GET a
    """)
    sub: Pair = pairs(2)
    sub.check("SUBSCRIBE", "c")
    sub.check("EXEC")


# -- store level ----------------------------------------------------------------------


def test_exec_commits_one_record() -> None:
    s, sink = make_session()
    assert run(s, "SET", "before", "x") == OK
    assert len(sink.records) == 1
    assert run(s, "MULTI") == OK
    for i in range(5):
        assert run(s, "SET", f"k{i}", str(i)) == QUEUED
    assert run(s, "INCR", "k0") == QUEUED
    assert run(s, "INCR", "before") == QUEUED  # fails at run time, changes nothing
    assert run(s, "SELECT", "3") == QUEUED
    assert run(s, "SET", "k0", "db3") == QUEUED
    assert run(s, "GET", "k1") == QUEUED
    assert len(sink.records) == 1  # nothing runs before EXEC
    replies = run(s, "EXEC")
    assert replies[:5] == [OK] * 5
    assert replies[5] == 1
    assert isinstance(replies[6], ErrorReply)
    assert replies[7:] == [OK, OK, None]  # GET k1 ran in database 3
    assert len(sink.records) == 2
    rec = sink.records[1]
    assert rec[R_LSN] == sink.records[0][R_LSN] + 1
    assert [(dbi, key) for dbi, key, _op in rec[R_OPS]] == [
        (0, b"k0"),
        (0, b"k1"),
        (0, b"k2"),
        (0, b"k3"),
        (0, b"k4"),
        (0, b"k0"),
        (3, b"k0"),
    ]
    assert rec[R_CMDS] == ("set",) * 5 + ("incr", "set")
    assert s.store.dbs[0].get(b"k0") is not None and s.store.dbs[3].get(b"k0") == b"db3"
    # Every key of the block carries the same version.
    assert (
        s.store.dbs[0].chains[b"k0"][-1][V_LSN]
        == s.store.dbs[3].chains[b"k0"][-1][V_LSN]
        == rec[R_LSN]
    )


def test_exec_without_writes_commits_nothing() -> None:
    s, sink = make_session()
    run(s, "MULTI")
    run(s, "GET", "a")
    run(s, "INCR", "a")  # queued...
    run(s, "DISCARD")  # ...and dropped
    run(s, "MULTI")
    run(s, "GET", "a")
    assert run(s, "EXEC") == [None]
    assert sink.records == []


def test_watch_in_process() -> None:
    s, sink = make_session()
    t = Session(s.server)
    run(s, "WATCH", "a", "b")
    assert set(s.watched) == {(0, b"a"), (0, b"b")}
    run(t, "SET", "a", "1")
    assert s.watch_dirty and not s.watched  # dirty drops every watch at once
    assert not s.store.observers
    run(s, "MULTI")
    run(s, "SET", "b", "2")
    assert run(s, "EXEC") is NULL_ARRAY
    assert s.store.dbs[0].get(b"b") is None
    assert not s.watch_dirty and s.multi is None
    # A failing EXEC (queue-time error) forgets the watches too.
    run(s, "WATCH", "a")
    run(s, "MULTI")
    run(s, "NOPE")
    assert isinstance(run(s, "EXEC"), ErrorReply)
    assert not s.watched and not s.store.observers
    assert len(sink.records) == 1


def test_watch_across_swapdb(ddiff: Differ) -> None:
    """SWAPDB dirties a watch only when the key is in either database (Redis'
    touchAllWatchedKeysInDb), and an expired value on either side is no change: a
    missing key replaced with an expired one, an expired one with nothing or with
    another expired one."""
    d = ddiff
    d.check("DEBUG", "SET-ACTIVE-EXPIRE", "0")
    try:
        steps: list[tuple[str, str]] = [
            # (what db 0 gets, what db 1 gets) before WATCH x in db 1 and SWAPDB 0 1
            ("", ""),
            ("SET x foo", ""),
            ("", "SET x foo"),
            ("SET x foo PX 1", ""),
            ("", "SET x foo PX 1"),
            ("SET x bar PX 1", "SET x foo PX 1"),
            ("SET x bar", "SET x foo PX 1"),
            ("SET x bar PX 1", "SET x foo"),
        ]
        for in0, in1 in steps:
            d.check("FLUSHALL")
            for db, cmd in (("0", in0), ("1", in1)):
                d.check("SELECT", db)
                if cmd:
                    d.check(*cmd.split())
            time.sleep(0.01)
            d.run("""
                SELECT 1
                WATCH x
                SWAPDB 0 1
                MULTI
                PING
                EXEC
            """)
        # Swapping back restores the expired value where it was: still no change.
        d.run("""
            FLUSHALL
            SELECT 0
            SET x foo PX 1
            SELECT 1
        """)
        time.sleep(0.01)
        d.run("""
            WATCH x
            SWAPDB 0 1
            SWAPDB 0 1
            MULTI
            PING
            EXEC
        """)
    finally:
        d.both("DEBUG", "SET-ACTIVE-EXPIRE", "1")
