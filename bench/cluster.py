"""Item 11 of `make bench`: Redis Cluster mode, 1 shard and 2 shards (issue 28).

For each count of shards, a fresh cluster of ours (`--cluster-enabled yes`, one etcd
member, each node on its own `file://` storage, `temporalstore cluster create`) and a
fresh redis-server cluster (`--cluster-enabled yes`, the slots given with CLUSTER
ADDSLOTSRANGE and the nodes joined with CLUSTER MEET: `redis-cli --cluster create`
wants three masters at least), each slot range spread as `cluster create` spreads it;
then `redis-benchmark --cluster` (SET and GET, 50 clients, -P 1 and -P 16) against the
first node, which finds the masters and sends each key to its own (plain
redis-benchmark for one shard: `--cluster` refuses a cluster of one node). Runs of the
two servers alternate.

Pinning, on a 2-core machine: one shard runs on the server CPU, redis-benchmark on the
load CPU, as in item 1; with two shards the second shard runs on the load CPU beside
redis-benchmark (there is no third core), so "2 shards" is two server cores less what
the load generator takes of the second.
"""

from __future__ import annotations

import re
import subprocess
import time
from typing import Any

from bench import rb
from bench.client import Client
from bench.proc import (
    LOAD_CPU,
    OURS,
    SERVER_CPU,
    Proc,
    free_port,
    start_ours,
    start_redis,
    tmpdir,
)
from bench.shared import PIPELINES, Settings, log, med, show_server
from store.slots import spread

SHARDS = (1, 2)
TESTS = ("set", "get")
CPUS = (SERVER_CPU, LOAD_CPU)  # shard i runs on CPUS[i]


def _until_ok(nodes: list[Proc], timeout: float = 60.0) -> None:
    """Every node says cluster_state:ok and knows every master."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        good = 0
        for n in nodes:
            with Client(n.port) as c:
                info = c.call("CLUSTER", "INFO")
                slots = c.call("CLUSTER", "SLOTS")
            good += b"cluster_state:ok" in info and len(slots) == len(nodes)
        if good == len(nodes):
            return
        time.sleep(0.1)
    raise RuntimeError(f"a cluster of {len(nodes)} did not reach cluster_state:ok")


def _redis_cluster(shards: int) -> list[Proc]:
    # --cluster-port: the bus port (port + 10000 by default, past 65535 for a port
    # above 55535) is a free one of its own.
    flags = ("--appendonly", "no", "--cluster-enabled", "yes")
    buses = [free_port() for _ in range(shards)]
    nodes = [
        start_redis(*flags, "--cluster-port", str(buses[i]), cpu=CPUS[i]) for i in range(shards)
    ]
    for n, (first, last) in zip(nodes, spread(shards), strict=True):
        with Client(n.port) as c:
            c.call("CLUSTER", "ADDSLOTSRANGE", first, last)
    with Client(nodes[0].port) as c:
        for n, bus in zip(nodes[1:], buses[1:], strict=True):
            c.call("CLUSTER", "MEET", "127.0.0.1", n.port, bus)
    _until_ok(nodes)
    return nodes


def _ours_cluster(shards: int, endpoints: str, name: str) -> list[Proc]:
    flags = ("--cluster-enabled", "yes", "--etcd-endpoints", endpoints, "--cluster-name", name)
    nodes = [start_ours(f"file://{tmpdir('shard')}", *flags, cpu=CPUS[i]) for i in range(shards)]
    create = [OURS, "cluster", "create", "--etcd-endpoints", endpoints, "--cluster-name", name]
    create += [f"127.0.0.1:{n.port}" for n in nodes]
    deadline = time.monotonic() + 60
    while True:  # the nodes register in etcd just after they answer PING
        done = subprocess.run(create, capture_output=True, text=True, timeout=60, check=False)
        if done.returncode == 0:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"temporalstore cluster create: {done.stderr.strip()}")
        time.sleep(0.2)
    _until_ok(nodes)
    return nodes


def _shown(p: Proc) -> str:
    """show_server, with etcd's port, the bus port and the cluster name as placeholders."""
    text = show_server(p).replace("$MOTO_PORT", "$ETCD_PORT")
    text = re.sub(r"--cluster-port \d+", "--cluster-port $BUS_PORT", text)
    return re.sub(r"--cluster-name \S+", "--cluster-name $NAME", text)


def _measure(
    s: Settings, kind: str, nodes: list[Proc], runs: dict[str, list[float]], shown: dict[str, str]
) -> None:
    """redis-benchmark --cluster, SET and GET at each pipeline depth, on one cluster."""
    for p in PIPELINES:
        for t in TESTS:
            n = s.requests
            if p > 1:
                n *= s.redis_pipelined_factor if kind == "redis" else s.ours_pipelined_factor
            # redis-benchmark --cluster refuses one node ("Invalid cluster: 1 node(s).");
            # one shard owns every slot, so plain redis-benchmark sends it every key.
            extra = ("--cluster",) if len(nodes) > 1 else ()
            a = rb.argv(nodes[0].port, requests=n, pipeline=p, tests=t, extra=extra)
            shown[f"P{p}_{t}_{kind}_{len(nodes)}"] = rb.show(a)
            (row,) = rb.run(a)
            runs.setdefault(f"{kind}:{len(nodes)}:P{p}:{t}", []).append(row.rps)


def item_cluster(s: Settings) -> dict[str, Any]:
    from tests.etcd import start_etcd

    etcd = start_etcd(1)
    endpoints = ",".join(etcd.endpoints)
    runs: dict[str, list[float]] = {}
    shown: dict[str, str] = {}
    try:
        for rep in range(s.other_runs):
            for shards in SHARDS:
                kinds = ["redis", "ours"] if (rep + shards) % 2 else ["ours", "redis"]
                for kind in kinds:
                    if kind == "redis":
                        nodes = _redis_cluster(shards)
                    else:
                        name = f"bench-{rep}-{shards}"  # a fresh etcd per item
                        nodes = _ours_cluster(shards, endpoints, name)
                    shown[f"server_{kind}"] = _shown(nodes[0])
                    try:
                        _measure(s, kind, nodes, runs, shown)
                    finally:
                        for n in nodes:
                            n.discard()
                log(f"cluster run {rep + 1}/{s.other_runs}, {shards} shard(s) done")
    finally:
        etcd.stop()
    summary: dict[str, Any] = {}
    for p in PIPELINES:
        for t in TESTS:
            row: dict[str, float] = {}
            for kind in ("redis", "ours"):
                for shards in SHARDS:
                    row[f"{kind}_{shards}"] = med(runs[f"{kind}:{shards}:P{p}:{t}"])
                row[f"{kind}_scale"] = row[f"{kind}_2"] / row[f"{kind}_1"]
            summary[f"P{p}:{t}"] = row
    return {"cluster": {"runs": runs, "summary": summary, "commands": shown}}
