"""How many segment PUTs run at once (`flusher/putlimit.py`): fewer when the store
serves PUTs one at a time, as many as allowed when it serves them side by side.

The rule on given latencies first, then a flusher with sync writers against an
in-memory store that serves one PUT at a time (a lock held across a sleep): the
limit must come down, every write still becomes durable in LSN order, and PUTs carry
more writes each than they did at the start."""

from __future__ import annotations

import asyncio
import random

from flusher.memory import MemoryObjectStore
from flusher.putlimit import HOLD, PutLimit
from tests.test_durable_log import run
from tests.test_puts_in_flight import sync_server

P = 0.004  # one PUT's latency alone, in the rule's tests


def serial_store(limit: PutLimit, puts: int) -> list[int]:
    """Feed `limit` `puts` PUTs of a store that serves one at a time: a PUT started
    with k in flight takes k times one PUT. The first runs alone (the store's
    baseline), the others with as many in flight as the limit lets. The limit after
    each."""
    limit.landed(P, 1)
    seen = []
    for _ in range(puts):
        k = limit.limit
        limit.landed(P * k, k)
        seen.append(limit.limit)
    return seen


def test_a_serial_store_brings_the_limit_down_to_one_and_probes_two_now_and_then() -> None:
    limit = PutLimit(4)
    assert limit.limit == 4  # until the store shows what it is
    seen = serial_store(limit, 300)
    assert seen[0] == 4  # one serial PUT is not enough: the average moves
    ones = seen[seen.index(1) :]
    assert seen.index(1) <= 15 and limit.lowered >= 3
    # From then on one PUT at a time, but for a probe of two after each hold.
    assert max(ones) == 2 and ones.count(2) >= 2
    assert ones.count(1) >= len(ones) * HOLD // (HOLD + 5)


def test_one_slow_put_of_a_parallel_store_and_fast_stores_lower_nothing() -> None:
    limit = PutLimit(4)
    limit.landed(P, 1)
    for i in range(100):
        limit.landed(P * (4 if i % 10 == 0 else 1), 4)  # one PUT in ten four times slower
    assert limit.limit == 4 and limit.lowered == 0
    fast = PutLimit(4)
    fast.landed(0.0001, 1)
    for _ in range(100):
        fast.landed(0.0001 * 4 * 0.99, 4)  # "serial", but well under a millisecond
    assert fast.limit == 4 and fast.lowered == 0


def test_a_parallel_store_keeps_the_limit_up() -> None:
    limit = PutLimit(4)
    for i in range(200):
        k = limit.limit
        limit.landed(P * (1 + 0.2 * (i % 3)), k)  # jitter, no queueing
        assert limit.limit == 4


def test_a_store_that_becomes_parallel_gets_its_puts_in_flight_back() -> None:
    limit = PutLimit(4)
    serial_store(limit, 100)
    assert limit.limit <= 2
    for _ in range(3 * HOLD):
        limit.landed(P, limit.limit)
    assert limit.limit == 4


def test_alone_or_retried_puts_teach_nothing_about_parallelism() -> None:
    limit = PutLimit(4)
    for _ in range(50):
        limit.landed(P * 10, 1)  # slow, but alone: not a sign of queueing
    assert limit.limit == 4 and limit.lowered == 0
    assert PutLimit(1).limit == 1
    one = PutLimit(1)
    serial_store(one, 100)
    assert one.limit == 1  # the cap holds, no probe past it


class Recorded(PutLimit):
    """The limit after each PUT landed."""

    __slots__ = ("seen",)

    def __init__(self, cap: int) -> None:
        super().__init__(cap)
        self.seen: list[int] = []

    def landed(self, seconds: float, peers: int) -> None:
        super().landed(seconds, peers)
        self.seen.append(self.limit)


class OneAtATime(MemoryObjectStore):
    """Serves one PUT at a time: each holds the store for 20 ms."""

    def __init__(self) -> None:
        super().__init__()
        self.lock = asyncio.Lock()
        self.running = 0
        self.most = 0

    async def put_if_absent(self, key: str, data: bytes) -> bool:
        self.running += 1
        self.most = max(self.most, self.running)
        try:
            async with self.lock:
                await asyncio.sleep(0.02)  # well over the loop's own delays
                return await super().put_if_absent(key, data)
        finally:
            self.running -= 1


def test_sync_writers_against_a_serial_store_use_fewer_bigger_puts() -> None:
    async def body() -> None:
        objects = OneAtATime()
        store, durable, _write = await sync_server(objects)
        db = store.dbs[0]
        flusher = durable.flusher
        assert flusher.put_limit.limit == 4
        flusher.put_limit = limit = Recorded(4)
        start = store.lsn

        async def writer(n: int) -> list[int]:
            rng = random.Random(n)
            lsns = []
            for i in range(8):
                await asyncio.sleep(rng.random() * 0.03)  # writers out of step
                store.apply(db, b"k%d" % n, ("set", b"%d" % i, None))
                store.commit()
                lsn = store.lsn
                assert await durable.wait_durable(lsn)
                assert flusher.durable_lsn >= lsn
                lsns.append(lsn)
            return lsns

        results = await asyncio.gather(*(writer(n) for n in range(30)))
        assert objects.most >= 2, limit.seen  # it began with several PUTs in flight
        assert limit.lowered >= 1 and 1 in limit.seen, limit.seen
        later = limit.seen[len(limit.seen) // 2 :]
        assert sum(later) / len(later) < 2, limit.seen  # mostly one at a time
        assert all(r == sorted(r) for r in results)
        assert flusher.durable_lsn == store.lsn == start + 30 * 8
        info = durable.info()
        assert info["puts_in_flight"] == 0
        assert info["puts_in_flight_limit"] == flusher.put_limit.limit
        assert info["puts_in_flight_lowered"] == flusher.put_limit.lowered
        await durable.close()

    run(body())
