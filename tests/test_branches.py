"""Branches: copy-on-write overlays of the main line, merges, and their
persistence (replayed records and checkpoints give back the same branches)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import commands.families  # noqa: F401
from commands.branch_lookup import checkout_branch
from commands.session import Session
from flusher.checkpoint import image, load_image
from store import Store
from store.branches import BranchDatabase
from tests.helpers import ListSink, make_session, run


def setup() -> tuple[Store, Session, ListSink]:
    s, sink = make_session(2)
    return s.store, s, sink


def on(s: Session, branch: str | None) -> None:
    if branch is None:
        s.branch = None
        s.select(s.dbi)
    else:
        checkout_branch(s, branch.encode())


def branch_state(store: Store, name: bytes) -> dict[tuple[int, bytes], Any]:
    b = store.branches[name]
    return {(db.index, k): (db.data.get(k), db.expires.get(k)) for db in b.dbs for k in db.data}


def test_branch_reads_parent_at_fork_and_holds_only_its_changes() -> None:
    store, s, _ = setup()
    run(s, "SET", "a", "1")
    run(s, "HSET", "h", "f", "1")
    run(s, "RPUSH", "l", "x", "y")
    assert run(s, "TS.BRANCH", "CREATE", "exp") == b"OK"
    run(s, "SET", "a", "main-later")
    on(s, "exp")
    assert run(s, "GET", "a") == b"1"  # the main line as it was at the fork
    assert sorted(run(s, "KEYS", "*")) == [b"a", b"h", b"l"]
    run(s, "HSET", "h", "g", "2")
    run(s, "LPOP", "l")
    run(s, "DEL", "a")
    run(s, "SET", "new", "n", "EX", "100")
    assert run(s, "HGETALL", "h") == {b"f": b"1", b"g": b"2"}
    assert run(s, "LRANGE", "l", "0", "-1") == [b"y"]
    assert run(s, "EXISTS", "a") == 0 and run(s, "DBSIZE") == 3
    assert 0 < run(s, "TTL", "new") <= 100
    branch_db = store.branches[b"exp"].dbs[0]
    assert isinstance(branch_db, BranchDatabase)
    assert set(branch_db.odata.own) == {b"h", b"l", b"new"}  # only what it changed
    on(s, None)
    assert run(s, "GET", "a") == b"main-later"
    assert run(s, "HGETALL", "h") == {b"f": b"1"}
    assert run(s, "EXISTS", "new") == 0
    listed = run(s, "TS.BRANCH", "LIST")
    assert listed[0][b"name"] == b"exp" and listed[0][b"changed"] == 4


def test_merge_strategies() -> None:
    _store, s, _ = setup()
    run(s, "SET", "both", "base")
    run(s, "SET", "only-branch", "base")
    run(s, "TS.BRANCH", "CREATE", "b")
    run(s, "SET", "both", "main")
    on(s, "b")
    run(s, "SET", "both", "branch")
    run(s, "SET", "only-branch", "branch")
    run(s, "SET", "added", "x")
    on(s, None)
    err = run(s, "TS.MERGE", "b")
    assert err.startswith(b"ERR CONFLICT") and b"both" in err
    assert run(s, "GET", "only-branch") == b"base"  # nothing applied
    assert run(s, "TS.MERGE", "b", "STRATEGY", "OURS") == 2
    assert run(s, "GET", "both") == b"main" and run(s, "GET", "added") == b"x"
    assert run(s, "TS.MERGE", "b", "INTO", "main", "STRATEGY", "THEIRS") == 1
    assert run(s, "GET", "both") == b"branch"
    assert run(s, "TS.MERGE", "b") == 0  # nothing left to merge


def test_errors() -> None:
    _store, s, _ = setup()
    run(s, "TS.BRANCH", "CREATE", "x")
    assert run(s, "TS.BRANCH", "CREATE", "x").startswith(b"ERR branch 'x' already exists")
    assert run(s, "TS.BRANCH", "CREATE", "main").startswith(b"ERR 'main' is not a valid")
    assert run(s, "TS.BRANCH", "DROP", "nope").startswith(b"ERR no such branch 'nope'")
    assert run(s, "TS.MERGE", "nope").startswith(b"ERR no such branch")
    assert run(s, "TS.MERGE", "x", "STRATEGY", "MAYBE").startswith(b"ERR syntax error")
    assert run(s, "TS.BRANCH", "CREATE", "y", "FROM", "VERSION", "999").startswith(b"ERR version")
    on(s, "x")
    assert run(s, "TS.BRANCH", "DROP", "x") == b"OK"
    assert s.branch is None  # back on the main line
    assert run(s, "SET", "k", "v") == b"OK"


def test_branch_from_a_past_version() -> None:
    store, s, _ = setup()
    run(s, "SET", "k", "1")
    v1 = store.lsn
    run(s, "SET", "k", "2")
    run(s, "TS.BRANCH", "CREATE", "old", "FROM", "VERSION", str(v1))
    on(s, "old")
    assert run(s, "GET", "k") == b"1"


@pytest.mark.parametrize("how", ["replay", "checkpoint"])
def test_branches_survive_replay_and_checkpoints(how: str) -> None:
    store, s, sink = setup()
    run(s, "SET", "a", "1")
    run(s, "ZADD", "z", "1", "m")
    run(s, "TS.BRANCH", "CREATE", "b1")
    on(s, "b1")
    run(s, "SET", "a", "b1")
    run(s, "ZADD", "z", "2", "n")
    run(s, "SELECT", "1")
    run(s, "SET", "in-db1", "x")
    run(s, "SELECT", "0")
    run(s, "DEL", "a")
    on(s, None)
    run(s, "TS.BRANCH", "CREATE", "b2")
    run(s, "TS.BRANCH", "DROP", "b2")
    run(s, "SET", "a", "main")
    fresh = Store(databases=2)
    if how == "replay":
        for r in sink.records:
            fresh.replay(r)
    else:
        raw, _n = image(store)
        load_image(fresh, raw, "test")
    assert set(fresh.branches) == {b"b1"}
    assert branch_state(fresh, b"b1") == branch_state(store, b"b1")
    assert fresh.dbs[0].data == store.dbs[0].data
    b1 = fresh.branches[b"b1"]
    assert b1.fork_lsn == store.branches[b"b1"].fork_lsn
    assert b1.dbs[0].data.get(b"a") is None and b1.dbs[1].data.get(b"in-db1") == b"x"


def test_diff_between_branch_heads_and_points() -> None:
    store, s, _ = setup()
    run(s, "SET", "same", "1")
    run(s, "SET", "gone", "1")
    run(s, "TS.BRANCH", "CREATE", "b")
    fork = store.lsn
    on(s, "b")
    run(s, "SET", "new", "1")
    run(s, "DEL", "gone")
    run(s, "APPEND", "same", "x")
    on(s, None)
    diff = run(s, "TS.DIFF", "VERSION", str(fork), "BRANCH", "b")
    assert diff == {b"new": b"added", b"gone": b"removed", b"same": b"changed"}
    assert run(s, "TS.DIFF", "BRANCH", "b", "VERSION", str(fork), "MATCH", "n*") == {
        b"new": b"removed"
    }
    assert run(s, "TS.DIFF", "BRANCH", "b", "BRANCH", "b") == {}
    assert run(s, "TS.DIFF", "BRANCH", "nope", "VERSION", "1").startswith(b"ERR no such branch")


def test_temporal_verbs_on_a_branch_read_its_history() -> None:
    store, s, _ = setup()
    run(s, "SET", "k", "main-1")
    run(s, "TS.BRANCH", "CREATE", "b")
    on(s, "b")
    run(s, "SET", "k", "b-1")
    v = store.lsn
    run(s, "SET", "k", "b-2")
    assert run(s, "TS.ASOF", "k", "VERSION", str(v)) == b"b-1"
    assert run(s, "TS.ASOF", "k", "BACK", "1") == b"b-1"
    on(s, None)
    assert run(s, "TS.ASOF", "k", "VERSION", str(v)) == b"main-1"


@pytest.mark.parametrize("resp", [2, 3])
def test_reply_shapes_on_the_wire(resp: int) -> None:
    """TS.BRANCH LIST, TS.TABLE INFO/LIST and TS.DIFF are maps per entry in RESP3 and
    flat field/value arrays in RESP2; errors are plain error replies."""
    from tests.conftest import start_temporalstore
    from tests.resp_client import RawClient, parse

    p = start_temporalstore()
    c = RawClient(p.port)
    try:
        if resp == 3:
            c.call("HELLO", "3")
        c.call("SET", "k", "1")
        assert c.call("TS.BRANCH", "CREATE", "b") == b"+OK\r\n"
        c.call("TS.CHECKOUT", "b")
        c.call("SET", "k", "2")
        c.call("TS.CHECKOUT", "HEAD")
        listed = parse(c.call("TS.BRANCH", "LIST"))
        entry = listed[1][0]
        assert entry[0] == ("%" if resp == 3 else "*")
        names = [x[1] for x in entry[1][0::2]]
        assert names == [b"name", b"parent", b"fork", b"latest", b"changed"]
        diff = parse(c.call("TS.DIFF", "VERSION", "1", "BRANCH", "b"))
        assert diff[0] == ("%" if resp == 3 else "*")
        assert [x[1] for x in diff[1]] == [b"k", b"added"]
        assert c.call("TS.TABLE", "CREATE", "a:b") == b"+OK\r\n"
        info = parse(c.call("TS.TABLE", "INFO", "a:b"))
        assert info[0] == ("%" if resp == 3 else "*")
        assert [x[1] for x in info[1][0::2]][:4] == [
            b"name",
            b"durability",
            b"retain",
            b"snapshot-every",
        ]
        assert c.call("TS.MERGE", "b") == b":1\r\n"
        assert c.call("TS.MERGE", "nope") == b"-ERR no such branch 'nope'\r\n"
        assert c.call("TS.TABLE", "INFO", "x") == b"-ERR table name must be <namespace>:<table>\r\n"
        assert c.call("TS.BRANCH") == b"-ERR wrong number of arguments for 'ts.branch' command\r\n"
        assert c.call("TS.BRANCH", "NOPE").startswith(b"-ERR unknown subcommand 'NOPE'")
    finally:
        c.close()
        p.stop()


ops = st.lists(
    st.tuples(
        st.sampled_from(["SET", "DEL", "EXPIRE", "PERSIST", "FLUSH"]),
        st.sampled_from([b"a", b"b", b"c", b"d", b"e"]),
    ),
    max_size=30,
)


@settings(max_examples=60, deadline=None)
@given(main=ops, branch=ops)
def test_branch_sizes_are_counted_not_scanned(
    main: list[tuple[str, bytes]], branch: list[tuple[str, bytes]]
) -> None:
    """Writes and reads on a branch never count the main line's keys; DBSIZE counts
    them once, then the overlay keeps the count; the counts equal a full scan."""
    store, s, _ = setup()

    def play(seq: list[tuple[str, bytes]]) -> None:
        for cmd, key in seq:
            if cmd == "SET":
                run(s, "SET", key, b"v")
            elif cmd == "EXPIRE":
                run(s, "EXPIRE", key, b"100")
            elif cmd == "FLUSH":
                run(s, "DEL", *[k for k in (b"a", b"b", b"c", b"d", b"e") if k != key])
            else:
                run(s, cmd, key)

    play(main)
    run(s, "TS.BRANCH", "CREATE", "b")
    play(main[::-1])  # the main line moves on after the fork
    on(s, "b")
    db = store.branches[b"b"].dbs[0]
    bases = (db.base_values, db.base_expires)
    scanned = sum(base.scans for base in bases)
    play(branch)
    # writes and reads never count the main line's keys
    assert sum(base.scans for base in bases) == scanned
    size = run(s, "DBSIZE")
    assert sum(base.scans for base in bases) <= scanned + 2  # at most one count per base
    for m in (db.odata, db.oexpires):
        assert len(m) == sum(1 for _ in m)
        assert bool(m) == any(True for _ in m)
    assert size == len(db.odata)
