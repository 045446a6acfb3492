"""Cluster snapshots across slot moves and failovers (issue 28), with real processes:
etcd, the nodes with --cluster-enabled yes, `temporalstore cluster move`.

A cluster snapshot (TS.SEAL in cluster mode) records each shard's seal time and which
shard served each slot; a shard commits nothing else in its seal's millisecond, and a
shard that takes a range commits later than the giving shard's clock. So after a
range moved, `TS.CHECKOUT AT SNAPSHOT` on the new owner reads its keys by time as they
were at the old owner's seal: written after it, deleted after it, created after it,
and one key written without pause while the seal was taken. A replicated shard is
recorded by its group: its snapshot reads the same after its primary failed over.
"""

from __future__ import annotations

import asyncio
import signal
from typing import Any

import pytest
import redis

from flusher.clustersnaps import ClusterSnapshot, MapChanged, SnapshotExists, record, recorded
from flusher.coordination import etcd_client
from flusher.slotmap import even_map, node_id_for, read_map, write_map
from flusher.slotmove import shard_id
from store import Store, database, keyspace
from store.moves import export_range, longest_chain, renumber
from store.slots import SLOTS, key_slot
from store.views import KeyTimes
from tests.conftest import until
from tests.etcd import EtcdCluster, unique_group
from tests.reliability import Background
from tests.test_cluster import Cluster
from tests.test_cluster_move import _move
from tests.test_cluster_move import cluster as cluster  # the fixtures
from tests.test_cluster_move import created as created
from tests.test_cluster_shards import Shards, _ready
from tests.test_cluster_shards import shards as shards  # the fixture
from tests.test_cluster_time import _fields, _shards, _snapshots
from tests.test_moves import Records, _commit, _set

FIRST, LAST = 0, 999  # moved: the first shard's


def _names(prefix: str, n: int, first: int = FIRST, last: int = LAST) -> list[str]:
    """`n` key names whose slots are in first..last."""
    out: list[str] = []
    i = 0
    while len(out) < n:
        if first <= key_slot(f"{prefix}{i}".encode()) <= last:
            out.append(f"{prefix}{i}")
        i += 1
    return out


class HotWriter(Background):
    """Writes one key, 0, 1, 2, ..., as fast as one connection can."""

    def __init__(self, port: int, key: str) -> None:
        super().__init__()
        self.port, self.key = port, key
        self.written = 0

    def run(self) -> None:
        r = redis.Redis(port=self.port)
        try:
            while not self.stopping.is_set():
                r.set(self.key, self.written)
                self.written += 1
        finally:
            r.close()


def _history(r: redis.Redis, key: str) -> list[tuple[int, int]]:
    """(LSN, commit time) of each version of `key`."""
    rows = [_fields(row) for row in r.execute_command("TS.HISTORY", key, "COUNT", 1_000_000)]
    return [(int(row[b"version"]), int(row[b"time"])) for row in rows]


def _checked_out(port: int, *at: Any) -> redis.Redis:
    r = redis.Redis(port=port)
    assert r.execute_command("TS.CHECKOUT", "AT", *at) == b"OK"
    return r


def test_a_seal_divides_versions_by_time_after_a_move(monkeypatch: pytest.MonkeyPatch) -> None:
    """The store's side, with the clock stopped: the writes after a seal take a later
    millisecond (live, and on a store that replays the records, as a promoted replica
    does), so a key moved to another store reads at the seal's time exactly as the
    seal's LSN read it on its first store."""
    monkeypatch.setattr(database, "_time", lambda: 1_000.0)
    monkeypatch.setattr(keyspace, "_time", lambda: 1_000.0)
    sink = Records()
    giver = Store(databases=1, sink=sink)
    for v in range(3):
        _set(giver, b"a", b"a%d" % v)
    _set(giver, b"gone", b"g")
    seal = _commit(giver, ("seal", b"snap", b""))
    seal_ms = giver.snapshots[b"snap"].time_ms
    for v in range(3, 6):
        _set(giver, b"a", b"a%d" % v)
    giver.begin("del")
    giver.apply(giver.dbs[0], b"gone", ("del",))
    giver.commit()
    _set(giver, b"later", b"l")
    assert giver.time_of(seal) == seal_ms == 1_000_000
    assert [giver.time_of(lsn) for lsn in range(seal + 1, giver.lsn + 1)] == [seal_ms + 1] * 5
    replica = Store(databases=1)
    for rec in sink.records[: seal + 1]:
        replica.replay(rec)
    _set(replica, b"a", b"promoted")
    assert replica.time_of(replica.lsn) == seal_ms + 1

    taker = Store(databases=1)
    _set(taker, b"mine", b"1")
    items = export_range(giver.dbs[0], 0, SLOTS - 1)
    while taker.lsn < longest_chain(items):
        _commit(taker, ("import", ()))
    _commit(taker, ("import", tuple(renumber(taker, items, taker.lsn))))
    sealed = giver.view(0, seal)
    by_time = taker.view(0, taker.lsn, KeyTimes("seal", lambda key: seal_ms, True))
    for key in (b"a", b"gone", b"later", b"mine"):
        if key != b"mine":
            assert by_time.get(key) == sealed.get(key), key
    assert by_time.get(b"a") == b"a2" and by_time.get(b"later") is None
    assert taker.dbs[0].get(b"a") == b"a5"


def test_records_written_before_seal_times_still_read() -> None:
    """A record of the old format (node id -> LSN, no seal times nor slots) reads as
    it was written, and a checkout then reads each shard at its LSN only."""
    old = b'{"epoch":3,"shards":{"ab12":7,"cd34":9},"time":1700000000000}'
    snap = ClusterSnapshot.from_json(b"s", old)
    assert (snap.shards, snap.times, snap.slots) == ({"ab12": 7, "cd34": 9}, {}, [])
    assert snap.to_json() == old
    new = ClusterSnapshot(b"s", {"group:g": 7}, 1, 3, {"group:g": 5}, [(0, 16383, "group:g")])
    assert ClusterSnapshot.from_json(b"s", new.to_json()) == new


def test_a_record_needs_the_map_the_seal_began_with(etcd: EtcdCluster) -> None:
    """The record's transaction (real etcd): refused if the slot map changed since the
    seal read it (a move's commit in between), or if the name is recorded already."""
    cluster = unique_group("cluster")
    snap = ClusterSnapshot(b"s", {"n1": 3}, 1, 1, {"n1": 5}, [(0, SLOTS - 1, "n1")])

    async def run() -> None:
        client = etcd_client(",".join(etcd.endpoints))
        try:
            await write_map(client, cluster, even_map([("127.0.0.1", 1)], 1), 0)
            _, began = await read_map(client, cluster)
            await write_map(client, cluster, even_map([("127.0.0.1", 2)], 2), began)
            with pytest.raises(MapChanged):
                await record(client, cluster, snap, began)
            assert await recorded(client, cluster) == {}
            _, now = await read_map(client, cluster)
            await record(client, cluster, snap, now)
            with pytest.raises(SnapshotExists):
                await record(client, cluster, snap, now)
            assert await recorded(client, cluster) == {b"s": snap}
        finally:
            await client.close()

    asyncio.run(run())


def test_snapshot_reads_moved_keys_as_sealed(created: Cluster) -> None:
    c = created
    src, dst = c.nodes[0].port, c.nodes[1].port
    kept, gone, later = _names("k:", 20), _names("d:", 10), _names("n:", 10)
    (hot,) = _names("hot:", 1)
    (on_dst,) = _names("t:", 1, 6000, 6000)  # a key the taking shard had all along
    s, d = redis.Redis(port=src), redis.Redis(port=dst)
    for k in kept + gone:
        s.set(k, f"{k}:v0")
        s.set(k, f"{k}:sealed")
    (hashed,) = _names("h:", 1)
    s.hset(hashed, mapping={"a": "1", "b": "2"})
    d.set(on_dst, "sealed")

    writer = HotWriter(src, hot)
    writer.start()
    until(lambda: writer.written > 100, 20)
    lsn = d.execute_command("TS.SEAL", "before-move")  # sent to the target: it seals all
    written = writer.written
    until(lambda: writer.written > written + 200, 20)
    writer.stop()
    for k in kept:
        s.set(k, f"{k}:after")
    for k in gone:
        s.delete(k)
    for k in later:
        s.set(k, f"{k}:after")
    s.hset(hashed, mapping={"a": "3", "c": "4"})
    d.set(on_dst, "after")

    # The source's own snapshot: its seal time divides the hot key's versions as its
    # LSN does (no later commit in the seal's millisecond).
    sealed = _snapshots(src)[b"before-move"]
    seal_lsn, seal_ms = int(sealed[b"version"]), int(sealed[b"time"])
    versions = _history(s, hot)
    assert any(v > seal_lsn for v, _ in versions)
    assert [(v, t > seal_ms) for v, t in versions] == [(v, v > seal_lsn) for v, _ in versions]
    at_seal = _checked_out(src, "SNAPSHOT", "before-move").get(hot)
    assert at_seal is not None and at_seal != str(writer.written - 1).encode()

    done = _move(c, f"{FIRST}-{LAST}", dst)
    assert done.returncode == 0, done.stderr
    assert d.get(kept[0]) == f"{kept[0]}:after".encode()

    want = {k: f"{k}:sealed".encode() for k in kept + gone}  # deleted after the seal
    want |= {k: None for k in later}  # created after it
    want[hot] = at_seal
    snap = _checked_out(dst, "SNAPSHOT", "before-move")
    assert {k: snap.get(k) for k in want} == want
    assert [snap.exists(k) for k in gone + later] == [1] * len(gone) + [0] * len(later)
    assert not any(d.exists(k) for k in gone)
    assert snap.get(on_dst) == b"sealed"
    assert snap.hgetall(hashed) == {b"a": b"1", b"b": b"2"}
    # TS.ASOF of a key given the snapshot reads it the same, and KEYS under the
    # checkout sees the same keys.
    assert [d.execute_command("TS.ASOF", k, "SNAPSHOT", "before-move") for k in want] == list(
        want.values()
    )
    assert {k.decode() for k in snap.keys("[kdhn]*:*")} == {*kept, *gone, hot, hashed}
    # TS.CHECKOUT AT TIME the source's seal time reads the moved keys the same way.
    by_time = _checked_out(dst, "TIME", seal_ms)
    assert {k: by_time.get(k) for k in want} == want
    # ... and the head as it is.
    assert d.get(hot) == str(writer.written - 1).encode()
    assert isinstance(lsn, int)

    # Written on the new owner, then moved on to the third shard and back to the first:
    # each reads the keys as the first shard sealed them.
    for k in kept + gone + later:
        d.set(k, f"{k}:on-{dst}")
    for port in (c.nodes[2].port, src):
        done = _move(c, f"{FIRST}-{LAST}", port)
        assert done.returncode == 0, done.stderr
        snap = _checked_out(port, "SNAPSHOT", "before-move")
        assert {k: snap.get(k) for k in want} == want, port
        assert redis.Redis(port=port).get(kept[0]) == f"{kept[0]}:on-{dst}".encode()


def test_snapshot_of_a_group_reads_after_failover_and_move(shards: Shards) -> None:
    s = shards
    primary, replica = _ready(s)
    first, last = 0, 999  # the group's
    keys = _names("g:", 20, first, last)
    p = redis.Redis(port=primary.port)
    for k in keys:
        p.set(k, f"{k}:sealed")
    assert isinstance(p.execute_command("TS.SEAL", "before-failover"), int)
    for k in keys:
        p.set(k, f"{k}:after")
    group = shard_id("", s.group)
    # Recorded by the group, not by its primary's node id.
    single = node_id_for("127.0.0.1", s.single.port)
    until(lambda: _shards(s.single.port, b"before-failover"), 20)
    assert set(_shards(s.single.port, b"before-failover")) == {group.encode(), single.encode()}

    primary.proc.send_signal(signal.SIGKILL)
    primary.proc.wait()
    primary.stop()
    until(lambda: s.slot_map().shards[0].port == replica.port, 30)
    until(lambda: redis.Redis(port=replica.port).execute_command("ROLE")[0] == b"master", 30)
    until(lambda: _shards(replica.port, b"before-failover"), 20)
    assert set(_shards(replica.port, b"before-failover")) == {group.encode(), single.encode()}
    want = {k: f"{k}:sealed".encode() for k in keys}
    snap = _checked_out(replica.port, "SNAPSHOT", "before-failover")
    assert {k: snap.get(k) for k in keys} == want

    done = s.cli("move", "--slots", f"{first}-{last}", "--to", f"127.0.0.1:{s.single.port}")
    assert done.returncode == 0, done.stderr
    moved = _checked_out(s.single.port, "SNAPSHOT", "before-failover")
    assert {k: moved.get(k) for k in keys} == want
    assert redis.Redis(port=s.single.port).get(keys[0]) == f"{keys[0]}:after".encode()
