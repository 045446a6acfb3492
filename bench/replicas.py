"""Item 10 of `make bench`: replicas and failover (issue 12).

1. Replica lag under the SET load of item 1: a primary and a replica
   (`--replicaof`, the same `--storage`), both on the server CPU, redis-benchmark SET
   (50 clients, -P 1 and -P 16) on the load CPU against the primary. Every 10 ms a
   sampler reads `TS.VERSION` on the primary and sends `TS.WAITLSN <that> ...` to the
   replica: the lag is the time from the primary's reply until the replica's (it has
   applied the version). INFO temporalstore `replica_lag_ms` (the replica's own figure) is sampled
   too. The same load runs against a primary alone (the sampler reading `TS.VERSION`
   only): the throughput ratio is the cost of feeding a replica on the same core.
2. Failover: one etcd member and three nodes of a group on one storage directory, a
   writer per durability mode (a sync table, a raft table and the async default)
   writing through redis-py's Sentinel client; each round kills the primary with
   -9 and times until every writer's writes succeed again, then restarts the killed
   node, which rejoins as a replica. At the end every acknowledged write is read
   back from the last primary.
"""

from __future__ import annotations

import bisect
import re
import threading
import time
from typing import Any

from bench.client import Client, Sampler
from bench.proc import Proc, restart, start_ours, tmpdir
from bench.shared import PIPELINES, Settings, guarded, log, med, pct, show_server

GROUP = "bench"
# The writers' tables: key prefix -> (durability, the TS.TABLE CREATE arguments).
MODES: dict[str, tuple[str, list[str]]] = {
    "sync": ("s:t", ["TS.TABLE", "CREATE", "s:t", "DURABILITY", "SYNC"]),
    "raft": ("r:t", ["TS.TABLE", "CREATE", "r:t", "DURABILITY", "RAFT"]),
    "async": ("a", []),  # keys outside any table: the server default, async
}
WAITLSN_TIMEOUT_MS = 30_000


def item_replicas(s: Settings) -> dict[str, Any]:
    out: dict[str, Any] = {}
    out["lag"] = guarded("replicas", "replica lag", lambda: _lag(s))
    out["failover"] = guarded("replicas", "failover", lambda: _failover(s))
    return {"replicas": out}


# -- 1: replica lag under SET load --------------------------------------------------------


class LagSampler(threading.Thread):
    """Every `interval` seconds: `TS.VERSION` on the primary, then (with a replica)
    `TS.WAITLSN <version>` on the replica. The lag is the time from the primary's
    reply (the version was committed by then) to the replica's: what a client reading
    its own write on the replica waits, the replica's round trip included. The
    TS.VERSION round trips (the primary's queue under the load) are kept too."""

    def __init__(self, primary: int, replica: int | None, interval: float) -> None:
        super().__init__(daemon=True)
        self.primary = primary
        self.replica = replica
        self.interval = interval
        self.lag_ms: list[float] = []
        self.version_rtt_ms: list[float] = []
        self.timeouts = 0
        self._stop_event = threading.Event()

    def run(self) -> None:
        with Client(self.primary) as p:
            r = Client(self.replica) if self.replica is not None else None
            try:
                nxt = time.monotonic()
                while not self._stop_event.is_set():
                    t0 = time.perf_counter()
                    v = p.call("TS.VERSION")
                    t1 = time.perf_counter()
                    self.version_rtt_ms.append((t1 - t0) * 1000)
                    if r is not None:
                        if r.call("TS.WAITLSN", v, WAITLSN_TIMEOUT_MS) < v:
                            self.timeouts += 1
                        self.lag_ms.append((time.perf_counter() - t1) * 1000)
                    nxt += self.interval
                    self._stop_event.wait(max(0.0, nxt - time.monotonic()))
            finally:
                if r is not None:
                    r.close()

    def stop(self) -> None:
        self._stop_event.set()
        self.join(WAITLSN_TIMEOUT_MS / 1000 + 10)


def _shown(p: Proc) -> str:
    """show_server, with the primary's and etcd's ports as placeholders too."""
    text = show_server(p).replace("$MOTO_PORT", "$ETCD_PORT")
    return re.sub(r"127\.0\.0\.1 \d+", "127.0.0.1 $PRIMARY_PORT", text)


def _caught_up(primary: Proc, replica: Proc) -> int:
    """The replica has applied everything the primary committed: that LSN."""
    with Client(primary.port) as p, Client(replica.port) as r:
        v: int = p.call("TS.VERSION")
        got: int = r.call("TS.WAITLSN", v, WAITLSN_TIMEOUT_MS)
    if got < v:
        raise RuntimeError(f"the replica applied LSN {got}, the primary is at {v}")
    return v


def _lag_runs(s: Settings, with_replica: bool) -> dict[str, dict[str, Any]]:
    """A fresh primary (and, with_replica, a fresh replica beside it), then one
    redis-benchmark SET run per pipeline depth against the primary, by "P<depth>"."""
    storage = f"file://{tmpdir('repl')}"
    primary = start_ours(storage)
    replica = None
    try:
        if with_replica:
            replica = start_ours(storage, "--replicaof", f"127.0.0.1 {primary.port}")
            _caught_up(primary, replica)
        return {f"P{p}": _lag_run(s, p, primary, replica) for p in PIPELINES}
    finally:
        if replica is not None:
            replica.discard()
        primary.discard()


def _lag_run(s: Settings, pipeline: int, primary: Proc, replica: Proc | None) -> dict[str, Any]:
    """One redis-benchmark SET run against the primary, the lag sampled beside it."""
    from bench import rb

    n = s.lag_requests if pipeline == 1 else s.lag_requests_pipelined
    a = rb.argv(primary.port, requests=n, pipeline=pipeline, tests="set")
    sampler = LagSampler(primary.port, replica.port if replica else None, s.lag_interval_ms / 1000)
    info = Sampler(replica.port, "temporalstore", "replica_lag_ms") if replica else None
    sampler.start()
    if info is not None:
        info.start()
    t0 = time.monotonic()
    c0 = replica.cpu_seconds() if replica else 0.0
    try:
        (row,) = rb.run(a)
    finally:
        sampler.stop()
        info_ms = info.stop() if info is not None else []
    wall = time.monotonic() - t0
    out: dict[str, Any] = {
        "rps": row.rps,
        "p50_ms": row.p50_ms,
        "p99_ms": row.p99_ms,
        "version_rtt_ms": sampler.version_rtt_ms,
        "command": rb.show(a),
        "primary": show_server(primary),
    }
    if replica is not None:
        out |= {
            "lag_ms": sampler.lag_ms,
            "timeouts": sampler.timeouts,
            "info_lag_ms": info_ms,
            "replica_cpu": (replica.cpu_seconds() - c0) / wall,
            "final_lsn": _caught_up(primary, replica),
            "replica": _shown(replica),
        }
    return out


def _lag(s: Settings) -> dict[str, Any]:
    runs: dict[str, dict[str, list[dict[str, Any]]]] = {
        f"P{p}": {"alone": [], "replica": []} for p in PIPELINES
    }
    for rep in range(s.other_runs):
        # Fresh servers per run and kind; the -P 16 load follows the -P 1 one on them
        # (both SET the one key `key:__rand_int__`: the store stays as small).
        for kind in ["alone", "replica"] if rep % 2 == 0 else ["replica", "alone"]:
            for pp, r in _lag_runs(s, kind == "replica").items():
                runs[pp][kind].append(r)
        log(f"replicas: lag run {rep + 1}/{s.other_runs} done")
    summary: dict[str, Any] = {}
    commands: dict[str, str] = {}
    for pp, by in runs.items():
        lag = [x for r in by["replica"] for x in r["lag_ms"]]
        info = [x for r in by["replica"] for x in r["info_lag_ms"]]
        rtt = [x for r in by["replica"] for x in r["version_rtt_ms"]]
        alone = med([r["rps"] for r in by["alone"]])
        with_replica = med([r["rps"] for r in by["replica"]])
        summary[pp] = {
            "samples": len(lag),
            "timeouts": sum(r["timeouts"] for r in by["replica"]),
            "lag_p50_ms": pct(lag, 50),
            "lag_p99_ms": pct(lag, 99),
            "lag_max_ms": max(lag, default=float("nan")),
            "version_rtt_p50_ms": pct(rtt, 50),
            "info_samples": len(info),
            "info_lag_p50_ms": pct(info, 50),
            "info_lag_p99_ms": pct(info, 99),
            "rps_alone": alone,
            "rps_replica": with_replica,
            "ratio": with_replica / alone,
            "run_ratios": [
                r["rps"] / a["rps"] for r, a in zip(by["replica"], by["alone"], strict=True)
            ],
            "replica_cpu": med([r["replica_cpu"] for r in by["replica"]]),
        }
        commands[pp] = by["replica"][0]["command"]
        commands["primary"] = by["alone"][0]["primary"]
        commands["replica"] = by["replica"][0]["replica"]
    return {
        "requests": s.lag_requests,
        "requests_pipelined": s.lag_requests_pipelined,
        "interval_ms": s.lag_interval_ms,
        "runs": runs,
        "summary": summary,
        "commands": commands,
    }


# -- 2: failover ----------------------------------------------------------------------------


class Writer(threading.Thread):
    """Writes `<prefix>:<n>` = n through redis-py's Sentinel client, one SET at a time,
    until stopped; n moves on when a SET is acknowledged, a failed one is sent again
    after 10 ms. Keeps (key, send time, acknowledgement time) of every acknowledged
    write, in time.monotonic() seconds."""

    def __init__(self, ports: list[int], prefix: str) -> None:
        super().__init__(daemon=True)
        self.ports = ports
        self.prefix = prefix
        self.acks: list[tuple[str, float, float]] = []
        self.failures = 0
        self._stop_event = threading.Event()

    def run(self) -> None:
        import redis
        from redis.backoff import NoBackoff
        from redis.retry import Retry
        from redis.sentinel import Sentinel

        sentinel = Sentinel([("127.0.0.1", p) for p in self.ports], socket_timeout=1)
        # No retries inside redis-py: every attempt is one SET, timed here.
        master = sentinel.master_for(GROUP, socket_timeout=2, retry=Retry(NoBackoff(), 0))
        n = 0
        while not self._stop_event.is_set():
            key = f"{self.prefix}:{n}"
            t0 = time.monotonic()
            try:
                ok = master.set(key, n)
            except redis.RedisError:
                ok = False
            if ok:
                self.acks.append((key, t0, time.monotonic()))
                n += 1
            else:
                self.failures += 1
                self._stop_event.wait(0.01)

    def stop(self) -> None:
        self._stop_event.set()
        self.join(30)

    def first_ack_sent_after(self, t: float) -> float | None:
        """When the first write sent after `t` was acknowledged (None: not yet)."""
        acks = self.acks  # appended in order of sending
        i = bisect.bisect_right(acks, t, key=lambda a: a[1])
        return acks[i][2] if i < len(acks) else None


def _role(port: int) -> bytes | None:
    try:
        with Client(port, timeout=2) as c:
            role: bytes = c.call("ROLE")[0]
            return role
    except (OSError, ConnectionError):
        return None


def _until(what: str, check: Any, timeout: float = 60.0) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = check()
        if got:
            return got
        time.sleep(0.02)
    raise RuntimeError(f"{what}: not reached in {timeout:.0f} s")


def _failover(s: Settings) -> dict[str, Any]:
    from tests.etcd import start_etcd

    etcd = start_etcd(1)
    nodes: list[Proc] = []
    writers: dict[str, Writer] = {}
    try:
        storage = f"file://{tmpdir('group')}"
        flags = ("--etcd-endpoints", ",".join(etcd.endpoints), "--group", GROUP)
        for _ in range(3):
            nodes.append(start_ours(storage, *flags))
        ports = [n.port for n in nodes]

        def primary() -> Proc:
            found: Proc = _until(
                "a primary",
                lambda: next((n for n in nodes if n.alive() and _role(n.port) == b"master"), None),
            )
            return found

        with Client(primary().port) as c:
            for _prefix, create in MODES.values():
                if create:
                    c.call(*create)
        for mode, (prefix, _create) in MODES.items():
            writers[mode] = Writer(ports, prefix)
            writers[mode].start()
        rounds: list[dict[str, Any]] = []
        for rnd in range(s.failover_rounds):
            time.sleep(s.failover_write_s)
            old = primary()
            old.kill9()
            killed = time.monotonic()

            def all_writing(killed: float = killed) -> dict[str, float] | None:
                firsts = {m: w.first_ack_sent_after(killed) for m, w in writers.items()}
                if any(t is None for t in firsts.values()):
                    return None
                return {m: t - killed for m, t in firsts.items() if t is not None}

            back_in = _until("writes after the kill", all_writing)
            new = primary()
            # The killed node restarts with an empty memory and rejoins as a replica.
            i = nodes.index(old)
            nodes[i] = restart(old)
            _until("the restarted node a replica", lambda n=nodes[i]: _role(n.port) == b"slave")
            rejoin = time.monotonic() - nodes[i].started
            rounds.append(
                {
                    "killed_at": killed,
                    "seconds": max(back_in.values()),
                    "by_mode": back_in,
                    "old_port": old.port,
                    "new_port": new.port,
                    "rejoin_s": rejoin,
                }
            )
            log(
                f"replicas: failover round {rnd + 1}/{s.failover_rounds}:"
                f" writes back after {max(back_in.values()):.2f} s"
            )
        for w in writers.values():
            w.stop()
        final = primary()
        lost = {mode: _lost(final.port, w) for mode, w in writers.items()}
        shown = _shown(final)
    finally:
        for w in writers.values():
            w.stop()
        for n in nodes:
            n.discard()
        etcd.stop()
    kills = [r["killed_at"] for r in rounds]
    per_mode: dict[str, Any] = {}
    for mode, w in writers.items():
        missing = lost[mode]
        acked_at = {key: acked for key, _sent, acked in w.acks}
        # Each lost write's age at the kill that lost it (the first kill after its ack).
        ages = []
        for key in missing:
            t = acked_at[key]
            kill = next((k for k in kills if k >= t), None)
            if kill is not None:
                ages.append((kill - t) * 1000)
        times = [r["by_mode"][mode] for r in rounds]
        per_mode[mode] = {
            "acknowledged": len(w.acks),
            "lost": len(missing),
            "failed_attempts": w.failures,
            "lost_max_age_ms": max(ages, default=None),
            "median_s": med(times),
            "max_s": max(times),
        }
    secs = [r["seconds"] for r in rounds]
    return {
        "rounds": s.failover_rounds,
        "write_s": s.failover_write_s,
        "runs": [{k: v for k, v in r.items() if k != "killed_at"} for r in rounds],
        "median_s": med(secs),
        "max_s": max(secs),
        "rejoin_median_s": med([r["rejoin_s"] for r in rounds]),
        "modes": per_mode,
        "tables": {mode: " ".join(create) for mode, (_p, create) in MODES.items() if create},
        "server": shown,
    }


def _lost(port: int, w: Writer) -> list[str]:
    """The acknowledged keys of `w` that the node at `port` does not have."""
    keys = [key for key, _sent, _acked in w.acks]
    missing: list[str] = []
    with Client(port, timeout=60) as c:
        for i in range(0, len(keys), 1000):
            chunk = keys[i : i + 1000]
            got = c.call("MGET", *chunk)
            missing += [k for k, v in zip(chunk, got, strict=True) if v is None]
    return missing
