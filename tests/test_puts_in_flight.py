"""Several segment PUTs in flight: the durable LSN still moves in LSN order, and a
crash with PUTs in flight loses no acknowledged sync write and leaves a log that
restarts.

In-process: a store that holds one segment's PUT until told (the others land
first). With real server processes: `TS.FAULT JITTER` makes PUTs land out of order
while sync writers run, then kill -9 and a restart.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from flusher import paths, segment
from flusher.codec import encode_record
from flusher.durable import DurabilityConfig, DurableStore
from flusher.flusher import FencedError, segment_object
from flusher.log import LogError, LogGap, SegmentLog
from flusher.memory import MemoryObjectStore
from replay.startup import take_over
from store import R_LSN, Store
from tests.conftest import start_temporalstore
from tests.reliability import Writer, check_writers, client, figure, sized, survived
from tests.test_durability import kill9
from tests.test_durable_log import FakeClock, run, set_record


class HeldStore(MemoryObjectStore):
    """Puts of the keys in `held` wait until `release`."""

    def __init__(self) -> None:
        super().__init__()
        self.held: dict[str, asyncio.Event] = {}

    def hold(self, key: str) -> None:
        self.held[key] = asyncio.Event()

    def release(self, key: str) -> None:
        self.held.pop(key).set()

    async def put_if_absent(self, key: str, data: bytes) -> bool:
        gate = self.held.get(key)
        if gate is not None:
            await gate.wait()
        return await super().put_if_absent(key, data)


async def settle(check: Callable[[], bool]) -> None:
    """Let the event loop run until `check()` holds (bounded by turns, not time)."""
    for _ in range(5000):
        if check():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("the condition never held")


async def sync_server(
    objects: MemoryObjectStore,
) -> tuple[Store, DurableStore, Callable[[int], int]]:
    """A store in sync mode over `objects`, its durable layer started, and a writer of
    key i (its LSN)."""
    store = Store(databases=2)
    manifest, rec = await take_over(store, objects)
    durable = DurableStore(
        store, objects, DurabilityConfig(mode="sync"), manifest, rec, FakeClock()
    )
    durable.start()
    db = store.dbs[0]

    def write(i: int) -> int:
        store.apply(db, b"k%d" % i, ("set", b"v%d" % i, None))
        store.commit()
        return store.lsn

    return store, durable, write


def stored(objects: MemoryObjectStore, key: str) -> Callable[[], bool]:
    return lambda: key in objects.objects


async def land_one_by_one(
    objects: MemoryObjectStore,
    durable: DurableStore,
    write: Callable[[int], int],
    keys: list[int],
) -> dict[int, asyncio.Future[bool]]:
    """Write each key and wait for it, one after the other, each in its own segment
    (stored before the next write): {LSN: its wait}."""
    waits: dict[int, asyncio.Future[bool]] = {}
    for i in keys:
        lsn = write(i)
        waits[lsn] = asyncio.ensure_future(durable.wait_durable(lsn))
        await settle(stored(objects, paths.segment(lsn)))
    return waits


def flags(objects: MemoryObjectStore, lsn: int) -> int:
    key = paths.segment(lsn)
    return segment.read_header(objects.objects[key], key, segment.SEGMENT_MAGIC).flags


async def crash() -> None:
    """Stop every task but this one, as kill -9 would (no drain, no PUT lands)."""
    tasks = asyncio.all_tasks() - {asyncio.current_task()}
    for t in tasks:
        t.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


async def held_then_two_land(
    objects: HeldStore, durable: DurableStore, write: Callable[[int], int]
) -> tuple[int, list[asyncio.Future[bool]], list[int]]:
    """Hold the next segment's PUT with key 1 in it, then write keys 2 and 3, each
    in its own segment that lands: (the held segment's LSN, every wait, the later
    segments' LSNs)."""
    first = durable.durable_lsn + 1
    objects.hold(paths.segment(first))
    waits = [asyncio.ensure_future(durable.wait_durable(write(1)))]
    await settle(lambda: durable.flusher.in_flight == 1)
    later = await land_one_by_one(objects, durable, write, [2, 3])
    return first, [*waits, *later.values()], list(later)


def test_a_later_put_that_lands_first_releases_nobody() -> None:
    async def body() -> None:
        objects = HeldStore()
        _store, durable, write = await sync_server(objects)
        claim = durable.durable_lsn
        first, waits, later = await held_then_two_land(objects, durable, write)
        # Both later segments are stored; the first is not: nothing moves.
        assert durable.durable_lsn == claim
        assert durable.flusher.in_flight == 1 + len(later)
        await asyncio.sleep(0)
        assert not any(w.done() for w in waits)
        # They were cut while an earlier segment was in flight, and say so.
        assert all(flags(objects, n) & segment.FLAG_AHEAD for n in later)
        objects.release(paths.segment(first))
        assert await asyncio.gather(*waits) == [True, True, True]
        assert durable.durable_lsn == max(later) and durable.flusher.in_flight == 0
        assert not flags(objects, first) & segment.FLAG_AHEAD
        assert durable.flusher.stats.segments_written == 3
        await durable.close()

    run(body())


def test_writers_are_called_back_in_one_pass_in_lsn_order_once_durable() -> None:
    """`on_durable` (how a sync connection waits): nobody is called before every
    earlier PUT has landed; then every writer up to the durable LSN is called in one
    pass, in LSN order, even if one callback fails; later writers wait on."""

    async def body() -> None:
        objects = HeldStore()
        _store, durable, write = await sync_server(objects)
        called: list[tuple[int, Exception | None]] = []

        def waiter(lsn: int) -> Callable[[Exception | None], None]:
            def done(exc: Exception | None) -> None:
                called.append((lsn, exc))
                if lsn == first + 1:
                    raise RuntimeError("a broken connection")  # the rest still go

            return done

        first = durable.durable_lsn + 1
        objects.hold(paths.segment(first))
        lsns = [write(i) for i in range(3)]  # one chunk: one segment, held
        for lsn in reversed(lsns):
            durable.on_durable(lsn, waiter(lsn))
        await settle(lambda: durable.flusher.in_flight == 1)
        objects.hold(paths.segment(first + 3))
        late = write(3)
        durable.on_durable(late, waiter(late))
        await settle(lambda: durable.flusher.in_flight == 2)
        await asyncio.sleep(0.01)
        assert called == [] and durable.durable_lsn == first - 1
        timed_out = await durable.wait_durable(late, timeout=0.01)
        assert timed_out is False
        objects.release(paths.segment(first))
        await settle(lambda: len(called) == 3)
        assert called == [(lsn, None) for lsn in lsns]
        assert durable.durable_lsn == lsns[-1]
        # Already durable: called at once.
        durable.on_durable(lsns[0], waiter(lsns[0]))
        assert called[-1] == (lsns[0], None)
        # Fenced before the late one lands: it is told so, and so is a newcomer.
        with pytest.raises(FencedError):
            durable.flusher.fence("taken over")
        assert called[-1][0] == late and isinstance(called[-1][1], FencedError)
        durable.on_durable(late + 1, waiter(late + 1))
        assert isinstance(called[-1][1], FencedError)
        objects.release(paths.segment(first + 3))
        await crash()

    run(body())


def test_equal_lsns_in_arrival_order_and_a_writer_that_waits_again() -> None:
    """Writers waiting for one LSN are called in the order they began to wait; one
    that begins to wait again from its callback (written to while held) is called
    when its new LSN is durable, not in the pass that released it."""

    async def body() -> None:
        objects = HeldStore()
        _store, durable, write = await sync_server(objects)
        called: list[str] = []
        first = durable.durable_lsn + 1
        objects.hold(paths.segment(first))
        lsns = [write(i) for i in range(2)]
        later: list[int] = []

        def again(exc: Exception | None) -> None:
            called.append("again")
            if not later:
                later.append(write(9))
                durable.on_durable(later[0], again)

        for name in "abc":
            durable.on_durable(lsns[1], lambda exc, name=name: called.append(name))
        durable.on_durable(lsns[0], again)
        durable.on_durable(lsns[1], lambda exc: called.append("d"))
        durable.on_durable(lsns[0], lambda exc: called.append("x"))  # behind "again"
        await settle(lambda: durable.flusher.in_flight == 1)
        objects.release(paths.segment(first))
        await settle(lambda: len(called) == 7)
        # "again" began to wait again for a write of its own: called once more, last.
        assert called == ["again", "x", "a", "b", "c", "d", "again"]
        assert durable.durable_lsn >= later[0] > lsns[1]
        await crash()

    run(body())


def test_a_crash_with_puts_in_flight_restarts_before_the_hole() -> None:
    async def body() -> None:
        objects = HeldStore()
        _store, durable, write = await sync_server(objects)
        write(0)
        await durable.drain(5)
        hole, waits, orphans = await held_then_two_land(objects, durable, write)
        assert not any(w.done() for w in waits)  # none acknowledged
        await crash()
        objects.held.clear()

        # The restart replays up to the hole, claims the hole's place, and sets the
        # segments past it aside, out of the log.
        again = Store(databases=2)
        manifest, rec = await take_over(again, objects)
        assert [r.first for r in rec.unfinished] == orphans
        assert again.lsn == hole  # its claim
        assert again.dbs[0].data.get(b"k0") == b"v0"
        assert all(again.dbs[0].data.get(b"k%d" % i) is None for i in (1, 2, 3))
        for n in orphans:
            assert paths.segment(n) not in objects.objects
            assert paths.orphaned(manifest.epoch, n) in objects.objects
        # The next writer's segments take their places; the log is whole again.
        third = Store(databases=2)
        _m, rec3 = await take_over(third, objects)
        assert rec3.unfinished == [] and third.lsn == hole + 1
        log = SegmentLog(objects)
        lsns = [r[R_LSN] async for seg in log.walk(await log.segments(), 0) for r in seg.records()]
        assert lsns == list(range(1, hole + 2))

    run(body())


async def _put(objects: MemoryObjectStore, first: int, last: int, flag: int = 0) -> None:
    records = [encode_record(set_record(n)) for n in range(first, last + 1)]
    await objects.put(paths.segment(first), segment_object(records, first, flag))


def test_only_a_hole_before_flagged_segments_ends_the_log() -> None:
    async def body() -> None:
        ahead, claim = segment.FLAG_AHEAD, segment.FLAG_CLAIM
        objects = MemoryObjectStore()
        await _put(objects, 1, 3)
        await _put(objects, 5, 5, ahead)
        await _put(objects, 7, 8, ahead)
        log = SegmentLog(objects)
        walked = [s.ref.first async for s in log.walk(await log.segments(), 0)]
        assert walked == [1]
        assert [r.first for r in log.unfinished] == [5, 7]
        # An unflagged segment past the hole: it was cut with nothing in flight
        # before it, so the hole was durable once. An error, as before.
        await _put(objects, 9, 9)
        with pytest.raises(LogGap) as e:
            [s async for s in log.walk(await log.segments(), 0)]
        assert (
            str(e.value) == f"{paths.segment(5)}: gap in LSNs: expected LSN 4, segment starts at 5"
        )
        # A flagged segment right after a claim (a crash between a new writer's claim
        # and its setting aside what the writer before left) ends the log too.
        objects = MemoryObjectStore()
        await _put(objects, 1, 3)
        await _put(objects, 4, 4, claim)
        await _put(objects, 5, 6, ahead)
        log = SegmentLog(objects)
        assert [s.ref.first async for s in log.walk(await log.segments(), 0)] == [1, 4]
        assert [r.first for r in log.unfinished] == [5]
        await _put(objects, 7, 7)
        with pytest.raises(LogGap):
            [s async for s in log.walk(await log.segments(), 0)]

    run(body())


def ahead_segments(root: Path) -> int:
    """Segments under a file:// prefix cut while an earlier one was in flight."""
    n = 0
    for f in (root / "segments").glob("*.seg"):
        data = f.read_bytes()
        n += bool(
            segment.read_header(data, f.name, segment.SEGMENT_MAGIC).flags & segment.FLAG_AHEAD
        )
    return n


def test_kill9_with_puts_in_flight_loses_no_acknowledged_sync_write(tmp_path: Path) -> None:
    root = tmp_path / "store"
    storage = ["--storage", f"file://{root}", "--durability", "sync"]
    args = [*storage, "--fault-injection", "yes"]
    recovered: dict[str, int] = {}
    acked = flagged = 0
    for cycle in range(sized(2, 10)):
        p = start_temporalstore(args)
        try:
            r = client(p.port)
            for prefix, n in recovered.items():  # earlier cycles: exactly as recovered
                assert survived(r, prefix) == n, f"cycle {cycle}: {prefix} changed"
            # PUTs take 0-30 ms each, at random: several are in flight, landing out
            # of order, whenever several writers wait.
            r.execute_command("TS.FAULT", "JITTER", "30")
            r.close()
            writers = [Writer(p.port, f"c{cycle}w{n}") for n in range(8)]
            for w in writers:
                w.start()
            time.sleep(0.8)
            kill9(p)
        finally:
            p.stop()
        for w in writers:
            w.stop()
            assert w.error is None, w.error
        acked += sum(w.acked for w in writers)
        flagged = max(flagged, ahead_segments(root))
        q = start_temporalstore(storage)
        try:
            r = client(q.port)
            recovered.update(check_writers(r, writers, {w.prefix: w.acked for w in writers}))
            r.close()
        finally:
            q.stop()
    figure("puts-in-flight-crash", acked_sync=acked, ahead_segments_seen=flagged)
    assert acked > 0
    assert flagged > 0, "no segment was ever cut with another PUT in flight"


def test_a_fenced_writers_put_that_lands_after_the_claim_is_skipped_and_set_aside() -> None:
    async def body() -> None:
        ahead, claim = segment.FLAG_AHEAD, segment.FLAG_CLAIM
        one, two = segment.epoch_mark(1), segment.epoch_mark(2)
        objects = MemoryObjectStore()
        await take_over(Store(databases=2), objects)  # epoch 1 claims LSN 1
        await _put(objects, 2, 5, one)
        await _put(objects, 6, 6, claim | two)  # epoch 2 took over at 6
        await _put(objects, 7, 9, two)
        await _put(objects, 8, 8, ahead | one)  # epoch 1's PUT, on the wire, lands late
        log = SegmentLog(objects)
        walked = [s.ref.first async for s in log.walk(await log.segments(), 0)]
        assert walked == [1, 2, 6, 7] and [r.first for r in log.strays] == [8]
        store = Store(databases=2)
        manifest, rec = await take_over(store, objects)
        assert store.lsn == 10 and [r.first for r in rec.strays] == [8]
        assert paths.segment(8) not in objects.objects
        assert paths.orphaned(manifest.epoch, 8) in objects.objects
        # Unflagged, the other writer's segment cannot be a late PUT: an error.
        await _put(objects, 11, 11, one)
        with pytest.raises(LogError):
            [s async for s in log.walk(await log.segments(), 0)]

    run(body())


def test_the_next_put_starts_before_the_writers_a_put_released_are_called_back() -> None:
    """A PUT lands while other writers wait for records no PUT holds yet: their PUT
    starts first, and the writers the landed PUT made durable are called back after
    it (the store is not idle while their replies go out); a fence that comes in
    between fails only the writers that are not durable."""

    async def body() -> None:
        objects = HeldStore()
        _store, durable, write = await sync_server(objects)
        flusher = durable.flusher
        seen: list[tuple[int, int, Exception | None]] = []

        def waiter(lsn: int) -> Callable[[Exception | None], None]:
            return lambda exc: seen.append((lsn, flusher.in_flight, exc))

        first = durable.durable_lsn + 1
        objects.hold(paths.segment(first))
        a = write(1)
        durable.on_durable(a, waiter(a))
        await settle(lambda: flusher.in_flight == 1)
        flusher.put_limit.limit = 1  # the next waits for this one's slot
        b = write(2)
        durable.on_durable(b, waiter(b))
        await asyncio.sleep(0.01)
        assert flusher.in_flight == 1 and seen == []
        objects.hold(paths.segment(b))
        objects.release(paths.segment(first))
        await settle(lambda: len(seen) == 1)
        # Called back with the next PUT (b's) already in flight.
        assert seen == [(a, 1, None)]
        assert durable.durable_lsn == a and paths.segment(b) in objects.held

        # A fence between a PUT landing and its writers' callback: they are durable,
        # so they are released, not failed; the writer still waiting is failed.
        flusher.put_limit.limit = 1
        c = write(3)
        durable.on_durable(c, waiter(c))
        objects.hold(paths.segment(c))
        deferred: list[Callable[[], None]] = []
        flusher._call_soon = deferred.append  # type: ignore[method-assign]
        objects.release(paths.segment(b))
        await settle(lambda: durable.durable_lsn == b)
        assert flusher.in_flight == 1 and len(seen) == 1  # c's PUT is out, b not told
        with pytest.raises(FencedError):
            flusher.fence("taken over")
        assert seen[1:] == [(b, 1, None), (c, 1, seen[2][2])]
        assert isinstance(seen[2][2], FencedError)
        for fn in deferred:
            fn()  # the deferred callback finds nobody left
        assert len(seen) == 3
        await crash()

    run(body())
