"""ioredis' `Cluster` client against three TemporalStore nodes in cluster mode (issue
28), with real processes: etcd, the nodes, `temporalstore cluster create` and Node.js
(tests/js/cluster.js). Given one startup node, ioredis learns the map from CLUSTER
SLOTS, sends every key to its slot's node, and gets the errors Redis Cluster gives.
"""

from __future__ import annotations

import json
import subprocess
from typing import Any

import redis
from redis.cluster import LoadBalancingStrategy, RedisCluster

from store.slots import key_slot, spread
from tests.conftest import until
from tests.reliability import Background, figure, sized
from tests.test_cluster import NON_LOCAL, Cluster, _created, cluster  # noqa: F401
from tests.test_cluster_group_move import _move
from tests.test_cluster_move import _keys_on
from tests.test_cluster_shards import Shards, _ready
from tests.test_cluster_shards import shards as shards  # the fixture
from tests.test_durability import kill9
from tests.test_ioredis import JS, _node

IO_KEYS = sized(10_000, 100_000)
# The writer's acknowledged writes before the moves, after each move, after the kill.
IO_BEFORE, IO_BETWEEN = sized(300, 5_000), sized(300, 5_000)
TO_SINGLE = (0, 2999)  # from the replicated shard (0-8191) to the single node
TO_GROUP = (9000, 10999)  # from the single node to the replicated shard


def owner(ports: list[int], key: str) -> int:
    """The port of the node that owns `key`'s slot (slots spread as `cluster create`)."""
    slot = key_slot(key.encode())
    return next(p for p, (a, z) in zip(ports, spread(3), strict=True) if a <= slot <= z)


def _cluster_js(port: int, keys: int) -> Any:
    """tests/js/cluster.js's JSON (its time limit grows with the keys: TS_SOAK=1)."""
    done = subprocess.run(
        [_node(), "cluster.js", str(port), str(keys)],
        cwd=JS,
        capture_output=True,
        text=True,
        timeout=60 + keys // 500,
    )
    assert done.returncode == 0, f"node cluster.js failed:\n{done.stderr}"
    return json.loads(done.stdout)


def test_ioredis_cluster(cluster: Cluster) -> None:  # noqa: F811
    ports = _created(cluster)
    got = _cluster_js(ports[1], IO_KEYS)  # one startup node only
    assert got["masters"] == sorted(ports)
    assert got["roundtrip"] == {"written": IO_KEYS, "wrong": 0}
    # Where the client sends each key, by the map it learned: as CLUSTER SLOTS says.
    assert got["ports"] == [owner(ports, k) for k in ("foo", "b", "io:key:0")]
    assert got["ports"][:2] == [ports[2], ports[0]]  # foo: slot 12182, b: 3300
    assert got["pipeline"] == ["OK", 1, 1, {"f": "v"}, "1"]
    assert got["multi"] == ["OK", 1, 2, ["b", "a"]]
    assert got["mset-one-slot"] == "OK" and got["mget-one-slot"] == ["1", "2"]
    assert got["crossslot"] == {
        "error": "CROSSSLOT Keys in request don't hash to the same slot",
        "name": "ReplyError",
    }
    assert got["script-local"] == "1"
    assert got["script-non-local"]["error"].startswith(f"ERR {NON_LOCAL} script: ")
    assert got["keyslot"] == 12182
    # Every key is on the node that owns its slot (the client went where it should).
    total = 0
    for port, (first, last) in zip(ports, spread(3), strict=True):
        keys = list(redis.Redis(port=port).scan_iter(match="io:key:*", count=1000))
        assert all(first <= key_slot(k) <= last for k in keys)
        total += len(keys)
    assert total == IO_KEYS


# ------------------------------------------------------------ a move and a failover


class NodeWriter(Background):
    """tests/js/cluster_writer.js, its "acked N" lines followed as they come."""

    def __init__(self, port: int) -> None:
        super().__init__()
        self.proc = subprocess.Popen(
            [_node(), "cluster_writer.js", str(port)],
            cwd=JS,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.acked = 0
        self.lines: list[str] = []

    def run(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line)
            if line.startswith("acked "):
                self.acked = int(line.split()[1])

    def more(self, n: int) -> None:
        """Wait until `n` more writes are acknowledged (the script still running)."""
        start = self.acked
        until(lambda: self.acked >= start + n or self.proc.poll() is not None, 90)
        assert self.proc.poll() is None, self.proc.stderr.read() if self.proc.stderr else ""

    def tell(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def finish(self) -> Any:
        """Ask the script to stop; its JSON."""
        assert self.proc.stdin is not None and self.proc.stderr is not None
        self.tell("stop")
        self.proc.stdin.close()
        self.proc.wait(90)
        self.join(10)
        assert self.proc.returncode == 0, f"cluster_writer.js failed:\n{self.proc.stderr.read()}"
        return json.loads(self.lines[-1])

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.join(10)
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()


def test_ioredis_cluster_survives_a_move_and_a_failover(shards: Shards) -> None:
    """One ioredis Cluster client, never recreated, writes all along while slots move
    from the replicated shard to the single node, others the other way, and then the
    shard's primary is killed (kill -9): the writes begun after each went where the new
    map says, and every write it was told OK reads back (`--durability sync`)."""
    s = shards
    primary, replica = _ready(s)  # the group serves 0-8191, the single node the rest
    writer = NodeWriter(s.single.port)
    writer.start()
    try:
        writer.more(IO_BEFORE)
        _move(s, *TO_SINGLE, s.single)
        writer.tell("mark to-single")
        writer.more(IO_BETWEEN)
        _move(s, *TO_GROUP, primary)
        writer.tell("mark to-group")
        writer.more(IO_BETWEEN)
        kill9(primary)
        until(lambda: s.slot_map().shards[0].port == replica.port, 30)
        writer.tell("mark failed-over")
        writer.more(IO_BETWEEN)
        got = writer.finish()
    finally:
        writer.close()
    acked: list[int] = got["acked"]
    assert len(acked) == len(set(acked)) >= IO_BEFORE + 3 * IO_BETWEEN
    # The client found the new map by itself: the single node and the new primary.
    assert got["masters"] == sorted([replica.port, s.single.port])
    rc = RedisCluster(host="127.0.0.1", port=s.single.port, socket_timeout=2)
    try:
        values = rc.mget_nonatomic([f"io:w{i}" for i in acked])
    finally:
        rc.close()
    lost = [i for i, v in zip(acked, values, strict=True) if v != f"value:{i}".encode()]

    def written(since: str, low: int, high: int) -> set[bytes]:
        """The acknowledged keys in slots low-high begun after the mark `since`."""
        keys = (f"io:w{i}".encode() for i in acked if i >= got["marks"][since])
        return {k for k in keys if low <= key_slot(k) <= high}

    to_single, to_group = written("to-single", *TO_SINGLE), written("to-group", *TO_GROUP)
    failed_shard = written("failed-over", TO_SINGLE[1] + 1, 8191)
    assert to_single and to_single <= _keys_on(s.single.port)
    # Taken by the group's primary, then found on its successor.
    assert to_group and to_group <= _keys_on(replica.port)
    assert failed_shard and failed_shard <= _keys_on(replica.port)
    figure(
        "ioredis-cluster-move-and-failover",
        durability="sync",
        acked=len(acked),
        acked_in_slots_moved_to_single=len(to_single),
        acked_in_slots_moved_to_group=len(to_group),
        acked_on_failed_shard_after_failover=len(failed_shard),
        errors_seen=sum(got["errors"].values()),
        errors_by_last=",".join(f"{k}:{v}" for k, v in sorted(got["errors"].items())) or "-",
        slot_map_refreshes=got["events"]["refresh"],
        node_connections_added=got["events"]["+node"],
        lost_acked=len(lost),
    )
    assert not lost


# --------------------------------------------------------------------------- reads on replicas

REPLICA_KEYS = sized(2_000, 20_000)


def _gets(port: int) -> int:
    """How many GETs the node at `port` has served (INFO commandstats)."""
    stats = redis.Redis(port=port).info("commandstats")
    return int(stats.get("cmdstat_get", {}).get("calls", 0))


def _keys_read_back(read: Any, keys: list[str]) -> bool:
    return all(read(k) == f"value:{k}".encode() for k in keys)


def test_cluster_clients_read_from_a_shards_replica(shards: Shards) -> None:
    """redis-py's `RedisCluster` reading from replicas (`load_balancing_strategy`
    ROUND_ROBIN_REPLICAS) and ioredis' `Cluster` with `scaleReads: "slave"` send reads
    to a replicated shard's replica (READONLY on their connections to it): every key
    reads its value, and the replica served the reads of its shard's keys."""
    primary, replica = _ready(shards)
    rc = RedisCluster(
        host="127.0.0.1",
        port=primary.port,
        load_balancing_strategy=LoadBalancingStrategy.ROUND_ROBIN_REPLICAS,
    )
    keys = [f"rp:key:{i}" for i in range(REPLICA_KEYS)]
    try:
        for k in keys:
            assert rc.set(k, f"value:{k}")
        before = _gets(replica.port)
        # The replica applies an acknowledged write shortly after its primary: read until
        # every key has its value.
        until(lambda: _keys_read_back(rc.get, keys), 30)
    finally:
        rc.close()
    # Every GET of the replicated shard's keys went to its replica: at least one each.
    ours = sum(1 for k in keys if key_slot(k.encode()) <= 8191)
    assert ours and _gets(replica.port) - before >= ours

    before = _gets(replica.port)
    done = subprocess.run(
        [_node(), "cluster_replicas.js", str(shards.single.port), str(REPLICA_KEYS)],
        cwd=JS,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, f"node cluster_replicas.js failed:\n{done.stderr}"
    got = json.loads(done.stdout)
    assert got["replicas"] == [replica.port]  # found from CLUSTER SLOTS
    assert (got["written"], got["wrong"]) == (REPLICA_KEYS, 0)
    ours = sum(1 for i in range(REPLICA_KEYS) if key_slot(b"ro:key:%d" % i) <= 8191)
    assert _gets(replica.port) - before >= ours
