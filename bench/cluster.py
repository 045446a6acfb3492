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

Item 11m: moving 1,000 slots holding 1M keys in all (keys given a hash tag per slot)
from one shard of ours to the other with `temporalstore cluster move`, timed from the
command's start to its exit 0 and split by the nodes' log lines, while one writer sends
SETs to the moved slots and counts what was acknowledged, answered -TRYAGAIN and lost.
"""

from __future__ import annotations

import random
import re
import shlex
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import datetime
from typing import Any

from bench import rb
from bench.client import Client, ServerError, encode, wait_flushed
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
from bench.shared import PIPELINES, Settings, _value, load, log, med, show_server
from store.slots import key_slot, spread

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


def _ours_cluster(shards: int, endpoints: str, name: str, *extra: str) -> list[Proc]:
    flags = ("--cluster-enabled", "yes", "--etcd-endpoints", endpoints, "--cluster-name", name)
    flags += extra
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


# --------------------------------------------------------------------------- item 11m

MOVE_FIRST = 0  # the moved range starts here: the first shard's (0-8191)
MOVE_TIMEOUT_S = 900.0
LOG_TIME = "%Y-%m-%d %H:%M:%S,%f"
TOOK = re.compile(
    r"took slots \d+-\d+ \((\d+) keys\).*\(replay ([\d.]+) s, import ([\d.]+) s, "
    r"durable ([\d.]+) s, map ([\d.]+) s(, (\d+) keys from the tail)?\)"
)
ROUNDS = re.compile(r"(\d+) rounds after the first")
COPIED = re.compile(
    r"pre-copied slots \d+-\d+ \((\d+) keys\).*\(replay ([\d.]+) s, import ([\d.]+) s, "
    r"durable ([\d.]+) s\)"
)


def slot_tags(first: int, last: int) -> list[bytes]:
    """A hash tag for each slot first..last: `{tag}` keys land in that slot."""
    found: dict[int, bytes] = {}
    n = 0
    while len(found) < last - first + 1:
        tag = b"t%d" % n
        slot = key_slot(tag)
        if first <= slot <= last and slot not in found:
            found[slot] = tag
        n += 1
    return [found[s] for s in range(first, last + 1)]


def _moved_key(tag: bytes, i: int) -> bytes:
    return b"{%s}:%06d" % (tag, i)


def _moved_values(tags: list[bytes], per_slot: int, size: int) -> Iterator[list[bytes]]:
    """Each slot's values, in the loader's order (one seeded generator)."""
    rng = random.Random(11)
    for _ in tags:
        yield [_value(rng, size) for _ in range(per_slot)]


def _load_moved(port: int, tags: list[bytes], per_slot: int, size: int) -> tuple[int, float]:
    def commands() -> Iterator[bytes]:
        for tag, values in zip(tags, _moved_values(tags, per_slot, size), strict=True):
            for i, v in enumerate(values):
                yield encode([b"SET", _moved_key(tag, i), v])

    return load(port, commands())


def _readable(port: int, tags: list[bytes], per_slot: int, size: int) -> int:
    """How many of the loaded keys the node serves with their loaded value (one MGET
    per slot: a slot's keys share its tag)."""
    good = 0
    with Client(port) as c:
        for tag, values in zip(tags, _moved_values(tags, per_slot, size), strict=True):
            got = c.call("MGET", *(_moved_key(tag, i) for i in range(per_slot)))
            good += sum(1 for g, v in zip(got, values, strict=True) if g == v)
    return good


class MoveWriter(threading.Thread):
    """One client writing `SET {tag}:w:N N` round the moved slots, one at a time, as a
    cluster client would: -TRYAGAIN is retried 10 ms later, -MOVED sends the range's
    writes to the node it names. Records when each write was acknowledged."""

    def __init__(self, port: int, tags: list[bytes]) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.tags = tags
        self.acked: list[tuple[float, bytes, bytes]] = []  # (when, key, value)
        self.tryagain = 0
        self.first_tryagain = self.last_tryagain = 0.0  # when they came (monotonic)
        self.moved = 0
        self.other_errors: list[str] = []
        self.stopping = threading.Event()

    def run(self) -> None:
        clients: dict[int, Client] = {}
        try:
            i = 0
            while not self.stopping.is_set():
                key = b"{%s}:w:%d" % (self.tags[i % len(self.tags)], i)
                value = b"%d" % i
                c = clients.get(self.port) or clients.setdefault(self.port, Client(self.port))
                try:
                    c.call("SET", key, value)
                except ServerError as e:
                    text = str(e)
                    if "TRYAGAIN" in text:
                        self.tryagain += 1
                        self.last_tryagain = time.monotonic()
                        self.first_tryagain = self.first_tryagain or self.last_tryagain
                        time.sleep(0.01)
                    elif (m := re.search(r"MOVED \d+ [\d.]+:(\d+)", text)) is not None:
                        self.moved += 1
                        self.port = int(m.group(1))
                    else:
                        self.other_errors.append(text)
                        time.sleep(0.01)
                    continue
                self.acked.append((time.monotonic(), key, value))
                i += 1
        finally:
            for c in clients.values():
                c.close()

    def lost(self, port: int) -> int:
        """Acknowledged writes the node does not serve with their value."""
        by_slot: dict[bytes, list[tuple[bytes, bytes]]] = {}
        for _, key, value in self.acked:
            by_slot.setdefault(key[1 : key.index(b"}")], []).append((key, value))
        lost = 0
        with Client(port) as c:
            for pairs in by_slot.values():
                got = c.call("MGET", *(k for k, _ in pairs))
                lost += sum(1 for g, (_, v) in zip(got, pairs, strict=True) if g != v)
        return lost


def _logged(p: Proc, text: str, needed: bool = True) -> tuple[float, str]:
    """The wall time and line of the first line of p's log holding `text` (0.0 and ""
    if there is none and it is not `needed`)."""
    for line in p.log.read_text(errors="replace").splitlines():
        if text in line:
            stamp = datetime.strptime(line[:23], LOG_TIME).timestamp()
            return stamp, line
    if not needed:
        return 0.0, ""
    raise RuntimeError(f"{p.name}'s log has no line with {text!r}:\n{p.log_tail()}")


def item_cluster_move(s: Settings) -> dict[str, Any]:
    """A 2-shard cluster of ours; slots MOVE_FIRST.. (s.move_slots of them) loaded with
    s.move_keys keys in all, then moved to the second shard by `temporalstore cluster
    move` while one writer writes to those slots."""
    from tests.etcd import start_etcd

    first, last = MOVE_FIRST, MOVE_FIRST + s.move_slots - 1
    per_slot = s.move_keys // s.move_slots
    tags = slot_tags(first, last)
    etcd = start_etcd(1)
    endpoints = ",".join(etcd.endpoints)
    name = "bench-move"
    try:
        nodes = _ours_cluster(2, endpoints, name, "--log-level", "info")
        try:
            src, dst = nodes
            loaded, load_s = _load_moved(src.port, tags, per_slot, s.value_bytes)
            wait_flushed(src.port, 600)
            log(f"cluster move: {loaded} keys loaded in {load_s:.1f} s")
            with Client(src.port) as c:
                src_keys = int(c.call("DBSIZE"))
            writer = MoveWriter(src.port, tags)
            writer.start()
            while len(writer.acked) < 1000 and writer.is_alive():
                time.sleep(0.05)
            argv = [OURS, "cluster", "move", "--slots", f"{first}-{last}"]
            argv += ["--to", f"127.0.0.1:{dst.port}", "--timeout", f"{MOVE_TIMEOUT_S:g}"]
            argv += ["--etcd-endpoints", endpoints, "--cluster-name", name]
            wall0, t0 = time.time(), time.monotonic()
            done = subprocess.run(argv, capture_output=True, text=True, check=False)
            t1, wall1 = time.monotonic(), time.time()
            if done.returncode != 0:
                raise RuntimeError(f"cluster move exited {done.returncode}: {done.stderr}")
            seconds = t1 - t0
            time.sleep(1.0)  # writes after the move, to the target
            writer.stopping.set()
            writer.join(60)
            log(f"cluster move: slots {first}-{last} moved in {seconds:.1f} s")
            # The split, from the nodes' log lines (their times to the millisecond): the
            # target pre-copied the range (its line gives its steps' seconds); the source
            # fenced, flushed; the target took the stream's tail (its line too); the
            # source forgot the range and deleted the record.
            copied_at, copied = _logged(dst, "pre-copied slots", needed=False)
            fencing, _ = _logged(src, "fencing slots")
            fenced, _ = _logged(src, "fenced and flushed")
            took_at, took = _logged(dst, "took slots")
            gave, _ = _logged(src, "gave slots")
            m = TOOK.search(took)
            if m is None:
                raise RuntimeError(f"unexpected log line: {took}")
            keys_moved = int(m.group(1))
            replay, imported, durable, mapped = (float(m.group(g)) for g in range(2, 6))
            target_started = took_at - (replay + imported + durable + mapped)
            split = {"start_s": fencing - wall0}
            pc = COPIED.search(copied)
            if pc is not None:  # a server that pre-copies: its steps before the fence
                pre = [float(pc.group(g)) for g in range(2, 5)]
                split = {
                    "start_s": copied_at - sum(pre) - wall0,
                    "precopy_replay_s": pre[0],
                    "precopy_import_s": pre[1],
                    "precopy_durable_s": pre[2],
                    "until_fence_s": fencing - copied_at,
                }
            split |= {
                "fence_flush_s": fenced - fencing,
                "target_poll_s": target_started - fenced,
                "replay_s": replay,
                "import_s": imported,
                "durable_s": durable,
                "map_s": mapped,
                "source_forget_s": gave - took_at,
                "exit_s": wall1 - gave,
            }
            readable = _readable(dst.port, tags, per_slot, s.value_bytes)
            with Client(src.port) as c:
                src_left = int(c.call("DBSIZE"))
            during = [w for w in writer.acked if t0 <= w[0] <= t1]
            result = {
                "slots": s.move_slots,
                "first": first,
                "last": last,
                "keys_loaded": loaded,
                "keys_per_slot": per_slot,
                "value_bytes": s.value_bytes,
                "load_s": load_s,
                "source_keys_before": src_keys,
                "source_keys_after": src_left,
                "seconds": seconds,
                "keys_moved": keys_moved,
                "keys_per_s": keys_moved / seconds,
                "split": split,
                # How long writes to the range were refused: from the source's fence to
                # the map that gives the range away, and as the writer met it.
                "fence": {
                    "fence_to_map_s": took_at - fencing,
                    "precopied_keys": int(pc.group(1)) if pc is not None else 0,
                    "precopy_rounds": int(r.group(1)) if (r := ROUNDS.search(copied)) else 0,
                    "tail_keys": int(m.group(7)) if m.group(7) else keys_moved,
                    "writer_tryagain_s": writer.last_tryagain - writer.first_tryagain,
                },
                "readable_on_target": readable,
                "writer": {
                    "acked": len(writer.acked),
                    "acked_during_move": len(during),
                    "tryagain": writer.tryagain,
                    "moved": writer.moved,
                    "other_errors": writer.other_errors[:5],
                    "lost": writer.lost(dst.port),
                },
                "commands": {"server": _shown(src), "move": _shown_move(argv)},
            }
        finally:
            for n in nodes:
                n.discard()
    finally:
        etcd.stop()
    return {"cluster_move": result}


def _shown_move(argv: list[str]) -> str:
    text = shlex.join(["temporalstore", *argv[1:]])
    text = re.sub(r"--to \S+", "--to 127.0.0.1:$TARGET_PORT", text)
    text = re.sub(r"--etcd-endpoints \S+", "--etcd-endpoints http://127.0.0.1:$ETCD_PORT", text)
    return text
