"""Time travel across the shards of a cluster (issue 28), with real processes: etcd,
three nodes with --cluster-enabled yes and `temporalstore cluster create`. TS.SEAL on
one node seals every shard and records the cluster snapshot in etcd; TS.CHECKOUT AT
SNAPSHOT (or TIME) on each node then reads that shard at its point, so every key
reads as it was; a shard that is down makes TS.SEAL fail with nothing left sealed.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster

from flusher.slotmap import node_id_for
from tests.conftest import start_temporalstore, until
from tests.etcd import EtcdCluster, unique_group
from tests.test_cluster import Cluster, _created, cluster  # noqa: F401
from tests.test_cluster_clients import owner

KEYS = 300


def _fields(entry: Any) -> dict[bytes, Any]:
    """A map reply as a dict (RESP2 sends it as a flat array)."""
    if isinstance(entry, dict):
        return entry
    return dict(zip(entry[::2], entry[1::2], strict=True))


def _snapshots(port: int) -> dict[bytes, dict[bytes, Any]]:
    """TS.SNAPSHOTS of one node, by name."""
    raw = redis.Redis(port=port).execute_command("TS.SNAPSHOTS")
    return {f[b"name"]: f for f in map(_fields, raw)}


def _shards(port: int, name: bytes) -> dict[bytes, int]:
    """The `shards` field of a snapshot's entry in TS.SNAPSHOTS ({}: none yet)."""
    return _fields(_snapshots(port).get(name, {}).get(b"shards", []))


def _read_all(conns: dict[int, redis.Redis], ports: list[int]) -> list[bytes | None]:
    """Every key read on the node that owns it, through that node's connection."""
    return [conns[owner(ports, f"tt:{i}")].get(f"tt:{i}") for i in range(KEYS)]


def test_seal_and_checkout_across_shards(cluster: Cluster) -> None:  # noqa: F811
    ports = _created(cluster)
    ids = {node_id_for("127.0.0.1", p): p for p in ports}
    rc = RedisCluster(host="127.0.0.1", port=ports[0])
    try:
        for i in range(KEYS):
            rc.set(f"tt:{i}", f"old:{i}")
        assert {owner(ports, f"tt:{i}") for i in range(KEYS)} == set(ports)
        sealer = redis.Redis(port=ports[1])
        lsn = sealer.execute_command("TS.SEAL", "release-1", "TRIGGER", "deploy")
        assert isinstance(lsn, int)
        time.sleep(0.01)  # the next writes commit in a later millisecond than the seals
        for i in range(KEYS):
            if i % 10 == 0:
                rc.delete(f"tt:{i}")
            else:
                rc.set(f"tt:{i}", f"new:{i}")
    finally:
        rc.close()

    # Every shard sealed it; each lists the cluster snapshot with every shard's LSN.
    for port in ports:
        # (the other nodes read the records from etcd every 0.5 s)
        until(lambda port=port: _shards(port, b"release-1"), 20)
        entry = _snapshots(port)[b"release-1"]
        shards = _shards(port, b"release-1")
        assert {k.decode() for k in shards} == set(ids)
        assert shards[node_id_for("127.0.0.1", port).encode()] == entry[b"version"]
        assert entry[b"trigger"] == b"deploy"
    assert _snapshots(ports[1])[b"release-1"][b"version"] == lsn
    seal_times = [_snapshots(p)[b"release-1"][b"time"] for p in ports]

    old = [f"old:{i}".encode() for i in range(KEYS)]
    new = [None if i % 10 == 0 else f"new:{i}".encode() for i in range(KEYS)]
    conns = {p: redis.Redis(port=p) for p in ports}
    assert _read_all(conns, ports) == new
    # A connection per node, checked out at the snapshot: the whole cluster as sealed.
    for c in conns.values():
        assert c.execute_command("TS.CHECKOUT", "AT", "SNAPSHOT", "release-1") == b"OK"
    assert _read_all(conns, ports) == old
    # ... and at a time: each shard at its last commit at or before it.
    for c in conns.values():
        assert c.execute_command("TS.CHECKOUT", "AT", "TIME", max(seal_times)) == b"OK"
    assert _read_all(conns, ports) == old
    for c in conns.values():
        assert c.execute_command("TS.CHECKOUT", "HEAD") == b"OK"
    assert _read_all(conns, ports) == new

    # The name is taken on every shard now.
    with pytest.raises(redis.ResponseError, match=r"^snapshot 'release-1' already exists$"):
        conns[ports[2]].execute_command("TS.SEAL", "release-1")
    # Branches are refused in cluster mode.
    with pytest.raises(redis.ResponseError, match=r"^TS\.BRANCH CREATE is not supported"):
        conns[ports[0]].execute_command("TS.BRANCH", "CREATE", "what-if")
    # TS.UNSEAL on any node drops it everywhere, and its record.
    assert conns[ports[2]].execute_command("TS.UNSEAL", "release-1") == 1
    for port in ports:
        assert b"release-1" not in _snapshots(port)
    assert conns[ports[2]].execute_command("TS.UNSEAL", "release-1") == 0

    # Inside MULTI/EXEC, TS.SEAL seals this shard only (a transaction waits on no node).
    pipe = conns[ports[1]].pipeline(transaction=True)
    pipe.execute_command("TS.SEAL", "in-multi")
    (in_multi,) = pipe.execute()
    assert isinstance(in_multi, int)
    assert _shards(ports[1], b"in-multi") == {}
    assert b"in-multi" not in _snapshots(ports[0])
    # A shard down: TS.SEAL fails, naming it, and no shard keeps the seal.
    down = ports[2]
    cluster.nodes[2].stop()
    with pytest.raises(redis.ResponseError) as failed:
        conns[ports[0]].execute_command("TS.SEAL", "release-2")
    text = str(failed.value)
    assert text.startswith(f"cluster snapshot 'release-2' not sealed (shard 127.0.0.1:{down}: ")
    assert text.endswith("; nothing recorded")
    for port in ports[:2]:
        assert b"release-2" not in _snapshots(port)
    # TS.SHARDSEAL seals one shard only (what TS.SEAL sends the others).
    assert isinstance(conns[ports[0]].execute_command("TS.SHARDSEAL", "mine"), int)
    assert b"mine" in _snapshots(ports[0]) and b"mine" not in _snapshots(ports[1])
    assert _shards(ports[0], b"mine") == {}


def test_seal_across_shards_with_a_password(etcd: EtcdCluster) -> None:
    """With requirepass (the same on every node) a node seals the others as the
    default user with its own password; META reaches every shard too."""
    name = unique_group("cluster")
    endpoints = ",".join(etcd.endpoints)
    args = ["--cluster-enabled", "yes", "--etcd-endpoints", endpoints, "--cluster-name", name]
    nodes = []
    try:
        for _ in range(3):
            nodes.append(start_temporalstore([*args, "--requirepass", "pw"]))
        for n in nodes:
            until(lambda n=n: any("registered" in line for line in n.log_lines), 20)
        conns = [redis.Redis(port=n.port, password="pw") for n in nodes]
        # Before `cluster create` no node serves a shard: refused, nothing kept.
        with pytest.raises(redis.ResponseError, match=r"^this node serves no slots"):
            conns[0].execute_command("TS.SEAL", "early")
        assert conns[0].execute_command("TS.SNAPSHOTS") == []
        assert Cluster(name, endpoints, nodes).create().returncode == 0
        for c in conns:
            until(lambda c=c: c.execute_command("CLUSTER INFO")["cluster_state"] == "ok", 20)
        lsn = conns[0].execute_command("TS.SEAL", "locked", "META", "by", "test")
        assert isinstance(lsn, int)
        for c in conns[1:]:
            (entry,) = map(_fields, c.execute_command("TS.SNAPSHOTS"))
            assert entry[b"name"] == b"locked"
            assert _fields(entry[b"meta"]) == {b"by": b"test"}
    finally:
        for n in nodes:
            n.stop()
