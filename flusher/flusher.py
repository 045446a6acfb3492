"""The durable stream: update records batched into segments in object storage.

`Flusher` is the store's record sink. `append` (called at the commit point) only
queues the record: the records of one pass of the event loop are encoded together
(one msgpack call for the whole batch) at the end of that pass. A background task
cuts a segment every flush interval or when the batch reaches the segment size;
when a writer waits for durability (sync mode, WAITAOF) a PUT starts at the end of
that pass of the event loop (no interval wait), holding every write of the pass
and any queued before (group commit): one PUT per pass, not one per writer.
Segments are written with put-if-absent (so a fenced writer can never interleave
with the new one).

Up to `max_in_flight` PUTs run at once (fewer while the store serves them one at a
time: `PutLimit`), each a segment of the records cut after the previous one's.
They may finish in any order; the durable LSN advances only over the oldest PUTs
that have all finished, so a later PUT finishing first releases nobody. A segment
cut while an earlier one is still in flight carries `segment.FLAG_AHEAD`: after a
crash, storage may hold it without the earlier one, and recovery
(`flusher.log.SegmentLog.walk`) reads such a hole followed only by flagged segments
as the end of the log (none of their records was ever acknowledged as durable),
while a hole before an unflagged segment stays an error.

A PUT that fails is retried with exponential backoff and jitter. A retried PUT
that finds its object already there compares bytes: the same bytes mean an
earlier attempt landed; other bytes mean another writer took over (fenced).
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import logging
import random
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from flusher import paths, segment
from flusher.capacity import Capacity
from flusher.codec import encode_record, encode_records, record_offsets
from flusher.objectapi import InvalidObjectStore, ObjectStore, Unavailable
from flusher.putlimit import PutLimit
from store import R_LSN, R_TIME, UpdateRecord
from store.settings import DEFAULTS
from store.tasks import cancel_and_wait

log = logging.getLogger("temporalstore")


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


def segment_object(encoded: list[bytes], first: int, flags: int = 0) -> bytes:
    """The segment object holding `encoded` records, LSNs `first` onwards."""
    return records_segment(b"".join(encoded), first, first + len(encoded) - 1, flags)


def records_segment(body: bytes, first: int, last: int, flags: int = 0) -> bytes:
    """The segment object holding records `first`..`last`, encoded back to back."""
    return segment.encode(segment.SEGMENT_MAGIC, first, last, last - first + 1, body, flags)


async def put_record(objects: ObjectStore, record: UpdateRecord, epoch: int = 0) -> bool:
    """Write a segment holding `record` alone, at its place in the log (the writer
    of `epoch` claims the next place this way, flagged `segment.FLAG_CLAIM`); as
    `put_segment`."""
    flags = segment.FLAG_CLAIM | segment.epoch_mark(epoch)
    data = segment_object([encode_record(record)], record[R_LSN], flags)
    return await put_segment(objects, paths.segment(record[R_LSN]), data)


MAX_IN_FLIGHT = 4
"""PUTs of segments running at once (`Flusher.max_in_flight`)."""

INLINE_COMPRESS_BYTES = 64 * 1024
"""Batches smaller than this are compressed on the event loop: a thread hop costs
more than zstd on a few records."""


class _Put:
    """One segment on its way to storage: records `first`..`last`."""

    __slots__ = ("done", "first", "last", "peers", "raw", "records", "size", "task", "time_ms")

    def __init__(self, first: int, last: int, time_ms: int, raw: int, records: int) -> None:
        self.first = first
        self.last = last
        self.time_ms = time_ms  # the oldest record's commit time
        self.raw = raw  # encoded bytes of its records
        self.records = records
        self.size = 0  # bytes stored
        self.done = False
        self.peers = 1  # PUTs in flight when it started, itself included
        self.task: asyncio.Task[None] | None = None


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
        max_in_flight: int = MAX_IN_FLIGHT,
        epoch: int = 0,
    ) -> None:
        self.objects = objects
        self.durable_lsn = durable_lsn
        self._last_lsn = durable_lsn  # of the last record encoded
        self.interval = flush_interval_ms / 1000
        self.segment_max_bytes = segment_max_bytes
        self.retry_base = retry_base_s
        self.retry_max = retry_max_s
        self.clock = clock
        self.max_in_flight = max(1, max_in_flight)
        # How many of them may run now: fewer when the store serves PUTs one at a time.
        self.put_limit = PutLimit(self.max_in_flight)
        self.mark = segment.epoch_mark(epoch)  # in every segment's flags
        # Records committed in this pass of the event loop, not yet encoded: encoded
        # together at its end (`encode_pending`), one C call for the batch. The same
        # list for the flusher's life: the store's commit appends to it directly
        # (`Store.sink_batch`, set by `DurableStore.start`) and calls `batch_started` for a
        # batch's first record.
        self.raw: list[UpdateRecord] = []
        # The backlog's size (`pending_bytes`) and cap (max-unflushed-bytes), kept in a
        # compiled object whose `over` is the check before every write.
        self.capacity = Capacity(self.raw, max_unflushed_bytes)
        # (first LSN, last LSN, commit time of the first, the records encoded back to
        # back): chunks of consecutive records, so the backlog is counted exactly and
        # holds no objects for the garbage collector to walk.
        self.pending: deque[tuple[int, int, int, bytes]] = deque()
        # Told of every batch of records as encoded (first LSN, last LSN, the records
        # back to back): the replication backlog, when set.
        self.tap: Callable[[int, int, bytes], None] | None = None
        self.stats = FlushStats()
        self.fenced: str | None = None
        # Told once when this writer is fenced (the durability object keeps `fenced`
        # as a plain attribute the dispatcher reads before each write).
        self.on_fenced: Callable[[str], None] | None = None
        self.closed = False
        self._wake = asyncio.Event()
        # Every writer waiting for durability: the LSN it waits for and its callback,
        # side by side, in LSN order (arrival order among equal LSNs). Writers begin to
        # wait in commit order, so a new one almost always goes at the end; a PUT that
        # lands releases a prefix (`_release_durable`).
        self._wait_lsns: list[int] = []
        self._wait_calls: list[Callable[[Exception | None], None]] = []
        self._capacity: list[asyncio.Future[None]] = []
        self._task: asyncio.Task[None] | None = None
        # The loop `start` ran in, and its thread: `batch_started` schedules on it
        # without asyncio.get_running_loop(), which calls getpid() (a system call)
        # each time on Python 3.11.
        self._loop: asyncio.AbstractEventLoop | None = None
        self._loop_thread = 0
        self._in_flight: deque[_Put] = deque()  # oldest first
        self._cut_lsn = durable_lsn  # the last LSN handed to a PUT
        self._wanted = durable_lsn  # the highest LSN a writer waits for
        self._kicked = False  # a `_kick` is due at the end of this pass of the loop
        self._rng = random.Random()

    # -- the sink ------------------------------------------------------------------

    def append(self, record: UpdateRecord) -> None:
        raw = self.raw
        raw.append(record)
        if len(raw) == 1:
            self.batch_started()

    def batch_started(self) -> None:
        """`raw` has just received its first record: encode at the end of this pass
        of the event loop."""
        try:
            self._call_soon(self.encode_pending)
        except RuntimeError:  # no event loop (tools, tests): at once
            self.encode_pending()

    def _call_soon(self, fn: Callable[[], None]) -> None:
        """Run `fn` at the end of this pass of the running event loop: the loop `start`
        saved when called in its thread while it runs (asyncio.get_running_loop() would
        call getpid(), a system call, per batch); RuntimeError without a running loop."""
        loop = self._loop
        if loop is None or threading.get_ident() != self._loop_thread or not loop.is_running():
            loop = asyncio.get_running_loop()
        loop.call_soon(fn)

    @property
    def last_lsn(self) -> int:
        """The LSN of the last record appended."""
        raw = self.raw
        return raw[-1][R_LSN] if raw else self._last_lsn

    def encode_pending(self) -> None:
        """Encode the records appended since the last call, as one chunk."""
        batch = self.raw
        if not batch:
            return
        raw = batch.copy()
        batch.clear()
        first, last = raw[0][R_LSN], raw[-1][R_LSN]
        self._last_lsn = last
        data = encode_records(raw)
        self.pending.append((first, last, raw[0][R_TIME], data))
        self.pending_bytes += len(data)
        if self.tap is not None:
            self.tap(first, last, data)
        if self.pending_bytes >= self.segment_max_bytes:
            self._wake.set()

    # -- state ---------------------------------------------------------------------

    @property
    def pending_bytes(self) -> int:
        """Bytes of every record not yet durable: queued or in a PUT."""
        return self.capacity.pending_bytes

    @pending_bytes.setter
    def pending_bytes(self, n: int) -> None:
        self.capacity.pending_bytes = n

    @property
    def unflushed_bytes(self) -> int:
        self.encode_pending()
        return self.pending_bytes

    @property
    def in_flight(self) -> int:
        """PUTs of segments running now."""
        return len(self._in_flight)

    def flush_lag_ms(self) -> int:
        """Age of the oldest write not yet durable."""
        if self._in_flight:
            oldest = self._in_flight[0].time_ms
        elif self.pending:
            oldest = self.pending[0][2]
        elif self.raw:
            oldest = self.raw[0][R_TIME]
        else:
            return 0
        return max(0, int(time.time() * 1000) - oldest)

    def over_capacity(self) -> bool:
        # Records not yet encoded count as their least possible size.
        return self.capacity.over()

    # -- waiting -------------------------------------------------------------------

    def on_durable(self, lsn: int, callback: Callable[[Exception | None], None]) -> None:
        """Call `callback(None)` once `lsn` is durable (at once if it is already), or
        `callback(exc)` if this writer is fenced first. No task and no future: the
        writers released by one PUT are called back in one pass, in LSN order, from
        the PUT's completion (a connection sends its held replies there)."""
        if self.fenced is not None:
            callback(FencedError(self.fenced))
            return
        if lsn <= self.durable_lsn:
            callback(None)
            return
        lsns = self._wait_lsns
        if not lsns or lsn >= lsns[-1]:
            lsns.append(lsn)
            self._wait_calls.append(callback)
        else:  # behind a later writer (one re-registered while its replies were held)
            at = bisect.bisect_right(lsns, lsn)
            lsns.insert(at, lsn)
            self._wait_calls.insert(at, callback)
        if lsn > self._wanted:
            self._wanted = lsn
        if lsn > self._cut_lsn and not self._kicked:
            # Its record is in no PUT yet: one PUT for every write of this pass of
            # the event loop, started at its end (`_kick`), not one per writer.
            self._kicked = True
            self._call_soon(self._kick)

    def _kick(self) -> None:
        """End of a pass of the event loop in which writers began to wait: start PUTs
        of everything queued now (as many as the free slots need), else leave it to
        the task (PUTs in flight end, or the flusher is not running)."""
        self._kicked = False
        if self._task is None or self.closed or self.fenced is not None:
            self._wake.set()
            return
        self.encode_pending()  # the pass's records (already, unless a writer came first)
        while (
            self.pending
            and self._wanted > self._cut_lsn
            and len(self._in_flight) < self.put_limit.limit
        ):
            self._start_put()

    async def wait_durable(self, lsn: int, timeout: float | None = None) -> bool:
        """Wait until `lsn` is durable (True), or the timeout passes (False).
        Raises FencedError if this writer was fenced."""
        if self.fenced is not None:
            raise FencedError(self.fenced)
        if lsn <= self.durable_lsn:
            return True
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def resolve(exc: Exception | None) -> None:
            if fut.done():  # timed out or cancelled meanwhile
                return
            if exc is None:
                fut.set_result(None)
            else:
                fut.set_exception(exc)

        self.on_durable(lsn, resolve)
        if timeout is None:
            await fut
            return True
        try:
            await asyncio.wait_for(fut, timeout)
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
        self._release_durable()
        if not self.over_capacity():
            for fut in self._capacity:
                if not fut.done():
                    fut.set_result(None)
            self._capacity.clear()

    def _release_durable(self) -> None:
        """Call back, in LSN order, every writer waiting for an LSN now durable (taken
        off the lists first: a callback may begin to wait again)."""
        lsns = self._wait_lsns
        if not lsns or lsns[0] > self.durable_lsn:
            return
        calls = self._wait_calls
        if lsns[-1] <= self.durable_lsn:  # all of them (group commit in lockstep)
            done = calls
            self._wait_lsns, self._wait_calls = [], []
        else:
            n = bisect.bisect_right(lsns, self.durable_lsn)
            done = calls[:n]
            del lsns[:n], calls[:n]
        self._call_all(done, None)

    @staticmethod
    def _call_all(
        callbacks: list[Callable[[Exception | None], None]], exc: Exception | None
    ) -> None:
        """Waiters' callbacks, in order: a failure is logged, the others are still called."""
        for callback in callbacks:
            try:
                callback(exc)
            except Exception:
                log.exception("releasing a writer waiting for durability")

    def _fail_waiters(self, exc: Exception) -> None:
        self._release_durable()  # durable ones whose callback was still to come
        calls = self._wait_calls
        self._wait_lsns, self._wait_calls = [], []
        self._call_all(calls, exc)
        for fut in self._capacity:
            if not fut.done():
                fut.set_exception(exc)
        self._capacity.clear()

    # -- the background task -------------------------------------------------------

    def start(self) -> None:
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._loop_thread = threading.get_ident()
        self._task = loop.create_task(self._run())

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
            due = now >= next_due
            if due:
                # Only a scheduled flush moves the schedule: early ones (a full batch,
                # a sync write waiting) must not push the next one further away.
                next_due = now + self.interval
            self.encode_pending()
            while (
                self.pending
                and self.fenced is None
                and len(self._in_flight) < self.put_limit.limit
                and (
                    due
                    or self._wanted > self._cut_lsn
                    or self.pending_bytes >= self.segment_max_bytes
                    or self._capacity
                )
            ):
                self._start_put()
                due = False  # one scheduled segment; more only if still wanted or full

    def _start_put(self) -> _Put:
        """Cut a segment of the oldest queued records (up to the size cap) and start
        its PUT; the durable LSN moves when it and every earlier one have landed."""
        pending = self.pending
        if len(pending[0][3]) > self.segment_max_bytes and pending[0][0] < pending[0][1]:
            self._split_first()
        batch: list[bytes] = []
        size = 0
        first, time_ms = pending[0][0], pending[0][2]
        last = first
        while pending:
            encoded = pending[0][3]
            if batch and size + len(encoded) > self.segment_max_bytes:
                break
            batch.append(encoded)
            size += len(encoded)
            last = pending[0][1]
            pending.popleft()
        self._cut_lsn = last
        flags = self.mark | (segment.FLAG_AHEAD if self._in_flight else 0)
        p = _Put(first, last, time_ms, size, last - first + 1)
        self._in_flight.append(p)
        p.peers = len(self._in_flight)
        p.task = asyncio.get_running_loop().create_task(self._write(p, batch, flags))
        p.task.add_done_callback(self._put_done)
        return p

    async def _write(self, p: _Put, batch: list[bytes], flags: int) -> None:
        body = b"".join(batch)
        if p.raw < INLINE_COMPRESS_BYTES:
            data = records_segment(body, p.first, p.last, flags)
        else:
            data = await asyncio.to_thread(records_segment, body, p.first, p.last, flags)
        await self._put(paths.segment(p.first), data, f"segment LSN {p.first}-{p.last}", p.peers)
        p.size = len(data)
        p.done = True
        self._advance()

    def _advance(self) -> None:
        """Move the durable LSN over the oldest PUTs that have all landed, in order,
        and release the writers waiting for it."""
        in_flight = self._in_flight
        if not in_flight or not in_flight[0].done or self.fenced is not None:
            return
        st = self.stats
        while in_flight and in_flight[0].done:
            p = in_flight.popleft()
            self.pending_bytes -= p.raw
            self.durable_lsn = p.last
            st.segments_written += 1
            st.records_written += p.records
            st.bytes_written_raw += p.raw
            st.bytes_written_compressed += p.size
        st.last_flush_status = "ok"
        if self.pending and self._wanted > self._cut_lsn:
            # Writers wait for records no PUT holds yet: the next PUT starts first, and
            # the writers this one made durable are called back just after, in the
            # loop's next callback, once the new PUT's task has built and sent its
            # request. Releasing first would leave the store idle while hundreds of
            # held replies go out (group commit in lockstep: +30 % sync SET/s at 500
            # clients against a local store).
            self._kick()
            self._call_soon(self._notify)
            return
        self._notify()
        if self.pending and (self._wanted > self._cut_lsn or self._capacity):
            self._wake.set()  # a slot is free for records still waited for

    def _put_done(self, task: asyncio.Task[None]) -> None:
        if not task.cancelled():
            task.exception()  # seen by whoever awaits it; never "not retrieved"
        if self.pending or self._wanted > self._cut_lsn:
            self._wake.set()

    async def flush_once(self) -> None:
        """Write one segment with the oldest pending records (up to the size cap) and
        wait until it is durable (with every earlier one): for a drain and tests,
        beside the background task or after `stop`."""
        self.encode_pending()
        if self.pending and self.fenced is None:
            while len(self._in_flight) >= self.put_limit.limit:
                await self._wait_oldest()
            if not self.pending:
                return
            p = self._start_put()
        elif self._in_flight:
            p = self._in_flight[-1]
        else:
            return
        while not p.done or self.durable_lsn < p.last:
            if self.fenced is not None:
                raise FencedError(self.fenced)
            await self._wait_oldest()

    async def _wait_oldest(self) -> None:
        """Until the oldest PUT in flight ends; its error (if any) is raised."""
        oldest = self._in_flight[0] if self._in_flight else None
        if oldest is None or oldest.task is None:
            return
        await asyncio.shield(oldest.task)

    def _split_first(self) -> None:
        """Cut the oldest chunk (past the segment cap) at the cap: a segment holds
        as many of its records as fit, and at least one."""
        first, last, time_ms, data = self.pending.popleft()
        ends = record_offsets(data, last - first + 1)
        n = max(1, bisect.bisect_right(ends, self.segment_max_bytes))
        cut = ends[n - 1]
        self.pending.appendleft((first + n, last, time_ms, data[cut:]))
        self.pending.appendleft((first, first + n - 1, time_ms, data[:cut]))

    async def _put(self, key: str, data: bytes, what: str, peers: int = 0) -> None:
        """PUT a segment (`put_segment`), retried until it lands or this writer is
        fenced. `peers`: PUTs in flight when it started, itself included (a segment's
        PUT: its latency, when its first try lands, goes to `put_limit`)."""
        attempt = 0
        while True:
            if self.fenced is not None:
                raise FencedError(self.fenced)
            self.stats.puts += 1
            try:
                t0 = time.monotonic()
                if await put_segment(self.objects, key, data):
                    if peers and not attempt:
                        self.put_limit.landed(time.monotonic() - t0, peers)
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
            if self.on_fenced is not None:
                self.on_fenced(why)
            self.stats.last_flush_status = "fenced"
            log.error("%s", why)
        exc = FencedError(why)
        self._fail_waiters(exc)
        raise exc

    async def drain(self, timeout: float) -> bool:
        """Flush everything pending (graceful shutdown), beside the background task
        or after `stop`. True if all is durable."""
        deadline = self.clock() + timeout
        while (self.pending or self.raw or self._in_flight) and self.fenced is None:
            if self.clock() >= deadline:
                break
            try:
                await asyncio.wait_for(self.flush_once(), max(0.1, deadline - self.clock()))
            except (TimeoutError, Unavailable, FencedError):
                break
        return not self.pending and not self.raw and not self._in_flight

    async def stop(self) -> None:
        """Stop the background task (pending records stay; `drain` writes them; PUTs
        in flight go on)."""
        self.closed = True
        self._wake.set()
        with contextlib.suppress(FencedError, Unavailable):
            await cancel_and_wait(self._task)
