"""The retained version entry kept small and the commit's time and time index kept
cheap (issue 13): a replaced string's undo stored as the old bytes alone, read back
as its ops everywhere (as-of reads, history, images, branches, the accounting);
one clock read per pass of the event loop; the time index's tails."""

from __future__ import annotations

from array import array
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commands.replies import OK
from flusher.checkpoint import image, load_image
from store import R_TIME, V_UNDO, Store, entry_created, keyspace
from store.accounting import (
    COMPACT_STRING_BYTES,
    ENTRY_BYTES,
    REPLACED_STRING_BYTES,
    entry_bytes,
    payload_bytes,
)
from store.chains import compact_undo, undo_ops
from store.ops import CREATED, RESTORE
from tests.helpers import make_session, run


def _chain(store: Store, key: bytes, db: int = 0) -> list[Any]:
    return list(store.dbs[db].chains.get(key) or ())


def test_a_replaced_string_keeps_its_old_bytes_alone() -> None:
    s, _ = make_session(4, "all")
    run(s, "SET", "k", "a")
    run(s, "SET", "k", "b")
    run(s, "SET", "k", "c")
    chain = _chain(s.store, b"k")
    assert [e[V_UNDO] for e in chain] == [CREATED, b"a", b"b"]
    assert undo_ops(chain[1][V_UNDO]) == ((RESTORE, b"a", None),)
    assert not entry_created(chain[1]) and entry_created(chain[0])
    assert entry_bytes(chain[1]) == COMPACT_STRING_BYTES + 1
    # Each version reads back as it was.
    for lsn, want in ((1, b"a"), (2, b"b"), (3, b"c")):
        assert s.store.value_as_of(0, b"k", lsn) == (want, None)
    assert run(s, "TS.ASOF", "k", "VERSION", "1") == b"a"


def test_undos_that_are_not_a_plain_replaced_string_stay_ops() -> None:
    s, _ = make_session(4, "all")
    run(s, "SET", "e", "a", "PX", "100000")
    run(s, "SET", "e", "b")  # the undo restores the expiry too
    run(s, "SETRANGE", "r", "0", "x")  # a bytearray
    run(s, "SET", "r", "y")
    run(s, "HSET", "h", "f", "1")
    run(s, "HSET", "h", "f", "2")
    e, r, h = (_chain(s.store, k)[-1][V_UNDO] for k in (b"e", b"r", b"h"))
    assert type(e) is tuple and e[0][0] == RESTORE and type(e[0][2]) is int
    assert entry_bytes(_chain(s.store, b"e")[-1]) == REPLACED_STRING_BYTES + 1
    assert type(r) is tuple and type(r[0][1]) is bytearray
    assert type(h) is tuple
    assert compact_undo(((RESTORE, b"v", None),)) == b"v"
    assert compact_undo(((RESTORE, b"v", 5),)) == ((RESTORE, b"v", 5),)
    assert compact_undo(CREATED) is CREATED


@pytest.mark.parametrize(
    "undo",
    [
        (("hset", ((b"f", b"old"),)),),
        (("hdel", (b"f", b"g")),),
        (("zrem", ()),),
        (("lpop", 3),),
        (("rpop", True),),
        (("expire", None),),
        (("expire", 12345),),
        (("lset", 0, b"v"),),
        (("hdel", (b"f",)), ("hset", ((b"g", b"x"),))),
    ],
)
def test_entry_bytes_of_one_argument_undos_is_the_general_sum(undo: Any) -> None:
    """`entry_bytes`' shortcut for an undo of one op with one argument (HSET, LPUSH,
    ZADD...) counts what the sum over every op's arguments counts."""
    entry = (1, 0, "x", undo, None, None)
    general = ENTRY_BYTES + sum(payload_bytes(x) for u in undo for x in u[1:])
    assert entry_bytes(entry) == general


def test_the_general_path_stores_the_same_compact_entries() -> None:
    """A key of a table (retention of its own) takes commitpath.version_key, not
    commitpath.version_one: the same stored form."""
    s, _ = make_session(4, "all")
    assert run(s, "TS.TABLE", "CREATE", "app:t", "RETAIN", "VERSIONS", "5") == OK
    for v in ("a", "b", "c"):
        run(s, "SET", "app:t:k", v)
        run(s, "SET", "plain", v)
    table = [e[V_UNDO] for e in _chain(s.store, b"app:t:k")]
    plain = [e[V_UNDO] for e in _chain(s.store, b"plain")]
    assert table == plain == [CREATED, b"a", b"b"]
    assert s.store.mem.main_bytes == s.store.history_recount().main_bytes


def test_images_write_the_ops_and_read_them_back_compact() -> None:
    s, _ = make_session(4, "all")
    run(s, "TS.META", "AUTHOR", "ann")  # an entry with metadata: the key is an item alone
    for v in ("a", "bb", "ccc"):
        run(s, "SET", "k", v)
    run(s, "TS.META", "RESET")
    for v in ("a", "bb"):
        run(s, "SET", "plain", v)  # plain string writes: a string-chain item
    run(s, "SET", "x", "1", "PX", "100000")
    run(s, "SET", "x", "2")
    items = list(s.store.export_image())
    saved = next(i for i in items[1:] if i[0] not in ("b", "s") and i[1] == b"k")
    assert [u for _l, _t, _c, u, _m, _s in saved[4]] == [
        CREATED,
        ((RESTORE, b"a", None),),
        ((RESTORE, b"bb", None),),
    ]
    strings = next(i for i in items[1:] if i[0] == "s")
    assert strings[2] == [b"plain"] and strings[4] == [2] and strings[8] == [None, b"a"]
    raw, _count = image(s.store)
    loaded = Store(4)
    load_image(loaded, raw, "test")
    assert [e[V_UNDO] for e in _chain(loaded, b"k")] == [CREATED, b"a", b"bb"]
    assert [e[V_UNDO] for e in _chain(loaded, b"plain")] == [CREATED, b"a"]
    assert _chain(loaded, b"x")[-1][V_UNDO] == _chain(s.store, b"x")[-1][V_UNDO]
    assert (loaded.mem.main_bytes, loaded.mem.main_versions) == (
        s.store.mem.main_bytes,
        s.store.mem.main_versions,
    )


def test_branches_save_the_ops_and_load_them_compact() -> None:
    s, _ = make_session(4, "all")
    run(s, "SET", "k", "a")
    assert run(s, "TS.BRANCH", "CREATE", "b1") == OK
    assert run(s, "TS.CHECKOUT", "b1") == OK
    run(s, "SET", "k", "x")
    run(s, "SET", "k", "y")
    saved = s.store.branches.save()
    chains = saved[0][3][0][4]
    assert [u for _l, _t, _c, u, _m in chains[b"k"]][-1] == ((RESTORE, b"x", None),)
    other = Store(4)
    other.branches.load(saved)
    assert [e[V_UNDO] for e in other.branches[b"b1"].dbs[0].chains[b"k"]][-1] == b"x"


class _Batch:
    """A stand-in for the flusher's sink: the store appends to `batch` itself."""

    def __init__(self) -> None:
        self.batch: list[Any] = []
        self.started = 0

    def append(self, record: Any) -> None:
        raise AssertionError("the commit appends to the batch directly")

    def start(self) -> None:
        self.started += 1


def test_one_clock_read_per_pass_and_per_32_commits(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = [1_000.0]
    reads = []

    def now() -> float:
        reads.append(clock[0])
        return clock[0]

    monkeypatch.setattr(keyspace, "_time", now)
    store = Store(4)
    sink = _Batch()
    store.sink = sink  # type: ignore[assignment]
    store.sink_batch = (sink, sink.batch, sink.start)  # type: ignore[arg-type]

    def write(i: int) -> int:
        store.begin("set")
        store.apply(store.dbs[0], b"k%d" % i, ("set", b"v", None))
        store.commit()
        clock[0] += 0.25  # 250 ms pass between two commits (a float sum kept exact)
        return store.last_time_ms

    times = [write(i) for i in range(40)]
    # Commits of one time are one run of the time index's tail (the compiled build
    # compares the time objects by identity: an item unboxed and boxed anew breaks it).
    assert store._run_starts == [0, 32]
    # The pass's first commit and its 32nd read the clock; the others take the last time.
    assert len(reads) == 2
    assert times[:32] == [1_000_000] * 32
    assert times[32:] == [1_008_000] * 8
    assert sink.started == 1
    # The records carry the same time objects as the index.
    assert {id(r[R_TIME]) for r in sink.batch[:32]} == {id(sink.batch[0][R_TIME])}
    # A new pass (the flusher took the batch) reads the clock again.
    sink.batch.clear()
    assert write(40) == 1_010_000
    assert len(reads) == 3
    assert list(store.index_times) == [*times, 1_010_000]
    assert list(store.index_lsns) == list(range(1, 42))


def test_without_the_flushers_batch_every_commit_reads_the_clock(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ticks = iter(range(10))
    monkeypatch.setattr(keyspace, "_time", lambda: 5.0 + next(ticks) / 1000)
    s, sink = make_session(4, "all")
    for i in range(4):
        run(s, "SET", f"k{i}", "v")
    assert [r[R_TIME] for r in sink.records] == [5000, 5001, 5002, 5003]
    # The same millisecond twice shares one int object.
    monkeypatch.setattr(keyspace, "_time", lambda: 9.0)
    run(s, "SET", "a", "1")
    run(s, "SET", "b", "1")
    assert sink.records[-1][R_TIME] is sink.records[-2][R_TIME]


def test_the_time_index_tails_are_taken_in_before_every_read() -> None:
    s, _ = make_session(4, "all")
    store = s.store
    for i in range(2_500):  # two weighings of the version index on the way
        run(s, "SET", f"k{i % 7}", str(i))
        if i % 401 == 0:
            assert len(store.index_lsns) == store.lsn
            assert store.time_of(store.lsn) == store.last_time_ms
            assert store.lsn_at_time(store.last_time_ms) == store.lsn
    assert list(store.index_lsns) == list(range(1, 2_501))
    assert len(store.index_times) == 2_500
    assert store.keys_written(0, 2_490, 2_500) == {b"k%d" % (i % 7) for i in range(2_490, 2_500)}
    # An LSN that is not the tail's next one (the store's LSN moved on outside a
    # commit) starts a new tail: the index keeps the LSNs as committed.
    run(s, "SET", "a", "1")
    store.lsn += 5
    run(s, "SET", "b", "1")
    run(s, "SET", "c", "1")
    assert list(store.index_lsns)[-3:] == [2_501, 2_507, 2_508]
    assert store.keys_written(0, 2_501, 2_508) == {b"b", b"c"}
    # A reset keeps nothing of the index; its undo puts the tails back too.
    run(s, "SET", "tail", "1")
    undo = store.reset()
    assert len(store.index_lsns) == 0
    undo()
    assert list(store.index_lsns) == [*range(1, 2_502), 2_507, 2_508, 2_509]


@settings(max_examples=200, deadline=None)
@given(
    steps=st.lists(
        st.tuples(st.sampled_from(["one", "bulk", "gap"]), st.integers(0, 3), st.integers(1, 9)),
        max_size=40,
    )
)
def test_the_time_index_keeps_times_as_runs_and_answers_as_one_per_commit(
    steps: list[tuple[str, int, int]],
) -> None:
    """Commits indexed one at a time (replay), in bulk (bulk replay) and after a gap in
    the LSNs, their times going up by 0-3 ms a step: the time index holds a run per
    time, and answers time_of, lsn_at_time, first_lsn_from and index_times as the
    per-commit lists they stand for would."""
    store = Store(databases=1)
    lsns: list[int] = []
    times: list[int] = []
    lsn, t = 0, 1_000
    for how, dt, n in steps:
        t += dt
        if how == "gap":
            lsn += n
        if how == "bulk":
            new = list(range(lsn + 1, lsn + n + 1))
            store.add_commits(array("q", new).tobytes(), array("q", [t] * n).tobytes())
        else:
            new = [lsn + 1]
            store.add_commit(lsn + 1, t)
        lsns += new
        times += [t] * len(new)
        lsn = new[-1]
    assert list(store.index_lsns) == lsns
    assert list(store.index_times) == times
    assert len(store._time_runs) == len(set(times))  # one run a time: they go up
    for x in range(lsn + 2):
        before = [tt for ll, tt in zip(lsns, times, strict=True) if ll <= x]
        assert store.time_of(x) == (before[-1] if before else 0), x
    for at in range(999, t + 2):
        upto = [ll for ll, tt in zip(lsns, times, strict=True) if tt <= at]
        assert store.lsn_at_time(at) == (upto[-1] if upto else 0), at
        after = [ll for ll, tt in zip(lsns, times, strict=True) if tt >= at]
        assert store.first_lsn_from(at) == (after[0] if after else None), at
    # Replaced from a checkpoint's per-commit times: the same runs again.
    other = Store(databases=1)
    other.index_lsns = array("q", lsns)
    other.index_times = array("q", times)
    assert (list(other._time_runs), list(other._time_run_at)) == (
        list(store._time_runs),
        list(store._time_run_at),
    )
