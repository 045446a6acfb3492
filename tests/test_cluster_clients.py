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

from store.slots import key_slot, spread
from tests.reliability import sized
from tests.test_cluster import NON_LOCAL, Cluster, _created, cluster  # noqa: F401
from tests.test_ioredis import JS, _node

IO_KEYS = sized(10_000, 100_000)


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
