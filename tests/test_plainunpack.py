"""Replay that walks the plain SET records' bytes itself (`flusher.plainunpack`)
restores exactly the store the codec's rows restore (`Store.replay_records`): a
random mix of commands, its records encoded as the flusher encodes them, replayed
by both paths (in slices, some records already present), the stores compared
field by field, history and time index included. Both paths run on both builds
(the walk is used by recovery only when compiled, where it pays)."""

from __future__ import annotations

import random
from array import array
from typing import Any

import pytest

from flusher import plainunpack
from flusher.codec import decode_records, encode_record, encode_records
from flusher.plainunpack import BodyRecords, replay_records
from store import R_LSN, R_META, R_TIME, Store, native
from store.bulkreplay import BULK_RUN, apply_run
from store.core import lsn_bytes
from store.keyspace import LsnMismatch
from store.records import UpdateRecord
from store.values import copy_value
from tests.helpers import make_session, run


def _commands(rng: random.Random, n: int) -> list[list[str]]:
    """Mostly SETs creating keys (runs of them, as a bulk load makes), with every
    kind of record that breaks a run in between."""
    out: list[list[str]] = []
    fresh = 0
    while len(out) < n:
        roll = rng.random()
        if roll < 0.2:
            for _ in range(rng.choice([1, 1, 2, 5, 40, 300])):
                fresh += 1
                size = rng.choice([0, 5, 100, 300, 70_000]) if rng.random() < 0.05 else 20
                out.append(["SET", f"k{fresh}" * rng.choice([1, 1, 40]), "v" * size])
        else:
            key = f"k{rng.randint(1, fresh + 3)}"
            out.append(
                rng.choice(
                    [
                        ["SET", key, "again"],
                        ["SET", f"t{fresh}", "v", "PX", "100000"],
                        ["SETNX", f"n{fresh}", "v"],
                        ["GETSET", f"g{fresh}", "v"],
                        ["APPEND", f"a{fresh}", "v"],
                        ["INCR", f"i{fresh}"],
                        ["HSET", "h", key, "v"],
                        ["MSET", f"m{fresh}", "1", f"mm{fresh}", "2"],
                        ["DEL", key],
                        ["LPUSH", "l", "x"],
                        ["SELECT", str(rng.randint(0, 3))],
                        ["TS.META", "AUTHOR", "ann"],
                        ["TS.META", "RESET"],
                        ["SWAPDB", "1", "2"],
                    ]
                )
            )
    return out


def _state(store: Store) -> dict[str, Any]:
    """Everything replay sets, field by field."""
    return {
        "lsn": store.lsn,
        "last_time_ms": store.last_time_ms,
        "index_lsns": list(store.index_lsns),
        "index_times": list(store.index_times),
        "index_keys": list(store.index_keys),
        "index_weight": (store._index_weighed, store._index_weight),
        "mem": (store.mem.main_bytes, store.mem.main_versions),
        "dbs": [
            {
                "data": {k: copy_value(v) for k, v in db.data.items()},
                "expires": dict(db.expires),
                "chains": dict(dict.items(db.chains)),
                "used": db.used,
            }
            for db in store.dbs
        ],
    }


def _records(seed: int, n: int) -> list[UpdateRecord]:
    rng = random.Random(seed)
    s, sink = make_session(4, "all")
    for cmd in _commands(rng, n):
        run(s, *cmd)
    return list(sink.records)


def _body(records: list[UpdateRecord], rng: random.Random) -> bytes:
    """Encoded as the flusher encodes them: in batches of any size."""
    parts = []
    i = 0
    while i < len(records):
        j = i + rng.choice([1, 7, 200, 2000])
        parts.append(encode_records(records[i:j]))
        i = j
    return b"".join(parts)


def _replay(
    store: Store, rows: Any, typed: Any, expected: int, skip: int, limits: list[int]
) -> int:
    """As recovery does: slice after slice until one comes back short."""
    for limit in limits:
        before = expected
        expected, _applied = replay_records(store, rows, typed, expected, skip, limit)
        if expected - before < limit:
            break
    return expected


@pytest.mark.parametrize("seed", range(6))
def test_the_walk_restores_what_the_rows_restore(seed: int) -> None:
    rng = random.Random(seed)
    records = _records(seed, 3000)
    assert any(r[R_META] is not None for r in records)
    body = _body(records, rng)
    last = records[-1][R_LSN]
    # Some records already present (a checkpoint's, a replica's): counted, not applied.
    have = rng.choice([0, 0, 1, 37, 500])
    limits = [rng.choice([1, 5, 256, 700, 5000]) for _ in range(last + 2)]
    stores = []
    for walk in (False, True):
        store = Store(databases=4)
        store.snapshot_every = 3
        if have:
            head = b"".join(encode_record(r) for r in records[:have])
            store.replay_records(*decode_records(head), 1, 0, have)
        rows, typed = decode_records(body)
        if walk:
            rows = BodyRecords(body)
        assert _replay(store, rows, typed, 1, have, limits) == last + 1
        stores.append(store)
    old, new = (_state(s) for s in stores)
    assert new == old
    assert old["lsn"] == last and old["index_lsns"] == list(range(1, last + 1))


def test_plain_runs_are_taken_as_columns() -> None:
    s, sink = make_session(4, "all")
    for i in range(10):
        run(s, "SET", f"k{i}", f"v{i}")
    run(s, "SET", "ttl", "v", "PX", "100000")
    run(s, "SELECT", "2")
    run(s, "SET", "big" * 100, "v" * 70_000)
    body = encode_records(sink.records)
    rows = BodyRecords(body)
    assert rows.plain_run(2, 256) is None  # the first record's LSN is 1
    plain = rows.plain_run(1, 4)
    assert plain is not None and (plain.dbi, plain.cmd) == (0, "set")
    assert plain.keys == [b"k0", b"k1", b"k2", b"k3"] and plain.values[3] == b"v3"
    assert plain.times() == [r[R_TIME] for r in sink.records[:4]]
    assert plain.last_time == sink.records[3][R_TIME]
    plain = rows.plain_run(5, 256)
    assert plain is not None and len(plain.keys) == 6  # up to the SET with a TTL
    assert rows.plain_run(11, 256) is None
    assert [row[0] for row in rows.take_rows(256, True)] == [11]
    plain = rows.plain_run(12, 256)
    assert plain is not None and plain.dbi == 2 and plain.keys == [b"big" * 100]
    assert plain.values == [b"v" * 70_000]
    assert rows.plain_run(13, 256) is None and rows.take_rows(256, True) == []


def test_lsns_out_of_order_and_truncated_bodies_are_refused() -> None:
    s, sink = make_session(4, "all")
    for i in range(5):
        run(s, "SET", f"k{i}", "v")
    body = encode_records(sink.records)
    with pytest.raises(LsnMismatch):
        replay_records(Store(databases=4), BodyRecords(body), decode_records(b"")[1], 2, 0, 9)
    # A cut body: the whole records are replayed, then the codec finds none more.
    cut = BodyRecords(body[:-3])
    store = Store(databases=4)
    assert replay_records(store, cut, decode_records(b"")[1], 1, 0, 9) == (5, 4)
    assert store.lsn == 4 and len(store.dbs[0].data) == 4


def test_the_walk_is_used_when_compiled() -> None:
    body = encode_records(_records(1, 10))
    rows, _typed = plainunpack.body_records(body)
    assert plainunpack.COMPILED is (native.STATE == "compiled")
    assert isinstance(rows, BodyRecords) == plainunpack.COMPILED


def test_slices_leave_the_rest_for_the_next() -> None:
    records = _records(3, 600)
    body = _body(records, random.Random(3))
    store = Store(databases=4)
    rows, typed = BodyRecords(body), decode_records(b"")[1]
    expected, applied = replay_records(store, rows, typed, 1, 0, 100)
    assert (expected, applied) == (101, 100) and store.lsn == 100
    expected, applied = replay_records(store, rows, typed, expected, 0, 10**9)
    assert expected == records[-1][R_LSN] + 1 and applied == len(records) - 100


@pytest.mark.parametrize("first", [0, 1, 200, 255, 256, 123_456_789, 2**40 + 7, 2**63 - 300])
def test_lsn_bytes_are_the_index_arrays_bytes(first: int) -> None:
    for n in (0, 1, 2, 56, 255, BULK_RUN, BULK_RUN + 1, 1000):
        if first + n <= 2**63:
            want = array("q", range(first, first + n)).tobytes()
            assert lsn_bytes(first, n) == want, (first, n)
    assert lsn_bytes(2**63 - 1, 1) == array("q", [2**63 - 1]).tobytes()


def test_a_run_setting_a_new_key_twice_is_applied_in_order() -> None:
    """The bulk update finds the repeated key by the database's size, takes its
    keys out again and applies the run in order (the pass that takes overwrites):
    the same store as the rows."""
    s, sink = make_session(4, "all")
    run(s, "SET", "old", "v")
    for key in ("a", "b", "a", "c"):
        run(s, "SET", key, key * 3)
    body = encode_records(sink.records)
    stores = []
    for walk in (False, True):
        store = Store(databases=4)
        rows, typed = decode_records(body)
        assert replay_records(store, BodyRecords(body) if walk else rows, typed, 1, 0, 9) == (6, 5)
        stores.append(store)
    assert _state(stores[1]) == _state(stores[0])
    assert list(stores[1].dbs[0].data) == [b"old", b"a", b"b", b"c"]
    assert stores[1].dbs[0].data[b"a"] == b"aaa"
    one = Store(databases=4)
    for r in sink.records:
        one.replay(r)
    one.bound_index()  # as replay_records does at the end of a slice
    assert _state(stores[1]) == _state(one)
    # The bulk pass itself: the second write of x is x's second version.
    store = Store(databases=4)
    keys, values = [b"x", b"y", b"x"], [b"1", b"2", b"3"]
    assert apply_run(store, 0, keys, values, lsn_bytes(5, 3), 7, 6, "set", 1)
    assert store.dbs[0].data == {b"x": b"3", b"y": b"2"} and list(store.index_lsns) == [1, 2, 3]
    first, second = store.dbs[0].chains[b"x"]
    assert first[:3] == (1, 5, "set") and second[:4] == (3, 7, "set", b"1")


def test_rows_and_runs_take_turns_from_any_position() -> None:
    """The unpacker is made at the first record that needs it and catches up
    over the runs walked since: iterating, taking runs and taking rows in any
    order gives the body's records once each, in order."""
    records = _records(5, 400)
    body = _body(records, random.Random(5))
    want = list(decode_records(body).rows)
    assert list(BodyRecords(body)) == want
    rng = random.Random(5)
    for _ in range(20):
        rows = BodyRecords(body)
        got: list[Any] = []
        while len(got) < len(want):
            how = rng.choice(["next", "run", "rows"])
            if how == "next":
                got.append(next(rows))
            elif how == "run":
                plain = rows.plain_run(len(got) + 1, rng.choice([1, 3, 256]))
                if plain is not None:
                    got.extend(plain.rows(len(got) + 1))
            else:
                got.extend(rows.take_rows(rng.choice([1, 4, 50]), rng.random() < 0.5))
        assert got == want
        assert rows.take_rows(5, False) == [] and rows.plain_run(len(got) + 1, 5) is None
