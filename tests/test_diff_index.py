"""TS.DIFF from the version index (issue 11): it visits the keys written between the
two points (and, where the points' clocks differ, keys with a TTL), not every key;
its answers are those of comparing every key's state at both points."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import commands.temporal
from commands.points import parse_point, state_as_of
from commands.session import Session
from store import Store
from tests.helpers import make_session, run


def test_diff_with_count_visits_only_changed_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    s, _sink = make_session()
    for i in range(50_000):
        run(s, "SET", f"k{i:05d}", "v")
    a = s.store.lsn
    for i in range(10):
        run(s, "SET", f"k{i * 4000:05d}", "changed")
    b = s.store.lsn
    calls = [0]
    real = commands.temporal.state_as_of

    def counting(*args: Any) -> Any:
        calls[0] += 1
        return real(*args)

    monkeypatch.setattr(commands.temporal, "state_as_of", counting)
    reply = run(s, "TS.DIFF", "VERSION", str(a), "VERSION", str(b))
    assert reply == {f"k{i * 4000:05d}".encode(): b"changed" for i in range(10)}
    assert calls[0] == 20
    calls[0] = 0
    assert len(run(s, "TS.DIFF", "VERSION", str(a), "VERSION", str(b), "COUNT", "3")) == 3
    assert calls[0] == 6


def _naive(s: Session, argv: list[str]) -> dict[bytes, bytes]:
    """Every key's state at both points, compared (the definition)."""
    args = [x.encode() for x in argv]
    a, i = parse_point(s, args, 1)
    b, _ = parse_point(s, args, i)
    db = s.store.dbs[s.dbi]
    out = {}
    for key in sorted(set(db.data) | set(db.chains)):
        old, old_exp = state_as_of(s, key, a)
        new, new_exp = state_as_of(s, key, b)
        if old is None and new is None:
            continue
        if old is None:
            out[key] = b"added"
        elif new is None:
            out[key] = b"removed"
        elif type(old) is not type(new) or old != new or old_exp != new_exp:
            out[key] = b"changed"
    return out


_ops = st.lists(
    st.tuples(
        st.sampled_from(["set", "del", "hset", "pexpire", "persist", "swapdb", "tick"]),
        st.integers(0, 5),
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=_ops, data=st.data())
def test_diff_equals_comparing_every_key(ops: list[tuple[str, int]], data: Any) -> None:
    s, _sink = make_session(databases=2)
    clock = [1_000_000_000]
    for op, k in ops:
        if op == "set":
            run(s, "SET", f"k{k}", str(len(s.store.index_lsns)))
        elif op == "del":
            run(s, "DEL", f"k{k}")
        elif op == "hset":
            run(s, "HSET", f"k{k}h", "f", str(k))
        elif op == "pexpire":
            run(s, "PEXPIRE", f"k{k}", str(k * 30 + 1))
        elif op == "persist":
            run(s, "PERSIST", f"k{k}")
        elif op == "swapdb":
            run(s, "SWAPDB", "0", "1")
        else:
            clock[0] += 1
    lsn = s.store.lsn
    a = data.draw(st.integers(0, lsn))
    b = data.draw(st.integers(0, lsn))
    for argv in (
        ["TS.DIFF", "VERSION", str(a), "VERSION", str(b)],
        ["TS.DIFF", "TIME", str(s.store.time_of(a)), "VERSION", str(b)],
    ):
        expected = _naive(s, argv)
        assert run(s, *argv) == expected
        assert run(s, *argv, "COUNT", "2") == dict(list(expected.items())[:2])
        matched = {k: v for k, v in expected.items() if k.endswith(b"h")}
        assert run(s, *argv, "MATCH", "*h") == matched


def test_branch_diffs_visit_what_the_branches_and_the_main_line_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    s, _sink = make_session()
    for i in range(20_000):
        run(s, "SET", f"k{i:05d}", "v")
    run(s, "TS.BRANCH", "CREATE", "b")
    run(s, "TS.CHECKOUT", "b")
    run(s, "SET", "k00001", "on-branch")
    run(s, "DEL", "k00002")
    run(s, "SET", "new", "x")
    run(s, "TS.CHECKOUT", "HEAD")
    run(s, "SET", "k00003", "main-after-fork")
    seen: list[bytes] = []
    real = commands.temporal.state_as_of

    def counting(sess: Any, key: bytes, point: Any) -> Any:
        seen.append(key)
        return real(sess, key, point)

    monkeypatch.setattr(commands.temporal, "state_as_of", counting)
    head = str(s.store.lsn)
    reply = run(s, "TS.DIFF", "VERSION", head, "BRANCH", "b")
    assert reply == {
        b"k00001": b"changed",
        b"k00002": b"removed",
        b"k00003": b"changed",
        b"new": b"added",
    }
    assert len(seen) <= 4
    assert run(s, "TS.DIFF", "BRANCH", "b", "VERSION", head, "COUNT", "1") == {
        b"k00001": b"changed"
    }


def test_the_index_is_rebuilt_by_replay() -> None:
    s, sink = make_session(databases=2)
    for i in range(5):
        run(s, "SET", f"k{i}", "v")
    run(s, "SELECT", "1")
    run(s, "MSET", "x", "1", "y", "2")
    run(s, "SELECT", "0")
    run(s, "SET", "k1", "w")
    fresh = Store(databases=2)
    for r in sink.records:
        fresh.replay(r)
    assert fresh.index_keys == s.store.index_keys
    assert fresh.keys_written(1, 0, fresh.lsn) == {b"x", b"y"}
    assert fresh.keys_written(0, 5, fresh.lsn) == {b"k1"}


def test_diff_pages_with_after_and_runs_long_diffs_in_slices() -> None:
    """AFTER is TS.DIFF's cursor: pages of COUNT keys, each after the last key of the
    one before, add up to the whole diff; a diff over more keys than run whole
    (commands.slices.ATOMIC_ITEMS) gives the same answer in slices."""
    from commands.slices import ATOMIC_ITEMS

    s, _sink = make_session()
    n = ATOMIC_ITEMS * 3
    for i in range(n):
        run(s, "SET", f"k{i:05d}", "v")
    a = s.store.lsn
    for i in range(0, n, 2):
        run(s, "SET", f"k{i:05d}", "changed")
    for i in range(1, n, 3):
        run(s, "DEL", f"k{i:05d}")
    run(s, "SET", "new", "1")
    b = s.store.lsn
    whole = run(s, "TS.DIFF", "VERSION", str(a), "VERSION", str(b))
    expected = {f"k{i:05d}".encode(): b"changed" for i in range(0, n, 2)}
    expected.update({f"k{i:05d}".encode(): b"removed" for i in range(1, n, 3)})
    expected[b"new"] = b"added"
    assert whole == dict(sorted(expected.items()))
    assert list(whole) == sorted(whole)
    paged: dict[bytes, Any] = {}
    after: list[str | bytes] = []
    while True:
        page = run(s, "TS.DIFF", "VERSION", str(a), "VERSION", str(b), "COUNT", "500", *after)
        paged.update(page)
        if len(page) < 500:
            break
        after = ["AFTER", list(page)[-1]]
    assert paged == whole
    assert run(s, "TS.DIFF", "VERSION", str(a), "VERSION", str(b), "AFTER", "zzz") == {}
    matched = run(s, "TS.DIFF", "VERSION", str(a), "VERSION", str(b), "MATCH", "k000*")
    assert matched == {k: v for k, v in whole.items() if k.startswith(b"k000")}


def test_the_index_is_bounded_and_older_diffs_compare_every_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The version index keeps about INDEX_KEYS key references (memory stays level
    under endless rewrites); a diff reaching before its start compares every key and
    answers the same."""
    import store.windex

    monkeypatch.setattr(store.windex, "INDEX_KEYS", 100)
    s, _sink = make_session()
    first = s.store.lsn
    for i in range(50):
        run(s, "MSET", *[x for j in range(10) for x in (f"k{j}", f"v{i}")])
        run(s, "SET", f"solo{i}", "x")
    for i in range(2000):
        run(s, "SET", f"x{i % 300}", "x")
    store = s.store
    weight = sum(1 if type(e) is bytes else len(e) for e in store.index_keys)
    assert weight <= 2 * 100 + 1024  # checked every 1,024 commits
    assert store.index_from > first + 1
    assert store.keys_written(0, first, store.lsn) is None  # before the index: unknown
    diff = run(s, "TS.DIFF", "VERSION", str(first), "VERSION", str(store.lsn))
    expected = {f"k{j}".encode(): b"added" for j in range(10)}
    expected.update({f"solo{i}".encode(): b"added" for i in range(50)})
    expected.update({f"x{i}".encode(): b"added" for i in range(300)})
    assert diff == dict(sorted(expected.items()))
    recent = store.lsn - 2
    assert store.keys_written(0, recent, store.lsn) == {b"x198", b"x199"}


def test_multi_key_commits_alone_keep_the_index_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Commits of many keys each (MSET of 100) are weighed by their keys, not only
    every 1,024 commits: 200 of them (20,000 key references) stay near the bound."""
    import store.windex

    monkeypatch.setattr(store.windex, "INDEX_KEYS", 1000)
    s, _sink = make_session()
    for i in range(200):
        run(s, "MSET", *[x for j in range(100) for x in (f"k{j}", f"v{i}")])
    weight = sum(1 if type(e) is bytes else len(e) for e in s.store.index_keys)
    assert weight <= 2 * 1000 + 1024 + 100
