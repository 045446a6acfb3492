"""What the bench items share: their settings, logging, statistics, the pipelined
loader and how a server describes itself. `bench.run` (the runner) and the item
modules (`bounded`, `replicas`, `memrestart`, `experiments`) import it; it imports
neither."""

from __future__ import annotations

import random
import re
import shlex
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.client import Client, encode
from bench.proc import Proc

TESTS = ["set", "get", "incr", "lpush", "hset", "zadd"]


PIPELINES = [1, 16]


BUCKET = "tsbench"


NO_CHECKPOINTS = (
    "--checkpoint-every-records",
    "1000000000",
    "--checkpoint-every-seconds",
    "1000000",
)


@dataclass
class Settings:
    # Runs per measurement: item 1 (the throughput targets, the noisiest) and the
    # restarts of items 5 and L take `runs`; items 2, 7, 9 and 10 take
    # `other_runs` (their median of 2 is the mean), which keeps `make bench` under 10
    # minutes. --runs N sets both.
    runs: int = 3
    other_runs: int = 2
    requests: int = 100_000  # item 1: SET and GET
    other_requests: int = 50_000  # item 1: INCR, LPUSH, HSET, ZADD
    # Redis at -P 16 gets 10x the requests: 100,000 take it under 0.1 s, too short to
    # measure (connection set-up and one scheduling hiccup would dominate).
    redis_pipelined_factor: int = 10
    # Ours at -P 16 gets 4x the requests for the same reason: INCR, LPUSH, HSET and
    # ZADD's 50,000 took ours about 0.13 s (redis' 500,000 about 0.35-0.4 s).
    ours_pipelined_factor: int = 4
    store_requests: int = 50_000  # item 2: async SET runs and every GET run
    sync_requests: int = 10_000  # item 2: sync-mode SET runs, 50 clients
    # Item 2, S3: SET at -P 1 by (clients, requests) in both modes, beside the 50-client
    # runs. One client in sync mode is set against one raw PUT (bench/putlat.py).
    sync_clients: tuple[tuple[int, int], ...] = ((1, 300), (500, 25_000))
    # How moto is started for items 2 and 6 (a key of bench.proc.MOTO_STARTS).
    moto: str = "keepalive"
    mem_keys: int = 1_000_000
    value_bytes: int = 100
    version_keys: int = 1_000_000  # item L: measured at the target's size, 1M x 10
    version_rounds: int = 10
    deep_versions: int = 100_000
    hash_fields: int = 1_000
    hash_versions: int = 10_000
    history_requests: int = 50_000
    hash_requests: int = 3_000
    profile_seconds: int = 8
    # Item L, item 5 with default checkpointing: records written (distinct keys), then
    # restarts.
    restart_sizes: tuple[int, ...] = (1_000_000, 10_000_000)
    # Item 5c: redis-benchmark's SETs over random keys (most overwrite one), then
    # restarts with default checkpointing.
    overwrite_sets: int = 2_000_000
    overwrite_keyspace: int = 1_000_000
    # Item 9 (history at bounded cost, bench/bounded.py).
    seal_writes: int = 50_000  # pipelined SETs per write measurement
    seal_keys: int = 10_000  # the "many keys" case
    pinned_versions: int = 50_000  # written after the seal, per case
    walk_string_versions: tuple[int, ...] = (1_000, 10_000, 100_000)
    # A hash gaining a field per version: TS.HISTORY WITHVALUES replies n(n+1)/2 fields.
    walk_hash_versions: tuple[int, ...] = (1_000, 2_000, 4_000)
    view_keys: int = 1_000_000  # TS.CHECKOUT AT and TS.DIFF
    view_connections: int = 100
    diff_calls: int = 30
    stall_keys: int = 200_000  # TS.RESTORE and TS.MERGE beside PINGs
    random_members: int = 1_000
    random_count: int = 5_000_000  # SRANDMEMBER/ZRANDMEMBER key -N (a 52 MiB reply)
    # Item 10 (replicas and failover, bench/replicas.py).
    # SETs per redis-benchmark run, with and without a replica, at -P 1 and at -P 16 (a
    # -P 16 run is over 3x as fast, and the lag sampler waits out each lag it samples).
    lag_requests: int = 50_000
    lag_requests_pipelined: int = 150_000
    lag_interval_ms: int = 10  # how often the replica's lag is sampled
    failover_rounds: int = 3
    failover_write_s: float = 2.0  # writing before each kill
    # Item 11m (a slot move, bench/cluster.py): this many keys in all in this many
    # slots, moved from one shard to the other.
    move_keys: int = 1_000_000
    move_slots: int = 1_000

    @classmethod
    def quick(cls) -> Settings:
        return cls(
            runs=1,
            other_runs=1,
            requests=20_000,
            other_requests=10_000,
            store_requests=10_000,
            sync_requests=2_000,
            sync_clients=((1, 100), (500, 10_000)),
            mem_keys=100_000,
            version_keys=10_000,
            deep_versions=10_000,
            hash_versions=1_000,
            history_requests=10_000,
            hash_requests=500,
            profile_seconds=3,
            restart_sizes=(100_000, 300_000),
            overwrite_sets=200_000,
            overwrite_keyspace=100_000,
            seal_writes=10_000,
            pinned_versions=10_000,
            walk_string_versions=(1_000, 3_000, 10_000),
            walk_hash_versions=(250, 500, 1_000),
            view_keys=100_000,
            stall_keys=20_000,
            random_count=1_000_000,
            lag_requests=20_000,
            lag_requests_pipelined=40_000,
            failover_rounds=2,
            failover_write_s=2.0,
            move_keys=100_000,
        )


def log(msg: str) -> None:
    print(f"[bench {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def guarded(part: str, name: str, fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """One case's results, or its error (the other cases of the part still run)."""
    try:
        return fn()
    except Exception as e:
        log(f"{part}: case {name} failed: {e!r}")
        return {"error": repr(e)}


def med(xs: list[float]) -> float:
    return float(statistics.median(xs)) if xs else float("nan")


def pct(xs: list[float], p: float) -> float:
    """Nearest-rank percentile."""
    if not xs:
        return float("nan")
    s = sorted(xs)
    k = max(0, min(len(s) - 1, int(-(-p * len(s) // 100)) - 1))
    return s[k]


def show_server(p: Proc, tmp: list[str] | None = None) -> str:
    """A server's command line with the per-run port and directories as placeholders."""
    out: list[str] = []
    root = str(Path(__file__).resolve().parent.parent) + "/"
    for a in p.argv:
        a = "$PORT" if a == str(p.port) else a
        a = a.replace(root, "")  # paths relative to the repository
        a = re.sub(r"/tmp/tsbench-[A-Za-z0-9_-]+", "$TMPDIR", a)
        a = re.sub(r"http://127\.0\.0\.1:\d+", "http://127.0.0.1:$MOTO_PORT", a)
        a = re.sub(r"s3://[^ ]+", "s3://" + BUCKET + "/$PREFIX", a)
        out.append(a)
    return shlex.join(out)


def _value(rng: random.Random, size: int) -> bytes:
    return rng.randbytes(size // 2 + 1).hex()[:size].encode()


def set_commands(keys: int, size: int, prefix: str = "key:", seed: int = 1) -> Iterator[bytes]:
    rng = random.Random(seed)
    for i in range(keys):
        yield encode([b"SET", b"%s%07d" % (prefix.encode(), i), _value(rng, size)])


def load(port: int, commands: Iterator[bytes]) -> tuple[int, float]:
    t0 = time.monotonic()
    with Client(port) as c:
        n = c.pipeline(commands)
    return n, time.monotonic() - t0


LOADER_DOC = (
    "bench loader (bench/client.py): `SET key:NNNNNNN <{size} random hex bytes>` for "
    "{keys} distinct keys, pipelined 1,000 commands deep over one connection"
)


def _persistence(port: int) -> dict[str, str]:
    with Client(port) as c:
        return c.info("persistence")


# `make bench` runs these; `make bench-long` runs L (10M records twice: several minutes)
# and the py-spy profile p (not a target; its 19 s at the last whole run).
DEFAULT_ITEMS = ["1", "2", "4", "5c", "7", "9", "10", "11", "11m"]
