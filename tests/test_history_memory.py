"""History counts as memory (issue 11): the running counts of what versions, seals,
branches and views hold, the cap on pinned history, and -OOM for the verbs that pin
history past maxmemory."""

from __future__ import annotations

from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flusher.checkpoint import image, load_image
from store import V_LSN, Store
from store.accounting import HistoryMemory, entry_bytes
from store.keyspace import TRIM_STEP
from tests.conftest import start_temporalstore
from tests.helpers import make_session, run
from tests.resp_client import RawClient


def _counts(mem: HistoryMemory) -> dict[str, Any]:
    return {
        "main": (mem.main_bytes, mem.main_versions),
        "branches": {k: tuple(v) for k, v in mem.branches.items() if v != [0, 0]},
    }


def _pinned_from_marks(store: Store) -> tuple[int, int]:
    """The pinned totals the marks imply: every entry at or below its key's mark."""
    nbytes = versions = 0
    for (ident, key), mark in store.mem.marks.items():
        for e in store.db_of(ident).chains.get(key, ()):
            if e[V_LSN] <= mark:
                nbytes += entry_bytes(e)
                versions += 1
    return nbytes, versions


ops = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "set",
                "hset",
                "del",
                "seal",
                "unseal",
                "branch",
                "drop",
                "on",
                "off",
                "table",
                "multi",
            ]
        ),
        st.integers(0, 3),
    ),
    max_size=120,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=ops)
def test_running_counts_equal_a_recount(ops: list[tuple[str, int]]) -> None:
    s, _sink = make_session(databases=2, history="versions:2")
    store = s.store
    for op, n in ops:
        key = f"ns:t:{n}" if n == 3 else f"k{n}"
        if op == "set":
            run(s, "SET", key, "v" * (n + 1) * 10)
        elif op == "hset":
            run(s, "HSET", key + "h", f"f{len(store.index_lsns) % 5}", "x")
        elif op == "del":
            run(s, "DEL", key)
        elif op == "seal":
            run(s, "TS.SEAL", f"s{n}")
        elif op == "unseal":
            run(s, "TS.UNSEAL", f"s{n}")
        elif op == "branch":
            run(s, "TS.BRANCH", "CREATE", f"b{n}")
        elif op == "drop":
            if s.branch == f"b{n}".encode():
                run(s, "TS.CHECKOUT", "HEAD")
            run(s, "TS.BRANCH", "DROP", f"b{n}")
        elif op == "on":
            run(s, "TS.CHECKOUT", f"b{n}")
        elif op == "off":
            run(s, "TS.CHECKOUT", "HEAD")
        elif op == "table":
            run(s, "TS.TABLE", "CREATE", "ns:t", "RETAIN", "VERSIONS", "3")
        elif op == "multi":  # one version holding several writes of the key
            run(s, "MULTI")
            for i in range(n + 4):
                run(s, "SET", key, str(i))
            run(s, "EXEC")
        for i in range(3):  # enough rewrites to reach the trimming point
            run(s, "SET", f"k{n}", str(i))
    assert _counts(store.mem) == _counts(store.history_recount())
    assert (store.mem.pinned_bytes, store.mem.pinned_versions) == _pinned_from_marks(store)
    assert store.mem.pinned_versions == sum(c[1] for c in store.mem.pinned.values())
    assert store.mem.pinned_bytes == sum(c[0] for c in store.mem.pinned.values())


def test_a_seal_pins_what_retention_would_drop_and_unseal_frees_it() -> None:
    s, _sink = make_session(history="versions:4")
    store = s.store
    for i in range(50):
        run(s, "SET", "a", f"{i:0100d}")
    before = store.mem.main_bytes
    assert store.mem.pinned_bytes == 0 and store.mem.main_versions <= 8
    run(s, "TS.SEAL", "s1")
    for i in range(200):
        run(s, "SET", "a", f"{i:0100d}")
    assert store.mem.main_versions >= 200
    assert store.mem.main_bytes > before + 200 * 100
    # Everything but the newest 4 versions is held only by the seal: counted as
    # pinned at most TRIM_STEP versions late on the write path, exactly once settled.
    assert 200 - 4 - TRIM_STEP <= store.mem.pinned_versions <= 200 - 4
    store.settle_trims()
    assert store.mem.pinned_versions == 200 - 4
    assert store.mem.pinned_bytes >= 196 * 100
    snaps = run(s, "TS.SNAPSHOTS")
    assert snaps[0][b"pinned_versions"] == store.mem.pinned_versions
    assert snaps[0][b"pinned_bytes"] == store.mem.pinned_bytes
    run(s, "TS.UNSEAL", "s1")
    run(s, "SET", "a", "last")
    assert store.mem.pinned_bytes == 0 and store.mem.pinned_versions == 0
    assert store.mem.main_versions <= 8


def test_a_transaction_writing_a_pinned_key_many_times() -> None:
    """MULTI/EXEC makes one version of several entries with one LSN: they are counted
    as pinned together, and unsealing uncounts them all (the first write after
    TS.UNSEAL used to fail in the accounting and drop the connection)."""
    s, _sink = make_session(history="versions:4")
    store = s.store
    run(s, "SET", "a", "init")
    run(s, "TS.SEAL", "s")
    run(s, "MULTI")
    for i in range(100):
        run(s, "SET", "a", str(i))
    assert len(run(s, "EXEC")) == 100
    for i in range(4):  # the transaction's version is no longer among the newest 4
        run(s, "SET", "a", f"x{i}")
        assert (store.mem.pinned_bytes, store.mem.pinned_versions) == _pinned_from_marks(store)
    store.settle_trims()
    assert (store.mem.pinned_bytes, store.mem.pinned_versions) == _pinned_from_marks(store)
    assert store.mem.pinned_versions == 100  # the transaction's entries, all of them
    assert run(s, "TS.SNAPSHOTS")[0][b"pinned_versions"] == 100
    run(s, "TS.UNSEAL", "s")
    assert run(s, "SET", "a", "y") == b"OK"
    assert run(s, "GET", "a") == b"y"
    assert store.mem.pinned_bytes == 0 and store.mem.pinned_versions == 0
    assert not store.mem.pinned and not store.mem.marks
    assert (store.mem.main_bytes, store.mem.main_versions) == (
        store.history_recount().main_bytes,
        store.history_recount().main_versions,
    )


def test_dropping_a_branch_uncounts_what_its_own_versions_pinned() -> None:
    """A branch pins its own chains' history newer than its fork too: dropping it
    takes that share out of the pinned counts (it used to stay counted for good, and
    count against max-pinned-history)."""
    s, _sink = make_session(history="versions:2")
    store = s.store
    run(s, "TS.TABLE", "CREATE", "app:t", "RETAIN", "VERSIONS", "2")
    run(s, "TS.BRANCH", "CREATE", "b")
    run(s, "TS.CHECKOUT", "b")
    for i in range(50):
        run(s, "SET", "k", str(i))
        run(s, "SET", "app:t:k", str(i))
    store.settle_trims()
    assert store.mem.pinned_versions == 2 * (50 - 2)
    assert store.mem.pinned_tables[b"app:t"] > 0
    run(s, "TS.CHECKOUT", "HEAD")
    run(s, "TS.BRANCH", "DROP", "b")
    assert (store.mem.pinned_bytes, store.mem.pinned_versions) == (0, 0)
    assert not store.mem.pinned and not store.mem.pinned_tables and not store.mem.marks


def test_each_snapshot_shows_what_it_pins() -> None:
    s, _sink = make_session(history="versions:2")
    run(s, "SET", "a", "0")
    run(s, "TS.SEAL", "first")
    for i in range(300):
        run(s, "SET", "a", str(i))
    run(s, "TS.SEAL", "second")
    for i in range(100):
        run(s, "SET", "a", str(i))
    first, second = run(s, "TS.SNAPSHOTS")
    assert first[b"name"] == b"first" and second[b"name"] == b"second"
    # Versions between the seals belong to the first (within one bucket of 64 LSNs at
    # the boundary), the newer ones to the second; together, all that is pinned.
    assert abs(first[b"pinned_versions"] - 300) <= 64
    assert abs(second[b"pinned_versions"] - 98) <= 64
    total = first[b"pinned_versions"] + second[b"pinned_versions"]
    assert total == s.store.mem.pinned_versions == 300 + 100 - 2


def test_history_info_section_and_the_pinned_cap() -> None:
    s, _sink = make_session(history="versions:2")
    assert run(s, "CONFIG", "SET", "max-pinned-history", "10kb") == b"OK"
    assert run(s, "CONFIG", "GET", "max-pinned-history") == {b"max-pinned-history": b"10240"}
    run(s, "TS.SEAL", "s1")
    for i in range(100):
        run(s, "SET", "a", f"{i:0200d}")
    info = run(s, "INFO", "history")
    text = info.decode() if isinstance(info, bytes) else str(info)
    fields = dict(line.split(":", 1) for line in text.split("\r\n") if ":" in line)
    assert int(fields["history_pinned_bytes"]) == s.store.mem.pinned_bytes > 10240
    assert int(fields["max_pinned_history"]) == 10240 and fields["snapshots"] == "1"
    refused = run(s, "TS.SEAL", "s2")
    assert refused.startswith(b"ERR pinned history is ")
    assert b"at or past max-pinned-history (10240 bytes)" in refused
    assert list(s.store.snapshots) == [b"s1"]
    run(s, "TS.UNSEAL", "s1")
    run(s, "SET", "a", "x")
    assert s.store.mem.pinned_bytes == 0
    assert run(s, "TS.SEAL", "s2") == s.store.lsn


def test_table_cap_refuses_a_seal_and_persists() -> None:
    s, sink = make_session(history="versions:2")
    run(s, "TS.TABLE", "CREATE", "app:t", "RETAIN", "VERSIONS", "2", "MAXPINNED", "2kb")
    assert run(s, "TS.TABLE", "INFO", "app:t")[b"maxpinned"] == 2048
    run(s, "TS.SEAL", "s1")
    for i in range(50):
        run(s, "SET", "other", str(i))  # outside the table: does not count against it
    assert run(s, "TS.SEAL", "s2") == s.store.lsn
    for i in range(50):
        run(s, "SET", "app:t:k", f"{i:0100d}")
    info = run(s, "TS.TABLE", "INFO", "app:t")
    assert info[b"pinned_bytes"] >= 2048
    refused = run(s, "TS.SEAL", "s3")
    assert refused.startswith(b"ERR pinned history of table 'app:t' is ")
    # The option survives replay of its record and a checkpoint.
    fresh = Store()
    for r in sink.records:
        fresh.replay(r)
    assert fresh.tables[b"app:t"].max_pinned == 2048
    again = Store()
    raw, _n = image(s.store)
    load_image(again, raw, "test")
    assert again.tables[b"app:t"].max_pinned == 2048
    assert again.mem.main_versions == s.store.mem.main_versions
    assert again.mem.main_bytes == s.store.mem.main_bytes


def test_verbs_that_pin_history_are_refused_past_maxmemory() -> None:
    s, _sink = make_session()
    run(s, "SET", "a", "1")
    run(s, "TS.BRANCH", "CREATE", "ok")
    s.server.limits.maxmemory = 1  # under noeviction, nothing is evicted: -OOM
    oom = b"OOM command not allowed when used memory > 'maxmemory'."
    assert run(s, "TS.SEAL", "s") == oom
    assert run(s, "TS.BRANCH", "CREATE", "b") == oom
    assert run(s, "TS.CHECKOUT", "AT", "VERSION", "1") == oom
    assert run(s, "TS.CHECKOUT", "HEAD") == b"OK"  # leaving a view is always allowed
    assert run(s, "TS.CHECKOUT", "ok") == b"OK"
    assert not s.store.snapshots and list(s.store.branches) == [b"ok"]


def test_oom_for_seal_on_a_real_server() -> None:
    server = start_temporalstore(["--max-pinned-history", "1mb"])
    try:
        c = RawClient(server.port)
        assert c.call("CONFIG", "GET", "max-pinned-history") == (
            b"*2\r\n$18\r\nmax-pinned-history\r\n$7\r\n1048576\r\n"
        )
        assert c.call("CONFIG", "SET", "maxmemory", "1") == b"+OK\r\n"
        oom = b"-OOM command not allowed when used memory > 'maxmemory'.\r\n"
        assert c.call("TS.SEAL", "s") == oom
        assert c.call("TS.BRANCH", "CREATE", "b") == oom
        assert c.call("TS.CHECKOUT", "AT", "VERSION", "0") == oom
        assert c.call("CONFIG", "SET", "maxmemory", "0") == b"+OK\r\n"
        assert c.call("TS.SEAL", "s").startswith(b":")
        c.close()
    finally:
        server.stop()


def test_dropping_a_branch_uncounts_what_it_pinned() -> None:
    s, _sink = make_session(history="versions:2")
    run(s, "SET", "k", "main")
    run(s, "TS.BRANCH", "CREATE", "b")
    run(s, "TS.CHECKOUT", "b")
    for i in range(20):
        run(s, "SET", "k", f"v{i}")
        run(s, "HSET", "h", f"f{i}", "x")
    run(s, "TS.CHECKOUT", "HEAD")
    assert s.store.mem.pinned_versions > 0
    run(s, "TS.BRANCH", "DROP", "b")
    live = s.store.mem
    fresh = s.store.history_recount()
    assert (live.pinned_bytes, live.pinned_versions) == (fresh.pinned_bytes, fresh.pinned_versions)
    assert live.pinned == fresh.pinned
    assert _pinned_from_marks(s.store) == (live.pinned_bytes, live.pinned_versions)
