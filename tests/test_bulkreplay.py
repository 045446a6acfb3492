"""Replay in bulk (store.bulkreplay, flusher.plainunpack) against the general path,
`Store.replay` one record at a time: for logs of SETs that overwrite keys (the
common case of a write load over a bounded keyspace) mixed with creating SETs, SETs
with expiries, expiries set and cleared, deletions, collections and other commands,
the store after replay is the same, field by field: values, expiries, the dataset's
count, every version chain (entries, with their times, undo and metadata; packed
first versions as packed), floors, history accounting, and the time and version
index."""

from __future__ import annotations

import random
from typing import Any

import pytest

from flusher.codec import decode_records, encode_records
from flusher.plainunpack import BodyRecords, replay_records
from store import R_LSN, Store
from store.bulkreplay import BULK_RUN, apply_run
from store.core import lsn_bytes
from store.policy import HistoryPolicy
from store.records import UpdateRecord
from store.values import copy_value
from tests.helpers import make_session, run


def _commands(rng: random.Random, n: int, keyspace: int) -> list[list[str]]:
    """Mostly plain SETs over `keyspace` random keys (most overwrite one), with
    every kind of record that changes what a SET finds or breaks a run."""
    out: list[list[str]] = []
    while len(out) < n:
        key = f"k{rng.randrange(keyspace)}"
        roll = rng.random()
        if roll < 0.85:
            for _ in range(rng.choice([1, 3, 40, 300])):
                size = rng.choice([0, 3, 100, 5000]) if rng.random() < 0.1 else 3
                out.append(["SET", f"k{rng.randrange(keyspace)}", "v" * size])
            continue
        out.append(
            rng.choice(
                [
                    ["SET", key, "e", "PX", "100000000"],  # an expiry a later SET clears
                    ["PEXPIRE", key, "100000000"],
                    ["PERSIST", key],
                    ["DEL", key],  # history stays: a later SET is no creation
                    ["INCR", key],
                    ["APPEND", key, "x"],
                    ["HSET", key, "f", "v"],  # a collection a later SET replaces
                    ["LPUSH", key, "x"],
                    ["GETSET", key, "g"],
                    ["MSET", key, "1", f"k{rng.randrange(keyspace)}", "2"],
                    ["SET", f"new{len(out)}", "v"],
                    ["SELECT", str(rng.randint(0, 2))],
                    ["TS.META", "AUTHOR", "ann"],
                    ["TS.META", "RESET"],
                    ["MULTI"],
                    ["EXEC"],
                ]
            )
        )
    return out


def _records(seed: int, n: int, keyspace: int) -> list[UpdateRecord]:
    rng = random.Random(seed)
    s, sink = make_session(4, "all")
    for cmd in _commands(rng, n, keyspace):
        run(s, *cmd)
    run(s, "EXEC")  # an open MULTI's commands committed (else an error reply)
    return list(sink.records)


def _state(store: Store) -> dict[str, Any]:
    """Everything replay sets, field by field."""
    mem = store.mem
    return {
        "lsn": store.lsn,
        "last_time_ms": store.last_time_ms,
        "index_lsns": list(store.index_lsns),
        "index_times": list(store.index_times),
        "index_keys": list(store.index_keys),
        "index_from": store.index_from,
        "index_weight": (store._index_weighed, store._index_weight),
        "mem": (mem.main_bytes, mem.main_versions, mem.main_packed),
        "dbs": [
            {
                "data": {k: copy_value(v) for k, v in db.data.items()},
                "types": {k: type(v).__name__ for k, v in db.data.items()},
                "expires": dict(db.expires),
                # The slots as they are (packed ints stay packed), and as entries.
                "slots": dict(dict.items(db.chains)),
                "chains": dict(db.chains.items()),
                "floors": dict(db.floors),
                "floor_mark": db.floor_mark,
                "trim_next": dict(db.trim_next),
                "used": db.used,
            }
            for db in store.dbs
        ],
    }


def _store(history: str) -> Store:
    store = Store(databases=4, history=HistoryPolicy.parse(history))
    store.snapshot_every = 3  # full copies of collections in the way
    return store


def _general(records: list[UpdateRecord], history: str) -> Store:
    store = _store(history)
    for r in records:
        store.replay(r)
    store.bound_index()
    return store


def _bulk(body: bytes, history: str, walk: bool, limit: int) -> Store:
    store = _store(history)
    rows, typed = decode_records(body)
    expected = 1
    while True:
        before = expected
        if walk:
            if before == 1:
                rows = BodyRecords(body)
            expected, _n = replay_records(store, rows, typed, expected, 0, limit)
        else:
            expected, _n = store.replay_records(rows, typed, expected, 0, limit)
        if expected - before < limit:
            return store


@pytest.mark.parametrize("history", ["versions:2", "versions:64", "all", "ms:600000"])
@pytest.mark.parametrize("seed", range(3))
def test_bulk_replay_of_overwrites_builds_the_general_paths_store(seed: int, history: str) -> None:
    records = _records(seed, 4000, keyspace=300)
    body = encode_records(records)
    want = _state(_general(records, history))
    assert want["lsn"] == records[-1][R_LSN]
    assert want["dbs"][0]["floors"] or history != "versions:2"  # chains were trimmed
    for walk in (False, True):
        for limit in (BULK_RUN, 5000, 700):
            got = _state(_bulk(body, history, walk, limit))
            for field, value in want.items():
                assert got[field] == value, (field, walk, limit)


def test_a_run_of_overwrites_is_applied_in_bulk() -> None:
    """Overwrites, a key twice in the run, a cleared expiry, a deleted key's chain and
    a packed first version: applied by the bulk pass itself (True), as the general
    path applies them; a run over a collection is refused, with nothing applied."""
    s, sink = make_session(4, "versions:64")
    run(s, "SET", "a", "1")
    run(s, "SET", "b", "1")
    run(s, "SET", "b", "2")
    run(s, "SET", "e", "1", "PX", "100000000")
    run(s, "SET", "gone", "1")
    run(s, "DEL", "gone")
    run(s, "HSET", "h", "f", "v")
    head = list(sink.records)
    keys = [b"a", b"b", b"new", b"e", b"gone", b"a", b"new"]
    for i, k in enumerate(keys):
        run(s, "SET", k, f"x{i}")
    tail = sink.records[len(head) :]
    times = b"".join(lsn_bytes(r[1], 1) for r in tail)  # one time per record, packed
    values = [b"x%d" % i for i in range(len(keys))]
    nbytes = sum(map(len, keys)) + sum(map(len, values))
    bulk = _general(head, "versions:64")
    first = len(head) + 1
    assert apply_run(bulk, 0, keys, values, times, tail[-1][1], nbytes, "set", first)
    assert _state(bulk) == _state(_general(head + tail, "versions:64"))
    # A SET over the hash: the op table's work (its size, its undo), not the run's.
    before = _state(bulk)
    lsn = bulk.lsn + 1
    assert not apply_run(bulk, 0, [b"a", b"h"], [b"1", b"2"], lsn_bytes(9, 2), 9, 4, "set", lsn)
    assert _state(bulk) == before
