"""Item 9 of `make bench`: history at bounded cost (issue 11), each case in one run.

1. Pipelined SET throughput on one key and across many keys with 0, 1 and 100 seals
   and with pinned history (a seal, then rewrites), as ratios to no seal.
2. `TS.HISTORY key WITHVALUES`: time per returned version as the history deepens,
   for a string and for a hash that gains one field per version.
3. `TS.CHECKOUT AT VERSION v` over many keys: creation time, and RSS per connection
   for connections checked out at different points that each read a few keys.
4. `TS.DIFF VERSION a VERSION b COUNT 10` with 10 keys changed between a and b.
5. PING latency from a second client while each long verb runs (TS.RESTORE,
   TS.MERGE, TS.HISTORY WITHVALUES, SRANDMEMBER with a huge negative count).
6. SRANDMEMBER / ZRANDMEMBER key -N on a 1,000-member key: ours vs redis-server.
7. Reads of frozen history (issue 29, `--history-hot-memory 1`: every version past
   the newest frozen into compressed pages): `TS.HISTORY key WITHVALUES` of 1,000 and
   100,000 versions (time per version), and `TS.ASOF key VERSION v` round trips into
   frozen pages, p50 and p99, beside GET round trips on redis-server in the same run.

Large replies are read unparsed (`Client.call_unparsed`): the time is the server's.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from typing import Any

from bench.client import Client, PingProber, encode, wait_flushed
from bench.proc import Proc, start_ours, start_redis, tmpdir
from bench.shared import (
    Settings,
    _value,
    guarded,
    load,
    log,
    med,
    pct,
    set_commands,
    show_server,
)

SEAL_CONFIGS = ["0 seals", "1 seal", "100 seals", "pinned"]
WRITE_CASES = ["one key", "many keys"]
DIFF_CHANGED = 10
VIEW_READS = 5


def _guarded(name: str, fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    return guarded("bounded", name, fn)


def item_bounded(s: Settings) -> dict[str, Any]:
    out: dict[str, Any] = {}
    out["writes"] = _guarded("writes", lambda: _writes(s))
    out["walk"] = _guarded("history walk", lambda: _history_walk(s))
    out["views"] = _guarded("checkout and diff", lambda: _checkout_and_diff(s))
    out["stalls"] = _guarded("stalls", lambda: _stalls(s))
    out["sampling"] = _guarded("sampling", lambda: _sampling(s))
    out["frozen"] = _guarded("frozen reads", lambda: _frozen_reads(s))
    return {"bounded": out}


FROZEN_KEYS = 20_000  # keys of 10 versions each, for TS.ASOF into frozen pages
FROZEN_CALLS = 3_000


def _round_trips(c: Client, calls: list[tuple[Any, ...]]) -> dict[str, float]:
    """Round trips of `calls` (p50, p99) and the server's own mean time per call of
    their command (INFO commandstats, reset first)."""
    c.call("CONFIG", "RESETSTAT")
    times = []
    for args in calls:
        t0 = time.perf_counter()
        c.call(*args)
        times.append(time.perf_counter() - t0)
    times.sort()
    name = str(calls[0][0]).lower()
    stat = c.info("commandstats").get(f"cmdstat_{name}", "")
    usec = dict(kv.split("=") for kv in stat.split(",")).get("usec_per_call", "nan")
    return {
        "p50_us": pct(times, 50) * 1e6,
        "p99_us": pct(times, 99) * 1e6,
        "server_us_per_call": float(usec),
    }


def _frozen_reads(s: Settings) -> dict[str, Any]:
    """Item 7 of the module docstring."""
    srv = start_ours(f"file://{tmpdir('frozen')}", "--history", "all", "--history-hot-memory", "1")
    vals = _values()
    rng = random.Random(7)
    out: dict[str, Any] = {}
    try:
        walks = (1_000, max(s.walk_string_versions))
        for n in walks:
            key = b"frozen:str:%d" % n
            load(srv.port, (encode([b"SET", key, vals[i % len(vals)]]) for i in range(n)))
        for rnd in range(10):
            load(srv.port, set_commands(FROZEN_KEYS, 100, prefix="fk:", seed=100 + rnd))
        wait_flushed(srv.port, timeout=600)
        with Client(srv.port, timeout=600) as c:
            deadline = time.monotonic() + 600
            while int(c.info("history")["history_hot_bytes"]) > 1:
                if time.monotonic() > deadline:
                    raise RuntimeError("history was not frozen")
                time.sleep(0.2)
            h = c.info("history")
            out["history"] = {k: h[k] for k in h if not k.endswith("_human")}
            walk: dict[str, Any] = {}
            for n in walks:
                key = b"frozen:str:%d" % n
                c.call("TS.HISTORY", key, "COUNT", "1")  # decoded once before timing
                times = []
                for _ in range(max(1, walks[-1] // n)):
                    _size, secs, _head = c.call_unparsed("TS.HISTORY", key, "WITHVALUES")
                    times.append(secs)
                walk[str(n)] = {"seconds": med(times), "us_per_version": med(times) / n * 1e6}
            walk["ratio"] = (
                walk[str(walks[-1])]["us_per_version"] / walk[str(walks[0])]["us_per_version"]
            )
            out["walk"] = walk
            last = int(c.info("persistence")["last_lsn"])
            lsns = [rng.randrange(last // 2, last) for _ in range(FROZEN_CALLS)]
            keys = [b"fk:%07d" % rng.randrange(FROZEN_KEYS) for _ in range(FROZEN_CALLS)]
            out["asof_many_keys"] = _round_trips(
                c, [("TS.ASOF", k, "VERSION", v) for k, v in zip(keys, lsns, strict=True)]
            )
            deep = b"frozen:str:%d" % walks[-1]
            out["asof_deep_key"] = _round_trips(
                c, [("TS.ASOF", deep, "VERSION", rng.randrange(1, walks[-1])) for _ in lsns]
            )
            out["get"] = _round_trips(c, [("GET", k) for k in keys])
        out["server"] = show_server(srv)
    finally:
        srv.discard()
    r = start_redis("--appendonly", "no")
    try:
        load(r.port, set_commands(FROZEN_KEYS, 100, prefix="fk:"))
        with Client(r.port) as c:
            out["redis_get"] = _round_trips(
                c, [("GET", b"fk:%07d" % rng.randrange(FROZEN_KEYS)) for _ in range(FROZEN_CALLS)]
            )
    finally:
        r.stop()
    log(
        f"bounded: frozen TS.HISTORY {out['walk']['ratio']:.2f}x per version (100k vs 1k), "
        f"TS.ASOF p50 {out['asof_many_keys']['p50_us']:.0f} us (many keys; in the server "
        f"{out['asof_many_keys']['server_us_per_call']:.0f} us per call), "
        f"{out['asof_deep_key']['p50_us']:.0f} us (deep key); GET p50 ours "
        f"{out['get']['p50_us']:.0f} us, redis {out['redis_get']['p50_us']:.0f} us"
    )
    return out


def _values(n: int = 256, size: int = 100) -> list[bytes]:
    rng = random.Random(11)
    return [_value(rng, size) for _ in range(n)]


def _history_info(port: int) -> dict[str, str]:
    with Client(port) as c:
        return c.info("history")


# -- 1: writes under seals --------------------------------------------------------------


def _write_commands(case: str, n: int, keys: int, vals: list[bytes]) -> list[bytes]:
    if case == "one key":
        return [encode([b"SET", b"w:one", vals[i % len(vals)]]) for i in range(n)]
    return [encode([b"SET", b"w:%07d" % (i % keys), vals[i % len(vals)]]) for i in range(n)]


def _seal_server(cfg: str, s: Settings, vals: list[bytes]) -> Proc:
    """A fresh server holding every key of the write cases once, then `cfg`."""
    srv = start_ours(f"file://{tmpdir('seals')}")
    load(srv.port, iter(_write_commands("many keys", s.seal_keys, s.seal_keys, vals)))
    load(srv.port, iter(_write_commands("one key", 1, 1, vals)))
    with Client(srv.port) as c:
        seals = {"0 seals": 0, "1 seal": 1, "100 seals": 100, "pinned": 1}[cfg]
        for i in range(seals):
            c.call("TS.SEAL", f"seal-{i}")
    if cfg == "pinned":
        # The seal pins every version written after it: `pinned_versions` on the one
        # key and as many across the many keys.
        for case in WRITE_CASES:
            load(srv.port, iter(_write_commands(case, s.pinned_versions, s.seal_keys, vals)))
    wait_flushed(srv.port, timeout=600)
    return srv


def _writes(s: Settings) -> dict[str, Any]:
    vals = _values()
    commands = {
        case: _write_commands(case, s.seal_writes, s.seal_keys, vals) for case in WRITE_CASES
    }
    rates: dict[str, dict[str, list[float]]] = {
        case: {cfg: [] for cfg in SEAL_CONFIGS} for case in WRITE_CASES
    }
    servers: dict[str, Proc] = {}
    try:
        for cfg in SEAL_CONFIGS:
            servers[cfg] = _seal_server(cfg, s, vals)
        pinned_before = {
            cfg: int(_history_info(srv.port)["history_pinned_versions"])
            for cfg, srv in servers.items()
        }
        for rep in range(s.other_runs):
            for i, case in enumerate(WRITE_CASES):
                # The four servers run side by side; each case runs on each in turn,
                # the order rotating from case to case and run to run.
                k = (rep + i) % len(SEAL_CONFIGS)
                for cfg in SEAL_CONFIGS[k:] + SEAL_CONFIGS[:k]:
                    srv = servers[cfg]
                    wait_flushed(srv.port, timeout=600)  # no earlier flush competes with it
                    n, secs = load(srv.port, iter(commands[case]))
                    rates[case][cfg].append(n / secs)
            log(f"bounded: writes under seals, run {rep + 1}/{s.other_runs} done")
        pinned_after = {
            cfg: int(_history_info(srv.port)["history_pinned_versions"])
            for cfg, srv in servers.items()
        }
        server = show_server(servers["0 seals"])
    finally:
        for srv in servers.values():
            srv.discard()
    summary: dict[str, dict[str, Any]] = {}
    for case in WRITE_CASES:
        base = rates[case]["0 seals"]
        summary[case] = {
            cfg: {
                "rps": med(r),
                "ratio": med(r) / med(base),
                "run_ratios": [x / b for x, b in zip(r, base, strict=True)],
            }
            for cfg, r in rates[case].items()
        }
    return {
        "writes": s.seal_writes,
        "keys": s.seal_keys,
        "pinned_versions": s.pinned_versions,
        "runs": rates,
        "summary": summary,
        "pinned_before": pinned_before,
        "pinned_after": pinned_after,
        "server": server,
    }


# -- 2: TS.HISTORY WITHVALUES per returned version ------------------------------------------


def _history_walk(s: Settings) -> dict[str, Any]:
    srv = start_ours(f"file://{tmpdir('walk')}", "--history", "all")
    vals = _values()
    keys: list[tuple[str, int, bytes]] = []
    try:
        for n in s.walk_string_versions:
            key = b"walk:str:%d" % n
            load(srv.port, (encode([b"SET", key, vals[i % len(vals)]]) for i in range(n)))
            keys.append(("string", n, key))
        for n in s.walk_hash_versions:
            key = b"walk:hash:%d" % n
            load(
                srv.port,
                (encode([b"HSET", key, b"f%07d" % i, b"v%07d" % i]) for i in range(n)),
            )
            keys.append(("hash", n, key))
        wait_flushed(srv.port, timeout=600)
        with Client(srv.port, timeout=600) as c:
            for kind, n, key in keys:  # each history is whole before it is timed
                if len(c.call("TS.HISTORY", key)) != n:
                    raise RuntimeError(f"{key!r} does not have {n} versions")
                oldest = c.call("TS.HISTORY", key, "COUNT", "1", "WITHVALUES")[0][-1]
                if kind == "hash" and oldest != [b"f0000000", b"v0000000"]:
                    raise RuntimeError(f"{key!r}: oldest value {oldest!r}")
            runs: dict[str, list[dict[str, float]]] = {f"{k} {n}": [] for k, n, _ in keys}
            deepest = {"string": max(s.walk_string_versions), "hash": max(s.walk_hash_versions)}
            for rep in range(s.other_runs):
                for kind, n, key in keys if rep % 2 == 0 else list(reversed(keys)):
                    # A short history is listed several times (the median counts), so
                    # that one hiccup of the machine does not decide its figure.
                    times = []
                    for _ in range(max(1, deepest[kind] // n)):
                        size, secs, _head = c.call_unparsed("TS.HISTORY", key, "WITHVALUES")
                        times.append(secs)
                    runs[f"{kind} {n}"].append({"seconds": med(times), "bytes": size})
                log(f"bounded: TS.HISTORY walk run {rep + 1}/{s.other_runs} done")
        server = show_server(srv)
    finally:
        srv.discard()
    summary: dict[str, dict[str, Any]] = {}
    for kind, n, _key in keys:
        secs = med([r["seconds"] for r in runs[f"{kind} {n}"]])
        # A hash that gains a field per version: the reply holds n(n+1)/2 fields.
        fields = n if kind == "string" else n * (n + 1) // 2
        summary[f"{kind} {n}"] = {
            "kind": kind,
            "versions": n,
            "seconds": secs,
            "reply_bytes": runs[f"{kind} {n}"][0]["bytes"],
            "us_per_version": secs / n * 1e6,
            "fields": fields,
            "us_per_field": secs / fields * 1e6,
        }
    return {
        "string_versions": list(s.walk_string_versions),
        "hash_versions": list(s.walk_hash_versions),
        "runs": runs,
        "summary": summary,
        "server": server,
    }


# -- 3, 4: lazy views and the version index ---------------------------------------------------


def _ts_version(c: Client) -> int:
    v: int = c.call("TS.VERSION")
    return v


def _checkout_and_diff(s: Settings) -> dict[str, Any]:
    srv = start_ours(f"file://{tmpdir('views')}")
    try:
        with Client(srv.port) as c:
            v0 = _ts_version(c)
        load(srv.port, set_commands(s.view_keys, s.value_bytes))
        wait_flushed(srv.port, timeout=600)
        out = {
            "keys": s.view_keys,
            "server": show_server(srv),
            "rss_loaded": srv.rss_bytes(),
            "checkout": _checkouts(srv, s, v0),
            "diff": _diff(srv, s),
        }
    finally:
        srv.discard()
    return out


def _checkouts(srv: Proc, s: Settings, v0: int) -> dict[str, Any]:
    """`view_connections` connections, each checked out at its own point of the load
    (key i was written at LSN v0 + i + 1), each then reading a few keys."""
    rng = random.Random(3)
    conns = [Client(srv.port) for _ in range(s.view_connections)]
    try:
        for c in conns:
            c.call("PING")
        rss_open = srv.rss_bytes()
        step = s.view_keys // s.view_connections
        create_ms: list[float] = []
        read_ms: list[float] = []
        for i, c in enumerate(conns):
            m = i * step + step // 2  # keys 0 .. m-1 exist at this point
            t0 = time.perf_counter()
            c.call("TS.CHECKOUT", "AT", "VERSION", v0 + m)
            create_ms.append((time.perf_counter() - t0) * 1000)
            present = [m - 1] + [rng.randrange(m) for _ in range(VIEW_READS - 2)]
            t0 = time.perf_counter()
            got = [c.call("GET", b"key:%07d" % k) for k in present]
            absent = c.call("GET", b"key:%07d" % m)
            read_ms.append((time.perf_counter() - t0) * 1000 / VIEW_READS)
            if None in got or absent is not None:
                raise RuntimeError(f"view at key {m}: wrong reads")
        rss_views = srv.rss_bytes()
        info = _history_info(srv.port)
    finally:
        for c in conns:
            c.close()
    return {
        "connections": s.view_connections,
        "reads_per_connection": VIEW_READS,
        "create_ms_median": med(create_ms),
        "create_ms_max": max(create_ms),
        "read_ms_median": med(read_ms),
        "rss_open": rss_open,
        "rss_views": rss_views,
        "bytes_per_connection": (rss_views - rss_open) / s.view_connections,
        "views": int(info["views"]),
        "views_bytes": int(info["history_views_bytes"]),
    }


def _diff(srv: Proc, s: Settings) -> dict[str, Any]:
    rng = random.Random(4)
    changed = sorted(rng.sample(range(s.view_keys), DIFF_CHANGED))
    with Client(srv.port) as c:
        a = _ts_version(c)
        for k in changed:
            c.call("SET", b"key:%07d" % k, b"changed")
        b = _ts_version(c)
        cmd = ["TS.DIFF", "VERSION", str(a), "VERSION", str(b), "COUNT", str(DIFF_CHANGED)]
        reply = c.call(*cmd)
        want = [x for k in changed for x in (b"key:%07d" % k, b"changed")]
        if reply != want:
            raise RuntimeError(f"TS.DIFF replied {reply!r}")
        ms: list[float] = []
        for _ in range(s.diff_calls):
            t0 = time.perf_counter()
            c.call(*cmd)
            ms.append((time.perf_counter() - t0) * 1000)
    return {
        "changed": DIFF_CHANGED,
        "calls": s.diff_calls,
        "command": " ".join([*cmd[:1], "VERSION", "<a>", "VERSION", "<b>", *cmd[5:]]),
        "ms_median": med(ms),
        "ms_p99": pct(ms, 99),
        "ms_max": max(ms),
    }


# -- 5: PING latency beside a long verb ----------------------------------------------------------


def _beside(port: int, verb: Callable[[Client], Any]) -> dict[str, Any]:
    """Run `verb` on one connection while a PingProber PINGs over another; the verb's
    seconds and the latencies of the PINGs in flight meanwhile."""
    prober = PingProber(port)
    prober.start_probing()
    try:
        with Client(port, timeout=600) as c:
            t0 = time.perf_counter()
            reply = verb(c)
            t1 = time.perf_counter()
    finally:
        prober.stop()
    lat = prober.during(t0, t1)
    return {
        "seconds": t1 - t0,
        "reply": reply,
        "pings": len(lat),
        "p50_ms": pct(lat, 50),
        "p99_ms": pct(lat, 99),
        "max_ms": max(lat, default=float("nan")),
    }


def _expect(what: str, got: Any, want: Any) -> None:
    if got != want:
        raise RuntimeError(f"{what} replied {got!r}, expected {want!r}")


def _random_members(c: Client, members: int) -> None:
    names = [b"m%04d" % i for i in range(members)]
    c.call("SADD", "rand:set", *names)
    c.call("ZADD", "rand:zset", *[x for i, m in enumerate(names) for x in (i, m)])


def _random_reply_bytes(count: int) -> int:
    """RESP2 size of SRANDMEMBER/ZRANDMEMBER key -count over 5-byte members."""
    return len(b"*%d\r\n" % count) + count * len(b"$5\r\nm0000\r\n")


def _sample_beside(srv: Proc, s: Settings) -> dict[str, Any]:
    r = _beside(srv.port, lambda c: c.call_unparsed("SRANDMEMBER", "rand:set", -s.random_count)[0])
    _expect(f"{srv.name} SRANDMEMBER", r["reply"], _random_reply_bytes(s.random_count))
    return r


def _stalls(s: Settings) -> dict[str, Any]:
    n = s.stall_keys
    deep = max(s.walk_string_versions)
    srv = start_ours(f"file://{tmpdir('stalls')}")
    out: dict[str, Any] = {"keys": n, "history_versions": deep, "count": s.random_count}
    try:
        out["server"] = show_server(srv)
        load(srv.port, set_commands(n, s.value_bytes, seed=1))
        with Client(srv.port) as c:
            c.call("TS.SEAL", "before")
        load(srv.port, set_commands(n, s.value_bytes, seed=2))
        wait_flushed(srv.port, timeout=600)
        r = _beside(srv.port, lambda c: c.call("TS.RESTORE", "SNAPSHOT", "before"))
        _expect("TS.RESTORE", r["reply"], n)
        out["TS.RESTORE SNAPSHOT"] = r
        log(f"bounded: TS.RESTORE of {n:,} keys: {r['seconds']:.2f} s")

        with Client(srv.port) as c:
            c.call("TS.BRANCH", "CREATE", "what-if")
            c.call("TS.CHECKOUT", "what-if")
            c.pipeline(set_commands(n, s.value_bytes, seed=3))
            c.call("TS.CHECKOUT", "HEAD")
        wait_flushed(srv.port, timeout=600)
        r = _beside(srv.port, lambda c: c.call("TS.MERGE", "what-if"))
        _expect("TS.MERGE", r["reply"], n)
        out["TS.MERGE"] = r
        log(f"bounded: TS.MERGE of {n:,} keys: {r['seconds']:.2f} s")

        key = b"bench:deep:str"
        vals = _values()
        with Client(srv.port) as c:
            c.call("TS.TABLE", "CREATE", "bench:deep", "RETAIN", "ALL")
        load(srv.port, (encode([b"SET", key, vals[i % len(vals)]]) for i in range(deep)))
        wait_flushed(srv.port, timeout=600)
        r = _beside(srv.port, lambda c: c.call_unparsed("TS.HISTORY", key, "WITHVALUES")[0])
        if r["reply"] < deep * len(vals[0]):
            raise RuntimeError(f"TS.HISTORY replied only {r['reply']} bytes")
        out["TS.HISTORY WITHVALUES"] = r
        log(f"bounded: TS.HISTORY of {deep:,} versions: {r['seconds']:.2f} s")

        with Client(srv.port) as c:
            _random_members(c, s.random_members)
        out["SRANDMEMBER"] = _sample_beside(srv, s)
        redis = start_redis("--appendonly", "no")
        try:
            with Client(redis.port) as c:
                _random_members(c, s.random_members)
            out["SRANDMEMBER (redis-server)"] = _sample_beside(redis, s)
            out["redis_server"] = show_server(redis)
        finally:
            redis.stop()
        log("bounded: PING beside the long verbs done")
    finally:
        srv.discard()
    return out


# -- 6: random sampling with a huge count, ours vs redis ---------------------------------------


def _sampling(s: Settings) -> dict[str, Any]:
    servers = {
        "redis": start_redis("--appendonly", "no"),
        "ours": start_ours(f"file://{tmpdir('sampling')}"),
    }
    want = _random_reply_bytes(s.random_count)
    cmds = {
        "SRANDMEMBER": ["SRANDMEMBER", "rand:set", str(-s.random_count)],
        "ZRANDMEMBER": ["ZRANDMEMBER", "rand:zset", str(-s.random_count)],
    }
    runs: dict[str, dict[str, list[float]]] = {name: {"redis": [], "ours": []} for name in cmds}
    try:
        for srv in servers.values():
            with Client(srv.port) as c:
                _random_members(c, s.random_members)
        wait_flushed(servers["ours"].port)
        for rep in range(s.other_runs):
            for i, (name, cmd) in enumerate(cmds.items()):
                order = ["redis", "ours"] if (rep + i) % 2 == 0 else ["ours", "redis"]
                for kind in order:
                    with Client(servers[kind].port, timeout=600) as c:
                        size, secs, _head = c.call_unparsed(*cmd)
                    _expect(f"{kind} {name}", size, want)
                    runs[name][kind].append(secs)
            log(f"bounded: sampling run {rep + 1}/{s.other_runs} done")
        shown = {kind: show_server(srv) for kind, srv in servers.items()}
    finally:
        for srv in servers.values():
            srv.discard()
    summary = {
        name: {
            "redis_s": med(r["redis"]),
            "ours_s": med(r["ours"]),
            "ratio": med(r["ours"]) / med(r["redis"]),
        }
        for name, r in runs.items()
    }
    return {
        "count": s.random_count,
        "members": s.random_members,
        "reply_bytes": want,
        "runs": runs,
        "summary": summary,
        "commands": {name: " ".join(cmd) for name, cmd in cmds.items()},
        "servers": shown,
    }
