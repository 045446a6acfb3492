"""Unit tests of the versioned keyspace: the commit point, LSN order, one record
per committed command, no version for a no-op, MULTI-style atomicity, history
rebuilt from undo chains, and replay of records into an empty store."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import commands.families  # noqa: F401
from commands.dispatch import DISPATCHER
from commands.session import ServerState, Session
from flusher.checkpoint import image, load_image
from flusher.codec import decode_records, encode_record
from store import HistoryPolicy, PrunedError, Store, UpdateRecord, VersionEntry
from store.keyspace import LsnMismatch
from store.ops import CREATED, apply_op
from store.values import copy_value


class ListSink:
    def __init__(self) -> None:
        self.records: list[UpdateRecord] = []

    def append(self, record: UpdateRecord) -> None:
        self.records.append(record)


def make(history: str = "all") -> tuple[Store, Session, ListSink]:
    sink = ListSink()
    store = Store(databases=4, history=HistoryPolicy.parse(history), sink=sink)
    store.snapshot_every = 3  # exercise the full copies, not only undo from the latest
    return store, Session(ServerState(store)), sink


def run(s: Session, *args: str | bytes) -> Any:
    return DISPATCHER.execute(s, [a.encode() if isinstance(a, str) else a for a in args])


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
    assert [r.lsn for r in sink.records] == [1, 2, 3]
    assert len(sink.records[1].ops) == 2
    assert sink.records[1].cmds == ("mset", "mset")
    assert all(r.time_ms > 0 for r in sink.records)


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
    assert [op[1] for op in sink.records[0].ops] == [b"a", b"b", b"a"]
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
    assert sink.records[-1].cmds == ("expired",)
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
    assert [r.lsn for r in sink.records] == list(range(1, store.lsn + 1))
    keys = {k for snap in seen.values() for (_dbi, k) in snap}
    for lsn, snap in seen.items():
        for k in keys:
            expected = snap.get((0, k), (None, None))
            assert store.value_as_of(0, k, lsn) == expected, (lsn, k)
    fresh = Store(databases=4)
    for record in sink.records:
        for dbi, key, op in record.ops:
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
    may take them at other versions)."""
    return {k: [tuple(e)[:5] for e in chain] for k, chain in store.dbs[0].chains.items()}


def test_a_key_written_once_keeps_its_version_packed() -> None:
    store, s, _ = make()
    run(s, "SET", "once", "v")
    lsn, t = store.lsn, store.last_time_ms
    chains = store.dbs[0].chains
    assert chains.born(b"once") == (lsn, "set")
    assert chains.get(b"once") == [VersionEntry(lsn, t, "set", CREATED, None)]
    run(s, "APPEND", "once", "w")
    # The second version unpacks the first, which keeps its LSN, time and command.
    assert chains.born(b"once") is None
    assert [(e.lsn, e.time_ms, e.cmd) for e in chains[b"once"]] == [
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
