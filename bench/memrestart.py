"""Items 4 and 5 of `make bench` (memory, restart) and the long measurements that
`make bench-long` runs (`python -m bench.run --items L`).

- `item_memory_restart` (make bench): redis and ours load the item 4 keys (1,000,000
  by default) and are measured; ours, with no checkpoint, is then killed with -9 and
  restarted from its segments beside redis from an AOF of the same writes (item 5,
  the replay rate).
- `item_long` (make bench-long): ours keeping 10 versions of 1,000,000 keys (item 4 at
  the target's size, 10M writes) against redis holding the latest values, and restarts
  from a checkpoint plus segments at 1M and 10M records beside redis from its AOF. They
  load 10M records each, several minutes on the bench machine, too long for the
  10-minute `make bench`; its report keeps their last figures, dated.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

from bench import rb
from bench.client import Client, wait_flushed
from bench.proc import LOAD_CPU, PINNED, Proc, restart, start_ours, start_redis, tmpdir
from bench.shared import (
    LOADER_DOC,
    NO_CHECKPOINTS,
    Settings,
    _persistence,
    load,
    log,
    med,
    set_commands,
    show_server,
)

T = TypeVar("T")


def _memory(p: Proc) -> dict[str, int]:
    with Client(p.port) as c:
        used = int(c.info("memory")["used_memory"])
    return {"rss": p.rss_bytes(), "used_memory": used}


def _load_and_measure(srv: Proc, s: Settings) -> dict[str, Any]:
    empty = _memory(srv)
    n, secs = load(srv.port, set_commands(s.mem_keys, s.value_bytes))
    if srv.name == "temporalstore":
        wait_flushed(srv.port)
    full = _memory(srv)
    log(f"memory {srv.name}: {full['rss'] / 2**20:.0f} MiB RSS for {n:,} keys in {secs:.1f}s")
    return {"empty": empty, "loaded": full, "load_seconds": secs, "server": show_server(srv)}


# 4b's second run: history past this much in memory moves to the spill file
# (store.coldhistory); the checkpoint child runs on the load CPU, as in 5b.
HISTORY_MEMORY = "16mb"


def _settle(srv: Proc, timeout: float = 600.0) -> tuple[float, int]:
    """Until the server is idle: writes durable, no checkpoint running, history in
    memory within `history-memory` (when set). (seconds waited, peak RSS seen)."""
    wait_flushed(srv.port)
    t0 = time.monotonic()
    peak = srv.rss_bytes()
    with Client(srv.port) as c:
        while time.monotonic() - t0 < timeout:
            h, p = c.info("history"), c.info("persistence")
            peak = max(peak, srv.rss_bytes())
            budget = int(h["history_memory"])
            hot = int(h["history_hot_bytes"])
            if p["checkpoint_in_progress"] == "0" and (not budget or hot <= budget + (1 << 20)):
                return time.monotonic() - t0, peak
            time.sleep(0.5)
    raise RuntimeError("the server did not settle")


def _versions_run(s: Settings, flags: tuple[str, ...]) -> dict[str, Any]:
    """Ours keeps `version_rounds` versions of `version_keys` keys: RSS after the
    first round and, settled, after the last; the peak RSS seen after each round."""
    ver: dict[str, Any] = {}
    srv = start_ours(f"file://{tmpdir('ver')}", *flags)
    ver["server"] = show_server(srv)
    t0 = time.monotonic()
    peak = 0
    for rnd in range(1, s.version_rounds + 1):
        load(srv.port, set_commands(s.version_keys, s.value_bytes, seed=rnd))
        peak = max(peak, srv.rss_bytes())
        if rnd in (1, s.version_rounds):
            ver["load_seconds"] = time.monotonic() - t0
            waited, seen = _settle(srv)
            peak = max(peak, seen)
            ver[f"round{rnd}"] = {**_memory(srv), "settle_seconds": waited}
    with Client(srv.port) as c:
        ver["history"] = c.info("history")
    ver["peak_rss"] = peak
    srv.discard()
    extra_versions = s.version_keys * (s.version_rounds - 1)
    ver["bytes_per_extra_version"] = (
        ver[f"round{s.version_rounds}"]["rss"] - ver["round1"]["rss"]
    ) / extra_versions
    return ver


def _versions(s: Settings) -> dict[str, Any]:
    """Ours keeps `version_rounds` versions of `version_keys` keys, all in memory (the
    default) and with history past HISTORY_MEMORY moved out (store.coldhistory),
    against redis holding the latest values."""
    ver: dict[str, Any] = {"keys": s.version_keys, "rounds": s.version_rounds}
    ver["memory"] = _versions_run(s, ())
    ver["history_memory"] = HISTORY_MEMORY
    ver["tiered"] = _versions_run(
        s, ("--history-memory", HISTORY_MEMORY, *_child_cpus("--checkpoint-cpulist"))
    )
    # The figures of the default run where the report read them before.
    ver.update({k: v for k, v in ver["memory"].items() if k != "history"})
    r = start_redis("--appendonly", "no")
    load(r.port, set_commands(s.version_keys, s.value_bytes))
    ver["redis_latest"] = _memory(r)
    r.stop()
    last = f"round{s.version_rounds}"
    for run in (ver, ver["tiered"]):
        run["ratio_to_redis_latest"] = run[last]["rss"] / ver["redis_latest"]["rss"]
    log(
        f"versions: {s.version_keys:,} keys x {s.version_rounds}: ours "
        f"{ver[last]['rss'] / 2**20:.0f} MiB RSS in memory, "
        f"{ver['tiered'][last]['rss'] / 2**20:.0f} MiB with --history-memory "
        f"{HISTORY_MEMORY}, redis (latest) {ver['redis_latest']['rss'] / 2**20:.0f} MiB: "
        f"{ver['ratio_to_redis_latest']:.2f}x, {ver['tiered']['ratio_to_redis_latest']:.2f}x"
    )
    return ver


def item_memory_restart(s: Settings) -> dict[str, Any]:
    """Items 4 and 5 share the expensive part: ours loads the 1M keys once, is
    measured, then killed with -9 and restarted from its segments. The versions and
    the restarts from a checkpoint are `item_long`'s (make bench-long)."""
    mem: dict[str, Any] = {"keys": s.mem_keys, "value_bytes": s.value_bytes}
    mem["loader"] = LOADER_DOC.format(size=s.value_bytes, keys=f"{s.mem_keys:,}")
    redis = start_redis("--appendonly", "no")
    mem["redis"] = _load_and_measure(redis, s)
    redis.stop()
    ours = start_ours(f"file://{tmpdir('replay')}", *NO_CHECKPOINTS)
    mem["ours"] = _load_and_measure(ours, s)

    rs: dict[str, Any] = {"records": s.mem_keys}
    rs["written_lsn"] = int(_persistence(ours.port)["last_lsn"])
    rs["ours_server"] = show_server(ours)
    ours.kill9()
    redis, rs["aof_bytes"], _keys, _loaded = _aof_redis(_item4_loader(s.mem_keys, s))
    rs["redis_server"] = show_server(redis)
    ours_runs, redis_runs = _restarts(s, ours, redis, s.mem_keys, "segments")
    serving = med([r["serving_s"] for r in ours_runs])
    replay_s = med([r["replay_seconds"] for r in ours_runs])
    replayed = ours_runs[0]["replay_records"]
    fixed = max(0.0, serving - replay_s)  # interpreter, imports, opening storage
    rate = replayed / replay_s if replay_s > 0 else float("nan")
    rs.update(
        {
            "ours_runs": ours_runs,
            "redis_runs": redis_runs,
            "ours_serving_s": serving,
            "ours_replay_s": replay_s,
            "ours_replay_records": replayed,
            "ours_records_per_s_replay": rate,
            "ours_records_per_s_end_to_end": replayed / serving,
            "redis_serving_s": med(redis_runs),
            "redis_records_per_s_end_to_end": s.mem_keys / med(redis_runs),
            "ours_fixed_startup_s": fixed,
        }
    )
    return {"memory": mem, "restart": rs}


def item_long(s: Settings) -> dict[str, Any]:
    """make bench-long: 1M keys x 10 versions, and restarts from a checkpoint plus
    segments at each of `restart_sizes` (1M and 10M records)."""
    out: dict[str, Any] = {}
    try:
        out["versions"] = _versions(s)
    except Exception as e:  # the restarts still run
        log(f"long: versions failed: {e!r}")
        out["versions"] = {"error": repr(e)}
    out["checkpoint_restart"] = {
        "sizes": [_checkpoint_restart(s, n) for n in s.restart_sizes],
        "loader": LOADER_DOC.format(size=s.value_bytes, keys="N"),
    }
    return out


def _aof_redis(loader: Callable[[int], T], *flags: str) -> tuple[Proc, int, int, T]:
    """redis-server with an AOF of what `loader(port)` wrote, killed once the AOF is
    written: (the server, the AOF's bytes, the keys it held, what `loader` returned)."""
    aof_dir = tmpdir("aof")
    redis = start_redis("--appendonly", "yes", "--appendfsync", "no", *flags, workdir=aof_dir)
    loaded = loader(redis.port)
    with Client(redis.port) as c:
        while c.info("persistence").get("aof_rewrite_in_progress", "0") != "0":
            time.sleep(0.1)
    time.sleep(1.5)  # appendfsync no: the AOF is written at once, fsync'd within ~1 s
    keys = _dbsize(redis)
    redis.kill9()
    return redis, sum(f.stat().st_size for f in aof_dir.rglob("*") if f.is_file()), keys, loaded


def _item4_loader(records: int, s: Settings) -> Callable[[int], tuple[int, float]]:
    """The item 4 loader's `records` SETs, for `_aof_redis`."""
    return lambda port: load(port, set_commands(records, s.value_bytes))


def _restarts(
    s: Settings, ours: Proc, redis: Proc, records: int, what: str, redis_records: int = -1
) -> tuple[list[dict[str, Any]], list[float]]:
    """Restart both (killed) servers `s.runs` times each, alternating, each timed from
    process creation to the first PONG and checked to hold `records` keys (redis
    `redis_records`, where it held another count)."""
    want = {"ours": records, "redis": records if redis_records < 0 else redis_records}
    ours_runs: list[dict[str, Any]] = []
    redis_runs: list[float] = []
    for rep in range(s.runs):
        for kind in ["ours", "redis"] if rep % 2 == 0 else ["redis", "ours"]:
            if kind == "ours":
                srv = ours = restart(ours)
            else:
                srv = redis = restart(redis)
            keys = _dbsize(srv)
            if keys != want[kind]:
                raise RuntimeError(f"{srv.name} came back with {keys} keys, not {want[kind]}")
            if kind == "ours":
                p = _persistence(ours.port)
                ours_runs.append(
                    {
                        "serving_s": ours.serving_s,
                        "checkpoint_lsn": int(p["last_checkpoint_lsn"]),
                        "replay_records": int(p["replay_records"]),
                        "replay_seconds": float(p["replay_seconds"]),
                        "rss": ours.rss_bytes(),
                    }
                )
            else:
                redis_runs.append(redis.serving_s)
            srv.kill9()
        log(f"restart ({what}, {records:,} records) run {rep + 1}/{s.runs} done")
    return ours_runs, redis_runs


def _child_cpus(flag: str) -> tuple[str, ...]:
    """`flag LOAD_CPU` where servers are pinned (nothing otherwise)."""
    return (flag, str(LOAD_CPU)) if PINNED else ()


def _checkpoint_restart(s: Settings, records: int) -> dict[str, Any]:
    """Ours with its default checkpointing (a checkpoint every 1,000,000 records, built
    by a forked child) takes `records` SETs of distinct keys, is killed with -9 once
    they are durable, and restarts from the newest checkpoint plus the segments after
    it; redis restarts from an AOF of the same writes. Restarts alternate. Both
    servers' children (ours: checkpoints; redis: AOF rewrites and saves) run on the
    load CPU, as `bgsave_cpulist` places them: pinned with the server, a checkpoint
    shares its core with the load and falls far behind the log."""
    ours = start_ours(f"file://{tmpdir('ckpt')}", *_child_cpus("--checkpoint-cpulist"))
    _n, load_s = load(ours.port, set_commands(records, s.value_bytes))
    wait_flushed(ours.port, timeout=900)
    p = _persistence(ours.port)
    out: dict[str, Any] = {
        "records": records,
        "ours_load_s": load_s,
        "written_lsn": int(p["last_lsn"]),
        "checkpoints_written": int(p["checkpoints_written"]),
        "ours_server": show_server(ours),
    }
    ours.kill9()
    children = (*_child_cpus("--aof_rewrite_cpulist"), *_child_cpus("--bgsave_cpulist"))
    redis, out["aof_bytes"], _keys, _loaded = _aof_redis(_item4_loader(records, s), *children)
    out["redis_server"] = show_server(redis)
    ours_runs, redis_runs = _restarts(s, ours, redis, records, "checkpoint")
    serving = med([r["serving_s"] for r in ours_runs])
    out.update(
        {
            "ours_runs": ours_runs,
            "redis_runs": redis_runs,
            "ours_serving_s": serving,
            "ours_records_per_s": out["written_lsn"] / serving,
            "redis_serving_s": med(redis_runs),
            "redis_records_per_s": records / med(redis_runs),
        }
    )
    return out


def _overwrite_load(port: int, s: Settings) -> tuple[list[str], float]:
    """`redis-benchmark -t set -n 2000000 -r 1000000 -P 16` (50 clients, 3-byte
    values) against `port`: (its command, seconds)."""
    sets = s.overwrite_sets
    a = rb.argv(
        port,
        requests=sets,
        pipeline=16,
        tests="set",
        extra=("-r", str(s.overwrite_keyspace)),
    )
    t0 = time.monotonic()
    rb.run(a, timeout=900)
    return a, time.monotonic() - t0


def _dbsize(p: Proc) -> int:
    with Client(p.port) as c:
        n: int = c.call("DBSIZE")
    return n


def item_overwrite_restart(s: Settings) -> dict[str, Any]:
    """Item 5c: both servers take redis-benchmark's 2M SETs over 1M random keys (most
    overwrite one), then are killed with -9 and restarted, alternating, timed to the
    first PONG and checked to hold the keys they held. Ours with its default
    checkpointing, redis from its AOF (with its default RDB preamble); both servers'
    children (checkpoints; AOF rewrites and saves) on the load CPU, as in 5b. Each
    is killed once nothing is in flight: ours with every write durable and no
    checkpoint running, redis with no AOF rewrite running and its AOF written."""
    out: dict[str, Any] = {"sets": s.overwrite_sets, "keyspace": s.overwrite_keyspace}
    ours = start_ours(f"file://{tmpdir('ovw')}", *_child_cpus("--checkpoint-cpulist"))
    a, out["ours_load_s"] = _overwrite_load(ours.port, s)
    out["loader"] = rb.show(a)
    _settle(ours, timeout=900)
    p = _persistence(ours.port)
    out["written_lsn"] = int(p["last_lsn"])
    out["checkpoints_written"] = int(p["checkpoints_written"])
    out["last_checkpoint_lsn"] = int(p["last_checkpoint_lsn"])
    keys = out["keys"] = _dbsize(ours)
    out["ours_server"] = show_server(ours)
    ours.kill9()

    children = (*_child_cpus("--aof_rewrite_cpulist"), *_child_cpus("--bgsave_cpulist"))
    redis, out["aof_bytes"], out["redis_keys"], (_a, out["redis_load_s"]) = _aof_redis(
        lambda port: _overwrite_load(port, s), *children
    )
    out["redis_server"] = show_server(redis)
    log(
        f"overwrite restart: ours {keys:,} keys, LSN {out['written_lsn']:,}, checkpoint "
        f"at {out['last_checkpoint_lsn']:,}; redis {out['redis_keys']:,} keys"
    )
    ours_runs, redis_runs = _restarts(s, ours, redis, keys, "overwrites", out["redis_keys"])
    out.update(
        {
            "ours_runs": ours_runs,
            "redis_runs": redis_runs,
            "ours_serving_s": med([r["serving_s"] for r in ours_runs]),
            "redis_serving_s": med(redis_runs),
        }
    )
    return out
