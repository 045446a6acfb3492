"""Keys moving between shards, as data (store.moves, store.slots): the renumbering of
moved versions into the taking store's LSNs, the map after a move, and the IMPORT and
FORGET ops through a real Store's commit and replay (the cluster itself:
tests/test_cluster_move.py)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from store import Store
from store.coldhistory import attach
from store.dataset import recount
from store.moves import (
    IMPORT_CMD,
    carried_tables,
    export_range,
    longest_chain,
    range_keys,
    renumber,
    written_since,
)
from store.policy import HistoryPolicy
from store.records import UpdateRecord
from store.slots import SLOTS, Shard, SlotMap, key_slot, owner_runs, reassign, spread
from tests.helpers import make_session, run


class Records:
    def __init__(self) -> None:
        self.records: list[UpdateRecord] = []

    def append(self, record: UpdateRecord) -> None:
        self.records.append(record)


def _commit(store: Store, op: tuple[object, ...]) -> int:
    store.begin(IMPORT_CMD)
    store.db_op(0, op)
    return store.commit()


def _set(store: Store, key: bytes, value: bytes) -> int:
    store.begin("set")
    store.apply(store.dbs[0], key, ("set", value, None))
    return store.commit()


@settings(max_examples=200, deadline=None)
@given(
    index=st.lists(st.integers(0, 50), max_size=30),
    versions=st.lists(st.tuples(st.integers(1, 40), st.integers(0, 60)), max_size=12),
)
def test_renumber_keeps_each_key_in_order(
    index: list[int], versions: list[tuple[int, int]]
) -> None:
    """Moved versions get distinct increasing LSNs (one per source commit), at most the
    import's, at least 1; a version takes the target's LSN at its time when there is room."""
    store = Store(databases=1)
    times = sorted(index)
    for lsn, t in enumerate(times, 1):
        store.add_commit(lsn, t)
    store.lsn = len(times)
    chain = [(lsn, t, "set", (("restore", None, None),), None, None) for lsn, t in versions]
    chain.sort(key=lambda e: (e[0], e[1]))
    item = (0, b"k", b"v", None, chain, None)
    at = max(store.lsn + 1, longest_chain([item]))
    [(_, _, _, _, moved, _)] = renumber(store, [item], at)
    by_old: dict[int, int] = {}
    for old, new in zip(chain, moved, strict=True):
        assert by_old.setdefault(old[0], new[0]) == new[0]  # one commit, one LSN
        assert old[1:] == new[1:]  # time, command, undo, meta, copy kept
    news = [by_old[o] for o in sorted(by_old)]
    assert news == sorted(set(news)) and all(1 <= n <= at for n in news)


def _counted_right(store: Store) -> None:
    """The running counts (dataset size, history) are what counting afresh gives."""
    mem = store.mem
    fresh = store.history_recount()
    for name in ("main_bytes", "main_versions", "main_packed", "cold_bytes", "cold_versions"):
        assert getattr(mem, name) == getattr(fresh, name), name
    used = store.dbs[0].used
    recount(store.dbs[0])
    assert store.dbs[0].used == used


def test_import_and_forget_replay_the_same() -> None:
    """IMPORT and FORGET are records: replaying them gives the same keys and chains."""
    giver = Store(databases=1)
    for v in range(3):
        for i in range(50):
            _set(giver, b"k%d" % i, b"v%d" % v)
    first, last = 0, 8191
    keys = range_keys(giver.dbs[0], first, last)
    assert keys and all(key_slot(k) <= last for k in keys)
    items = export_range(giver.dbs[0], first, last)

    sink = Records()
    taker = Store(databases=1, sink=sink)
    _set(taker, b"mine", b"1")
    while taker.lsn < longest_chain(items):
        _commit(taker, ("import", ()))
    at = taker.lsn
    _commit(taker, ("import", tuple(renumber(taker, items, at))))
    for k in keys:
        assert taker.dbs[0].data[k] == giver.dbs[0].data[k]
        old = giver.dbs[0].chains[k]
        new = taker.dbs[0].chains[k]
        assert [e[1:] for e in new] == [e[1:] for e in old]
        assert [e[0] for e in new] == sorted({e[0] for e in new}) and new[-1][0] <= at
        # Each version reads back at its new LSN, and the version index names the key
        # there (TS.DIFF between two LSNs finds it).
        for (lsn, *_), (old_lsn, *_) in zip(new, old, strict=True):
            assert taker.value_as_of(0, k, lsn) == giver.value_as_of(0, k, old_lsn)
            assert k in (taker.keys_written(0, lsn - 1, lsn) or ())
    _counted_right(taker)
    _commit(taker, ("forget", tuple(keys[:10])))
    _counted_right(taker)

    again = Store(databases=1)
    for record in sink.records:
        again.replay(record)
    assert again.dbs[0].data == taker.dbs[0].data
    assert dict(again.dbs[0].chains.items()) == dict(taker.dbs[0].chains.items())
    assert not any(k in again.dbs[0].chains for k in keys[:10])
    assert again.index_keys == taker.index_keys


def test_reassign_and_runs() -> None:
    three = SlotMap(1, [Shard(f"n{i}", "h", 7000 + i, [r]) for i, r in enumerate(spread(3))])
    assert owner_runs(three, 5000, 6000) == [(0, 5000, 5460), (1, 5461, 6000)]
    moved = reassign(three, 5000, 6000, Shard("n2", "h", 7002))
    assert moved.epoch == 2
    assert [s.ranges for s in moved.shards] == [
        [(0, 4999)],
        [(6001, 10922)],
        [(5000, 6000), (10923, 16383)],
    ]
    joined = reassign(moved, 0, 0, Shard("n3", "h", 7003))
    assert joined.shards[3].ranges == [(0, 0)] and joined.shards[0].ranges == [(1, 4999)]
    assert joined.assigned == SLOTS
    back = reassign(joined, 0, 0, Shard("n0", "h", 7000))
    assert back.shards[0].ranges == [(0, 4999)] and back.shards[3].ranges == []
    assert SlotMap.from_json(back.to_json()) == back
    # A replicated shard is found by its group (its primary may have changed), and a
    # new one keeps its group.
    grouped = SlotMap(1, [Shard("p", "h", 1, [(0, 99)], "g"), Shard("n", "h", 2, [(100, 16383)])])
    taken = reassign(grouped, 100, 199, Shard("q", "h", 3, group="g"))
    assert [(s.node_id, s.ranges, s.group) for s in taken.shards] == [
        ("p", [(0, 199)], "g"),
        ("n", [(200, 16383)], ""),
    ]
    new = reassign(taken, 0, 9, Shard("r", "h", 4, group="other"))
    assert (new.shards[2].node_id, new.shards[2].group) == ("r", "other")


def test_moved_keys_bring_their_tables() -> None:
    """The taker gets the moved keys' tables it lacks; RAFT becomes SYNC without a log."""
    giver, taker = Store(databases=1), Store(databases=1)
    for name, durability in ((b"s:t", "sync"), (b"r:t", "raft"), (b"a:t", "async")):
        _commit(giver, ("table", name, durability, "versions:3", 5, 1024))
    _commit(taker, ("table", b"a:t", "sync", "all", 1))
    for key in (b"s:t:1", b"r:t:1", b"a:t:1", b"plain", b"x:y:1"):
        _set(giver, key, b"v")
    items = export_range(giver.dbs[0], 0, SLOTS - 1)
    ops = carried_tables(giver, taker, items, raft=False)
    assert ops == [
        ("table", b"r:t", "sync", "versions:3", 5, 1024),
        ("table", b"s:t", "sync", "versions:3", 5, 1024),
    ]
    assert carried_tables(giver, taker, items, raft=True)[0][2] == "raft"
    for op in ops:
        _commit(taker, op)
    assert taker.tables[b"s:t"] == giver.tables[b"s:t"]
    assert taker.tables[b"a:t"].durability == "sync"  # the taker's own, kept
    assert carried_tables(giver, taker, items, raft=False) == []


def test_keys_with_history_out_of_memory_move(tmp_path: Path) -> None:
    """Keys whose entries the tierer moved to the spill file (store.coldhistory), some
    with a newer entry in memory: exported whole, forgotten with their runs freed, and
    counted right throughout."""
    s, _sink = make_session(databases=1, history="all")
    giver = s.store
    spill = attach(giver, str(tmp_path))
    for i in range(10):
        run(s, "SET", "k", f"v{i}")
        run(s, "HSET", "h", f"f{i}", "x")
    assert giver.tierer.step(0, 60.0) is False
    run(s, "SET", "k", "new")  # k: cold entries and one in memory; h: all cold
    db = giver.dbs[0]
    assert b"k" in db.chains.cold and dict.get(db.chains, b"h") < 0
    chains = {k: db.chains[k] for k in (b"k", b"h")}
    items = [i for i in export_range(db, 0, SLOTS - 1) if i[1] in chains]
    assert {i[1]: len(i[4]) for i in items} == {b"k": 11, b"h": 10}

    taker = Store(databases=1)
    while taker.lsn < longest_chain(items):
        _commit(taker, ("import", ()))
    _commit(taker, ("import", tuple(renumber(taker, items, taker.lsn))))
    for k, chain in chains.items():
        assert [e[1:] for e in taker.dbs[0].chains[k]] == [e[1:] for e in chain]
    _counted_right(taker)

    assert spill.dead == 0
    _commit(giver, ("forget", (b"k", b"h")))
    assert spill.dead > 0  # their runs freed
    assert b"k" not in db.chains and not db.chains.cold and b"h" not in db.data
    _counted_right(giver)


def test_written_since_finds_the_keys_a_tail_wrote() -> None:
    """The chains of a store keeping every version say which keys were written after
    an LSN (a pre-copy's tail, where the version index does not reach back so far):
    rewritten, deleted and new keys, packed creations too; not the untouched ones."""
    store = Store(databases=1, history=HistoryPolicy("all", 0))
    for key in (b"kept", b"changed", b"gone"):
        _set(store, key, b"1")
    at = store.lsn
    _set(store, b"changed", b"2")
    _set(store, b"new", b"1")
    store.begin("del")
    store.apply(store.dbs[0], b"gone", ("del",))
    store.commit()
    db = store.dbs[0]
    keys = range_keys(db, 0, SLOTS - 1)
    assert sorted(written_since(db, keys, at)) == [b"changed", b"gone", b"new"]
    assert written_since(db, keys, store.lsn) == []
    assert store.keys_written(0, at, store.lsn) == {b"changed", b"gone", b"new"}
