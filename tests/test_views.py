"""TS.CHECKOUT AT views are lazy and shared (issue 11): made in O(1), a key computed
as of the point on first read and cached once for every connection there, released
when no connection holds them."""

from __future__ import annotations

import gc
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import store.views
from commands.session import Session
from tests.helpers import make_session, run


def _count_as_of(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    real = store.views.value_as_of

    def counting(*args: Any) -> Any:
        calls[0] += 1
        return real(*args)

    monkeypatch.setattr(store.views, "value_as_of", counting)
    return calls


def test_checkout_reads_nothing_and_a_read_computes_one_key(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    s, _sink = make_session()
    for i in range(50_000):
        run(s, "SET", f"k{i}", "old")
    point = s.store.lsn
    run(s, "SET", "k7", "new")
    calls = _count_as_of(monkeypatch)
    assert run(s, "TS.CHECKOUT", "AT", "VERSION", str(point)) == b"OK"
    assert calls[0] == 0
    assert run(s, "GET", "k7") == b"old"
    assert run(s, "GET", "k8") == b"old"
    assert run(s, "GET", "k7") == b"old"  # cached
    assert calls[0] == 2


def test_sessions_at_one_point_share_one_view_and_it_goes_with_them() -> None:
    s, _sink = make_session()
    run(s, "HSET", "h", *[x for i in range(1000) for x in (f"f{i}", "v")])
    point = s.store.lsn
    run(s, "HSET", "h", "f0", "changed")
    others = [Session(s.server) for _ in range(30)]
    for o in others:
        assert run(o, "TS.CHECKOUT", "AT", "VERSION", str(point)) == b"OK"
        assert run(o, "HGET", "h", "f0") == b"v"
    views = {id(o.db) for o in others}
    assert len(views) == 1
    assert s.store.views_memory()[0] == 1
    # One cached copy of the hash, not thirty.
    assert 0 < s.store.views_memory()[1] < 2 * 64 * 1000 + 1000
    for o in others:
        run(o, "TS.CHECKOUT", "HEAD")
    gc.collect()
    assert s.store.views_memory() == (0, 0)


def test_a_view_keeps_answering_as_of_its_point_after_commits() -> None:
    s, _sink = make_session()
    run(s, "SET", "a", "1")
    run(s, "RPUSH", "l", "x", "y")
    point = s.store.lsn
    o = Session(s.server)
    run(o, "TS.CHECKOUT", "AT", "VERSION", str(point))
    run(s, "SET", "a", "2")
    run(s, "RPUSH", "l", "z")
    run(s, "SET", "b", "new")
    assert run(o, "GET", "a") == b"1"
    assert run(o, "LRANGE", "l", "0", "-1") == [b"x", b"y"]
    assert run(o, "EXISTS", "b") == 0
    assert sorted(run(o, "KEYS", "*")) == [b"a", b"l"]
    assert run(o, "DBSIZE") == 2


def test_checkout_before_retained_history_is_refused_at_once() -> None:
    s, _sink = make_session(history="versions:2")
    run(s, "SET", "a", "0")
    old = s.store.lsn
    for i in range(10):
        run(s, "SET", "a", str(i))
    reply = run(s, "TS.CHECKOUT", "AT", "VERSION", str(old))
    assert reply.startswith(b"PRUNED version ") and b" of a " in reply
    assert s.view_lsn is None


_cmds = st.lists(
    st.tuples(
        st.sampled_from(["set", "del", "hset", "rpush", "sadd", "zadd", "pexpire", "persist"]),
        st.integers(0, 4),
        st.integers(0, 3),
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cmds=_cmds, data=st.data())
def test_view_reads_equal_the_state_as_of_each_key(cmds: list[Any], data: Any) -> None:
    s, _sink = make_session()
    for op, k, v in cmds:
        key = f"{op[0]}{k}" if op in ("hset", "rpush", "sadd", "zadd") else f"k{k}"
        if op == "set":
            run(s, "SET", key, str(v))
        elif op == "del":
            run(s, "DEL", f"k{k}", f"h{k}")
        elif op == "hset":
            run(s, "HSET", key, f"f{v}", str(v))
        elif op == "rpush":
            run(s, "RPUSH", key, str(v))
        elif op == "sadd":
            run(s, "SADD", key, str(v))
        elif op == "zadd":
            run(s, "ZADD", key, str(v), f"m{v}")
        elif op == "pexpire":
            run(s, "PEXPIRE", f"k{k}", str(1_000_000 * (v + 1)))
        else:
            run(s, "PERSIST", f"k{k}")
    point = data.draw(st.integers(0, s.store.lsn))
    o = Session(s.server)
    run(o, "TS.CHECKOUT", "AT", "VERSION", str(point))
    expected: dict[bytes, Any] = {}
    main = s.store.dbs[0]
    for key in dict.fromkeys([*main.data, *main.chains]):
        value, expire = s.store.value_as_of(0, key, point)
        if value is not None:
            expected[key] = (value, expire)
    assert sorted(run(o, "KEYS", "*")) == sorted(expected)
    assert run(o, "DBSIZE") == len(expected)
    for key, (value, expire) in expected.items():
        assert run(o, "EXISTS", key) == 1
        assert (run(o, "PEXPIRETIME", key) == -1) == (expire is None)
        t = run(o, "TYPE", key)
        assert t in (b"string", b"hash", b"list", b"set", b"zset")
        if t == b"string":
            assert run(o, "GET", key) == value
        elif t == b"hash":
            assert run(o, "HGETALL", key) == value
    cursor, keys = b"0", []
    while True:
        cursor, page = run(o, "SCAN", cursor)
        keys += page
        if cursor == b"0":
            break
    assert sorted(keys) == sorted(expected)


def test_a_view_read_past_retention_answers_pruned() -> None:
    """Retention may trim a key past a view's point after the checkout (a view pins
    nothing): a read of that key under the view answers PRUNED, not an internal error."""
    s, _sink = make_session(history="versions:2")
    run(s, "SET", "k", "v0")
    run(s, "SET", "other", "x")
    point = s.store.lsn
    o = Session(s.server)
    assert run(o, "TS.CHECKOUT", "AT", "VERSION", str(point)) == b"OK"
    for i in range(1, 8):
        run(s, "SET", "k", f"v{i}")
    reply = run(o, "GET", "k")
    assert isinstance(reply, bytes) and reply.startswith(b"PRUNED"), reply
    assert run(o, "GET", "other") == b"x"
