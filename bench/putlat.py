"""One PUT at a time to object storage, timed: what a sync write is measured against.

    python -m bench.putlat --storage s3://bucket/prefix --endpoint URL --size N --count K

Opens the store through the server's own client (`flusher.objectstore.open_object_store`,
so aiobotocore for s3://), writes K objects of N bytes one after the other with
put-if-absent (as the flusher writes a segment) after a few untimed ones, and prints
{"p50_ms": ..., "p99_ms": ..., "count": K} as JSON. `make bench` runs it pinned to the
server's CPU, against the endpoint the sync server writes to.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time

from flusher.objectstore import open_object_store

WARMUP = 10


async def timed_puts(storage: str, endpoint: str | None, size: int, count: int) -> list[float]:
    """Seconds each of `count` put-if-absent calls of `size` bytes took."""
    objects = open_object_store(storage, endpoint)
    data = os.urandom(size)
    took: list[float] = []
    try:
        for i in range(WARMUP + count):
            t0 = time.perf_counter()
            if not await objects.put_if_absent(f"putlat/{i:08d}", data):
                raise RuntimeError(f"{storage}: putlat/{i:08d} exists already")
            if i >= WARMUP:
                took.append(time.perf_counter() - t0)
    finally:
        await objects.close()
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--storage", required=True)
    ap.add_argument("--endpoint", default=None)
    ap.add_argument("--size", type=int, required=True)
    ap.add_argument("--count", type=int, default=300)
    a = ap.parse_args()
    took = sorted(asyncio.run(timed_puts(a.storage, a.endpoint, a.size, a.count)))
    print(
        json.dumps(
            {
                "p50_ms": took[len(took) // 2] * 1000,
                "p99_ms": took[min(len(took) - 1, len(took) * 99 // 100)] * 1000,
                "count": len(took),
            }
        )
    )


if __name__ == "__main__":
    main()
