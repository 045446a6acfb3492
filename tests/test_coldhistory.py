"""History moved out of memory (store.coldhistory) reads back exactly as it was.

Each workload runs twice on in-process stores: once with every version in memory, once
with the tierer moving every key's entries to the spill file, or freezing them into
compressed runs in memory, at the points the workload says (budget 0). Under `all`
retention both keep the same versions, so the chains, every key's state as of every LSN
and the history counts must be equal; under `versions:N` the tiered store cuts at other
moments (when the tierer flattens a key's runs), so both must keep at least the N newest
versions and agree on every state both still hold."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from commands.snapshot_codec import encode_value
from flusher.checkpoint import image, load_image
from store import V_LSN, V_SNAP, PrunedError, Store
from store.coldhistory import Codec, MemorySpill, attach, compact, hot_bytes, use_kind
from store.image import PLAIN_TAGS
from tests.conftest import start_temporalstore
from tests.helpers import make_session, run
from tests.test_durability import kill9

VERBS = [
    "set",
    "setex",
    "incr",
    "append",
    "hset",
    "hdel",
    "lpush",
    "rpop",
    "sadd",
    "zadd",
    "xadd",
    "del",
    "multi",
    "expire",
    "seal",
    "tier",
    "tier",
]
WORKLOAD = st.lists(
    st.tuples(st.sampled_from(VERBS), st.integers(0, 3), st.binary(min_size=1, max_size=8)),
    max_size=70,
)


# What each verb of a workload sends (`n` picks the key, `v` is the value); "seal" and
# "xadd" take a running count, "tier" moves everything it may out of memory.
COMMANDS: dict[str, Any] = {
    "set": lambda n, v, c: [["SET", f"k{n}", v]],
    "setex": lambda n, v, c: [["SET", f"k{n}", v, "PXAT", "99999999999999"]],
    "incr": lambda n, v, c: [["INCR", f"c{n}"]],
    "append": lambda n, v, c: [["APPEND", f"k{n}", v]],
    "hset": lambda n, v, c: [["HSET", f"h{n}", v, v + b"v"]],
    "hdel": lambda n, v, c: [["HDEL", f"h{n}", v]],
    "lpush": lambda n, v, c: [["LPUSH", f"l{n}", v]],
    "rpop": lambda n, v, c: [["RPOP", f"l{n}"]],
    "sadd": lambda n, v, c: [["SADD", f"s{n}", v]],
    "zadd": lambda n, v, c: [["ZADD", f"z{n}", str(n), v]],
    # stream IDs that do not depend on the clock
    "xadd": lambda n, v, c: [["XADD", f"x{n}", f"{c}-1", "f", v]],
    "del": lambda n, v, c: [["DEL", f"k{n}", f"h{n}", f"l{n}"]],
    "expire": lambda n, v, c: [["PEXPIREAT", f"k{n}", "99999999999999"]],
    "seal": lambda n, v, c: [["TS.SEAL", f"seal{c}"]],
    "multi": lambda n, v, c: [
        ["MULTI"],
        ["SET", f"k{n}", v],
        ["HSET", f"h{n}", "m", v],
        ["EXEC"],
    ],
    "tier": lambda n, v, c: [],
}


def _play(
    workload: list[tuple[str, int, bytes]], history: str, spill: Path | None, memory: bool = False
) -> Store:
    s, _sink = make_session(databases=2, history=history)
    store = s.store
    store.snapshot_every = 4  # full copies of collections in some entries
    if spill is not None:
        attach(store, str(spill), memory)
    for count, (verb, n, value) in enumerate(workload):
        for argv in COMMANDS[verb](n, value, count):
            run(s, *argv)
        if verb == "tier" and spill is not None:
            store.tierer.step(0, 60.0)
        run(s, "SET", "hot", value)  # a chain that reaches its trimming point
    return store


def _chains(store: Store) -> dict[tuple[int, bytes], list[Any]]:
    return {
        # Times differ between runs, and full copies (V_SNAP) are made every N versions
        # in memory, so at other places in a chain that went out and came back.
        (db.index, key): [(e[V_LSN], *e[2:V_SNAP]) for e in chain]
        for db in store.dbs
        for key, chain in db.chains.items()
    }


def _as_of(store: Store, key: bytes, lsn: int) -> Any:
    try:
        value, expire = store.value_as_of(0, key, lsn)
    except PrunedError:
        return PrunedError
    if value is None:
        return None, expire
    kind, encoded = encode_value(value)
    if kind in ("set", "hash"):
        encoded = sorted(map(repr, encoded))
    return kind, encoded, expire


def _check_counts(store: Store) -> None:
    fresh = store.history_recount()
    mem = store.mem
    assert (mem.main_bytes, mem.main_versions) == (fresh.main_bytes, fresh.main_versions)
    assert mem.main_packed == fresh.main_packed
    assert (mem.cold_bytes, mem.cold_versions) == (fresh.cold_bytes, fresh.cold_versions)


def _compare(
    tmp: Path, workload: list[tuple[str, int, bytes]], history: str, memory: bool = False
) -> None:
    """Play `workload` with and without tiering; compare what both hold."""
    plain = _play(workload, history, None)
    tiered = _play(workload, history, tmp, memory)
    a, b = _chains(plain), _chains(tiered)
    if history == "all":
        assert b == a
    else:  # versions:3: the newest 3 (or all there are) everywhere
        assert a.keys() == b.keys()
        for k, chain in b.items():
            newest = min(len(a[k]), 3)
            assert chain[len(chain) - newest :] == a[k][len(a[k]) - newest :], k
    keys = {key for db in plain.dbs for key in db.chains}
    for key in keys:
        for lsn in range(plain.lsn + 1):
            x, y = _as_of(tiered, key, lsn), _as_of(plain, key, lsn)
            if history == "all" or (x is not PrunedError and y is not PrunedError):
                assert x == y, (key, lsn)
    _check_counts(tiered)
    _check_counts(plain)


@pytest.mark.parametrize("kind", ["file", "memory"])
@pytest.mark.parametrize("history", ["all", "versions:3"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workload=WORKLOAD)
def test_history_reads_the_same_out_of_memory(
    tmp_path_factory: pytest.TempPathFactory,
    kind: str,
    history: str,
    workload: list[tuple[str, int, bytes]],
) -> None:
    _compare(tmp_path_factory.mktemp("spill"), workload, history, kind == "memory")


def test_runs_round_trip_with_and_without_a_trained_dictionary() -> None:
    """A codec packs runs plainly until it has seen enough of them, then trains a
    dictionary and, where it pays, packs with it; runs of both kinds read back the
    entries they were made of, metadata and full copies included."""
    codec = Codec()
    made: list[tuple[bytes, list[Any]]] = []
    for i in range(2100):
        entries: list[Any] = [
            (
                1000 * i + j,
                1_700_000_000_000 + i + j // 3,
                "set",
                b"value:%d:%d" % (i, j),
                None,
                None,
            )
            for j in range(9)
        ]
        if i % 100 == 7:  # metadata and a full copy in some runs
            entries[3] = (*entries[3][:4], (b"meta", i), ({b"f": b"v"}, None))
        made.append((codec.encode(i, entries), entries))
    assert codec.cdict is not None  # these runs are alike: the dictionary pays
    kinds = {packed[0] for packed, _entries in made}
    assert kinds == {0, 1}
    for i, (packed, entries) in enumerate(made):
        assert codec.decode(packed) == (i, entries)


def test_frozen_pages_round_trip_before_and_after_their_dictionary() -> None:
    """Frozen in memory, pages are compressed plainly until the spill has seen enough
    of them, then with a dictionary trained on them; runs in pages of both kinds read
    back the entries they were made of, and a spill compaction writes into shares the
    dictionary."""
    spill = MemorySpill()
    codec = spill.pages
    made: list[tuple[int, int, list[Any]]] = []
    for i in range(800):
        entries: list[Any] = [
            (1000 * i + j, 1_700_000_000_000 + i, "set", b"value:%d:%d" % (i, j), None, None)
            for j in range(9)
        ]
        ((offset, length),) = spill.write([codec.encode(i, entries)])
        made.append((offset, length, entries))
    assert codec.cdict is not None  # these pages are alike: the dictionary pays
    assert {page[0] for page in spill._pages} == {0, 1}
    spill._open.clear()
    for i, (offset, length, entries) in enumerate(made):
        assert codec.decode(spill.read(offset, length)) == (i, entries)
    fresh = spill.fresh()
    assert isinstance(fresh, MemorySpill) and fresh.pages is codec


@pytest.mark.parametrize("memory", [True, False])
def test_streams_with_consumer_groups_go_out_and_come_back(tmp_path: Path, memory: bool) -> None:
    """A stream's undo and full copies hold its nodes and consumer groups (compiled
    classes, pickled with their own `__reduce__`): frozen or spilled, they read back
    equal, and every as-of state with them."""
    s, _sink = make_session(databases=1, history="all")
    store = s.store
    store.snapshot_every = 2
    attach(store, str(tmp_path), memory)
    for i in range(1, 9):
        run(s, "XADD", "x", f"{i}-1", "f", f"v{i}")
        if i == 2:
            run(s, "XGROUP", "CREATE", "x", "g", "0")
        if i % 3 == 0:
            run(s, "XREADGROUP", "GROUP", "g", f"c{i}", "COUNT", "2", "STREAMS", "x", ">")
    run(s, "DEL", "x")  # its undo holds the whole stream
    run(s, "XADD", "x", "9-1", "f", "again")
    states = [_as_of(store, b"x", lsn) for lsn in range(store.lsn + 1)]
    before = _chains(store)
    store.tierer.step(0, 60.0)
    assert store.mem.cold_versions > 0
    store.spill._cache.clear()
    assert _chains(store) == before
    assert [_as_of(store, b"x", lsn) for lsn in range(store.lsn + 1)] == states


def test_frozen_in_memory_moves_to_the_file_and_back(tmp_path: Path) -> None:
    """`use_kind`: history frozen in memory moves to the spill file when history-memory
    is set at run time, and back when it is cleared, reading the same throughout."""
    s, _sink = make_session(databases=1, history="all")
    store = s.store
    attach(store, str(tmp_path), memory=True)
    for i in range(30):
        run(s, "SET", "k", f"v{i}")
        run(s, "HSET", "h", f"f{i % 4}", str(i))
    before = _chains(store)
    store.tierer.step(0, 60.0)
    assert store.spill.kind == "memory" and store.spill.size > 8
    assert _chains(store) == before
    use_kind(store, "file")
    assert store.spill.kind == "file" and store.spill.size > 8
    assert _chains(store) == before
    run(s, "SET", "k", "new")
    store.tierer.step(0, 60.0)
    use_kind(store, "memory")
    assert store.spill.kind == "memory"
    assert _chains(store)[(0, b"k")][:-1] == before[(0, b"k")]
    assert store.value_as_of(0, b"k", 1) == (b"v0", None)
    _check_counts(store)


def test_tiering_moves_entries_out_and_writes_append_in_memory(tmp_path: Path) -> None:
    s, _sink = make_session(databases=1, history="all")
    store = s.store
    spill = attach(store, str(tmp_path))
    for i in range(20):
        run(s, "SET", "k", f"v{i}")
        run(s, "HSET", "h", f"f{i}", "x")
    before = _chains(store)
    assert hot_bytes(store) > 0
    assert store.tierer.step(0, 60.0) is False
    db = store.dbs[0]
    # All out: each slot holds its key's cold reference, negated.
    assert dict.get(db.chains, b"k") < 0 and dict.get(db.chains, b"h") < 0 and not db.chains.cold
    assert store.mem.cold_versions == 40
    assert hot_bytes(store) == 0
    assert spill.size > 0
    assert _chains(store) == before
    # A write after: the new entry is in memory, the cold ones stay out.
    run(s, "SET", "k", "new")
    assert len(dict.get(db.chains, b"k")) == 1 and b"k" in db.chains.cold
    assert len(db.chains[b"k"]) == 21
    assert store.value_as_of(0, b"k", 1) == (b"v0", None)
    # Moved again: only the new entry is written (one more run).
    runs = spill.runs
    store.tierer.step(0, 60.0)
    assert spill.runs == runs + 1
    assert len(db.chains[b"k"]) == 21
    _check_counts(store)


@pytest.mark.parametrize("memory", [False, True])
def test_as_of_reads_only_the_runs_it_needs(tmp_path: Path, memory: bool) -> None:
    """An as-of read decodes a key's frozen runs from the newest back to the first
    that starts at or before its point, and reads what a whole read would; a run
    read once is not kept at hand, one read twice is."""
    s, _sink = make_session(databases=1, history="all")
    store = s.store
    spill = attach(store, str(tmp_path), memory)
    lsns = []
    for rnd in range(3):  # three runs of four versions each
        for i in range(4):
            run(s, "SET", "k", f"v{rnd}.{i}")
            lsns.append(store.lsn)
        store.tierer.step(0, 60.0)
    run(s, "SET", "k", "hot")  # one entry in memory, in front of the cold ones
    db = store.dbs[0]
    ref = db.chains.cold[b"k"]
    spill._cache.clear()  # what the writes and the tierer read is forgotten
    spill._seen.clear()
    spill.cached = 0
    decoded = []
    decode = spill.codec.decode
    spill.codec.decode = lambda data: decoded.append(1) or decode(data)  # type: ignore[method-assign]
    assert len(spill.since(ref, lsns[-2])) == 4  # the newest run alone
    assert len(decoded) == 1
    assert len(spill.since(ref, lsns[4])) == 8 and len(decoded) == 3
    assert not spill._cache  # read once each: nothing kept
    assert len(spill.since(ref, 0)) == 12 and len(decoded) == 6
    assert len(spill.since(ref, 0)) == 12 and len(decoded) == 9  # read twice: kept
    assert spill._cache and len(spill.since(ref, 0)) == 12 and len(decoded) == 9
    # Past the oldest entry in memory, no run is read; before it, what the point needs.
    spill._cache.clear()
    assert len(db.chains.since(b"k", store.lsn - 1)) == 1 + 4 and len(decoded) == 10
    assert len(db.chains.since(b"k", store.lsn)) == 1 and len(decoded) == 10
    whole = db.chains[b"k"]
    for lsn in range(store.lsn + 1):
        got = store.value_as_of(0, b"k", lsn)
        part = db.chains.since(b"k", lsn)  # a suffix of the chain, all newer ones in it
        assert part == whole[len(whole) - len(part) :]
        assert [e for e in part if e[V_LSN] > lsn] == [e for e in whole if e[V_LSN] > lsn]
        want = (b"v%d.%d" % divmod(lsns.index(lsn), 4), None) if lsn in lsns else got
        assert got == want, lsn


def test_retention_cuts_cold_entries_and_compaction_keeps_them(tmp_path: Path) -> None:
    s, _sink = make_session(databases=1, history="versions:4")
    store = s.store
    spill = attach(store, str(tmp_path))
    for round_ in range(12):
        for k in range(5):
            run(s, "SET", f"k{k}", f"r{round_}")
        store.tierer.step(0, 60.0)
    db = store.dbs[0]
    for k in range(5):
        chain = db.chains[f"k{k}".encode()]
        assert 4 <= len(chain) <= 2 * 4
        assert store.value_as_of(0, f"k{k}".encode(), chain[0][V_LSN]) is not None
    assert spill.dead > 0
    values = {k: db.chains[k] for k in list(db.chains)}
    compact(store)
    assert store.spill is not spill and store.spill.dead == 0
    assert {k: db.chains[k] for k in list(db.chains)} == values
    _check_counts(store)


def test_pinned_history_stays_in_memory_until_released(tmp_path: Path) -> None:
    s, _sink = make_session(databases=1, history="versions:2")
    store = s.store
    attach(store, str(tmp_path))
    run(s, "SET", "k", "a")
    run(s, "TS.SEAL", "s1")
    for i in range(10):
        run(s, "SET", "k", f"v{i}")
        store.tierer.step(0, 60.0)
    sealed = store.snapshots[b"s1"].lsn
    assert store.value_as_of(0, b"k", sealed) == (b"a", None)
    run(s, "TS.UNSEAL", "s1")
    store.tierer.step(0, 60.0)
    with pytest.raises(PrunedError):
        store.value_as_of(0, b"k", sealed)
    _check_counts(store)


def _history_replies(r: Any, keys: list[str], last: int) -> list[Any]:
    out: list[Any] = []
    for key in keys:
        out.append(r.execute_command("TS.HISTORY", key, "WITHVALUES"))
        for v in range(1, last + 1, 7):
            out.append(r.execute_command("TS.ASOF", key, "VERSION", v))
    out.append(r.execute_command("TS.ASOF", "doc", "SNAPSHOT", "first"))
    out.append(r.execute_command("TS.DIFF", "VERSION", 10, "VERSION", last))
    return out


def _cold(r: Any) -> tuple[int, int, int]:
    h = r.info("history")
    return (
        h["history_cold_versions"],
        h["history_hot_bytes"],
        h["history_memory"],
    )


def test_server_moves_history_out_and_keeps_it_across_kill9(tmp_path: Path) -> None:
    """A real server: the same replies before and after its history went to the spill
    file (CONFIG SET history-memory), and after kill -9 and a restart from storage."""
    spill = tmp_path / "spill"
    spill.mkdir()
    flags = ["--storage", f"file://{tmp_path}/store", "--history-spill-dir", str(spill)]
    p = start_temporalstore(flags)
    r = redis.Redis(port=p.port, socket_timeout=30)
    keys = ["doc", "n", "h", "l", "z"]
    try:
        for i in range(40):
            r.set("doc", f"v{i}" * 20)
            r.incr("n")
            r.hset("h", f"f{i % 7}", i)
            r.lpush("l", i)
            r.zadd("z", {f"m{i % 5}": i})
            if i == 20:
                r.execute_command("TS.SEAL", "first")
        last = int(r.info("persistence")["last_lsn"])
        before = _history_replies(r, keys, last)
        assert _cold(r)[0] == 0
        assert r.config_get("history-memory") == {"history-memory": "0"}
        r.config_set("history-memory", "1")
        deadline = time.monotonic() + 30
        while _cold(r)[1] > 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        cold, hot, budget = _cold(r)
        assert budget == 1 and hot <= 1 and cold >= 40 * len(keys)
        assert r.info("history")["history_spill_file_bytes"] > 0
        assert _history_replies(r, keys, last) == before
        r.set("doc", "after")  # a write to a key whose history is out of memory
        assert r.execute_command("TS.ASOF", "doc", "BACK", 1) == b"v39" * 20
        r.execute_command("TS.WAITDURABLE", "0")
        r.bgsave()  # a checkpoint holding the cold entries, written by the forked child
        deadline = time.monotonic() + 30
        while int(r.info("persistence")["checkpoints_written"]) < 1:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        # The child wrote it: it kept the spill file open (else it fails, and the
        # server takes the image in-process, blocking its clients meanwhile).
        assert not [line for line in p.log_lines if "checkpoint child exited" in line]
        r.close()
        kill9(p)
        q = start_temporalstore(flags)
        r = redis.Redis(port=q.port, socket_timeout=30)
        try:
            assert r.get("doc") == b"after"
            assert r.execute_command("TS.ASOF", "doc", "BACK", 1) == b"v39" * 20
            again = _history_replies(r, keys, last)
            # TS.HISTORY of doc (oldest first) ends with the write made after.
            assert again[1:] == before[1:]
            assert again[0][:-1] == before[0] and len(again[0]) == len(before[0]) + 1
        finally:
            r.close()
            q.stop()
    finally:
        r.close()
        p.stop()


def test_server_freezes_history_in_memory_and_reads_it_the_same(tmp_path: Path) -> None:
    """A real server started with a small --history-hot-memory freezes older versions
    into compressed runs in memory (INFO history_frozen_bytes; no spill file), answers
    the same history verbs as before, and moves them to the spill file when
    history-memory is set at run time."""
    spill = tmp_path / "spill"
    spill.mkdir()
    flags = ["--storage", f"file://{tmp_path}/store", "--history-spill-dir", str(spill)]
    p = start_temporalstore([*flags, "--history-hot-memory", "0"])
    r = redis.Redis(port=p.port, socket_timeout=30)
    keys = ["doc", "n", "h", "l", "z"]
    try:
        for i in range(40):
            r.set("doc", f"v{i}" * 20)
            r.incr("n")
            r.hset("h", f"f{i % 7}", i)
            r.lpush("l", i)
            r.zadd("z", {f"m{i % 5}": i})
            if i == 20:
                r.execute_command("TS.SEAL", "first")
        last = int(r.info("persistence")["last_lsn"])
        before = _history_replies(r, keys, last)
        time.sleep(0.3)
        assert _cold(r)[0] == 0  # history-hot-memory 0: nothing is frozen
        r.config_set("history-hot-memory", "1")
        assert r.config_get("history-hot-memory") == {"history-hot-memory": "1"}
        deadline = time.monotonic() + 30
        while _cold(r)[1] > 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        h = r.info("history")
        assert h["history_hot_bytes"] <= 1 and h["history_cold_versions"] >= 40 * len(keys)
        assert h["history_frozen_bytes"] > 0 and h["history_spill_file_bytes"] == 0
        assert _history_replies(r, keys, last) == before
        r.set("doc", "after")
        assert r.execute_command("TS.ASOF", "doc", "BACK", 1) == b"v39" * 20
        r.config_set("history-memory", "1")
        deadline = time.monotonic() + 30
        while r.info("history")["history_spill_file_bytes"] == 0:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert r.info("history")["history_frozen_bytes"] == 0
        assert r.execute_command("TS.ASOF", "doc", "BACK", 1) == b"v39" * 20
        again = _history_replies(r, keys, last)
        assert again[1:] == before[1:] and again[0][:-1] == before[0]
    finally:
        r.close()
        p.stop()


def test_packed_first_versions_do_not_count_against_the_budget(tmp_path: Path) -> None:
    """Keys written once keep their version packed in one int, nothing to move: they
    are not history the tierer could move, and a step with only them returns at once
    (and rests: no pass over every key each time the server asks)."""
    s, _sink = make_session(databases=1, history="all")
    store = s.store
    spill = attach(store, str(tmp_path))
    for i in range(500):
        run(s, "SET", f"once{i}", "v")
    assert store.mem.main_packed == 500 and store.mem.main_bytes > 0
    assert hot_bytes(store) == 0
    assert store.tierer.step(0, 60.0) is False and spill.runs == 0
    run(s, "TS.SEAL", "s")
    run(s, "SET", "once1", "w")  # a second version: a list, which can move
    assert store.mem.main_packed == 499 and hot_bytes(store) > 0
    assert store.tierer.step(0, 60.0) is False and spill.runs == 1
    assert hot_bytes(store) == 0
    _check_counts(store)


@pytest.mark.parametrize("memory", [False, True])
def test_checkpoint_images_of_frozen_history_keep_string_chains(
    tmp_path: Path, memory: bool
) -> None:
    """A checkpoint of a store whose string keys' history went out of memory, all of it
    or the older part, writes those keys into string-chain items (loaded with C-level
    passes at restart), not one item per key; loaded back, every chain is whole."""
    # k0-k3 written, frozen, then k0 and k1 written again: k2 and k3 wholly out of
    # memory, k0 and k1 in part.
    before = [("set", i % 4, b"v%d" % i) for i in range(30)]
    after = [("set", i % 2, b"w%d" % i) for i in range(10)]
    tiered = _play([*before, ("tier", 0, b""), *after], "all", tmp_path, memory)
    assert any(db.chains.cold for db in tiered.dbs)  # keys in part out of memory
    assert any(v < 0 for db in tiered.dbs for v in dict.values(db.chains) if type(v) is int)
    items = list(tiered.export_image())
    per_key = [it for it in items[1:] if it[0] not in PLAIN_TAGS]
    assert per_key == []
    raw, _count = image(tiered)
    fresh = Store(databases=2, history=tiered.history)
    assert load_image(fresh, raw, "test") == tiered.lsn
    assert _chains(fresh) == _chains(tiered)  # read back whole: every entry
