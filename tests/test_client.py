"""The Python client of the temporal API (package `temporalstore`) against a live server:
the blocking client on redis.Redis and the asyncio one on redis.asyncio.Redis, RESP2 and
RESP3, decoded and raw replies."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import redis.asyncio as aredis

from temporalstore import (
    AlreadyExistsError,
    AsyncTemporal,
    BranchNotFoundError,
    MergeConflictError,
    Point,
    PrunedError,
    ReadOnlyViewError,
    SnapshotNotFoundError,
    Temporal,
    TemporalError,
)
from tests.conftest import ServerProcess, start_temporalstore

_n = itertools.count()


def unique(stem: str) -> str:
    return f"{stem}-{next(_n)}"


@pytest.fixture(params=[(2, True), (3, True), (3, False)], ids=["resp2", "resp3", "resp3-raw"])
def ts(request: pytest.FixtureRequest, ts_server: ServerProcess) -> Iterator[Temporal]:
    protocol, decode = request.param
    r = redis.Redis(port=ts_server.port, protocol=protocol, decode_responses=decode)
    yield Temporal(r)
    r.close()


def s(x: Any) -> Any:
    """A reply as str whether the client decodes or not."""
    return x.decode() if isinstance(x, bytes) else x


def test_seal_snapshots_and_views(ts: Temporal) -> None:
    key = unique("cl:plan")
    ts.r.set(key, "draft")
    sid = ts.seal("before edit", episode=7, agent="planner")
    assert sid.startswith("before-edit-")
    ts.r.set(key, "final")
    info = ts.snapshots()[sid]
    assert info.trigger == "before edit"
    assert info.metadata == {"episode": "7", "agent": "planner"}
    assert info.lsn == info.version == ts.version() - 1
    assert abs(info.created_at.timestamp() - __import__("time").time()) < 60
    named = ts.seal(name=unique("cl-named"))
    assert ts.snapshots()[named].trigger == "" and ts.snapshots()[named].metadata == {}
    with pytest.raises(AlreadyExistsError):
        ts.seal(name=named)
    with ts.at_snapshot(sid) as view:
        assert s(view.get(key)) == "draft"
        assert key in [s(k) for k in view.keys("cl:plan*")]
        with pytest.raises(ReadOnlyViewError):
            view.set(key, "nope")
        with pytest.raises(redis.exceptions.ReadOnlyError):  # still a redis-py error
            view.delete(key)
    assert s(ts.r.get(key)) == "final"
    with ts.at(version=info.version) as view:
        assert s(view.get(key)) == "draft"
    with ts.at(back=1) as view:  # the state one version (the seal of `named`) ago
        assert s(view.get(key)) == "final"
    assert ts.unseal(sid) and not ts.unseal(sid)
    with pytest.raises(SnapshotNotFoundError):
        ts.at_snapshot(sid)
    with pytest.raises(SnapshotNotFoundError):
        ts.get_as_of(key, snapshot=sid)
    assert ts.unseal(named)


def test_history_writer_revert(ts: Temporal) -> None:
    key = unique("cl:doc")
    with ts.writer("alice", "first draft") as w:
        w.set(key, "v1")
    with ts.writer("bob") as w:
        w.set(key, "v2")
        w.append(key, "!")
    ts.r.set(key, "v3")
    entries = ts.history(key, with_values=True)
    assert [s(e.value) for e in entries] == ["v1", "v2", "v2!", "v3"]
    assert [e.author for e in entries] == ["alice", "bob", "bob", None]
    assert entries[0].message == "first draft" and entries[1].message is None
    assert [e.command for e in entries] == ["set", "set", "append", "set"]
    assert [e.value for e in ts.history(key)] == [None] * 4
    assert [e.version for e in ts.history(key, author="bob")] == [
        entries[1].version,
        entries[2].version,
    ]
    assert [e.version for e in ts.history(key, reverse=True, count=2)] == [
        entries[3].version,
        entries[2].version,
    ]
    since = Point(version=entries[1].version)
    until = Point(version=entries[2].version)
    assert len(ts.history(key, since=since, until=until)) == 2
    assert entries[0].time <= entries[-1].time
    assert s(ts.get_as_of(key, back=3)) == "v1"
    assert s(ts.get_as_of(key, Point(version=entries[1].version))) == "v2"
    assert ts.get_as_of(key, version=entries[0].version - 1) is None
    assert ts.revert(key, back=2) is True
    assert s(ts.r.get(key)) == "v2"
    assert ts.revert(key, to=Point(version=entries[1].version)) is False  # already so
    with pytest.raises(ValueError):
        Point(version=1, back=1)


def test_pruned() -> None:
    # A server of its own: on the shared one another test's sealed snapshot may pin history.
    p = start_temporalstore(["--history", "versions:4"])
    try:
        ts = Temporal(redis.Redis(port=p.port))
        for _ in range(20):
            ts.r.incr("counter")
        with pytest.raises(PrunedError) as e:
            ts.get_as_of("counter", back=15)
        assert str(e.value).startswith("PRUNED")
        assert isinstance(e.value, TemporalError)
    finally:
        p.stop()


def test_branches_switch_merge_diff(ts: Temporal) -> None:
    a, b = unique("cl:a"), unique("cl:b")
    ts.r.set(a, "1")
    ts.r.set(b, "1")
    name = unique("cl-what-if")
    ts.branch(name)
    with pytest.raises(AlreadyExistsError):
        ts.branch(name)
    with ts.switch(name) as br:
        br.set(a, "2")
        assert s(br.get(a)) == "2"
        pipe = br.pipeline()  # a pipeline on the session stays on the branch
        pipe.get(a).get(b)
        assert [s(x) for x in pipe.execute()] == ["2", "1"]
    assert s(ts.r.get(a)) == "1"
    info = ts.branches()[name]
    assert info.parent == "main" and info.changed == 1 and info.latest > info.fork
    assert ts.diff(name, Point(version=ts.version()), match=a) == {a: "changed"}
    assert ts.diff(name, "main", match=f"{a}*") == {a: "changed"}
    assert ts.diff("main", name, match=b) == {}
    ts.r.set(a, "main-side")  # now a conflict
    with pytest.raises(MergeConflictError) as e:
        ts.merge(name)
    assert e.value.keys == [a]
    assert ts.merge(name, strategy="theirs") == 1
    assert s(ts.r.get(a)) == "2"
    with pytest.raises(ValueError):
        ts.merge(name, strategy="mine")
    ts.drop_branch(name)
    with pytest.raises(BranchNotFoundError):
        ts.switch(name)
    with pytest.raises(BranchNotFoundError):
        ts.merge(name)


def test_diff_pages_past_one_reply(ts: Temporal) -> None:
    stem = unique("cl:many")
    v0 = ts.version()
    with ts.r.pipeline(transaction=False) as p:
        for i in range(1203):  # more than two pages of 500
            p.set(f"{stem}:{i:05d}", i)
        p.execute()
    d = ts.diff(Point(version=v0), Point(version=ts.version()), match=f"{stem}:*")
    assert len(d) == 1203 and set(d.values()) == {"added"}
    assert list(d) == sorted(d)


def test_tables(ts: Temporal) -> None:
    name = unique("cl:tbl").replace("-", "")
    ts.create_table(name, durability="sync", retain="versions:5", snapshot_every=8)
    info = ts.table_info(name)
    assert s(info.fields["durability"]).lower() == "sync"
    assert name in ts.tables()
    ts.alter_table(name, retain="all")
    assert "all" in s(ts.table_info(name).fields["retain"]).lower()
    with pytest.raises(AlreadyExistsError):
        ts.create_table(name)
    with pytest.raises(TypeError):
        ts.create_table(name + "x", durabilty="sync")  # a misspelt option is not ignored
    ts.drop_table(name)
    assert name not in ts.tables()


def test_sessions_survive_a_reconnect(ts_server: ServerProcess) -> None:
    ts = Temporal(redis.Redis(port=ts_server.port, decode_responses=True))
    key = unique("cl:rc")
    ts.r.set(key, "old")
    v = ts.version()
    ts.r.set(key, "new")
    with ts.at(version=v) as view, ts.writer("carol") as w:
        assert view.get(key) == "old"
        for sess in (view, w):
            cid = sess.client_id()
            assert ts.r.client_kill_filter(_id=cid) == 1
        # redis-py reconnects; the session's set-up runs again on the new connection.
        assert view.get(key) == "old"
        w.set(key, "by-carol")
    assert ts.history(key)[-1].author == "carol"


def test_asyncio_client(ts_server: ServerProcess) -> None:
    async def main() -> None:
        r = aredis.Redis(port=ts_server.port, protocol=3, decode_responses=True)
        ts = AsyncTemporal(r)
        key = unique("cl:async")
        await r.set(key, "a")
        sid = await ts.seal("async", turn=1)
        await r.set(key, "b")
        assert (await ts.snapshots())[sid].metadata == {"turn": "1"}
        async with await ts.at_snapshot(sid) as view:
            assert await view.get(key) == "a"
            with pytest.raises(ReadOnlyViewError):
                await view.set(key, "x")
        async with ts.writer("dave", "async write") as w:
            await w.set(key, "c")
        hist = await ts.history(key, with_values=True)
        assert [e.value for e in hist] == ["a", "b", "c"]
        assert hist[-1].author == "dave" and hist[-1].message == "async write"
        assert await ts.get_as_of(key, back=1) == "b"
        assert await ts.revert(key, snapshot=sid) is True
        name = unique("cl-async-br")
        await ts.branch(name, from_=Point(snapshot=sid))
        async with await ts.switch(name) as br:
            assert await br.get(key) == "a"
            await br.set(key, "branch")
        assert (await ts.diff(name, "main", match=key)) == {key: "changed"}
        await r.set(key, "main")
        with pytest.raises(MergeConflictError):
            await ts.merge(name)
        assert await ts.merge(name, strategy="ours") == 0  # the conflict kept as main has it
        assert await r.get(key) == "main"
        assert (await ts.branches())[name].parent == "main"
        await ts.drop_branch(name)
        with pytest.raises(BranchNotFoundError):
            await ts.switch(name)
        assert await ts.unseal(sid)
        await r.aclose()

    asyncio.run(main())
