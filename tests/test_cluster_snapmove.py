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

import signal
from typing import Any

import redis

from flusher.slotmap import node_id_for
from flusher.slotmove import shard_id
from store.slots import key_slot
from tests.conftest import until
from tests.reliability import Background
from tests.test_cluster import Cluster
from tests.test_cluster_move import _move, created
from tests.test_cluster_move import cluster as cluster  # the fixture
from tests.test_cluster_shards import Shards, _ready
from tests.test_cluster_shards import shards as shards  # the fixture
from tests.test_cluster_time import _fields, _shards, _snapshots

__all__ = ["created"]  # a fixture

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
    # KEYS under the checkout sees the same keys.
    assert {k.decode() for k in snap.keys("[kdhn]*:*")} == {*kept, *gone, hot, hashed}
    # TS.CHECKOUT AT TIME the source's seal time reads the moved keys the same way.
    by_time = _checked_out(dst, "TIME", seal_ms)
    assert {k: by_time.get(k) for k in want} == want
    # ... and the head as it is.
    assert redis.Redis(port=dst).get(hot) == str(writer.written - 1).encode()
    assert isinstance(lsn, int)


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
