"""The flusher, the durable log and the durable layer in-process: an in-memory
object store and a fake clock, so nothing here waits on real time. Plus
round-trip property tests for object names and the segment format."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st

from flusher import paths, segment
from flusher.codec import encode_record, encode_records, iter_records, record_offsets
from flusher.durable import DurabilityConfig, DurableStore
from flusher.flusher import FencedError, Flusher, segment_object
from flusher.log import LogError, LogGap, MissingSegment, SegmentLog, SegmentRef
from flusher.memory import MemoryObjectStore
from replay.replay import recover
from replay.startup import take_over
from store import R_LSN, R_META, R_OPS, Store, UpdateRecord, WriteMeta
from store.values import HashTable
from tests.helpers import write_metas

T = TypeVar("T")
LSN = st.integers(min_value=0, max_value=10**20 - 1)  # what a name holds
HEADER_LSN = st.integers(min_value=0, max_value=2**64 - 4)  # what a header holds (Q)


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def run(aw: Awaitable[T]) -> T:
    async def main() -> T:
        return await aw

    return asyncio.run(main())


def set_record(lsn: int, key: bytes = b"k", value: bytes = b"v") -> UpdateRecord:
    return (lsn, 1_700_000_000_000 + lsn, ((0, key, ("set", value, None)),), ("set",), None)


# -- object names and the segment format ------------------------------------------------


@given(LSN)
def test_segment_and_checkpoint_names_parse_back(lsn: int) -> None:
    assert paths.parse_segment(paths.segment(lsn)) == lsn
    assert paths.parse_checkpoint(paths.checkpoint(lsn)) == lsn
    # Other objects' names are not taken for these.
    assert paths.parse_checkpoint(paths.segment(lsn)) is None
    assert paths.parse_segment(paths.checkpoint(lsn)) is None


@given(st.integers(0, 10**20 - 2), LSN)
def test_manifest_names_parse_back_and_sort_numerically(epoch: int, seq: int) -> None:
    assert paths.parse_manifest(paths.manifest(epoch, seq)) == (epoch, seq)
    assert paths.parse_segment(paths.manifest(epoch, seq)) is None
    # Listing order (names) is numeric order.
    assert (paths.manifest(epoch, seq) < paths.manifest(epoch + 1, 0)) is True


@given(st.sampled_from([segment.SEGMENT_MAGIC, segment.CHECKPOINT_MAGIC]), HEADER_LSN, st.binary())
def test_an_object_decodes_to_what_was_encoded(magic: bytes, first: int, raw: bytes) -> None:
    data = segment.encode(magic, first, first + 3, 4, raw)
    header, body = segment.decode(data, "x", magic)
    assert body == raw
    assert (header.magic, header.first, header.last, header.count) == (magic, first, first + 3, 4)
    assert (header.raw_len, header.body_len) == (len(raw), len(data) - segment.HEADER_SIZE)


def test_a_kept_compressor_stores_the_bytes_a_new_one_would() -> None:
    """Small bodies go through one compressor per thread, kept: every object is the
    bytes a new compressor gives, whatever came before it, in any thread."""
    sizes = [0, 1, 3000, segment.REUSE_BELOW - 1, segment.REUSE_BELOW, 500, 40_000, 2]
    bodies = [bytes(i % 251 for i in range(n)) + b"k%d" % n for n in sizes]

    def check() -> None:
        for raw in bodies + bodies[::-1]:
            fresh = zstandard.ZstdCompressor(level=segment.SEGMENT_LEVEL).compress(raw)
            assert segment._compress(raw) == fresh

    check()
    with ThreadPoolExecutor(3) as pool:
        for done in [pool.submit(check) for _ in range(3)]:
            done.result()
    assert getattr(segment._kept, "zstd", None) is not None


@given(
    st.lists(
        st.tuples(
            st.binary(max_size=8),
            st.binary(max_size=8),
            write_metas(9, 3),
        ),
        min_size=1,
        max_size=20,
    ),
    st.integers(1, 10**6),
)
def test_a_segment_of_records_decodes_to_the_records(rows: list, first: int) -> None:  # type: ignore[type-arg]
    records = [
        (first + i, i, ((0, k, ("set", v, None)),), ("set",), meta)
        for i, (k, v, meta) in enumerate(rows)
    ]
    data = segment_object([encode_record(r) for r in records], first)
    header, body = segment.decode(data, paths.segment(first), segment.SEGMENT_MAGIC)
    assert (header.first, header.last, header.count) == (first, first + len(rows) - 1, len(rows))
    back = list(iter_records(body))
    assert back == records
    assert all(type(r) is tuple and len(r) == 5 for r in back)
    assert [r[R_META] for r in back] == [r[R_META] for r in records]


@pytest.mark.parametrize("n", [1, 15, 16, 65_535, 65_536])
def test_records_encoded_together_are_the_bytes_of_each_encoded_alone(n: int) -> None:
    """The flusher encodes a batch in one call (an array of records less its header,
    whose size depends on the count): the same bytes as record by record."""
    meta = WriteMeta(7, b"me", None)
    records = [set_record(lsn, b"k%d" % lsn) for lsn in range(1, n + 1)]
    records[0] = (*records[0][:4], meta)
    each = [encode_record(r) for r in records]
    assert encode_records(records) == b"".join(each)
    ends = record_offsets(b"".join(each), n)
    assert ends[0] == len(each[0]) and ends[-1] == sum(map(len, each))
    # A value that needs its extension type (a hash table) is never packed as a map.
    typed = (n + 1, 1, ((0, b"h", ("restore", HashTable({b"f": b"v"}), None)),), ("x",), None)
    assert encode_records([*records[:3], typed]) == b"".join([*each[:3], encode_record(typed)])
    assert type(next(iter_records(encode_records([typed])))[R_OPS][0][2][1]) is HashTable


# -- the flusher -------------------------------------------------------------------------


def test_the_flusher_cuts_segments_at_the_size_cap_and_advances_the_durable_lsn() -> None:
    async def body() -> None:
        objects = MemoryObjectStore()
        clock = FakeClock()
        f = Flusher(objects, durable_lsn=0, segment_max_bytes=64, clock=clock)
        for lsn in range(1, 11):
            f.append(set_record(lsn, b"key%d" % lsn, b"x" * 20))
        assert f.unflushed_bytes > 0 and f.durable_lsn == 0
        assert await f.drain(timeout=5)
        assert f.durable_lsn == 10 and f.unflushed_bytes == 0
        assert f.stats.segments_written > 1  # the cap split the batch
        log = SegmentLog(objects)
        segments = await log.segments()
        lsns = [r[R_LSN] async for seg in log.walk(segments, 0) for r in seg.records()]
        assert lsns == list(range(1, 11))

    run(body())


def test_wait_capacity_answers_by_the_injected_clock_and_wakes_on_a_flush() -> None:
    async def body() -> None:
        clock = FakeClock()
        f = Flusher(MemoryObjectStore(), 0, max_unflushed_bytes=1, clock=clock)
        f.append(set_record(1))
        assert f.over_capacity()
        assert await f.wait_capacity(0.0) is False  # its deadline is now: no wait
        waiting = asyncio.ensure_future(f.wait_capacity(5.0))
        await asyncio.sleep(0)
        assert not waiting.done()
        await f.flush_once()  # the backlog drains: the waiter is told at once
        assert await waiting is True

    run(body())


def test_a_writer_that_finds_its_segment_name_taken_is_fenced() -> None:
    async def body() -> None:
        objects = MemoryObjectStore()
        await objects.put(paths.segment(1), b"another writer's segment")
        f = Flusher(objects, 0, clock=FakeClock())
        f.append(set_record(1))
        with pytest.raises(FencedError):
            await f.flush_once()
        assert f.fenced is not None and "fenced" in f.fenced
        assert f.durable_lsn == 0
        with pytest.raises(FencedError):
            await f.wait_durable(1)

    run(body())


def test_a_retried_put_that_had_landed_is_not_a_fence() -> None:
    async def body() -> None:
        objects = MemoryObjectStore()
        f = Flusher(objects, 0, clock=FakeClock())
        record = set_record(1)
        # An earlier attempt stored the same bytes (its reply was lost).
        await objects.put(paths.segment(1), segment_object([encode_record(record)], 1))
        f.append(record)
        await f.flush_once()
        assert f.fenced is None and f.durable_lsn == 1

    run(body())


# -- the log reader ----------------------------------------------------------------------


async def _write_segments(objects: MemoryObjectStore, ranges: list[tuple[int, int]]) -> None:
    for first, last in ranges:
        data = segment_object([encode_record(set_record(n)) for n in range(first, last + 1)], first)
        await objects.put(paths.segment(first), data)


def test_the_walk_skips_what_is_below_and_names_a_gap() -> None:
    async def body() -> None:
        objects = MemoryObjectStore()
        await _write_segments(objects, [(1, 3), (4, 6), (9, 9)])
        log = SegmentLog(objects)
        segments = await log.segments()
        assert segments == [
            SegmentRef(1, paths.segment(1)),
            SegmentRef(4, paths.segment(4)),
            SegmentRef(9, paths.segment(9)),
        ]
        walked = []
        with pytest.raises(LogGap) as e:
            async for seg in log.walk(segments, 3):
                walked.append(seg.ref.first)
        assert walked == [4]
        assert str(e.value) == (
            f"{paths.segment(9)}: gap in LSNs: expected LSN 7, segment starts at 9"
        )
        # Up to an LSN the walk stops before the gap.
        assert [s.ref.first async for s in log.walk(segments, 0, upto=6)] == [1, 4]

    run(body())


def test_the_log_names_a_missing_or_misplaced_segment() -> None:
    async def body() -> None:
        objects = MemoryObjectStore()
        log = SegmentLog(objects)
        with pytest.raises(MissingSegment) as e:
            await log.read(SegmentRef(5, paths.segment(5)))
        assert str(e.value) == f"{paths.segment(5)}: listed but missing (LSN 5)"
        await objects.put(paths.segment(5), segment_object([encode_record(set_record(6))], 6))
        with pytest.raises(LogError) as e2:
            await log.read(SegmentRef(5, paths.segment(5)))
        assert str(e2.value) == f"{paths.segment(5)}: header says LSN 6, name says 5"

    run(body())


# -- the durable layer -------------------------------------------------------------------


def test_drain_makes_every_write_durable_and_a_restart_reads_it_back() -> None:
    async def body() -> None:
        objects = MemoryObjectStore()
        clock = FakeClock()
        store = Store(databases=2)
        manifest, rec = await take_over(store, objects)
        durable = DurableStore(store, objects, DurabilityConfig(), manifest, rec, clock)
        store.sink = durable.flusher
        db = store.dbs[0]
        for i in range(5):
            store.apply(db, b"k%d" % i, ("set", b"v%d" % i, None))
            store.commit()
        assert durable.durable_lsn < store.lsn
        assert await durable.drain(timeout=5)
        assert durable.durable_lsn == store.lsn
        again = Store(databases=2)
        await recover(again, objects)
        assert again.dbs[0].data == db.data and again.lsn == store.lsn

    run(body())


def test_checkpoints_fall_due_by_records_or_by_the_injected_clock() -> None:
    async def body() -> None:
        objects = MemoryObjectStore()
        clock = FakeClock()
        store = Store(databases=2)
        manifest, rec = await take_over(store, objects)
        config = DurabilityConfig(checkpoint_every_records=3, checkpoint_every_seconds=60)
        durable = DurableStore(store, objects, config, manifest, rec, clock)
        store.sink = durable.flusher
        assert not durable.checkpoint_due()
        db = store.dbs[0]
        store.apply(db, b"a", ("set", b"1", None))
        store.commit()
        assert not durable.checkpoint_due()
        clock.now += 60
        assert durable.checkpoint_due()  # by time
        # A checkpoint waits for the log to reach its LSN: with no background
        # flusher here, drain first.
        assert await durable.drain(timeout=5)
        lsn = await durable.checkpoint()
        assert lsn == store.lsn and not durable.checkpoint_due()
        assert durable.info()["last_checkpoint_age_s"] == 0
        clock.now += 7
        assert durable.info()["last_checkpoint_age_s"] == 7
        for i in range(3):
            store.apply(db, b"b%d" % i, ("set", b"1", None))
            store.commit()
        assert durable.checkpoint_due()  # by records
        durable.checkpoint_soon()
        assert await durable.drain(timeout=5)
        await durable.checkpoint()
        # Compaction kept two checkpoints; a restart starts from the newest.
        assert len(await durable.log.checkpoints()) == 2
        again = Store(databases=2)
        rec2 = await recover(again, objects)
        assert rec2.checkpoint_lsn == store.lsn and again.dbs[0].data == db.data

    run(body())


def test_checkpoints_fall_due_by_bytes_logged_counting_what_a_restart_replayed() -> None:
    """--checkpoint-every-bytes: a few large records make a checkpoint due where many
    small ones would by count; after a restart, the segments it replayed beyond its
    checkpoint count towards the next one (a restart then would replay them again)."""

    async def body() -> None:
        objects = MemoryObjectStore()
        config = _by_bytes(4000)
        durable = await _writer(objects, config)
        store = durable.store

        async def write(target: Store, n: int, size: int) -> None:
            for i in range(n):
                target.apply(target.dbs[0], b"k%d" % i, ("set", b"x" * size, None))
                target.commit()

        await write(store, 3, 100)
        assert await durable.drain(timeout=5)
        assert 300 < durable.log_since_checkpoint() < 4000 and not durable.checkpoint_due()
        await write(store, 3, 1500)  # three records more, 4,500 bytes more
        assert await durable.drain(timeout=5)
        assert durable.checkpoint_due()
        assert await durable.checkpoint() == store.lsn
        assert durable.log_since_checkpoint() == 0 and not durable.checkpoint_due()
        assert durable.info()["log_bytes_since_checkpoint"] == 0
        await write(store, 2, 1500)
        assert await durable.drain(timeout=5)
        logged = durable.log_since_checkpoint()
        assert 3000 < logged < 4000 and not durable.checkpoint_due()

        again = Store(databases=2)
        manifest2, rec2 = await take_over(again, objects)
        assert rec2.records == 2 and rec2.raw_bytes == logged
        durable2 = DurableStore(again, objects, config, manifest2, rec2, FakeClock())
        again.sink = durable2.flusher
        assert durable2.log_since_checkpoint() == logged and not durable2.checkpoint_due()
        await write(again, 1, 1500)
        assert await durable2.drain(timeout=5)
        assert durable2.checkpoint_due()

    run(body())


def test_a_big_checkpoint_falls_due_once_as_much_was_logged_after_it() -> None:
    """--checkpoint-every-bytes is a floor: the next checkpoint falls due once the log
    since the last one is also as big as that checkpoint (a big store is not
    checkpointed over and over)."""

    async def body() -> None:
        durable = await _writer(MemoryObjectStore(), _by_bytes(100))
        store = durable.store
        for i in range(2000):  # values zstd cannot shrink much
            store.apply(store.dbs[0], b"k%d" % i, ("set", b"%032x" % (i * 7919**5), None))
            store.commit()
        assert await durable.drain(timeout=5)
        assert durable.checkpoint_due()
        await durable.checkpoint()
        size = durable.checkpoint_bytes
        assert size > 10_000
        n = 0
        while durable.log_since_checkpoint() < size:
            assert not durable.checkpoint_due()
            store.apply(store.dbs[0], b"k%d" % n, ("set", b"%032x" % n, None))
            store.commit()
            n += 1
            if n % 100 == 0:
                assert await durable.drain(timeout=5)
        assert await durable.drain(timeout=5)
        assert durable.checkpoint_due()

    run(body())


async def _writer(
    objects: MemoryObjectStore, config: DurabilityConfig | None = None
) -> DurableStore:
    """A server that took `objects` over, its durable layer the store's sink."""
    store = Store(databases=2)
    manifest, rec = await take_over(store, objects)
    durable = DurableStore(store, objects, config or DurabilityConfig(), manifest, rec, FakeClock())
    store.sink = durable.flusher
    return durable


def _by_bytes(every: int) -> DurabilityConfig:
    """Checkpoints by bytes logged only (`every`), never by records or time."""
    return DurabilityConfig(
        checkpoint_every_records=10**9,
        checkpoint_every_seconds=10**9,
        checkpoint_every_bytes=every,
    )


def test_a_fenced_server_cannot_drain() -> None:
    async def body() -> None:
        objects = MemoryObjectStore()
        durable = await _writer(objects)
        store = durable.store
        # A second server takes the prefix over.
        await take_over(Store(databases=2), objects)
        store.apply(store.dbs[0], b"k", ("set", b"v", None))
        store.commit()  # acknowledged in async mode: applied in memory only
        assert not await durable.drain(timeout=5)
        assert durable.fenced is not None
        # What it acknowledged after the takeover never reached the log.
        newest = Store(databases=2)
        await recover(newest, objects)
        assert b"k" not in newest.dbs[0].data

    run(body())


def test_an_idle_writer_finds_the_newer_manifest_and_is_fenced() -> None:
    async def body() -> None:
        objects = MemoryObjectStore()
        durable = await _writer(objects)
        assert not await durable.superseded() and durable.fenced is None
        await take_over(Store(databases=2), objects)
        # No write of its own collided with the newcomer's claim: the manifest alone fences it.
        assert await durable.superseded()
        assert durable.fenced is not None and "newer writer" in durable.fenced

    run(body())


class RacingObjectStore(MemoryObjectStore):
    """Storage shared with a writer that flushes another record just after each time
    a newcomer lists the log (so each claim finds its place taken), and looks for a newer
    manifest on every third listing, as its background task does each second."""

    def __init__(self) -> None:
        super().__init__()
        self.old: DurableStore | None = None
        self.listings = 0

    async def list(self, prefix: str) -> list[str]:
        keys = await super().list(prefix)
        old = self.old
        if old is not None and prefix == paths.SEGMENTS and old.fenced is None:
            self.listings += 1
            old.store.apply(old.store.dbs[0], b"k%d" % self.listings, ("set", b"v", None))
            old.store.commit()
            await old.drain(timeout=5)
            if self.listings % 3 == 0:
                await old.superseded()
        return keys


def test_a_takeover_claims_the_log_from_a_writer_that_keeps_flushing() -> None:
    async def body() -> None:
        objects = RacingObjectStore()
        old = objects.old = await _writer(objects)
        new = Store(databases=2)
        await take_over(new, objects)
        assert old.fenced is not None and objects.listings >= 3
        # Every record the old writer made durable is in the newcomer's store.
        assert all(b"k%d" % i in new.dbs[0].data for i in range(1, objects.listings + 1))

    run(body())
