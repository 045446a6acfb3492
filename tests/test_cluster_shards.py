"""Replicated shards in cluster mode (issue 28 with issue 12), with real processes: etcd,
two shards, the first a group of two nodes on one storage prefix started with
`--cluster-enabled yes --group NAME` (they elect its primary on etcd), the second one
node; `temporalstore cluster create` naming each shard's primary; redis-py's
RedisCluster across a kill -9 of the replicated shard's primary, and READONLY on its
replica. Every node runs `--durability sync` (what a write acknowledged is stored),
except in the async loss measurement at the end: the default durability (async),
with and without `--min-replicas-to-write 1 --min-replicas-max-lag 1`.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
from redis.backoff import NoBackoff
from redis.cluster import RedisCluster
from redis.retry import Retry

from flusher.coordination import etcd_client
from flusher.slotmap import node_id_for, read_map
from store.slots import SlotMap, key_slot
from tests.conftest import ServerProcess, start_temporalstore, until
from tests.etcd import EtcdCluster, unique_group
from tests.reliability import figure
from tests.test_cluster import _raw, cluster_cli
from tests.test_failover import (
    LOSS_ROUNDS,
    AsyncWriter,
    loss_figures,
    lost_tail,
    refused_while_stopped,
    with_and_without_min_replicas,
    write_through_a_kill,
)

KEYS = 2_000


@dataclass
class Shards:
    name: str
    endpoints: str
    group: str
    pair: list[ServerProcess]  # the replicated shard's two nodes
    single: ServerProcess  # the other shard

    def primary(self) -> ServerProcess:
        """The node of the pair that took the group's lead (its log says so)."""
        found: ServerProcess = until(
            lambda: next(
                (n for n in self.pair if any("takes the lead" in x for x in n.log_lines)), None
            ),
            30,
        )
        return found

    def create(self, *addresses: int) -> subprocess.CompletedProcess[str]:
        return self.cli("create", *(f"127.0.0.1:{p}" for p in addresses))

    def cli(self, action: str, *args: str) -> subprocess.CompletedProcess[str]:
        return cluster_cli(self.endpoints, self.name, action, *args)

    def slot_map(self) -> SlotMap:
        async def read() -> SlotMap:
            client = etcd_client(self.endpoints)
            try:
                found, _ = await read_map(client, self.name)
            finally:
                await client.close()
            assert found is not None
            return found

        return asyncio.run(read())


@contextmanager
def started(etcd: EtcdCluster, extra: list[str]) -> Iterator[Shards]:
    """The two shards on `etcd`, every node started with `extra`, registered."""
    name = unique_group("cluster")
    group = unique_group("shard")
    endpoints = ",".join(etcd.endpoints)
    args = ["--cluster-enabled", "yes", "--etcd-endpoints", endpoints, "--cluster-name", name]
    args += extra
    shared = Path(tempfile.mkdtemp(prefix="ts-shard-"))
    nodes: list[ServerProcess] = []
    try:
        for _ in range(2):
            nodes.append(start_temporalstore([*args, "--group", group], workdir=shared))
        nodes.append(start_temporalstore(args))
        for n in nodes:
            until(lambda n=n: any("registered" in line for line in n.log_lines), 20)
        yield Shards(name, endpoints, group, nodes[:2], nodes[2])
    finally:
        for n in nodes:
            n.stop()


@pytest.fixture
def shards(etcd: EtcdCluster) -> Iterator[Shards]:
    with started(etcd, ["--durability", "sync", "--flush-interval-ms", "50"]) as s:
        yield s


def _slots(port: int) -> list[tuple[int, int, list[int]]]:
    """CLUSTER SLOTS as (first, last, [port of each node, the primary first])."""
    got = redis.Redis(port=port, socket_timeout=2).execute_command("CLUSTER SLOTS")
    return [(s[0], s[1], [n[1] for n in s[2:]]) for s in got]


def _ready(s: Shards) -> tuple[ServerProcess, ServerProcess]:
    """Create the cluster (the group's primary named); wait until every node lists the
    replica. The primary and the replica of the replicated shard."""
    primary = s.primary()
    replica = next(n for n in s.pair if n is not primary)
    # Two nodes of one group cannot both be named.
    twice = s.create(s.pair[0].port, s.pair[1].port)
    assert twice.returncode == 1 and "two nodes of one group" in twice.stderr
    done = s.create(primary.port, s.single.port)
    assert done.returncode == 0, done.stderr
    assert f"group {s.group}" in done.stdout
    want = [(0, 8191, [primary.port, replica.port]), (8192, 16383, [s.single.port])]
    for n in (primary, replica, s.single):
        until(lambda n=n: _slots(n.port) == want, 20, (redis.RedisError,))
    shard = s.slot_map().shards[0]
    assert (shard.group, shard.port) == (s.group, primary.port)
    return primary, replica


def _write(rc: RedisCluster, first: int, last: int) -> None:
    for i in range(first, last):
        assert rc.set(f"key:{i}", f"value:{i}")


def test_failover_of_a_shard_primary_under_redis_cluster(shards: Shards) -> None:
    primary, replica = _ready(shards)
    # CLUSTER NODES and SHARDS: the replica after its master.
    text = _raw(replica.port, "CLUSTER", "NODES").decode()  # type: ignore[attr-defined]
    pid, rid = node_id_for("127.0.0.1", primary.port), node_id_for("127.0.0.1", replica.port)
    assert f"{rid} 127.0.0.1:{replica.port}@{replica.port + 10000} myself,slave {pid} " in text
    assert f"{pid} 127.0.0.1:{primary.port}@{primary.port + 10000} master - " in text
    assert text.count("\n") == 3
    got = _raw(shards.single.port, "CLUSTER", "SHARDS")
    assert isinstance(got, list)
    first = next(sh for sh in got if sh[b"slots"] == [0, 8191])
    assert [(n[b"id"], n[b"role"]) for n in first[b"nodes"]] == [
        (pid.encode(), b"master"),
        (rid.encode(), b"replica"),
    ]

    rc = RedisCluster(host="127.0.0.1", port=shards.single.port, socket_timeout=2)
    try:
        _write(rc, 0, KEYS)  # acknowledged in sync mode: stored
        on_pair = [i for i in range(KEYS) if key_slot(f"key:{i}".encode()) <= 8191]
        assert len(on_pair) > KEYS // 3

        primary.proc.send_signal(signal.SIGKILL)
        primary.proc.wait()
        primary.stop()

        # The replica is elected and writes itself into the map; every live node
        # shows it as the shard's primary.
        want = [(0, 8191, [replica.port]), (8192, 16383, [shards.single.port])]
        for n in (replica, shards.single):
            until(lambda n=n: _slots(n.port) == want, 30, (redis.RedisError,))
        assert redis.Redis(port=replica.port).execute_command("ROLE")[0] == b"master"
        after = shards.slot_map()
        assert after.shards[0].port == replica.port and after.epoch == 2

        # RedisCluster goes on: a write to the failed shard may fail while the client
        # still knows the dead primary; it finds the new one by itself on a retry.
        deadline = time.monotonic() + 30
        while True:
            try:
                _write(rc, KEYS, KEYS + 1)
                break
            except (redis.exceptions.ConnectionError, redis.exceptions.ClusterError):
                assert time.monotonic() < deadline
                time.sleep(0.5)
        _write(rc, KEYS + 1, 2 * KEYS)
        # Every acknowledged write, before and after the kill -9, read back.
        values = rc.mget_nonatomic([f"key:{i}" for i in range(2 * KEYS)])
        lost = [i for i, v in enumerate(values) if v != f"value:{i}".encode()]
        figure(
            "shard-failover",
            durability="sync",
            acked_before_kill=KEYS,
            acked_before_kill_on_failed_shard=len(on_pair),
            acked_after_failover=KEYS,
            lost_acked=len(lost),
        )
        assert not lost
    finally:
        rc.close()


def test_readonly_on_a_replica(shards: Shards) -> None:
    primary, replica = _ready(shards)
    mine = "foo"  # slot 12182: the single node's
    theirs = next(f"k{i}" for i in range(100) if key_slot(f"k{i}".encode()) <= 8191)
    slot = key_slot(theirs.encode())
    redis.Redis(port=primary.port).set(theirs, "v")
    r = redis.Redis(port=replica.port)
    moved = f"{slot} 127.0.0.1:{primary.port}"
    with pytest.raises(redis.exceptions.MovedError, match=f"^{moved}$"):
        r.get(theirs)  # a replica redirects reads too, until READONLY

    assert r.execute_command("READONLY") is True
    until(lambda: r.get(theirs) == b"v", 20)  # served here once replicated
    assert r.exists(theirs) == 1
    with pytest.raises(redis.exceptions.MovedError, match=f"^{moved}$"):
        r.set(theirs, "w")  # writes still go to the primary
    other = f"^12182 127.0.0.1:{shards.single.port}$"
    with pytest.raises(redis.exceptions.MovedError, match=other):
        r.get(mine)  # another shard's slot: its primary
    assert r.execute_command("READWRITE") is True
    with pytest.raises(redis.exceptions.MovedError, match=f"^{moved}$"):
        r.get(theirs)
    # READONLY is the connection's: another connection is redirected.
    with pytest.raises(redis.exceptions.MovedError):
        redis.Redis(port=replica.port).get(theirs)

    shown = shards.cli("show")
    assert shown.returncode == 0, shown.stderr
    assert f"127.0.0.1:{primary.port} slots 0-8191 keys 1 group {shards.group}" in shown.stdout
    assert f"127.0.0.1:{replica.port} no slots of its own (group {shards.group})" in shown.stdout
    # A replica names its shard: moving the shard's own slots to it moves nothing.
    own = shards.cli("move", "--slots", "0-10", "--to", f"127.0.0.1:{replica.port}")
    assert own.returncode == 1
    assert f"(group {shards.group})'s already: nothing to move" in own.stderr


# --------------------------------------------------------------------------- async loss


def _async_shard_loss(etcd: EtcdCluster, settings: list[str]) -> dict[str, int]:
    """One round, on shards of their own at the default durability (async) with
    `settings`: a RedisCluster writer pipelining SETs to one slot of the replicated
    shard for LOSS_SECONDS, kill -9 of the shard's primary, its replica elected; what
    the new primary lacks of the acknowledged writes (`lost_tail` checks that it is a
    tail and nothing the replica or object storage had acknowledged). With
    min-replicas-to-write, first: writes to the shard are refused while its replica
    is stopped."""
    with started(etcd, settings) as s:
        primary, replica = _ready(s)
        p = redis.Redis(port=primary.port)
        until(lambda: p.info("replication")["connected_slaves"] == 1, 20)
        # A hash tag of the replicated shard's slots: one slot, one node, one connection.
        tag = next(f"{{a{i}}}:" for i in range(100) if key_slot(f"a{i}".encode()) <= 8191)
        stopped = {}
        if settings:
            stopped["acked_after_replica_stopped"] = refused_while_stopped(primary, replica, tag)
        # No retries: a write sent again after the kill could land on the successor
        # after an earlier one was lost, and the first error must end the writer.
        rc = RedisCluster(
            host="127.0.0.1", port=s.single.port, socket_timeout=2, retry=Retry(NoBackoff(), 0)
        )
        writer = AsyncWriter(rc, tag)
        watch = write_through_a_kill(writer, primary)
        want = [(0, 8191, [replica.port]), (8192, 16383, [s.single.port])]
        until(lambda: _slots(replica.port) == want, 30, (redis.RedisError,))
        r = redis.Redis(port=replica.port)
        assert r.execute_command("ROLE")[0] == b"master"
        return lost_tail(r, writer, watch) | stopped


@with_and_without_min_replicas
def test_async_writes_lost_on_a_shard_failover(etcd: EtcdCluster, settings: list[str]) -> None:
    """test_failover.py's async loss measurement in cluster mode: the acknowledged
    async writes a replicated shard loses when its primary is killed and its replica
    elected, with and without min-replicas-to-write 1 / min-replicas-max-lag 1
    (figures `shard-failover-async-loss-default` and `-min-replicas-1-lag-1`)."""
    rounds = [_async_shard_loss(etcd, settings) for _ in range(LOSS_ROUNDS)]
    stopped = [str(x["acked_after_replica_stopped"]) for x in rounds if settings]
    more = {"acked_after_replica_stopped": ",".join(stopped)} if settings else {}
    loss_figures("shard-failover-async-loss", settings, rounds, **more)
