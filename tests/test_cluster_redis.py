"""Our cluster nodes against a redis-server 7.0 cluster of the same shape (issue 28):
three masters each, the slots spread alike (0-5460, 5461-10922, 10923-16383), the same
requests sent to the first node of each; the replies must be the same bytes once each
node's port is named by its index. Covers what a script may touch (Redis 7.0's
scriptVerifyClusterState), redirections and CROSSSLOT, in and out of MULTI.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
import redis

from flusher.coordination import etcd_client
from flusher.slotmap import read_map, write_map
from store.slots import Shard, SlotMap, spread
from tests.conftest import ServerProcess, free_port, start_redis, until
from tests.test_cluster import Cluster, _created, _raw, _wire, cluster  # noqa: F401
from tests.test_cluster_time import _fields


@pytest.fixture
def redis_cluster() -> Iterator[list[int]]:
    """Three redis-server masters (--cluster-enabled yes), slots given as `cluster
    create` gives ours, joined by CLUSTER MEET: their ports."""
    buses = [free_port() for _ in range(3)]
    nodes: list[ServerProcess] = []
    try:
        for bus in buses:
            nodes.append(start_redis(["--cluster-enabled", "yes", "--cluster-port", str(bus)]))
        conns = [redis.Redis(port=n.port) for n in nodes]
        for c, (first, last) in zip(conns, spread(3), strict=True):
            c.execute_command("CLUSTER ADDSLOTSRANGE", first, last)
        for n, bus in zip(nodes[1:], buses[1:], strict=True):
            conns[0].execute_command("CLUSTER MEET", "127.0.0.1", n.port, bus)
        for c in conns:
            until(
                lambda c=c: (
                    c.execute_command("CLUSTER INFO")["cluster_state"] == "ok"
                    and len(c.execute_command("CLUSTER SLOTS")) == 3
                ),
                30,
            )
        yield [n.port for n in nodes]
    finally:
        for n in nodes:
            n.stop()


GET_FOO = b"\"return redis.call('get','foo')\""
# (request words, as _wire sends them); foo is slot 12182 (the third node's), b 3300 and
# bar 5061 (both the first node's).
CASES: list[list[bytes]] = [
    [b"EVAL", GET_FOO, b"0"],
    [b"EVAL", GET_FOO, b"1", b"b"],
    [b"EVAL", GET_FOO, b"1", b"foo"],
    [b"EVAL", b"\"return redis.call('get','bar')\"", b"1", b"b"],
    [b"EVAL", b"\"return redis.call('mget','b','bar')\"", b"0"],
    [b"EVAL", b"\"return redis.pcall('get','foo')\"", b"0"],
    [b"EVAL", b"\"return redis.call('select','1')\"", b"0"],
    [b"EVAL", b"\"redis.call('set','{b}2','y'); return redis.call('get','foo')\"", b"1", b"b"],
    [b"GET", b"{b}2"],
    [b"EVALSHA", b"6b1bf486c81ceb7edf3c093f4c48582e38c0e791", b"0"],
    [b"FCALL", b"getfoo", b"1", b"b"],
    [b"FCALL_RO", b"getfoo", b"1", b"b"],
    # With a shebang (or in a function) the keys must also stay in one slot, unless
    # the script says allow-cross-slot-keys; EVAL without one may (Redis 7.0).
    [b"EVAL", b"\"#!lua\\nreturn redis.call('get','bar')\"", b"1", b"b"],
    [b"EVAL", b"\"#!lua\\nreturn redis.pcall('get','bar')\"", b"1", b"b"],
    [b"EVAL", b"\"#!lua\\nredis.call('get','b'); return redis.call('get','bar')\"", b"0"],
    [b"EVAL", b"\"#!lua\\nreturn redis.call('get','bar')\"", b"0"],
    [
        b"EVAL",
        b"\"#!lua flags=allow-cross-slot-keys\\nreturn redis.call('get','bar')\"",
        b"1",
        b"b",
    ],
    [b"EVAL", b'"#!lua flags=no-cluster\\nreturn 1"', b"0"],
    [b"FCALL", b"getbar", b"1", b"b"],
    [b"FCALL", b"getbar", b"0"],
    [b"FCALL", b"getbar2", b"1", b"b"],
    [b"GET", b"foo"],
    [b"MSET", b"b", b"1", b"bar", b"2"],
    [b"MULTI", b"GET", b"foo", b"EXEC"],
    [b"MULTI", b"SET", b"b", b"1", b"SET", b"bar", b"1", b"EXEC"],
    [b"SELECT", b"1"],
    [b"CLUSTER", b"keyslot", b"{b}2"],  # (_wire starts a command at each upper-case word)
]
LIBRARY = (
    "#!lua name=cl\n"
    "redis.register_function{function_name='getfoo', callback=function(keys, args)"
    " return redis.call('get', 'foo') end, flags={'no-writes'}}\n"
    "redis.register_function('getbar', function(keys, args) return redis.call('get', 'bar') end)\n"
    "redis.register_function{function_name='getbar2', callback=function(keys, args)"
    " return redis.call('get', 'bar') end, flags={'allow-cross-slot-keys'}}"
)


def _named(reply: bytes, ports: list[int]) -> bytes:
    for i, port in enumerate(ports):
        reply = reply.replace(b"127.0.0.1:%d" % port, b"127.0.0.1:<node %d>" % i)
    return reply


def test_script_and_routing_replies_as_a_redis_cluster(
    cluster: Cluster,  # noqa: F811
    redis_cluster: list[int],
) -> None:
    ours = _created(cluster)
    for ports in (ours, redis_cluster):
        assert redis.Redis(port=ports[0]).function_load(LIBRARY) == b"cl"
        assert redis.Redis(port=ports[0]).set("bar", "here")
    for words in CASES:
        theirs = _named(_wire(redis_cluster[0], *words), redis_cluster)
        got = _named(_wire(ours[0], *words), ours)
        assert got == theirs, words
    # The script's position in the error names the function as Redis does.
    assert b"script: getfoo, on @user_function:2." in _wire(
        ours[0], b"FCALL", b"getfoo", b"1", b"b"
    )


def _ids_named(reply: bytes, ports: list[int]) -> bytes:
    """A reply with each node's port and id named by the node's index."""
    for i, port in enumerate(ports):
        node_id = redis.Redis(port=port).execute_command("CLUSTER MYID")
        reply = reply.replace(node_id, b"<id %d>" % i).replace(
            b":%d\r\n" % port, b":<port %d>\r\n" % i
        )
    return reply


def test_cluster_slots_and_shards_as_a_redis_cluster(
    cluster: Cluster,  # noqa: F811
    redis_cluster: list[int],
) -> None:
    """What cluster clients read to find the masters (ioredis and redis-py: CLUSTER
    SLOTS) is the same bytes; CLUSTER SHARDS has Redis' fields in Redis' order."""
    ours = _created(cluster)
    assert _ids_named(_wire(ours[0], b"CLUSTER", b"slots"), ours) == _ids_named(
        _wire(redis_cluster[0], b"CLUSTER", b"slots"), redis_cluster
    )

    def shards(port: int) -> list[tuple[list[int], list[bytes]]]:
        raw: Any = _raw(port, "CLUSTER", "SHARDS")
        out = []
        for shard in raw:
            fields = _fields(shard)
            (node,) = fields[b"nodes"]
            out.append((list(fields[b"slots"]), list(_fields(node))))
        return sorted(out)

    assert shards(ours[0]) == shards(redis_cluster[0])
    assert shards(ours[0])[0] == (
        [0, 5460],
        [b"id", b"port", b"ip", b"endpoint", b"role", b"replication-offset", b"health"],
    )


DOWN_CASES: list[list[bytes]] = [
    [b"EVAL", GET_FOO, b"0"],
    [b"EVAL", GET_FOO, b"1", b"foo"],
    [b"EVAL", b"\"return redis.call('get','b')\"", b"0"],
    [b"EVAL", b"\"return redis.call('ping')\"", b"0"],
    [b"GET", b"foo"],
    [b"GET", b"b"],
]


def test_cluster_down_replies_as_a_redis_cluster(
    cluster: Cluster,  # noqa: F811
    redis_cluster: list[int],
) -> None:
    """The third node stops serving slot 16383 (Redis: CLUSTER DELSLOTS there; ours: a
    map without it): it is down (cluster_state:fail) and says so, in scripts too."""
    ours = _created(cluster)
    redis.Redis(port=redis_cluster[2]).execute_command("CLUSTER DELSLOTS", 16383)

    async def shrink() -> None:
        client = etcd_client(cluster.endpoints)
        try:
            found, revision = await read_map(client, cluster.name)
            assert found is not None
            shards = [Shard(s.node_id, s.host, s.port, list(s.ranges)) for s in found.shards]
            shards[2].ranges = [(10923, 16382)]
            await write_map(client, cluster.name, SlotMap(found.epoch + 1, shards), revision)
        finally:
            await client.close()

    asyncio.run(shrink())
    for port in (ours[2], redis_cluster[2]):
        until(lambda port=port: _state(port) == "fail", 20)
    for words in DOWN_CASES:
        theirs = _named(_wire(redis_cluster[2], *words), redis_cluster)
        got = _named(_wire(ours[2], *words), ours)
        assert got == theirs, words
    assert _wire(ours[2], b"EVAL", GET_FOO, b"0").startswith(
        b"-ERR Script attempted to execute a command while the cluster is down script: "
    )


def _state(port: int) -> str:
    info = redis.Redis(port=port, decode_responses=True).execute_command("CLUSTER INFO")
    return str(info["cluster_state"])
