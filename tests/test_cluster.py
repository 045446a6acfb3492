"""Redis Cluster mode (issue 28, first slice), with real processes: etcd, three nodes
started with --cluster-enabled yes (each on its own storage), `temporalstore cluster
create`, then redis-py's RedisCluster, `redis-cli -c` and raw sockets against them (the
hash slots themselves: tests/test_slots.py).
"""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
from redis.cluster import RedisCluster

from flusher.coordination import etcd_client
from flusher.slotmap import node_id_for, write_map
from proxy.slotmove import HOLD_ENV
from store.slots import Shard, SlotMap, key_slot, spread
from tests.conftest import ROOT, ServerProcess, start_temporalstore, until
from tests.etcd import EtcdCluster, unique_group
from tests.reliability import sized

KEYS = sized(10_000, 100_000)


# --------------------------------------------------------------------------- processes


def cluster_cli(
    endpoints: str, name: str, action: str, *args: str
) -> subprocess.CompletedProcess[str]:
    """`temporalstore cluster <action> ... <args>` on cluster `name`."""
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "proxy.cli",
            "cluster",
            action,
            "--etcd-endpoints",
            endpoints,
            "--cluster-name",
            name,
            *args,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )


@dataclass
class Cluster:
    name: str
    endpoints: str
    nodes: list[ServerProcess]
    # The nodes' TEMPORALSTORE_MOVE_HOLD file: a move's state written there holds a
    # target at it (proxy.slotmove); none: no hold.
    hold: Path | None = None

    def create(self) -> subprocess.CompletedProcess[str]:
        addresses = (f"127.0.0.1:{n.port}" for n in self.nodes)
        return cluster_cli(self.endpoints, self.name, "create", *addresses)


@pytest.fixture
def cluster(etcd: EtcdCluster) -> Iterator[Cluster]:
    name = unique_group("cluster")
    endpoints = ",".join(etcd.endpoints)
    args = ["--cluster-enabled", "yes", "--etcd-endpoints", endpoints, "--cluster-name", name]
    hold = Path(tempfile.mkdtemp(prefix="ts-hold-")) / "hold"
    nodes: list[ServerProcess] = []
    try:
        for _ in range(3):
            nodes.append(start_temporalstore(args, env={HOLD_ENV: str(hold)}))
        for n in nodes:
            until(lambda n=n: any("registered" in line for line in n.log_lines), 20)
        yield Cluster(name, endpoints, nodes, hold)
    finally:
        for n in nodes:
            n.stop()


def _raw(port: int, *args: object) -> object:
    """A reply as sent (redis-py parses some CLUSTER replies into dicts)."""
    conn = redis.Connection(port=port)
    try:
        conn.send_command(*args)
        return conn.read_response()
    finally:
        conn.disconnect()


def _wire(port: int, *words: bytes) -> bytes:
    """The bytes a node answers to inline commands (one per word group: MULTI, GET k, ...)."""
    lines, cur = [], []
    for w in words:
        if w.isupper() and cur:
            lines.append(b" ".join(cur))
            cur = []
        cur.append(w)
    lines.append(b" ".join(cur))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"".join(line + b"\r\n" for line in lines))
        out = b""
        while out.count(b"\r\n") < len(lines):
            chunk = sock.recv(65536)
            if not chunk:
                break
            out += chunk
    return out


def _info(port: int) -> dict[str, str]:
    """CLUSTER INFO's fields (redis-py parses the text into a dict)."""
    info = redis.Redis(port=port, decode_responses=True).execute_command("CLUSTER INFO")
    return {k: str(v) for k, v in info.items()}


def write_keys(rc: RedisCluster, n: int) -> None:
    """key:0 .. key:<n-1> = value:<i>, pipelined by 1,000."""
    pipe = rc.pipeline(transaction=False)
    for i in range(n):
        pipe.set(f"key:{i}", f"value:{i}")
        if i % 1000 == 999:
            pipe.execute()
    pipe.execute()


def read_keys(rc: RedisCluster, n: int) -> None:
    """Every key `write_keys` wrote reads back."""
    got = rc.mget_nonatomic([f"key:{i}" for i in range(n)])
    assert got == [f"value:{i}".encode() for i in range(n)]


def test_before_create_slots_are_not_served(cluster: Cluster) -> None:
    r = redis.Redis(port=cluster.nodes[0].port)
    assert _info(cluster.nodes[0].port)["cluster_state"] == "fail"
    assert _wire(cluster.nodes[0].port, b"SET", b"foo", b"bar") == (
        b"-CLUSTERDOWN Hash slot not served\r\n"
    )
    assert r.ping()  # a command without keys runs
    assert r.execute_command("CLUSTER KEYSLOT", "foo") == 12182
    assert r.info("cluster") == {"cluster_enabled": 1}


def test_create_then_cluster_clients(cluster: Cluster) -> None:
    done = cluster.create()
    assert done.returncode == 0, done.stderr
    again = cluster.create()
    assert again.returncode == 1 and "has a slot map already" in again.stderr
    ports = [n.port for n in cluster.nodes]
    for port in ports:
        until(lambda port=port: _info(port)["cluster_state"] == "ok", 20)
    info = _info(ports[0])
    assert info["cluster_slots_assigned"] == "16384" and info["cluster_size"] == "3"

    plain = redis.Redis(port=ports[0])
    myid = plain.execute_command("CLUSTER MYID")
    assert len(myid) == 40
    slots = plain.execute_command("CLUSTER SLOTS")
    assert [(s[0], s[1], s[2][1]) for s in slots] == [
        (0, 5460, ports[0]),
        (5461, 10922, ports[1]),
        (10923, 16383, ports[2]),
    ]
    nodes_text = _raw(ports[0], "CLUSTER", "NODES").decode()  # type: ignore[attr-defined]
    assert f"{myid.decode()} 127.0.0.1:{ports[0]}@{ports[0] + 10000} myself,master" in nodes_text
    assert nodes_text.count("\n") == 3 and " 0-5460\n" in nodes_text
    shards = plain.execute_command("CLUSTER SHARDS")
    assert len(shards) == 3
    for word in ("READONLY", "READWRITE", "ASKING"):
        assert _raw(ports[0], word) == b"OK"

    # MOVED with Redis' text: "foo" is slot 12182, the third node's.
    with pytest.raises(redis.exceptions.MovedError) as moved:
        plain.set("foo", "bar")
    assert str(moved.value) == f"12182 127.0.0.1:{ports[2]}"
    assert _wire(ports[0], b"GET", b"foo") == b"-MOVED 12182 127.0.0.1:%d\r\n" % ports[2]
    # CROSSSLOT: two keys of different slots on one node (both of the first node's).
    a, b = "b", "bar"  # slots 3300 and 5061
    assert key_slot(a.encode()) < 5461 and key_slot(b.encode()) < 5461
    assert key_slot(a.encode()) != key_slot(b.encode())
    assert _wire(ports[0], b"MSET", a.encode(), b"1", b.encode(), b"2") == (
        b"-CROSSSLOT Keys in request don't hash to the same slot\r\n"
    )
    with pytest.raises(redis.ResponseError, match="hash to the same slot"):
        plain.mset({a: 1, b: 2})
    # In a transaction: the command is refused, EXEC then aborts (Redis' flagTransaction).
    assert _wire(ports[0], b"MULTI", b"GET", b"foo", b"EXEC") == (
        b"+OK\r\n-MOVED 12182 127.0.0.1:%d\r\n"
        b"-EXECABORT Transaction discarded because of previous errors.\r\n" % ports[2]
    )
    assert plain.mset({"{b}x": 1, "{b}y": 2})  # one slot: fine

    # EXEC looks at every queued command: two slots -> CROSSSLOT, the transaction is gone.
    assert _wire(ports[0], b"MULTI", b"SET", b"b", b"1", b"SET", b"bar", b"1", b"EXEC") == (
        b"+OK\r\n+QUEUED\r\n+QUEUED\r\n-CROSSSLOT Keys in request don't hash to the same slot\r\n"
    )
    assert _wire(ports[0], b"SELECT", b"1") == b"-ERR SELECT is not allowed in cluster mode\r\n"
    assert _wire(ports[0], b"SELECT", b"0") == b"+OK\r\n"

    # redis-py's RedisCluster: writes and reads back KEYS keys across the shards.
    rc = RedisCluster(host="127.0.0.1", port=ports[0], decode_responses=False)
    try:
        write_keys(rc, KEYS)
        read_keys(rc, KEYS)
        assert rc.get("key:7") == b"value:7"
    finally:
        rc.close()
    # Each key is on the shard that owns its slot, and only there.
    total = 0
    for port, (first, last) in zip(ports, spread(3), strict=True):
        node = redis.Redis(port=port)
        keys = [k for k in node.scan_iter(match="key:*", count=1000)]
        total += len(keys)
        assert all(first <= key_slot(k) <= last for k in keys)
        slot = key_slot(keys[0])
        assert node.execute_command("CLUSTER COUNTKEYSINSLOT", slot) == sum(
            1 for k in keys if key_slot(k) == slot
        )
        in_slot = _raw(port, "CLUSTER", "GETKEYSINSLOT", slot, 10_000)
        assert sorted(in_slot) == sorted(k for k in keys if key_slot(k) == slot)  # type: ignore[call-overload]
    assert total == KEYS

    # redis-cli -c follows the MOVED.
    cli = shutil.which("redis-cli")
    assert cli is not None
    out = subprocess.run(
        [cli, "-c", "-p", str(ports[0]), "GET", "key:7"], capture_output=True, text=True, timeout=30
    )
    assert out.stdout.strip() == "value:7", out


def test_redis_benchmark_cluster(cluster: Cluster) -> None:
    """`redis-benchmark --cluster` finds the three masters and spreads its SETs and GETs
    over them, with no error reply."""
    assert cluster.create().returncode == 0
    ports = [n.port for n in cluster.nodes]
    for port in ports:
        until(lambda port=port: _info(port)["cluster_state"] == "ok", 20)
    exe = shutil.which("redis-benchmark")
    assert exe is not None
    out = subprocess.run(
        [exe, "--cluster", "-p", str(ports[0]), "-t", "set,get", "-n", "3000", "-q"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "Cluster has 3 master nodes" in out.stdout
    assert "error" not in (out.stdout + out.stderr).lower()
    for port in ports:
        stats = redis.Redis(port=port).info("commandstats")
        assert stats["cmdstat_set"]["calls"] > 0 and stats["cmdstat_get"]["calls"] > 0
        assert stats["cmdstat_set"]["rejected_calls"] == 0


def test_partial_map_is_down(cluster: Cluster) -> None:
    """A map that leaves slots unserved: those answer -CLUSTERDOWN Hash slot not served,
    the served ones -CLUSTERDOWN The cluster is down (cluster_state:fail), as Redis."""
    first = cluster.nodes[0].port
    partial = SlotMap(1, [Shard(node_id_for("127.0.0.1", first), "127.0.0.1", first, [(0, 5460)])])

    async def write() -> None:
        client = etcd_client(cluster.endpoints)
        try:
            await write_map(client, cluster.name, partial, 0)
        finally:
            await client.close()

    asyncio.run(write())
    until(lambda: _info(first)["cluster_slots_assigned"] == "5461", 20)
    assert _info(first)["cluster_state"] == "fail"
    assert _wire(first, b"GET", b"b") == b"-CLUSTERDOWN The cluster is down\r\n"  # slot 3300
    assert _wire(first, b"GET", b"foo") == b"-CLUSTERDOWN Hash slot not served\r\n"
    assert _wire(first, b"PING") == b"+PONG\r\n"
    # In a script: Redis' scriptVerifyClusterState texts (down; an unserved slot).
    get_b = b"\"return redis.call('get','b')\""
    assert _wire(first, b"EVAL", get_b, b"0") == _script_error(
        "Script attempted to execute a command while the cluster is down",
        "eefb072c762647cc8d8a40e7fe048aaf8872d416",
        "@user_script:1",
    )
    get_foo = b"\"return redis.call('get','foo')\""
    assert _wire(first, b"EVAL", get_foo, b"0") == _script_error(
        NON_LOCAL, "6b1bf486c81ceb7edf3c093f4c48582e38c0e791", "@user_script:1"
    )
    done = cluster.create()  # a map exists: refused, nothing changed
    assert done.returncode == 1 and "has a slot map already (epoch 1" in done.stderr


def _created(cluster: Cluster) -> list[int]:
    """`cluster create` run, every node serving the map: the nodes' ports."""
    done = cluster.create()
    assert done.returncode == 0, done.stderr
    ports = [n.port for n in cluster.nodes]
    for port in ports:
        until(lambda port=port: _info(port)["cluster_state"] == "ok", 20)
    return ports


def _script_error(text: str, name: str, where: str) -> bytes:
    return f"-ERR {text} script: {name}, on {where}.\r\n".encode()


NON_LOCAL = "Script attempted to access a non local key in a cluster node"


def test_script_keys_must_be_local(cluster: Cluster) -> None:
    """A script's redis.call on a key this node does not serve fails as in Redis 7.0
    (scriptVerifyClusterState); keys of another slot of this node's are fine, and the
    writes the script made before the failing call stay."""
    ports = _created(cluster)
    first = ports[0]
    sha_foo = "6b1bf486c81ceb7edf3c093f4c48582e38c0e791"  # return redis.call('get','foo')
    script = b"\"return redis.call('get','foo')\""
    assert _wire(first, b"EVAL", script, b"0") == _script_error(
        NON_LOCAL, sha_foo, "@user_script:1"
    )
    # Declared key b (slot 3300, this node's): foo is still another node's.
    assert _wire(first, b"EVAL", script, b"1", b"b") == _script_error(
        NON_LOCAL, sha_foo, "@user_script:1"
    )
    r = redis.Redis(port=first)
    # Another slot (bar: 5061) that this node serves: allowed, as in Redis.
    r.set("bar", "local")
    assert r.eval("return redis.call('get','bar')", 1, "b") == b"local"
    # One call's keys in two slots: refused even though both are this node's.
    with pytest.raises(redis.ResponseError, match="^" + NON_LOCAL + " script: "):
        r.eval("return redis.call('mget','b','bar')", 0)
    # redis.pcall gets the error as a table, without the script's position.
    assert _wire(first, b"EVAL", b"\"return redis.pcall('get','foo')\"", b"0") == (
        f"-ERR {NON_LOCAL}\r\n".encode()
    )
    # The write before the refused call is kept (Redis does not roll a script back).
    with pytest.raises(redis.ResponseError, match=NON_LOCAL):
        r.eval("redis.call('set','{b}2','y'); return redis.call('get','foo')", 1, "b")
    assert r.get("{b}2") == b"y"
    # SELECT inside a script: Redis' own cluster error.
    with pytest.raises(redis.ResponseError, match=r"^SELECT is not allowed in cluster mode script"):
        r.eval("return redis.call('select','1')", 0)
    assert r.eval("return redis.call('select','0')", 0) == b"OK"
    # FCALL: the same check, named by the function.
    r.function_load(
        "#!lua name=cl\n"
        "redis.register_function('getfoo', function(keys, args)"
        " return redis.call('get', 'foo') end)"
    )
    assert _wire(first, b"FCALL", b"getfoo", b"1", b"b") == _script_error(
        NON_LOCAL, "getfoo", "@user_function:2"
    )
    # On the node that owns foo the same script runs.
    redis.Redis(port=ports[2]).set("foo", "there")
    assert redis.Redis(port=ports[2]).eval("return redis.call('get','foo')", 0) == b"there"
    stats = r.info("errorstats")
    assert stats["errorstat_ERR"]["count"] >= 5
