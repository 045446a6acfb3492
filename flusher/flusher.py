"""The durable stream: update records batched into segments in object storage.

`Flusher` is the store's record sink. `append` (called at the commit point) only
queues the record: the records of one pass of the event loop are encoded together
(one msgpack call for the whole batch) at the end of that pass. A background task
cuts a segment every flush interval or when the batch reaches the segment size,
writes it with put-if-absent (so a fenced writer can never interleave with the new
one), and advances the durable LSN.
Writers waiting for durability (sync mode, WAITAOF) wake the task at once, so all
writes waiting together share one PUT (group commit).

A PUT that fails is retried with exponential backoff and jitter. A retried PUT
that finds its object already there compares bytes: the same bytes mean an
earlier attempt landed; other bytes mean another writer took over (fenced).
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import heapq
import logging
import random
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from flusher import paths, segment
from flusher.codec import encode_record, encode_records, record_offsets
from flusher.objectstore import InvalidObjectStore, ObjectStore, Unavailable
from store import UpdateRecord
from store.settings import DEFAULTS

log = logging.getLogger("temporalstore")

# The least an encoded record takes (its array header, LSN, commit time, ops, command
# names and metadata): how records not yet encoded count against the backlog cap.
MIN_RECORD_BYTES = 16


class FencedError(Exception):
    """Another server has taken over this storage prefix."""


@dataclass
class FlushStats:
    segments_written: int = 0
    records_written: int = 0
    bytes_written_raw: int = 0
    bytes_written_compressed: int = 0
    puts: int = 0
    put_failures: int = 0
    last_flush_status: str = "ok"
    last_error: str = ""


async def put_segment(objects: ObjectStore, key: str, data: bytes) -> bool:
    """Write a segment once. True: it is stored (now or by an earlier attempt of
    ours); False: another writer's object holds the name."""
    if await objects.put_if_absent(key, data):
        return True
    existing = await objects.get(key)
    return existing == data


def segment_object(encoded: list[bytes], first: int) -> bytes:
    """The segment object holding `encoded` records, LSNs `first` onwards."""
    return records_segment(b"".join(encoded), first, first + len(encoded) - 1)


def records_segment(body: bytes, first: int, last: int) -> bytes:
    """The segment object holding records `first`..`last`, encoded back to back."""
    return segment.encode(segment.SEGMENT_MAGIC, first, last, last - first + 1, body)


async def put_record(objects: ObjectStore, record: UpdateRecord) -> bool:
    """Write a segment holding `record` alone, at its place in the log (a takeover
    claims the next place this way); as `put_segment`."""
    data = segment_object([encode_record(record)], record.lsn)
    return await put_segment(objects, paths.segment(record.lsn), data)


class Flusher:
    def __init__(
        self,
        objects: ObjectStore,
        durable_lsn: int,
        flush_interval_ms: int = DEFAULTS.flush_interval_ms,
        segment_max_bytes: int = DEFAULTS.segment_max_bytes,
        max_unflushed_bytes: int = DEFAULTS.max_unflushed_bytes,
        retry_base_s: float = 0.05,
        retry_max_s: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.objects = objects
        self.durable_lsn = durable_lsn
        self.last_lsn = durable_lsn
        self.interval = flush_interval_ms / 1000
        self.segment_max_bytes = segment_max_bytes
        self.max_unflushed_bytes = max_unflushed_bytes
        self.retry_base = retry_base_s
        self.retry_max = retry_max_s
        self.clock = clock
        # Records committed in this pass of the event loop, not yet encoded: encoded
        # together at its end (`encode_pending`), one C call for the batch.
        self.raw: list[UpdateRecord] = []
        # (first LSN, last LSN, commit time of the first, the records encoded back to
        # back): chunks of consecutive records, so the backlog is counted exactly and
        # holds no objects for the garbage collector to walk.
        self.pending: deque[tuple[int, int, int, bytes]] = deque()
        self.pending_bytes = 0
        # Told of every batch of records as encoded (first LSN, last LSN, the records
        # back to back): the replication backlog, when set.
        self.tap: Callable[[int, int, bytes], None] | None = None
        self.stats = FlushStats()
        self.fenced: str | None = None
        self.closed = False
        self._wake = asyncio.Event()
        self._waiters: list[tuple[int, int, asyncio.Future[None]]] = []
        self._capacity: list[asyncio.Future[None]] = []
        self._seq = 0
        self._task: asyncio.Task[None] | None = None
        self._flush_lock = asyncio.Lock()
        self._rng = random.Random()

    # -- the sink ------------------------------------------------------------------

    def append(self, record: UpdateRecord) -> None:
        self.last_lsn = record.lsn
        raw = self.raw
        raw.append(record)
        if len(raw) == 1:
            try:
                asyncio.get_running_loop().call_soon(self.encode_pending)
            except RuntimeError:  # no event loop (tools, tests): at once
                self.encode_pending()

    def encode_pending(self) -> None:
        """Encode the records appended since the last call, as one chunk."""
        raw = self.raw
        if not raw:
            return
        self.raw = []
        first, last = raw[0].lsn, raw[-1].lsn
        data = encode_records(raw)
        self.pending.append((first, last, raw[0].time_ms, data))
        self.pending_bytes += len(data)
        if self.tap is not None:
            self.tap(first, last, data)
        if self.pending_bytes >= self.segment_max_bytes:
            self._wake.set()

    # -- state ---------------------------------------------------------------------

    @property
    def unflushed_bytes(self) -> int:
        self.encode_pending()
        return self.pending_bytes

    def flush_lag_ms(self) -> int:
        """Age of the oldest write not yet durable."""
        if self.pending:
            oldest = self.pending[0][2]
        elif self.raw:
            oldest = self.raw[0].time_ms
        else:
            return 0
        return max(0, int(time.time() * 1000) - oldest)

    def over_capacity(self) -> bool:
        # Records not yet encoded count as their least possible size.
        return self.pending_bytes + MIN_RECORD_BYTES * len(self.raw) > self.max_unflushed_bytes

    # -- waiting -------------------------------------------------------------------

    async def wait_durable(self, lsn: int, timeout: float | None = None) -> bool:
        """Wait until `lsn` is durable (True), or the timeout passes (False).
        Raises FencedError if this writer was fenced."""
        if self.fenced is not None:
            raise FencedError(self.fenced)
        if lsn <= self.durable_lsn:
            return True
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._seq += 1
        heapq.heappush(self._waiters, (lsn, self._seq, fut))
        self._wake.set()
        try:
            await asyncio.wait_for(asyncio.shield(fut), timeout)
        except TimeoutError:
            return False
        return True

    async def wait_capacity(self, timeout: float) -> bool:
        """Wait until the unflushed backlog is under the cap (True) or time out."""
        deadline = self.clock() + timeout
        while self.over_capacity():
            if self.fenced is not None:
                raise FencedError(self.fenced)
            remaining = deadline - self.clock()
            if remaining <= 0:
                return False
            fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
            self._capacity.append(fut)
            self._wake.set()
            try:
                await asyncio.wait_for(asyncio.shield(fut), remaining)
            except TimeoutError:
                return not self.over_capacity()
        return True

    def _notify(self) -> None:
        while self._waiters and self._waiters[0][0] <= self.durable_lsn:
            _lsn, _seq, fut = heapq.heappop(self._waiters)
            if not fut.done():
                fut.set_result(None)
        if not self.over_capacity():
            for fut in self._capacity:
                if not fut.done():
                    fut.set_result(None)
            self._capacity.clear()

    def _fail_waiters(self, exc: Exception) -> None:
        for _lsn, _seq, fut in self._waiters:
            if not fut.done():
                fut.set_exception(exc)
        self._waiters.clear()
        for fut in self._capacity:
            if not fut.done():
                fut.set_exception(exc)
        self._capacity.clear()

    # -- the background task -------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        next_due = self.clock() + self.interval
        while not self.closed:
            # A fixed rate: the time a flush took counts against the next interval.
            delay = next_due - self.clock()
            if delay > 0 and not self._wake.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), delay)
            self._wake.clear()
            now = self.clock()
            if now >= next_due:
                # Only a scheduled flush moves the schedule: early ones (a full batch,
                # a sync write waiting) must not push the next one further away.
                next_due = now + self.interval
            if (self.pending or self.raw) and self.fenced is None:
                with contextlib.suppress(FencedError):
                    await self.flush_once()

    async def flush_once(self) -> None:
        """Write one segment with the oldest pending records (up to the size cap).
        One at a time: a drain may run beside the background task."""
        async with self._flush_lock:
            self.encode_pending()
            if self.pending:
                await self._flush_batch()

    async def _flush_batch(self) -> None:
        pending = self.pending
        if len(pending[0][3]) > self.segment_max_bytes and pending[0][0] < pending[0][1]:
            self._split_first()
        batch: list[bytes] = []
        size = 0
        last = 0
        for _first, last_lsn, _t, encoded in pending:
            if batch and size + len(encoded) > self.segment_max_bytes:
                break
            batch.append(encoded)
            size += len(encoded)
            last = last_lsn
        first = pending[0][0]
        data = await asyncio.to_thread(records_segment, b"".join(batch), first, last)
        await self._put(paths.segment(first), data, f"segment LSN {first}-{last}")
        for _ in batch:
            pending.popleft()
        self.pending_bytes -= size
        self.durable_lsn = last
        st = self.stats
        st.segments_written += 1
        st.records_written += last - first + 1
        st.bytes_written_raw += size
        st.bytes_written_compressed += len(data)
        st.last_flush_status = "ok"
        self._notify()

    def _split_first(self) -> None:
        """Cut the oldest chunk (past the segment cap) at the cap: a segment holds
        as many of its records as fit, and at least one."""
        first, last, time_ms, data = self.pending.popleft()
        ends = record_offsets(data, last - first + 1)
        n = max(1, bisect.bisect_right(ends, self.segment_max_bytes))
        cut = ends[n - 1]
        self.pending.appendleft((first + n, last, time_ms, data[cut:]))
        self.pending.appendleft((first, first + n - 1, time_ms, data[:cut]))

    async def _put(self, key: str, data: bytes, what: str) -> None:
        attempt = 0
        while True:
            self.stats.puts += 1
            try:
                if await put_segment(self.objects, key, data):
                    return
                self.fence(f"another writer wrote {key} ({what}): this server is fenced")
            except (Unavailable, InvalidObjectStore) as e:
                self.stats.put_failures += 1
                self.stats.last_flush_status = "err"
                self.stats.last_error = str(e)
                if attempt == 0 or attempt % 20 == 0:
                    log.warning("object storage unavailable writing %s, retrying: %s", key, e)
            attempt += 1
            delay = min(self.retry_max, self.retry_base * 2**attempt)
            await asyncio.sleep(delay * (0.5 + self._rng.random() / 2))
            if self.closed and attempt > 3:
                raise Unavailable(f"gave up writing {key}: {self.stats.last_error}")

    def fence(self, why: str) -> None:
        if self.fenced is None:
            self.fenced = why
            self.stats.last_flush_status = "fenced"
            log.error("%s", why)
        exc = FencedError(why)
        self._fail_waiters(exc)
        raise exc

    async def drain(self, timeout: float) -> bool:
        """Flush everything pending (graceful shutdown), beside the background task
        or after `stop`. True if all is durable."""
        deadline = self.clock() + timeout
        while (self.pending or self.raw) and self.fenced is None and self.clock() < deadline:
            try:
                await asyncio.wait_for(self.flush_once(), max(0.1, deadline - self.clock()))
            except (TimeoutError, Unavailable, FencedError):
                break
        return not self.pending and not self.raw

    async def stop(self) -> None:
        """Stop the background task (pending records stay; `drain` writes them)."""
        self.closed = True
        self._wake.set()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError, FencedError, Unavailable):
                await self._task
