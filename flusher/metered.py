"""Object storage requests as monitoring sees them: a wrapper that counts every
request by kind, its failures, and the time each PUT took.

`temporalstore serve` wraps its object store in one (outermost, so injected faults
count as failures). The counters are plain integers and a fixed array of latency
buckets: a few additions per request (requests are per flush or checkpoint, never per
command). `INFO persistence` and `/metrics` read them; `s3_put_cost` turns the PUT
count into an estimate of the bill (dollars per 1,000 PUTs, S3's way of pricing).
"""

from __future__ import annotations

import time
from bisect import bisect_left
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from flusher.objectapi import ObjectStore, ObjectStoreError

T = TypeVar("T")

# Upper bounds (seconds) of the PUT latency histogram's buckets; the last is +Inf.
PUT_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
OPS = ("put", "get", "list", "delete")


@dataclass
class RequestStats:
    """Counters of the requests made to object storage (both PUT kinds count as put)."""

    requests: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OPS, 0))
    errors: dict[str, int] = field(default_factory=lambda: dict.fromkeys(OPS, 0))
    # PUTs that completed, successful or not: count per bucket (not cumulative; one
    # more for +Inf), and their total time.
    put_buckets: list[int] = field(default_factory=lambda: [0] * (len(PUT_LATENCY_BUCKETS) + 1))
    put_seconds: float = 0.0

    def observe_put(self, seconds: float) -> None:
        self.put_buckets[bisect_left(PUT_LATENCY_BUCKETS, seconds)] += 1  # first bound >= it
        self.put_seconds += seconds

    def put_cost(self, dollars_per_1000: float) -> float:
        """The estimated cost in dollars of the PUTs made so far."""
        return self.requests["put"] * dollars_per_1000 / 1000


class MeteredObjectStore(ObjectStore):
    """`inner`, with every request counted in `stats`."""

    def __init__(self, inner: ObjectStore, clock: Callable[[], float] = time.perf_counter) -> None:
        self.inner = inner
        self.url = inner.url
        self.stats = RequestStats()
        self.clock = clock

    async def _count(self, op: str, call: Awaitable[T]) -> T:
        self.stats.requests[op] += 1
        start = self.clock() if op == "put" else 0.0
        try:
            return await call
        except ObjectStoreError:
            self.stats.errors[op] += 1
            raise
        finally:
            if op == "put":
                self.stats.observe_put(self.clock() - start)

    async def put(self, key: str, data: bytes) -> None:
        await self._count("put", self.inner.put(key, data))

    async def put_if_absent(self, key: str, data: bytes) -> bool:
        return await self._count("put", self.inner.put_if_absent(key, data))

    async def get(self, key: str) -> bytes | None:
        return await self._count("get", self.inner.get(key))

    async def list(self, prefix: str) -> list[str]:
        return await self._count("list", self.inner.list(prefix))

    async def delete(self, key: str) -> None:
        await self._count("delete", self.inner.delete(key))

    async def close(self) -> None:
        await self.inner.close()
