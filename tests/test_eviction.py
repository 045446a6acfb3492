"""maxmemory and eviction (commands/evict.py, store/dataset.py).

Against redis-server, RESP2 and RESP3: the eviction settings as CONFIG sees them, and
what is deterministic in both servers: volatile-ttl evicting every key with a TTL,
soonest first (the `evicted` events in order), then refusing writes with Redis' OOM
error while keys without a TTL stay. Against ours alone: what each policy evicts
(recently or frequently used keys survive LRU and LFU, the volatile policies never
touch keys without a TTL), the used memory held under maxmemory, client-side caching
invalidations, the `evicted` version in history, and a restart rebuilding the keys
eviction left.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import Differ, ServerProcess, start_redis, start_temporalstore
from tests.resp_client import RawClient

OOM = b"-OOM command not allowed when used memory > 'maxmemory'.\r\n"
VALUE = b"x" * 1000


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[ServerProcess, ServerProcess]]:
    """A redis-server and a TemporalStore of this module's own (maxmemory changes)."""
    ref, ours = start_redis(), start_temporalstore()
    yield ref, ours
    ref.stop()
    ours.stop()


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def ediff(
    servers: tuple[ServerProcess, ServerProcess], request: pytest.FixtureRequest
) -> Iterator[Differ]:
    d = Differ(servers[0].port, servers[1].port, request.param)
    yield d
    for c in (d.ref, d.ours):
        c.call("CONFIG", "SET", "maxmemory", "0")
        c.call("CONFIG", "SET", "maxmemory-policy", "noeviction")
        c.call("CONFIG", "SET", "notify-keyspace-events", "")
    d.close()


@pytest.fixture
def ours(servers: tuple[ServerProcess, ServerProcess]) -> Iterator[RawClient]:
    c = RawClient(servers[1].port)
    c.call("FLUSHALL")
    c.call("CONFIG", "RESETSTAT")
    yield c
    c.call("CONFIG", "SET", "maxmemory", "0")
    c.call("CONFIG", "SET", "maxmemory-policy", "noeviction")
    c.call("CONFIG", "SET", "maxmemory-samples", "5")
    c.close()


def info_field(c: RawClient, name: str) -> int:
    text = c.call("INFO", "everything")
    return int(text.split(b"\r\n" + name.encode() + b":")[1].split(b"\r\n")[0])


def wait_evicted(c: RawClient, limit: int, keys: int = 0) -> None:
    """Until the eviction loop CONFIG SET maxmemory started has brought the used
    memory under `limit`, or evicted `keys` keys (or 5 s passed)."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if info_field(c, "used_memory") <= limit or (
            keys and info_field(c, "evicted_keys") >= keys
        ):
            return
        time.sleep(0.05)


def fill(c: RawClient, n: int, prefix: str = "k", ttl: int | None = None) -> None:
    for i in range(n):
        if ttl is None:
            c.call("SET", f"{prefix}:{i}", VALUE)
        else:
            c.call("SETEX", f"{prefix}:{i}", ttl, VALUE)


def existing(c: RawClient, keys: list[str]) -> set[str]:
    return {k for k in keys if c.call("EXISTS", k) == b":1\r\n"}


# -- against redis-server --------------------------------------------------------------------


def test_eviction_settings_match_redis(ediff: Differ) -> None:
    policies = "allkeys-lru allkeys-lfu allkeys-random volatile-lru volatile-lfu volatile-random"
    for policy in (*policies.split(), "volatile-ttl", "noeviction", "ALLKEYS-LRU", "lru"):
        ediff.check("CONFIG", "SET", "maxmemory-policy", policy)
        ediff.check("CONFIG", "GET", "maxmemory-policy")
    for value in ("1", "10", "64", "0", "65", "x"):
        ediff.check("CONFIG", "SET", "maxmemory-samples", value)
        ediff.check("CONFIG", "GET", "maxmemory-samples")
    for value in ("0", "100", "101", "-1", "10"):
        ediff.check("CONFIG", "SET", "maxmemory-eviction-tenacity", value)
        ediff.check("CONFIG", "GET", "maxmemory-eviction-tenacity")
    for value in ("yes", "no", "maybe"):
        ediff.check("CONFIG", "SET", "lazyfree-lazy-eviction", value)
        ediff.check("CONFIG", "GET", "lazyfree-lazy-eviction")
    ediff.check("CONFIG", "SET", "maxmemory-samples", "5")


def test_volatile_ttl_evicts_soonest_first_then_refuses(ediff: Differ) -> None:
    """Every key with a TTL is evicted, the soonest to expire first (the `evicted`
    events in that order, on both servers), keys without one stay, and writes then
    get Redis' OOM error (inside MULTI too) until maxmemory is raised."""
    ports = (ediff.ref.sock.getpeername()[1], ediff.ours.sock.getpeername()[1])
    subs = [RawClient(p) for p in ports]
    try:
        ediff.check("FLUSHALL")
        ediff.check("CONFIG", "RESETSTAT")
        ediff.check("CONFIG", "SET", "notify-keyspace-events", "Ee")
        for c in subs:
            c.call("PSUBSCRIBE", "__keyevent@*__:evicted")
        for i in range(3):
            ediff.check("SET", f"keep:{i}", "v")
        for name, ttl in (("v1", 500), ("v2", 100), ("v3", 300), ("v4", 200), ("v5", 400)):
            ediff.check("SETEX", name, ttl, "v")
        ediff.check("CONFIG", "SET", "maxmemory-samples", "10")
        ediff.check("CONFIG", "SET", "maxmemory-policy", "volatile-ttl")
        ediff.check("CONFIG", "SET", "maxmemory", "1")
        got = [[c.read_reply() for _ in range(5)] for c in subs]
        assert got[1] == got[0]
        assert [m.split(b"\r\n")[-2] for m in got[1]] == [b"v2", b"v4", b"v3", b"v5", b"v1"]
        ediff.check("DBSIZE")
        ediff.check("SET", "new", "v")
        ediff.check("GET", "keep:0")
        ediff.check("DEL", "keep:2")
        ediff.check("MULTI")
        ediff.check("SET", "new", "v")
        ediff.check("EXEC")
        ediff.check("CONFIG", "SET", "maxmemory", "0")
        ediff.check("SET", "new", "v")
        ref_stats, ours_stats = ediff.both("INFO", "stats")
        assert b"\r\nevicted_keys:5\r\n" in ref_stats
        assert b"\r\nevicted_keys:5\r\n" in ours_stats
        ediff.check("CONFIG", "SET", "maxmemory-samples", "5")
    finally:
        for c in subs:
            c.close()


def test_noeviction_refuses_writes_allows_reads(ediff: Differ) -> None:
    ediff.check("FLUSHALL")
    ediff.check("SET", "a", "1")
    ediff.check("SETEX", "b", 100, "2")
    ediff.check("CONFIG", "SET", "maxmemory", "1")
    for cmd in (("SET", "c", "3"), ("INCR", "a"), ("GET", "a"), ("EXISTS", "b"), ("DEL", "b")):
        ediff.check(*cmd)
    ediff.check("DBSIZE")
    ediff.check("CONFIG", "SET", "maxmemory", "0")


# -- against ours ----------------------------------------------------------------------------


def evict_100_of_400(c: RawClient, keys: list[str]) -> set[str]:
    """Set maxmemory about 100 keys under the used memory; the keys evicted."""
    limit = info_field(c, "used_memory") - 100 * 1100
    c.call("CONFIG", "SET", "maxmemory", limit)
    wait_evicted(c, limit)
    gone = set(keys) - existing(c, keys)
    assert 90 <= len(gone) <= 110
    assert info_field(c, "evicted_keys") == len(gone)
    return gone


def test_allkeys_lru_keeps_recently_used_keys(ours: RawClient) -> None:
    keys = [f"k:{i}" for i in range(400)]
    fill(ours, 400)
    time.sleep(1.2)  # the LRU clock counts whole seconds
    for k in keys[:200]:
        ours.call("GET", k)
    ours.call("CONFIG", "SET", "maxmemory-policy", "allkeys-lru")
    gone = evict_100_of_400(ours, keys)
    assert len(gone & set(keys[:200])) <= len(gone) // 10, "recently used keys were evicted"


def test_allkeys_lfu_keeps_frequently_used_keys(ours: RawClient) -> None:
    ours.call("CONFIG", "SET", "maxmemory-policy", "allkeys-lfu")
    keys = [f"k:{i}" for i in range(400)]
    fill(ours, 400)
    for _ in range(5):
        for k in keys[:200]:
            ours.call("GET", k)
    gone = evict_100_of_400(ours, keys)
    assert len(gone & set(keys[:200])) <= len(gone) // 10, "frequently used keys were evicted"


@pytest.mark.parametrize(
    "policy", ["volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl"]
)
def test_volatile_policies_never_evict_keys_without_ttl(ours: RawClient, policy: str) -> None:
    fill(ours, 100, "keep")
    fill(ours, 100, "vol", ttl=1000)
    ours.call("CONFIG", "SET", "maxmemory-policy", policy)
    limit = info_field(ours, "used_memory") - 150 * 1100
    ours.call("CONFIG", "SET", "maxmemory", limit)
    wait_evicted(ours, 0, keys=100)  # never under: it evicts what it may, then stops
    assert existing(ours, [f"keep:{i}" for i in range(100)]) == {f"keep:{i}" for i in range(100)}
    assert existing(ours, [f"vol:{i}" for i in range(100)]) == set()
    assert info_field(ours, "evicted_keys") == 100
    assert ours.call("SET", "more", "v") == OOM
    assert ours.call("GET", "keep:0") == b"$1000\r\n" + VALUE + b"\r\n"


def test_allkeys_random_holds_used_memory_under_maxmemory(ours: RawClient) -> None:
    ours.call("CONFIG", "SET", "maxmemory-policy", "allkeys-random")
    limit = info_field(ours, "used_memory") + 200 * 1024
    ours.call("CONFIG", "SET", "maxmemory", limit)
    for i in range(1000):
        assert ours.call("SET", f"k:{i}", VALUE) == b"+OK\r\n"
        if i % 100 == 99:
            # Evicting runs before each command: at most the last write is over.
            assert info_field(ours, "used_memory") <= limit + 1100
    assert 100 < int(ours.call("DBSIZE")[1:-2]) < 300
    assert info_field(ours, "evicted_keys") == 1000 - int(ours.call("DBSIZE")[1:-2])


def test_used_memory_moves_with_writes_and_deletes(ours: RawClient) -> None:
    base = info_field(ours, "used_memory")
    rss = info_field(ours, "used_memory_rss")
    assert info_field(ours, "used_memory_dataset") == 0
    assert rss > base // 2
    ours.call("SET", "s", b"x" * 100_000)
    ours.call("HSET", "h", *[f"f{i}" for i in range(2000)])
    grown = info_field(ours, "used_memory")
    assert 100_000 < grown - base < 400_000
    ours.call("DEL", "s", "h")
    assert info_field(ours, "used_memory") == base
    assert info_field(ours, "used_memory_dataset") == 0


def test_eviction_invalidates_tracked_keys(servers: tuple[ServerProcess, ServerProcess]) -> None:
    c, tracker = RawClient(servers[1].port), RawClient(servers[1].port)
    try:
        c.call("FLUSHALL")
        c.call("SET", "cached", "v")
        tracker.call("HELLO", "3")
        tracker.call("CLIENT", "TRACKING", "on")
        assert tracker.call("GET", "cached") == b"$1\r\nv\r\n"
        c.call("CONFIG", "SET", "maxmemory-policy", "allkeys-lru")
        c.call("CONFIG", "SET", "maxmemory", "1")
        assert tracker.read_reply() == b">2\r\n$10\r\ninvalidate\r\n*1\r\n$6\r\ncached\r\n"
    finally:
        c.call("CONFIG", "SET", "maxmemory", "0")
        c.call("CONFIG", "SET", "maxmemory-policy", "noeviction")
        c.close()
        tracker.close()


def test_evicted_key_is_a_version_in_history(ours: RawClient) -> None:
    ours.call("SET", "k", "v")
    ours.call("CONFIG", "SET", "maxmemory-policy", "allkeys-random")
    ours.call("CONFIG", "SET", "maxmemory", "1")
    deadline = time.monotonic() + 5
    while ours.call("EXISTS", "k") != b":0\r\n" and time.monotonic() < deadline:
        time.sleep(0.05)
    ours.call("CONFIG", "SET", "maxmemory", "0")
    history = ours.call("TS.HISTORY", "k")
    assert b"$7\r\nevicted\r\n" in history
    assert history.index(b"$3\r\nset\r\n") < history.index(b"$7\r\nevicted\r\n")


def test_restart_after_eviction_rebuilds_the_same_keys(tmp_path: Path) -> None:
    server = start_temporalstore(["--maxmemory-policy", "allkeys-lru"], workdir=tmp_path)
    try:
        c = RawClient(server.port)
        fill(c, 300)
        limit = info_field(c, "used_memory") - 100 * 1100
        c.call("CONFIG", "SET", "maxmemory", limit)
        wait_evicted(c, limit)
        left = sorted(c.call("KEYS", "*").split(b"\r\n")[2::2])
        assert 150 < len(left) < 250
        used = info_field(c, "used_memory_dataset")
        c.call("TS.WAITDURABLE", 5000)
        c.close()
        server.proc.kill()
        server.proc.wait()
    finally:
        server.stop()
    again = start_temporalstore(workdir=tmp_path)
    try:
        c = RawClient(again.port)
        assert sorted(c.call("KEYS", "*").split(b"\r\n")[2::2]) == left
        assert info_field(c, "used_memory_dataset") == used
        assert info_field(c, "evicted_keys") == 0
        c.close()
    finally:
        again.stop()
