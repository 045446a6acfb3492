"""Unit tests of the versioned keyspace: the commit point, LSN order, one record
per committed command, no version for a no-op, MULTI-style atomicity, history
rebuilt from undo chains, and replay of records into an empty store."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from commands.registry import COMMANDS as COMMAND_TABLE
from commands.replies import OK, ErrorReply
from commands.session import Session
from flusher.checkpoint import image, load_image
from flusher.codec import decode_records, encode_record
from store import (
    R_CMDS,
    R_LSN,
    R_META,
    R_OPS,
    R_TIME,
    V_CMD,
    V_LSN,
    V_META,
    V_TIME,
    V_UNDO,
    PrunedError,
    Snapshot,
    Store,
    bulkreplay,
    database,
    keyspace,
)
from store.chains import undo_ops
from store.keyspace import LsnMismatch
from store.ops import CREATED, apply_op
from store.values import copy_value
from tests.conftest import ROOT
from tests.helpers import ListSink, make_session, run


def make(history: str = "all") -> tuple[Store, Session, ListSink]:
    s, sink = make_session(4, history)
    s.store.snapshot_every = 3  # exercise the full copies, not only undo from the latest
    return s.store, s, sink


def snapshot(store: Store) -> dict[tuple[int, bytes], tuple[Any, int | None]]:
    return {
        (db.index, k): (copy_value(v), db.expires.get(k))
        for db in store.dbs
        for k, v in db.data.items()
    }


def test_each_write_gets_the_next_lsn_and_one_record() -> None:
    store, s, sink = make()
    run(s, "SET", "a", "1")
    run(s, "MSET", "b", "2", "c", "3")
    run(s, "HSET", "h", "f", "v", "g", "w")
    run(s, "GET", "a")
    assert store.lsn == 3
    assert [r[R_LSN] for r in sink.records] == [1, 2, 3]
    assert len(sink.records[1][R_OPS]) == 2
    assert sink.records[1][R_CMDS] == ("mset", "mset")
    assert all(r[R_TIME] > 0 for r in sink.records)


@pytest.mark.parametrize(
    "setup,noop",
    [
        (("SET", "k", "v"), ("SET", "k", "x", "NX")),
        (("SET", "k", "v"), ("SET", "nokey", "x", "XX")),
        (("SET", "k", "v"), ("DEL", "missing")),
        (("HSET", "h", "f", "v"), ("HDEL", "h", "nofield")),
        (("HSET", "h", "f", "v"), ("HSETNX", "h", "f", "other")),
        (("SET", "k", "v"), ("MSETNX", "k", "1", "z", "2")),
        (("SET", "k", "v"), ("GETDEL", "missing")),
        (("SET", "k", "v"), ("INCR", "k")),
        (("SET", "k", "v"), ("SETRANGE", "k", "0", "")),
    ],
)
def test_a_command_that_changes_nothing_creates_no_version(
    setup: tuple[str, ...], noop: tuple[str, ...]
) -> None:
    store, s, sink = make()
    run(s, *setup)
    before = store.lsn
    run(s, *noop)
    assert store.lsn == before
    assert len(sink.records) == before


def test_failed_command_leaves_no_trace() -> None:
    store, s, sink = make()
    run(s, "HSET", "h", "f", "v")
    reply = run(s, "INCR", "h")
    assert reply.startswith(b"WRONGTYPE")
    assert store.lsn == 1 and len(sink.records) == 1


def test_transaction_commits_once() -> None:
    store, s, sink = make()
    store.apply(s.db, b"a", ("set", b"1", None))
    store.apply(s.db, b"b", ("set", b"2", None))
    store.apply(s.db, b"a", ("set", b"3", None))
    lsn = store.commit()
    assert lsn == 1 and len(sink.records) == 1
    assert [op[1] for op in sink.records[0][R_OPS]] == [b"a", b"b", b"a"]
    assert store.value_as_of(0, b"a", 1)[0] == b"3"
    assert store.value_as_of(0, b"a", 0)[0] is None


def test_history_policy_keeps_last_versions_and_reports_pruned() -> None:
    store, s, _ = make("versions:3")
    for i in range(10):
        run(s, "SET", "k", str(i))
    assert store.value_as_of(0, b"k", 10)[0] == b"9"
    assert store.value_as_of(0, b"k", 8)[0] == b"7"
    with pytest.raises(PrunedError):
        store.value_as_of(0, b"k", 1)


def test_expiry_is_a_version() -> None:
    store, s, sink = make()
    run(s, "SET", "k", "v", "PX", "1")
    import time

    time.sleep(0.01)
    assert run(s, "GET", "k") is None
    assert sink.records[-1][R_CMDS] == ("expired",)
    assert store.value_as_of(0, b"k", 1)[0] == b"v"
    assert store.value_as_of(0, b"k", 2)[0] is None


KEYS = st.sampled_from(["a", "b", "c"])
FIELDS = st.sampled_from(["f", "g", "h"])
VALUES = st.sampled_from(["1", "2", "x", "10", ""])
COMMANDS = st.one_of(
    st.tuples(st.just("SET"), KEYS, VALUES),
    st.tuples(st.just("SET"), KEYS, VALUES, st.sampled_from(["NX", "XX", "GET"])),
    st.tuples(st.just("SET"), KEYS, VALUES, st.just("EX"), st.just("1000")),
    st.tuples(st.just("APPEND"), KEYS, VALUES),
    st.tuples(st.just("INCR"), KEYS),
    st.tuples(st.just("INCRBYFLOAT"), KEYS, st.just("1.5")),
    st.tuples(st.just("SETRANGE"), KEYS, st.sampled_from(["0", "3"]), VALUES),
    st.tuples(st.just("DEL"), KEYS),
    st.tuples(st.just("GETDEL"), KEYS),
    st.tuples(st.just("MSET"), KEYS, VALUES, KEYS, VALUES),
    st.tuples(st.just("HSET"), KEYS, FIELDS, VALUES),
    st.tuples(st.just("HSET"), KEYS, FIELDS, VALUES, FIELDS, VALUES),
    st.tuples(st.just("HDEL"), KEYS, FIELDS, FIELDS),
    st.tuples(st.just("HINCRBY"), KEYS, FIELDS, st.just("3")),
    st.tuples(st.just("GETEX"), KEYS, st.sampled_from(["PERSIST", "EX"]), st.just("100")),
    st.tuples(st.just("FLUSHDB")),
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(COMMANDS, min_size=1, max_size=40))
def test_history_and_replay_match_what_happened(cmds: list[tuple[str, ...]]) -> None:
    """After any command sequence: every key at every LSN rebuilds to exactly the
    state seen then, and replaying the records into an empty store reproduces it."""
    store, s, sink = make()
    seen = {0: snapshot(store)}
    for c in cmds:
        args = list(c)
        if args[0] == "GETEX" and args[1:] and args[2:3] == ["PERSIST"]:
            args = args[:3]
        before = store.lsn
        run(s, *args)
        assert store.lsn in (before, before + 1)
        seen[store.lsn] = snapshot(store)
    assert [r[R_LSN] for r in sink.records] == list(range(1, store.lsn + 1))
    keys = {k for snap in seen.values() for (_dbi, k) in snap}
    for lsn, snap in seen.items():
        for k in keys:
            expected = snap.get((0, k), (None, None))
            assert store.value_as_of(0, k, lsn) == expected, (lsn, k)
    fresh = Store(databases=4)
    for record in sink.records:
        for dbi, key, op in record[R_OPS]:
            assert key is not None
            apply_op(fresh.dbs[dbi], key, op)
    assert snapshot(fresh) == snapshot(store)
    # Replaying the records (versions included) or loading a checkpoint image gives
    # a store whose history answers exactly the same.
    replayed = Store(databases=4)
    replayed.snapshot_every = 3
    body = b"".join(encode_record(r) for r in sink.records)
    assert replayed.replay_records(*decode_records(body), 1, 0, 1 << 30) == (
        store.lsn + 1,
        store.lsn,
    )
    raw, _count = image(store)
    loaded = Store(databases=4)
    load_image(loaded, raw, "test")
    for other in (replayed, loaded):
        for lsn, snap in seen.items():
            for k in keys:
                assert other.value_as_of(0, k, lsn) == snap.get((0, k), (None, None))
        assert _versions(other) == _versions(store)
    # A whole-database view at each LSN holds exactly the keys that existed then.
    for lsn, snap in seen.items():
        view = store.view(0, lsn)
        assert {k: v for (d, k), (v, _e) in snap.items() if d == 0} == view.data


def _versions(store: Store) -> dict[bytes, list[tuple[Any, ...]]]:
    """Every key's history in database 0, without the full copies (a replayed store
    may take them at other versions); undos as their ops (`store.chains.undo_ops`: a
    replaced bytearray's undo is read back from an image as bytes, kept compact)."""
    return {
        k: [(e[V_LSN], e[V_TIME], e[V_CMD], undo_ops(e[V_UNDO]), e[V_META]) for e in chain]
        for k, chain in store.dbs[0].chains.items()
    }


def test_a_key_written_once_keeps_its_version_packed() -> None:
    store, s, _ = make()
    run(s, "SET", "once", "v")
    lsn, t = store.lsn, store.last_time_ms
    chains = store.dbs[0].chains
    assert chains.born(b"once") == (lsn, "set")
    assert chains.get(b"once") == [(lsn, t, "set", CREATED, None, None)]
    run(s, "APPEND", "once", "w")
    # The second version unpacks the first, which keeps its LSN, time and command.
    assert chains.born(b"once") is None
    assert [(e[V_LSN], e[V_TIME], e[V_CMD]) for e in chains[b"once"]] == [
        (lsn, t, "set"),
        (store.lsn, store.last_time_ms, "append"),
    ]
    assert store.value_as_of(0, b"once", lsn) == (b"v", None)


def test_replay_checks_lsns_and_skips_what_it_has() -> None:
    store, s, sink = make()
    for i in range(4):
        run(s, "SET", f"k{i}", "v")
    body = b"".join(encode_record(r) for r in sink.records)
    fresh = Store(databases=4)
    # Records 1-2 are already there (say, from a checkpoint): counted, not applied.
    fresh.replay_records(
        *decode_records(b"".join(encode_record(r) for r in sink.records[:2])), 1, 0, 9
    )
    assert fresh.replay_records(*decode_records(body), 1, 2, 9) == (5, 2)
    assert fresh.dbs[0].data == store.dbs[0].data and fresh.lsn == 4
    with pytest.raises(LsnMismatch):
        Store(databases=4).replay_records(*decode_records(body), 2, 0, 9)
    # A limit takes that many records and leaves the rest in the iterator.
    rows, typed = decode_records(body)
    part = Store(databases=4)
    assert part.replay_records(rows, typed, 1, 0, 3) == (4, 3)
    assert part.replay_records(rows, typed, 4, 0, 3) == (5, 1)


def test_replay_in_bulk_matches_replay_one_by_one() -> None:
    """Runs of the common record (a SET creating a key) are applied in bulk; a run
    broken by any other record (an overwrite, a TTL, another database, a key with
    history, metadata) is replayed one by one. Both give the store the live one is."""
    store, s, sink = make()
    n = 3 * bulkreplay.BULK_RUN
    run(s, "SET", "gone", "v")
    run(s, "DEL", "gone")  # no value, but history: a later SET of it is no creation
    for i in range(n):
        run(s, "SET", f"k{i}", f"v{i}")
    for i in range(n, 2 * n):
        run(s, "SET", f"k{i}", "v")
        if i == n + 5:
            run(s, "SET", "k3", "again")
            run(s, "SET", "ttl", "v", "PX", "100000")
            run(s, "SET", "gone", "back")
            run(s, "SELECT", "2")
            run(s, "SET", "k3", "other db")
            run(s, "SELECT", "0")
        if i == n + 300:
            run(s, "TS.META", "AUTHOR", "ann")
            run(s, "SET", "authored", "v")
            run(s, "TS.META", "RESET")
            run(s, "HSET", "h", "f", "v")
    assert sum(r[R_META] is not None for r in sink.records) == 1
    body = b"".join(encode_record(r) for r in sink.records)
    bulk = Store(databases=4)
    bulk.snapshot_every = 3
    rows, typed = decode_records(body)
    expected = 1
    while expected <= store.lsn:
        expected, _applied = bulk.replay_records(rows, typed, expected, 0, 1000)
    one = Store(databases=4)
    one.snapshot_every = 3
    for r in sink.records:
        one.replay(r)
    for other in (bulk, one):
        assert other.lsn == store.lsn and other.last_time_ms == store.last_time_ms
        assert snapshot(other) == snapshot(store)
        assert _versions(other) == _versions(store)
        assert dict.items(other.dbs[0].chains) == dict.items(store.dbs[0].chains)
        assert list(other.index_lsns) == list(store.index_lsns)
        assert list(other.index_times) == list(store.index_times)
        assert other.index_keys == store.index_keys
        assert other.mem.main_versions == store.mem.main_versions
        assert other.mem.main_bytes == store.mem.main_bytes
        assert other.keys_written(0, 0, store.lsn) == store.keys_written(0, 0, store.lsn)


def test_undo_of_repeated_members_in_one_op() -> None:
    store, s, _ = make()
    store.apply(s.db, b"z", ("zadd", ((b"a", 1.0),)))
    store.commit()
    store.apply(s.db, b"z", ("zadd", ((b"b", 2.0), (b"b", 3.0), (b"a", 5.0), (b"a", 6.0))))
    store.commit()
    z, _ = store.value_as_of(0, b"z", 1)
    assert z.scores == {b"a": 1.0}


def test_loading_refuses_commands_that_need_data() -> None:
    _store, s, _ = make()
    s.server.loading = True
    assert run(s, "GET", "k").startswith(b"LOADING")
    assert run(s, "SET", "k", "v").startswith(b"LOADING")
    assert run(s, "PING").startswith(b"LOADING")
    info = run(s, "INFO", "persistence")
    assert b"loading:1" in info
    s.server.loading = False
    assert run(s, "GET", "k") is None


def test_time_index_and_snapshot_pins_history() -> None:
    store, s, _ = make("versions:2")
    run(s, "SET", "k", "0")
    lsn = store.db_op(0, ("seal", b"snap", b"test"))
    store.commit()
    for i in range(1, 20):
        run(s, "SET", "k", str(i))
    assert store.value_as_of(0, b"k", lsn)[0] == b"0"  # pinned by the snapshot
    assert store.lsn_at_time(store.time_of(lsn)) >= lsn
    assert store.lsn_at_time(0) == 0
    store.db_op(0, ("unseal", b"snap"))
    store.commit()
    for i in range(20, 30):
        run(s, "SET", "k", str(i))
    with pytest.raises(PrunedError, match="PRUNED version 1 of k is no longer retained"):
        store.value_as_of(0, b"k", 1)


# -- the transaction at the commit point ----------------------------------------------


def chains_as_stored(store: Store) -> dict[tuple[int, bytes], Any]:
    """Every chain as stored (packed ints stay ints), copied."""
    return {
        (db.index, k): v if type(v) is int else list(v)
        for db in store.dbs
        for k, v in dict.items(db.chains)
    }


def test_begin_apply_commit_gives_one_lsn_one_record_and_tells_the_writer() -> None:
    store, s, sink = make()
    run(s, "SET", "a", "0")
    assert s.last_write_lsn == 1 and s.last_sync_lsn == 0
    assert store.begin("set", s) == 0
    store.apply(s.db, b"a", ("set", b"1", None))
    assert store.begin("hset", s) == 1  # the savepoint: what is already applied
    store.apply(s.db, b"h", ("hset", ((b"f", b"v"),)))
    assert len(sink.records) == 1  # nothing reaches the sink before the commit
    assert store.commit() == 2
    assert store.commit() == 0  # nothing left open
    assert [r[R_LSN] for r in sink.records] == [1, 2]
    rec = sink.records[1]
    assert rec[R_OPS] == ((0, b"a", ("set", b"1", None)), (0, b"h", ("hset", ((b"f", b"v"),))))
    assert rec[R_CMDS] == ("set", "hset")
    assert store.time_of(2) == rec[R_TIME]
    assert s.last_write_lsn == 2 and s.last_sync_lsn == 0
    store.default_sync = True
    run(s, "SET", "a", "2")
    assert s.last_write_lsn == s.last_sync_lsn == 3
    # Only the writer named by `begin` is told; a commit without one tells nobody.
    store.begin("expired")
    store.apply(s.db, b"a", ("del",))
    assert store.commit() == 4
    assert s.last_write_lsn == s.last_sync_lsn == 3


def test_metadata_is_the_writers_at_commit() -> None:
    _store, s, sink = make()
    run(s, "MULTI")
    run(s, "SET", "a", "1")
    run(s, "TS.META", "AUTHOR", "bob")
    run(s, "EXEC")
    assert sink.records[0][R_META] is not None and sink.records[0][R_META].author == b"bob"


def test_rollback_leaves_keyspace_and_chains_as_before() -> None:
    store, s, sink = make()
    run(s, "SET", "once", "v")
    run(s, "SET", "twice", "a")
    run(s, "SET", "twice", "b")
    run(s, "HSET", "h", "f", "1")
    run(s, "RPUSH", "l", "x", "y")
    run(s, "SET", "ttl", "t", "EX", "1000")
    before = (snapshot(store), chains_as_stored(store), store.lsn, list(store.index_lsns))
    store.begin("mix", s)
    for key, op in [
        (b"once", ("set", b"w", None)),
        (b"twice", ("del",)),
        (b"h", ("hset", ((b"f", b"2"), (b"g", b"3")))),
        (b"l", ("lpop", 1)),
        (b"ttl", ("expire", None)),
        (b"new", ("set", b"n", None)),
        (b"h", ("hdel", (b"f",))),
    ]:
        store.apply(s.db, key, op)
    store.rollback_to(0)
    assert store.commit() == 0
    assert (snapshot(store), chains_as_stored(store), store.lsn, list(store.index_lsns)) == before
    assert len(sink.records) == 6 and s.last_write_lsn == 6


def test_savepoint_undoes_only_what_follows_it() -> None:
    store, s, sink = make()
    store.begin("set", s)
    store.apply(s.db, b"a", ("set", b"1", None))
    savepoint = store.begin("set", s)
    store.apply(s.db, b"b", ("set", b"2", None))
    store.apply(s.db, b"a", ("set", b"3", None))
    store.rollback_to(savepoint)
    assert store.commit() == 1
    assert sink.records[0][R_OPS] == ((0, b"a", ("set", b"1", None)),)
    assert snapshot(store) == {(0, b"a"): (b"1", None)}


def test_db_ops_get_the_commits_lsn_and_time(monkeypatch: pytest.MonkeyPatch) -> None:
    store, s, sink = make()
    run(s, "SET", "a", "1")
    run(s, "SET", "b", "2", "EX", "100000")
    # The clock moves on between the ops and the commit: both carry one time.
    monkeypatch.setattr(database, "_time", lambda: 4_000_000_000.0)
    monkeypatch.setattr(keyspace, "_time", lambda: 4_000_000_009.0)
    store.begin("ts.seal", s)
    assert store.db_op(0, ("seal", b"snap", b"manual")) == 3
    store.apply(s.db, b"a", ("set", b"x", None))
    assert store.db_op(0, ("table", b"ns:t", "sync", "versions:4", 8)) == 3
    store.swap_dbs(0, 1)
    assert store.commit() == 3
    rec = sink.records[-1]
    assert rec[R_LSN] == 3 and rec[R_TIME] == 4_000_000_000_000
    assert [op for _d, _k, op in rec[R_OPS]] == [
        ("seal", b"snap", b"manual"),
        ("set", b"x", None),
        ("table", b"ns:t", "sync", "versions:4", 8),
        ("swapdb", 1),
    ]
    assert store.snapshots[b"snap"] == Snapshot(b"snap", 3, 4_000_000_000_000, b"manual")
    assert store.tables[b"ns:t"].durability == "sync"
    assert store.dbs[1].get(b"a") == b"x" and store.dbs[0].get(b"a") is None
    # The next commit reads the clock again.
    run(s, "SET", "c", "3")
    assert sink.records[-1][R_TIME] == 4_000_000_009_000
    # Replayed, the same record gives the same snapshot.
    fresh = Store(databases=4)
    for r in sink.records:
        fresh.replay(r)
    assert fresh.snapshots == store.snapshots and fresh.tables == store.tables


def test_failing_handler_rolls_back_all_it_applied(monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside MULTI a handler that fails after writing leaves nothing; inside EXEC
    only its own ops are undone and the block is still one record."""
    store, s, sink = make()
    hset = COMMAND_TABLE[b"hset"]
    real = hset.handler
    assert real is not None

    def fails_after_writing(s: Session, argv: list[bytes]) -> Any:
        real(s, argv)
        s.store.apply(s.db, b"other", ("set", b"x", None))
        raise RuntimeError("bug")

    run(s, "HSET", "h", "f", "1")
    before = (snapshot(store), chains_as_stored(store))
    monkeypatch.setattr(hset, "handler", fails_after_writing)
    monkeypatch.setattr(hset, "direct", 0)  # HSET of one field: through the handler too
    reply = run(s, "HSET", "h", "f", "2", "g", "3")
    assert reply == ErrorReply(b"ERR internal error while running 'hset'")
    assert (snapshot(store), chains_as_stored(store)) == before
    assert len(sink.records) == 1 and not store.pending
    run(s, "MULTI")
    run(s, "SET", "a", "1")
    run(s, "HSET", "h", "f", "2")
    run(s, "SET", "b", "2")
    replies = run(s, "EXEC")
    assert replies[0] == replies[2] == OK and isinstance(replies[1], ErrorReply)
    assert len(sink.records) == 2
    assert [(k, op) for _d, k, op in sink.records[1][R_OPS]] == [
        (b"a", ("set", b"1", None)),
        (b"b", ("set", b"2", None)),
    ]
    assert store.dbs[0].get(b"h") == before[0][(0, b"h")][0]
    assert b"other" not in store.dbs[0].data


def test_store_state_names_every_attribute() -> None:
    """Store.reset (DEBUG RELOAD) saves and restores the attributes STORE_STATE names:
    the list must be every attribute a (pure-Python) Store has."""
    code = (
        "import store.keyspace as k; s = k.Store(databases=2); "
        "print(sorted(set(vars(s)) ^ set(k.STORE_STATE)))"
    )
    env = {**os.environ, "TEMPORALSTORE_PURE": "1"}
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "[]"
