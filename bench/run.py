"""`make bench`: TemporalStore side by side with a real redis-server, in one run.

Every server is started here on a free port and pinned to CPU 0; redis-benchmark,
the pipelined loader, the INFO samplers and moto (standing in for remote S3) run on
CPU 1. Runs of the two servers alternate so drift affects both alike, and tables
show medians of --runs runs. Writes docs/benchmarks.md (keeping its hand-written
"where the time goes" section) and bench-results.json.

    python -m bench.run                 # what `make bench` runs: every item but L and p
    python -m bench.run --quick         # small sizes, one run: checks the suite itself
    python -m bench.run --items 1,7     # a subset: rewrites only its sections of the report
    python -m bench.run --items L,p     # `make bench-long`: 1M keys x 10 versions, restarts
                                        # from a checkpoint at 1M and 10M records, the profile
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict
from pathlib import Path
from typing import Any

from bench import rb
from bench.client import Client, Sampler, encode, wait_flushed
from bench.proc import (
    CORES,
    LOAD_CPU,
    MOTO_STARTS,
    PINNED,
    REPO,
    SERVER_CPU,
    create_bucket,
    pin,
    pin_self,
    start_moto,
    start_ours,
    start_redis,
    tmpdir,
)
from bench.shared import (
    BUCKET,
    DEFAULT_ITEMS,
    PIPELINES,
    TESTS,
    Settings,
    _persistence,
    _value,
    load,
    log,
    med,
    pct,
    show_server,
)

# -- 1, 3, 8: throughput, latency, flush lag ----------------------------------------------


def item_throughput(s: Settings) -> dict[str, Any]:
    rows: dict[str, dict[str, dict[str, list[dict[str, Any]]]]] = {
        str(p): {t: {"redis": [], "ours": []} for t in TESTS} for p in PIPELINES
    }
    lag: dict[str, list[float]] = {str(p): [] for p in PIPELINES}
    commands: dict[str, str] = {}
    for rep in range(s.runs):
        for p in PIPELINES:
            # Both servers run side by side (each on a fresh store, the idle one costs
            # nothing) and each test runs on one, then the other, the order alternating:
            # paired runs seconds apart, so drift on the machine hits both alike.
            servers = {
                "redis": start_redis("--appendonly", "no"),
                "ours": start_ours(f"file://{tmpdir('ours')}"),
            }
            for kind, srv in servers.items():
                commands[f"server_{kind}"] = show_server(srv)
            for i, t in enumerate(TESTS):
                order = ["redis", "ours"] if (rep + i) % 2 == 0 else ["ours", "redis"]
                for kind in order:
                    srv = servers[kind]
                    n = s.requests if t in ("set", "get") else s.other_requests
                    if p > 1:
                        n *= (
                            s.redis_pipelined_factor if kind == "redis" else s.ours_pipelined_factor
                        )
                    a = rb.argv(srv.port, requests=n, pipeline=p, tests=t)
                    commands[f"P{p}_{t}_{kind}"] = rb.show(a)
                    sampler = None
                    if kind == "ours" and t == "set":
                        sampler = Sampler(srv.port, "persistence", "flush_lag_ms")
                        sampler.start()
                    t0, c0 = time.monotonic(), srv.cpu_seconds()
                    try:
                        (row,) = rb.run(a)
                    finally:
                        if sampler is not None:
                            lag[str(p)] += sampler.stop()
                    busy = (srv.cpu_seconds() - c0) / (time.monotonic() - t0)
                    rows[str(p)][t][kind].append(row.as_dict() | {"server_cpu": busy})
            for srv in servers.values():
                srv.discard()
            log(f"throughput run {rep + 1}/{s.runs} -P {p} done")
    summary: dict[str, Any] = {}
    for p in PIPELINES:
        for t in TESTS:
            r = rows[str(p)][t]
            mr = med([x["rps"] for x in r["redis"]])
            mo = med([x["rps"] for x in r["ours"]])
            summary[f"P{p}:{t}"] = {
                "redis_rps": mr,
                "ours_rps": mo,
                "ratio": mo / mr,
                "run_ratios": [
                    o["rps"] / q["rps"] for o, q in zip(r["ours"], r["redis"], strict=True)
                ],
                "redis_cpu": med([x["server_cpu"] for x in r["redis"]]),
                "ours_cpu": med([x["server_cpu"] for x in r["ours"]]),
                "redis_p50_ms": med([x["p50_ms"] for x in r["redis"]]),
                "redis_p99_ms": med([x["p99_ms"] for x in r["redis"]]),
                "ours_p50_ms": med([x["p50_ms"] for x in r["ours"]]),
                "ours_p99_ms": med([x["p99_ms"] for x in r["ours"]]),
            }
    flush_lag = {
        f"P{p}": {
            "samples": len(lag[str(p)]),
            "p50_ms": pct(lag[str(p)], 50),
            "p99_ms": pct(lag[str(p)], 99),
            "max_ms": max(lag[str(p)], default=float("nan")),
        }
        for p in PIPELINES
    }
    return {
        "runs": rows,
        "summary": summary,
        "flush_lag": flush_lag,
        "commands": commands,
        "requests": s.requests,
        "other_requests": s.other_requests,
        "redis_pipelined_factor": s.redis_pipelined_factor,
        "ours_pipelined_factor": s.ours_pipelined_factor,
    }


# -- 2, 6: what durability costs; sync mode ----------------------------------------------

STORE_CONFIGS = ["file-async", "s3-async", "s3-sync", "file-sync"]


PAIRED_ROUNDS = 5
"""Item 2: rounds of 1-client sync SETs, each followed by as many raw PUTs."""


def _raw_puts(storage: str, endpoint: str, size: int, count: int) -> tuple[str, dict[str, Any]]:
    """(command, {"p50_ms", "p99_ms", "count"}) of `count` PUTs of `size` bytes, one at a
    time, through the server's object store client, pinned to the server's CPU."""
    a = pin(SERVER_CPU, [sys.executable, "-m", "bench.putlat", "--storage", storage])
    a += ["--endpoint", endpoint, "--size", str(size), "--count", str(count)]
    out = subprocess.run(a, capture_output=True, text=True, check=True, timeout=600, cwd=REPO)
    root = str(REPO) + "/"
    shown = [x.replace(endpoint, "http://127.0.0.1:$MOTO_PORT").replace(root, "") for x in a]
    shown[shown.index("--storage") + 1] = f"s3://{BUCKET}/$PREFIX"
    return shlex.join(shown), json.loads(out.stdout)


def _costs(rs: list[dict[str, Any]]) -> dict[str, float]:
    """Medians over S3 runs: the server's CPU microseconds per write, moto's CPU
    milliseconds per PUT, PUTs per second (none for other runs)."""
    rs = [r for r in rs if "server_cpu_s" in r and r.get("writes") and r.get("puts")]
    if not rs:
        return {}
    return {
        "server_us_per_write": med([r["server_cpu_s"] / r["writes"] * 1e6 for r in rs]),
        "moto_ms_per_put": med([r["moto_cpu_s"] / r["puts"] * 1e3 for r in rs]),
        "puts_per_s": med([r["puts"] / r["wall_s"] for r in rs]),
        "server_cpu_share": med([r["server_cpu_s"] / r["wall_s"] for r in rs]),
        "moto_cpu_share": med([r["moto_cpu_s"] / r["wall_s"] for r in rs]),
        "put_limit": med([float(r.get("put_limit", 0)) for r in rs]),
        "limit_lowered": med([float(r.get("limit_lowered", 0)) for r in rs]),
    }


def item_durability(s: Settings, sync_only: bool = False) -> dict[str, Any]:
    """Item 2 (every storage and durability mode) with item 6 (sync mode against S3);
    `sync_only`: item 6 alone (S3, -P 1, the client counts of `sync_clients`)."""
    configs = ["s3-async", "s3-sync"] if sync_only else STORE_CONFIGS
    moto = start_moto(s.moto)
    create_bucket(moto, BUCKET)
    endpoint = f"http://127.0.0.1:{moto.port}"
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {c: {} for c in configs}
    lag: dict[str, list[float]] = {c: [] for c in configs if c.endswith("async")}
    puts: list[dict[str, Any]] = []
    commands: dict[str, str] = {}
    try:
        for rep in range(s.other_runs):
            k = rep % len(configs)
            order = configs[k:] + configs[:k]
            for cfg in order:
                medium, mode = cfg.split("-")
                flags: list[str] = ["--durability", mode]
                if medium == "s3":
                    storage = f"s3://{BUCKET}/{cfg}-{rep}"
                    flags += ["--s3-endpoint-url", endpoint]
                else:
                    storage = f"file://{tmpdir(cfg)}"
                srv = start_ours(storage, *flags)
                commands[f"server_{cfg}"] = show_server(srv)
                for p in [1] if sync_only else PIPELINES:
                    sweep = [(50, s.sync_requests if mode == "sync" else s.store_requests)]
                    if sync_only:
                        sweep = []
                    if medium == "s3" and p == 1:
                        sweep += list(s.sync_clients)
                    for clients, n in sweep:
                        # One client in sync mode alternates with raw PUTs, in rounds, so
                        # that both see the machine alike (it is shared and noisy).
                        paired = cfg == "s3-sync" and clients == 1
                        rounds = PAIRED_ROUNDS if paired else 1
                        a = rb.argv(
                            srv.port, clients=clients, requests=n // rounds, pipeline=p, tests="set"
                        )
                        commands[f"set_c{clients}_P{p}_{mode}"] = rb.show(a)
                        for rnd in range(rounds):
                            before = _persistence(srv.port)
                            sampler = None
                            if mode == "async":
                                sampler = Sampler(srv.port, "persistence", "flush_lag_ms")
                                sampler.start()
                            cpu0 = (srv.cpu_seconds(), moto.cpu_seconds(), time.monotonic())
                            try:
                                (row,) = rb.run(a)
                            finally:
                                if sampler is not None:
                                    lag[cfg] += sampler.stop()
                            # What the run cost each process: the server's CPU per
                            # write and moto's per PUT show which side limits.
                            cpu = (srv.cpu_seconds(), moto.cpu_seconds(), time.monotonic())
                            if mode == "async":
                                wait_flushed(srv.port)
                            after = _persistence(srv.port)
                            writes = int(after["last_lsn"]) - int(before["last_lsn"])
                            put_n = int(after["object_puts"]) - int(before["object_puts"])
                            d = row.as_dict() | {"writes": writes, "puts": put_n}
                            if medium == "s3":
                                d |= {
                                    "server_cpu_s": cpu[0] - cpu0[0],
                                    "moto_cpu_s": cpu[1] - cpu0[1],
                                    "wall_s": cpu[2] - cpu0[2],
                                    # PutLimit's PUTs in flight at the end, and how
                                    # often it lowered them during the run.
                                    "put_limit": int(after.get("puts_in_flight_limit", 0)),
                                    "limit_lowered": int(after.get("puts_in_flight_lowered", 0))
                                    - int(before.get("puts_in_flight_lowered", 0)),
                                }
                            runs[cfg].setdefault(f"set:c{clients}:P{p}", []).append(d)
                            if paired:
                                # Raw PUTs of the size of the segments this round wrote.
                                segs = int(after["segments_written"]) - int(
                                    before["segments_written"]
                                )
                                size = (
                                    int(after["bytes_written_compressed"])
                                    - int(before["bytes_written_compressed"])
                                ) // max(1, segs)
                                show, got = _raw_puts(
                                    f"s3://{BUCKET}/putlat-{rep}-{rnd}", endpoint, size, n // rounds
                                )
                                commands["raw_put"] = show
                                puts.append(got | {"bytes": size, "sync_p50_ms": row.p50_ms})
                    if sync_only:
                        continue
                    a = rb.argv(srv.port, requests=s.store_requests, pipeline=p, tests="get")
                    commands[f"get_P{p}"] = rb.show(a)
                    (row,) = rb.run(a)
                    runs[cfg].setdefault(f"get:c50:P{p}", []).append(row.as_dict())
                srv.discard()
                log(f"durability run {rep + 1}/{s.other_runs} {cfg} done")
    finally:
        moto.stop()
    summary: dict[str, dict[str, Any]] = {}
    for cfg, by in runs.items():
        for key, rs in by.items():
            summary.setdefault(cfg, {})[key] = {
                "rps": med([r["rps"] for r in rs]),
                "p50_ms": med([r["p50_ms"] for r in rs]),
                "p99_ms": med([r["p99_ms"] for r in rs]),
                "puts_per_write": (
                    med([r["puts"] / r["writes"] for r in rs if r.get("writes")])
                    if "puts" in rs[0]
                    else None
                ),
                **_costs(rs),
            }
    flush_lag = {
        cfg: {"samples": len(v), "p50_ms": pct(v, 50), "p99_ms": pct(v, 99)}
        for cfg, v in lag.items()
    }
    return {
        "runs": runs,
        "summary": summary,
        "flush_lag": flush_lag,
        "raw_put": {
            "runs": puts,
            "p50_ms": med([r["p50_ms"] for r in puts]),
            "p99_ms": med([r["p99_ms"] for r in puts]),
            "bytes": med([r["bytes"] for r in puts]),
            # Each round's sync p50 over its own raw-PUT p50, then the median.
            "sync_over_put": med([r["sync_p50_ms"] / r["p50_ms"] for r in puts]),
        },
        "commands": commands,
        "moto": show_server(moto),
    }


# -- 7: history ---------------------------------------------------------------------------------


def _ts_version(port: int) -> int:
    with Client(port) as c:
        v: int = c.call("TS.VERSION")
        return v


def item_history(s: Settings) -> dict[str, Any]:
    srv = start_ours(f"file://{tmpdir('hist')}", "--history", "all")
    out: dict[str, Any] = {"server": show_server(srv)}
    # A string key with `deep_versions` versions.
    v0 = _ts_version(srv.port)
    rng = random.Random(7)
    load(
        srv.port,
        (encode([b"SET", b"deep:str", _value(rng, s.value_bytes)]) for _ in range(s.deep_versions)),
    )
    v1 = _ts_version(srv.port)
    if v1 - v0 != s.deep_versions:
        raise RuntimeError(f"expected {s.deep_versions} versions, LSN moved {v1 - v0}")
    # A hash of `hash_fields` fields with `hash_versions` versions.
    h0 = _ts_version(srv.port)
    first = [b"HSET", b"deep:hash"]
    for i in range(s.hash_fields):
        first += [b"f%04d" % i, _value(rng, 20)]

    def hash_writes() -> Iterator[bytes]:
        yield encode(first)
        for j in range(1, s.hash_versions):
            yield encode([b"HSET", b"deep:hash", b"f%04d" % (j % s.hash_fields), b"v%07d" % j])

    load(srv.port, hash_writes())
    h1 = _ts_version(srv.port)
    if h1 - h0 != s.hash_versions:
        raise RuntimeError(f"expected {s.hash_versions} hash versions, LSN moved {h1 - h0}")
    wait_flushed(srv.port)
    deep = s.deep_versions // 20  # the 5,000th of 100,000 versions: 95,000 newer ones
    mid = s.deep_versions // 2
    hdeep = s.hash_versions // 2
    cases: list[tuple[str, list[str], int]] = [
        ("GET deep:str", ["GET", "deep:str"], s.history_requests),
        (
            f"TS.ASOF deep:str VERSION <version {deep:,}>",
            ["TS.ASOF", "deep:str", "VERSION", str(v0 + deep)],
            s.history_requests,
        ),
        (
            f"TS.ASOF deep:str VERSION <version {mid:,}>",
            ["TS.ASOF", "deep:str", "VERSION", str(v0 + mid)],
            s.history_requests,
        ),
        ("HGETALL deep:hash", ["HGETALL", "deep:hash"], s.hash_requests),
        (
            f"TS.ASOF deep:hash VERSION <version {hdeep:,}>",
            ["TS.ASOF", "deep:hash", "VERSION", str(h0 + hdeep)],
            s.hash_requests,
        ),
    ]
    # Each command answers correctly before it is timed.
    with Client(srv.port) as c:
        for _name, cmd, _n in cases:
            c.call(*cmd)
        if c.call("TS.ASOF", "deep:str", "VERSION", str(v0 + deep)) is None:
            raise RuntimeError("TS.ASOF found no value at the deep version")
        old_hash = c.call("TS.ASOF", "deep:hash", "VERSION", str(h0 + hdeep))
        if len(old_hash) != 2 * s.hash_fields:
            raise RuntimeError(f"TS.ASOF hash has {len(old_hash) // 2} fields")
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name, _c, _n in cases}
    commands: dict[str, str] = {}
    for rep in range(s.other_runs):
        seq = cases if rep % 2 == 0 else list(reversed(cases))
        for name, cmd, n in seq:
            a = rb.argv(srv.port, requests=n, command=cmd)
            commands[name] = rb.show(a)
            (row,) = rb.run(a)
            runs[name].append(row.as_dict())
        log(f"history run {rep + 1}/{s.other_runs} done")
    srv.discard()
    summary = {
        name: {"rps": med([r["rps"] for r in rs]), "p99_ms": med([r["p99_ms"] for r in rs])}
        for name, rs in runs.items()
    }
    names = [c[0] for c in cases]
    out.update(
        {
            "deep_versions": s.deep_versions,
            "hash_fields": s.hash_fields,
            "hash_versions": s.hash_versions,
            "runs": runs,
            "summary": summary,
            "commands": commands,
            "str_get": names[0],
            "str_deep": names[1],
            "str_mid": names[2],
            "hash_get": names[3],
            "hash_deep": names[4],
            "ratio_str_deep": summary[names[1]]["rps"] / summary[names[0]]["rps"],
            "ratio_str_mid": summary[names[2]]["rps"] / summary[names[0]]["rps"],
            "ratio_hash_deep": summary[names[4]]["rps"] / summary[names[3]]["rps"],
        }
    )
    return out


# -- profile --------------------------------------------------------------------------------


def item_profile(s: Settings) -> dict[str, Any]:
    from bench.profile import profile_set_load

    return {"profile": profile_set_load(s.profile_seconds)}


def item_bounded(s: Settings) -> dict[str, Any]:
    from bench.bounded import item_bounded as run_item

    return run_item(s)


def item_replicas(s: Settings) -> dict[str, Any]:
    from bench.replicas import item_replicas as run_item

    return run_item(s)


# -- driver ---------------------------------------------------------------------------------------


def item_cluster(s: Settings) -> dict[str, Any]:
    from bench.cluster import item_cluster as run_item

    return run_item(s)


def item_cluster_move(s: Settings) -> dict[str, Any]:
    from bench.cluster import item_cluster_move as run_item

    return run_item(s)


def item_memory_restart(s: Settings) -> dict[str, Any]:
    from bench.memrestart import item_memory_restart as run_item

    return run_item(s)


def item_long(s: Settings) -> dict[str, Any]:
    from bench.memrestart import item_long as run_item

    return run_item(s)


def item_overwrite_restart(s: Settings) -> dict[str, Any]:
    from bench.memrestart import item_overwrite_restart as run_item

    return {"overwrite_restart": run_item(s)}


# Each returns its named sections of the results.
ITEMS: dict[str, tuple[str, Callable[[Settings], dict[str, Any]]]] = {
    "1": (
        "throughput, latency, flush lag (items 1, 3, 8)",
        lambda s: {"throughput": item_throughput(s)},
    ),
    "2": ("durability and sync mode (items 2, 6)", lambda s: {"durability": item_durability(s)}),
    "6": ("sync mode against S3 (item 6)", lambda s: {"sync": item_durability(s, sync_only=True)}),
    "4": ("memory and restart (items 4, 5)", item_memory_restart),
    "5c": ("restart after overwriting SETs (item 5c)", item_overwrite_restart),
    "7": ("history (item 7)", lambda s: {"history": item_history(s)}),
    "9": ("history at bounded cost (item 9, issue 11)", item_bounded),
    "10": ("replicas and failover (item 10, issue 12)", item_replicas),
    "11": ("cluster mode, 1 and 2 shards (item 11, issue 28)", item_cluster),
    "11m": ("moving 1,000 slots holding 1M keys (item 11m, issue 28)", item_cluster_move),
    "p": ("profile", item_profile),
    "L": (
        "long: 1M keys x 10 versions, restart from a checkpoint (items 4 and 5, make bench-long)",
        item_long,
    ),
}
SECTIONS = {
    "1": ["throughput"],
    "2": ["durability"],
    "6": ["sync"],
    "4": ["memory", "restart"],
    "5c": ["overwrite_restart"],
    "7": ["history"],
    "9": ["bounded"],
    "10": ["replicas"],
    "11": ["cluster"],
    "11m": ["cluster_move"],
    "p": ["profile"],
    "L": ["versions", "checkpoint_restart"],
}


class LoadMeter:
    """CPU time the rest of the machine used while a part ran: all busy time in
    /proc/stat minus this runner's and its (reaped) children's CPU time. Other
    people's work on a shared machine shows up here."""

    def __init__(self) -> None:
        self.t0 = time.monotonic()
        self.busy0 = self._busy()
        self.ours0 = self._ours()

    @staticmethod
    def _busy() -> float:
        f = Path("/proc/stat").read_text().splitlines()[0].split()[1:]
        v = [int(x) for x in f]
        # user nice system idle iowait irq softirq steal ...
        return (v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) / os.sysconf("SC_CLK_TCK")

    @staticmethod
    def _ours() -> float:
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system

    def result(self) -> dict[str, float]:
        wall = time.monotonic() - self.t0
        other = max(0.0, (self._busy() - self.busy0) - (self._ours() - self.ours0))
        return {
            "wall_s": round(wall, 1),
            "other_cpu_s": round(other, 1),
            "other_share_of_machine": round(other / (wall * CORES), 3) if wall else 0.0,
            "loadavg_end": float(Path("/proc/loadavg").read_text().split()[0]),
        }


SERVER_PACKAGES = ["proxy", "commands", "store", "flusher", "replay"]


def code_version() -> dict[str, Any]:
    """Which server code was measured: the commit, the server files changed from it,
    and a hash of the server sources (compared at the end: others may edit the
    checkout while the benchmark runs)."""
    import hashlib

    def git(*args: str) -> str:
        return subprocess.run(
            ["git", *args], cwd=REPO, capture_output=True, text=True, check=False
        ).stdout.strip()

    h = hashlib.sha256()
    for pkg in SERVER_PACKAGES:
        for f in sorted((REPO / pkg).rglob("*.py")):
            h.update(str(f.relative_to(REPO)).encode() + b"\0" + f.read_bytes())
    return {
        "commit": git("rev-parse", "--short", "HEAD"),
        "subject": git("log", "-1", "--format=%s"),
        "uncommitted_server_files": git(
            "status", "--porcelain", "--", *SERVER_PACKAGES
        ).splitlines(),
        "sources_sha256": h.hexdigest()[:16],
    }


def machine() -> dict[str, Any]:
    model = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    redis_version = subprocess.run(
        ["redis-server", "--version"], capture_output=True, text=True, check=False
    ).stdout.strip()
    mem_total = 0
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_total = int(line.split()[1]) * 1024
    except OSError:
        pass
    return {
        "cores": CORES,
        "cpu_model": model,
        "memory_bytes": mem_total,
        "kernel": platform.release(),
        "python": platform.python_version(),
        "redis_server": redis_version,
        "pinned": PINNED,
        "server_cpu": SERVER_CPU if PINNED else None,
        "load_cpu": LOAD_CPU if PINNED else None,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="small sizes, one run")
    ap.add_argument(
        "--items",
        default=",".join(DEFAULT_ITEMS),
        help=(
            "comma-separated: 1,2,4,5c,7,9,10,11,11m (the default, make bench; 11m, a move of"
            " 1,000 slots holding 1M keys, takes about 2 minutes), 6 (sync mode against S3"
            " alone; item 2 measures it too), L and p (make bench-long)"
        ),
    )
    ap.add_argument("--runs", type=int, default=None, help="runs per measurement (default 3)")
    ap.add_argument(
        "--moto",
        choices=sorted(MOTO_STARTS),
        default="keepalive",
        help=(
            "how items 2 and 6 start moto: keepalive (bench/motoserver.py, the default) or"
            " close (python -m moto.server, a new connection per request)"
        ),
    )
    ap.add_argument("--doc", default=str(REPO / "docs" / "benchmarks.md"))
    ap.add_argument("--json", default=str(REPO / "bench-results.json"))
    ap.add_argument(
        "--render",
        action="store_true",
        help="only rewrite --doc from an existing --json (no measurements)",
    )
    ns = ap.parse_args(argv)
    if ns.render:
        from bench.report import render

        doc = Path(ns.doc)
        res = json.loads(Path(ns.json).read_text())
        doc.write_text(render(res, doc.read_text() if doc.exists() else ""))
        return 0
    s = Settings.quick() if ns.quick else Settings()
    if ns.runs is not None:
        s.runs = s.other_runs = ns.runs
    s.moto = ns.moto
    os.chdir(REPO)
    pin_self()
    results: dict[str, Any] = {
        "generated": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "machine": machine(),
        "settings": asdict(s),
        "quick": ns.quick,
        "items": [k.strip() for k in ns.items.split(",")],
        "item_seconds": {},
        "other_load": {},
        "code": code_version(),
    }
    t_all = time.monotonic()
    for key in ns.items.split(","):
        key = key.strip()
        label, fn = ITEMS[key]
        log(f"part {key}: {label}")
        meter = LoadMeter()
        try:
            results.update(fn(s))
        except Exception as e:  # a failed part is reported, the others still run
            log(f"part {key} ({label}) failed: {e!r}")
            for name in SECTIONS[key]:
                results[name] = {"error": repr(e)}
        load = meter.result()
        results["item_seconds"][label] = load["wall_s"]
        results["other_load"][label] = load
    results["total_seconds"] = round(time.monotonic() - t_all, 1)
    end = code_version()
    results["code_changed_during_run"] = end["sources_sha256"] != results["code"]["sources_sha256"]
    if results["code_changed_during_run"]:
        log("WARNING: the server's source files changed while the benchmark ran")
    from bench.report import evaluate, render

    results["targets"] = evaluate(results)
    Path(ns.json).write_text(json.dumps(results, indent=2, default=str) + "\n")
    doc = Path(ns.doc)
    old = doc.read_text() if doc.exists() else ""
    doc.write_text(render(results, old))
    for t in results["targets"]:
        log(f"{t['verdict']:4} {t['target']}: {t['measured']}")
    log(f"wrote {ns.json} and {ns.doc} in {results['total_seconds']:.0f}s")
    failed = [k for k, v in results.items() if isinstance(v, dict) and "error" in v]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
