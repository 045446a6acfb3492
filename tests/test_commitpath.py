"""store.commitpath's straight-line commit cases store and count exactly what the
general code does: the same records, version chains, history counts and dataset
sizes, whether or not the fast path takes a write.

The reference run turns the fast paths off by replacing the names the callers look
up (`store.keyspace.version_one`, `commands.strings.set_string`, `apply_on` in
`commands.hashes` and `commands.lists`): that compares the
two paths where the code runs as Python (the fast subset CI runs pure); in the
compiled build the callers are bound in C, both runs take the same path, and the
test still holds each run to a recount of its history from scratch."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from commands import dispatch, hashes, hotwrites, strings
from store import R_CMDS, R_LSN, R_META, R_OPS, V_LSN, Store, keyspace
from store.commitpath import set_string
from store.ops import KEEP_TTL, SET
from tests.helpers import ListSink, make_session, run

WORKLOAD = st.lists(
    st.tuples(
        st.sampled_from(
            ["set", "setex", "incr", "hset", "lpush", "rpush", "push2", "del", "multi", "expire"]
        ),
        st.integers(0, 3),
        st.binary(max_size=12),
    ),
    max_size=80,
)


def _general_set(
    store: Store, db: Any, key: bytes, value: bytes, ttl: Any = None, _read: Any = None
) -> None:
    store.apply(db, key, (SET, value, ttl))


def _general_apply(store: Store, db: Any, key: bytes, op: Any, _old: Any) -> Any:
    store.apply(db, key, op)
    return store.pending[-1][3]  # the op's undo, as apply_on returns it


def _state(store: Store, sink: ListSink) -> dict[str, Any]:
    chains = {
        (db.index, key): [(e[V_LSN], *e[2:]) for e in chain]  # times differ between runs
        for db in store.dbs
        for key, chain in db.chains.items()
    }
    mem = store.mem
    return {
        "records": [(r[R_LSN], r[R_OPS], r[R_CMDS], r[R_META]) for r in sink.records],
        "chains": chains,
        "mem": (mem.main_bytes, mem.main_versions),
        "used": [db.used for db in store.dbs],
        "data": [dict(db.data) for db in store.dbs],
        "expires": [dict(db.expires) for db in store.dbs],
    }


def _play(workload: list[tuple[str, int, bytes]], history: str) -> dict[str, Any]:
    s, sink = make_session(databases=2, history=history)
    s.store.snapshot_every = 4  # full copies in the way of some writes
    for verb, n, value in workload:
        key = f"k{n}"
        if verb == "set":
            run(s, "SET", key, value)
        elif verb == "setex":
            run(s, "SET", key, value, "PXAT", "99999999999999")
        elif verb == "incr":
            run(s, "INCR", f"c{n}")
        elif verb == "hset":
            run(s, "HSET", key, "f", value)
        elif verb == "lpush":
            run(s, "LPUSH", key, value)
        elif verb == "rpush":
            run(s, "RPUSH", key, value)
        elif verb == "push2":
            run(s, "LPUSH", key, value, value + b"y")
        elif verb == "del":
            run(s, "DEL", key)
        elif verb == "expire":
            run(s, "PEXPIREAT", key, "99999999999999")
        else:
            run(s, "MULTI")
            run(s, "SET", key, value)
            run(s, "SET", key, value + b"x")
            run(s, "EXEC")
        run(s, "SET", "hot", value)  # a chain that reaches its trimming point
    store = s.store
    fresh = store.history_recount()
    assert (store.mem.main_bytes, store.mem.main_versions) == (
        fresh.main_bytes,
        fresh.main_versions,
    )
    return _state(store, sink)


@pytest.mark.parametrize("history", ["versions:3", "all", "ms:600000"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workload=WORKLOAD)
def test_fast_paths_store_what_the_general_path_stores(
    history: str, workload: list[tuple[str, int, bytes]]
) -> None:
    fast = _play(workload, history)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(keyspace, "version_one", lambda *_a: False)
        for module in (dispatch, strings, hotwrites):
            mp.setattr(module, "set_string", _general_set)
        for module in (hashes, hotwrites):
            mp.setattr(module, "apply_on", _general_apply)
        general = _play(workload, history)
    assert fast == general


@pytest.mark.parametrize("read", [False, True])
@pytest.mark.parametrize("ttl", [None, KEEP_TTL])
def test_set_string_over_each_kind_of_old_value(ttl: Any, read: bool) -> None:
    """Over nothing, a string, a string with an expiry and a collection, clearing
    the expiry (SET) or keeping it (INCR), given the value the caller read (INCR) or
    not: the op, undo and size `apply` would have given."""
    olds = (
        [],
        ["SET", "k", "old"],
        ["SET", "k", "old", "PXAT", "99999999999999"],
        ["LPUSH", "k", "a"],
    )
    for prepare in olds:
        results = []
        for fast in (True, False):
            s, _sink = make_session(databases=1)
            if prepare:
                run(s, *prepare)
            store = s.store
            store.begin("set", s)
            if fast:
                if read:
                    set_string(store, s.db, b"k", b"new", ttl, s.db.get(b"k"))
                else:
                    set_string(store, s.db, b"k", b"new", ttl)
            else:
                _general_set(store, s.db, b"k", b"new", ttl)
            results.append(
                (
                    list(store.pending),
                    s.db.used,
                    dict(s.db.data),
                    dict(s.db.expires),
                )
            )
            store.commit()
        assert results[0] == results[1], prepare


@pytest.mark.parametrize("convert", ["long value", "many fields"])
def test_an_hset_that_converts_its_hash_weighs_the_new_one(convert: str) -> None:
    """An HSET that makes a compact hash a HashTable (a value past
    hash-max-listpack-value, or a field past hash-max-listpack-entries) leaves another
    object at the key: the dataset's size is that object's, as a recount finds it,
    and its element cost is kept for it, not for the dict it replaced."""
    from store import dataset
    from store.containers import HashTable
    from store.values import LIMITS

    s, _sink = make_session(databases=1)
    run(s, "HSET", "h", "f", "v")
    run(s, "HSET", "h", "g", "w")  # a compact hash with its element cost sampled
    before = s.db.data[b"h"]
    assert type(before) is dict
    if convert == "long value":
        run(s, "HSET", "h", "f", "x" * 100)
    else:
        for i in range(LIMITS.hash_entries):
            run(s, "HSET", "h", f"f{i}", "v")
    after = s.db.data[b"h"]
    assert type(after) is HashTable
    assert s.db.sizes[b"h"][2] is after
    counted = s.db.used
    dataset.recount(s.db)
    assert s.db.used == counted
