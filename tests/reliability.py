"""Shared by the reliability tests (fuzzing, crash loops, storage faults, floods,
corruption): the scale knob, figure reporting, server memory sampling, writer threads
that record what the server acknowledged, the server's own durable-LSN reports, and
the check of what survived a crash.

Scale: `TS_SOAK=1` (set by `make soak`) switches every test from its short size
(`make test`) to the issue's long size; `sized(short, soak)` picks one.
Figures: `figure(name, ...)` prints one `FIGURE name key=value ...` line and, when
`TS_FIGURES` names a file, appends the same as a JSON line (read by
`tools/reliability_report.py`, which writes `docs/reliability.md`).
"""

from __future__ import annotations

import json
import os
import random
import select
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from tests.conftest import proc_status_kb
from tests.resp_client import RawClient, encode_command
from tests.test_durability import inspect

SOAK = os.environ.get("TS_SOAK", "") not in ("", "0")


def sized(short: int, soak: int) -> int:
    """The short size under `make test`, the long one under `make soak`."""
    return soak if SOAK else short


def seeded(name: str) -> tuple[int, random.Random]:
    """A seed (from `TS_SEED`, else fresh) and its generator; figures record the seed
    so a failing run can be repeated with `TS_SEED=<seed>`."""
    seed = int(os.environ.get("TS_SEED") or random.SystemRandom().randrange(1 << 32))
    print(f"{name}: seed {seed} (repeat with TS_SEED={seed})")
    return seed, random.Random(seed)


def figure(name: str, **values: Any) -> None:
    """Report one test's figures: a `FIGURE` line, and a JSON line in $TS_FIGURES."""
    node = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" ", 1)[0]
    rounded = {k: round(v, 2) if isinstance(v, float) else v for k, v in values.items()}
    print(f"FIGURE {name} " + " ".join(f"{k}={v}" for k, v in rounded.items()), flush=True)
    path = os.environ.get("TS_FIGURES")
    if path:
        line = {"test": name, "node": node, "soak": SOAK, "figures": rounded}
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(line) + "\n")


# --------------------------------------------------------------------------- memory


def rss_mb(pid: int) -> float:
    """Resident memory of a process, from /proc/<pid>/status."""
    return proc_status_kb(pid) / 1024


class Background(threading.Thread):
    """A daemon thread that runs until `stop()`."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.stopping = threading.Event()

    def stop(self, timeout: float = 60.0) -> None:
        self.stopping.set()
        self.join(timeout)


class MemorySampler(Background):
    """Samples a process's VmRSS every `interval` seconds; keeps the start and peak."""

    def __init__(self, pid: int, interval: float = 0.02) -> None:
        super().__init__()
        self.pid = pid
        self.interval = interval
        self.start_mb = self.peak_mb = self.last_mb = rss_mb(pid)

    def run(self) -> None:
        while not self.stopping.wait(self.interval):
            try:
                self.last_mb = rss_mb(self.pid)
            except (OSError, AssertionError):
                return  # the process is gone
            self.peak_mb = max(self.peak_mb, self.last_mb)


@contextmanager
def sampling(pid: int) -> Iterator[MemorySampler]:
    sampler = MemorySampler(pid)
    sampler.start()
    try:
        yield sampler
    finally:
        sampler.stop()


# --------------------------------------------------------------------------- long requests


def pings_before_reply(port: int, sock: socket.socket, request: bytes) -> int:
    """Send `request` on `sock`; count the PINGs a second connection gets answered
    until the first byte of its reply can be read (none of it is read here): how
    often the server let another client in while the request ran. A request that
    holds the event loop lets at most two through (one before it starts, one queued
    behind it)."""
    other = RawClient(port, timeout=120)
    answered = 0
    try:
        sock.sendall(request)
        while True:
            assert other.call("PING") == b"+PONG\r\n"
            answered += 1
            if select.select([sock], [], [], 0)[0]:
                return answered
    finally:
        other.close()


def pings_while(port: int, c: RawClient, *cmd: Any) -> tuple[bytes, int]:
    """Send `cmd` on `c`: its reply, and the PINGs answered before it began to come."""
    assert not c.buf, "unread replies on the connection"
    pings = pings_before_reply(port, c.sock, encode_command(*cmd))
    return c.read_reply(), pings


def load_keys(c: RawClient, n: int, value: str) -> None:
    """Set keys k000000 .. k<n-1> to `value`, a thousand per MSET."""
    for start in range(0, n, 1000):
        stop = min(n, start + 1000)
        c.call("MSET", *[x for i in range(start, stop) for x in (f"k{i:06d}", value)])


# --------------------------------------------------------------------------- writers

STORAGE_REFUSED = "object storage unavailable"


def op_args(prefix: str, i: int) -> tuple[str, ...]:
    """Write number `i` of a writer: the kind rotates SET, INCR, RPUSH, HSET, so the
    state of the writer's keys tells exactly which of its writes were applied."""
    kind = i % 4
    if kind == 0:
        return ("SET", f"{prefix}:s:{i}", str(i))
    if kind == 1:
        return ("INCR", f"{prefix}:ctr")
    if kind == 2:
        return ("RPUSH", f"{prefix}:list", str(i))
    return ("HSET", f"{prefix}:hash", f"f{i}", str(i))


def client(port: int, timeout: float = 30.0) -> redis.Redis:
    """A redis-py client that never retries: a retried write after a lost connection
    would be sent twice, and a crashed server must show up at once."""
    return redis.Redis(
        port=port,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(NoBackoff(), 0),
    )


class Writer(Background):
    """Writes 0, 1, 2, ... (see `op_args`) on keys under `prefix`, `depth` per
    pipeline, until stopped or the connection fails. `sent` counts writes handed to
    the socket, `acked` those the server acknowledged. With `depth` 1 a write refused
    with -TRYAGAIN (object storage back-pressure) is counted in `refused` and sent
    again; with deeper pipelines a refusal would reorder writes, so it is an error."""

    def __init__(self, port: int, prefix: str, depth: int = 1, timeout: float = 30.0) -> None:
        super().__init__()
        self.port = port
        self.prefix = prefix
        self.depth = depth
        self.timeout = timeout
        self.sent = 0
        self.acked = 0
        self.refused = 0
        self.ended_by = ""  # why it stopped writing
        self.error: str | None = None  # an unexpected reply

    def run(self) -> None:
        r = client(self.port, self.timeout)
        try:
            while not self.stopping.is_set() and self.error is None:
                self._batch(r)
        except (redis.ConnectionError, redis.TimeoutError, OSError) as e:
            self.ended_by = type(e).__name__
        except redis.ReadOnlyError as e:
            self.ended_by = f"readonly: {e}"
        finally:
            r.close()
        self.ended_by = self.ended_by or ("error" if self.error else "stopped")

    def _batch(self, r: redis.Redis) -> None:
        pipe = r.pipeline(transaction=False)
        n = self.depth
        for i in range(self.acked, self.acked + n):
            pipe.execute_command(*op_args(self.prefix, i))
        self.sent = self.acked + n
        results = pipe.execute(raise_on_error=False)
        for res in results:
            if isinstance(res, redis.ReadOnlyError):
                raise res
            if isinstance(res, Exception):
                if (
                    self.depth == 1
                    and isinstance(res, redis.exceptions.TryAgainError)
                    and str(res).startswith(STORAGE_REFUSED)
                ):
                    self.refused += 1
                    self.sent = self.acked
                    return
                self.error = f"write {self.acked} of {self.prefix}: {res!r}"
                return
            self.acked += 1

    def stop(self, timeout: float = 60.0) -> None:
        super().stop(timeout)
        assert not self.is_alive(), f"writer {self.prefix} did not stop"


class Reader(Background):
    """Reads a key with a known value over and over; records when reads completed."""

    def __init__(self, port: int, key: str, value: bytes, timeout: float = 30.0) -> None:
        super().__init__()
        self.port = port
        self.key = key
        self.value = value
        self.timeout = timeout
        self.times: list[float] = []
        self.max_latency = 0.0
        self.error: str | None = None

    def run(self) -> None:
        r = client(self.port, self.timeout)
        try:
            while not self.stopping.is_set():
                started = time.monotonic()
                got = r.get(self.key)
                if got != self.value:
                    self.error = f"GET {self.key} gave {got!r}"
                    return
                self.times.append(time.monotonic())
                self.max_latency = max(self.max_latency, self.times[-1] - started)
                time.sleep(0.002)
        except (redis.RedisError, OSError) as e:
            self.error = f"read failed: {e!r}"
        finally:
            r.close()

    def served_between(self, start: float, end: float) -> int:
        return sum(1 for t in self.times if start <= t <= end)


class DurableWatch(Background):
    """Learns which acknowledged writes are durable from the server's own report.

    Each round snapshots every writer's `acked`, then reads INFO persistence: its
    `last_lsn` L is at least the LSN of every write acknowledged before the snapshot.
    Once a later report's `durable_lsn` reaches L, those writes are durable: they are
    what an async table must never lose. `confirmed[prefix]` is that count."""

    def __init__(self, port: int, writers: list[Writer]) -> None:
        super().__init__()
        self.port = port
        self.writers = writers
        self.confirmed = {w.prefix: 0 for w in writers}
        self.durable_lsn = 0
        self.reports = 0

    def run(self) -> None:
        r = client(self.port, 10)
        pending: list[tuple[int, dict[str, int]]] = []
        try:
            while not self.stopping.is_set():
                acked = {w.prefix: w.acked for w in self.writers}
                info = r.info("persistence")
                last, durable = int(info["last_lsn"]), int(info["durable_lsn"])
                self.reports += 1
                self.durable_lsn = durable
                pending.append((last, acked))
                while pending and pending[0][0] <= durable:
                    self.confirmed = pending.pop(0)[1]
                time.sleep(0.01)
        except (redis.RedisError, OSError):
            pass  # the server was killed
        finally:
            r.close()


def survived(r: redis.Redis, prefix: str) -> int:
    """How many writes of the writer on `prefix` are in the store; asserts they are
    exactly its writes 0..n-1: each value as written, no hole, nothing extra."""
    present: set[int] = set()
    keys = r.keys(f"{prefix}:s:*")
    for start in range(0, len(keys), 1000):
        chunk = keys[start : start + 1000]
        for key, value in zip(chunk, r.mget(chunk), strict=True):
            i = int(key.rsplit(b":", 1)[1])
            assert value == str(i).encode(), f"{key!r} holds {value!r}"
            present.add(i)
    incrs = int(r.get(f"{prefix}:ctr") or 0)
    present.update(4 * j + 1 for j in range(incrs))
    items = [int(v) for v in r.lrange(f"{prefix}:list", 0, -1)]
    assert items == [4 * j + 2 for j in range(len(items))], f"{prefix}:list out of order"
    present.update(items)
    for field, value in r.hgetall(f"{prefix}:hash").items():
        i = int(field[1:])
        assert value == str(i).encode(), f"{prefix}:hash {field!r} holds {value!r}"
        present.add(i)
    n = len(present)
    assert present == set(range(n)), (
        f"{prefix}: writes {sorted(set(range(max(present) + 1)) - present)[:10]} missing "
        f"but later ones present: what survived is not a prefix"
    )
    return n


def check_writers(
    r: redis.Redis, writers: list[Writer], required: dict[str, int]
) -> dict[str, int]:
    """Each writer kept at least `required[prefix]` writes and at most what it sent;
    returns how many survived per writer."""
    counts: dict[str, int] = {}
    for w in writers:
        n = counts[w.prefix] = survived(r, w.prefix)
        assert n >= required[w.prefix], (
            f"{w.prefix}: lost acknowledged writes: {n} survived, {required[w.prefix]} required "
            f"({w.acked} acknowledged, {w.sent} sent)"
        )
        assert n <= w.sent, f"{w.prefix}: {n} survived but only {w.sent} were sent"
    return counts


# --------------------------------------------------------------------------- storage


def assert_store_verifies(storage: list[str]) -> str:
    """`temporalstore inspect` lists and verifies every object under the prefix."""
    out = inspect(storage)
    assert out.returncode == 0 and "problems=0" in out.stdout, out.stdout + out.stderr
    return out.stdout
