"""Opening a storage prefix for writing: recover, take over, keep it durable.

`DurableStore.open` rebuilds the store (replay), then takes the prefix over:
it writes a manifest with the next writer epoch (create-if-absent, so two new
servers cannot both win) and claims the next place in the log with a takeover
record written put-if-absent. A previous writer still running finds that name
taken at its next flush and is fenced: it can never interleave segments with us.
Then the flusher runs, checkpoints are written every N records or seconds and at
shutdown, and compaction deletes what the kept checkpoints make unnecessary.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from dataclasses import dataclass
from typing import Any

from flusher import paths, segment
from flusher.checkpoint import (
    Manifest,
    new_manifest,
    newest_manifest,
    read_checkpoint,
    write_checkpoint,
)
from flusher.codec import encode_record, iter_records
from flusher.flusher import FencedError, Flusher, put_segment
from flusher.objectstore import ObjectStore, ObjectStoreError
from replay.replay import Progress, Recovery, ReplayError, list_segments, recover
from store import HistoryPolicy, PrunedError, Store, UpdateRecord, WriteMeta, now_ms
from store.settings import DEFAULTS

log = logging.getLogger("temporalstore")


@dataclass
class DurabilityConfig:
    mode: str = DEFAULTS.durability
    flush_interval_ms: int = DEFAULTS.flush_interval_ms
    segment_max_bytes: int = DEFAULTS.segment_max_bytes
    max_unflushed_bytes: int = DEFAULTS.max_unflushed_bytes
    checkpoint_every_records: int = DEFAULTS.checkpoint_every_records
    checkpoint_every_seconds: float = DEFAULTS.checkpoint_every_seconds
    keep_checkpoints: int = DEFAULTS.keep_checkpoints


class DurableStore:
    """The running durable side of a server: flusher, checkpoints, compaction."""

    def __init__(
        self,
        store: Store,
        objects: ObjectStore,
        config: DurabilityConfig,
        manifest: Manifest,
        recovery: Recovery,
    ) -> None:
        self.store = store
        self.objects = objects
        self.config = config
        self.manifest = manifest
        self.recovery = recovery
        self.flusher = Flusher(
            objects,
            durable_lsn=store.lsn,
            flush_interval_ms=config.flush_interval_ms,
            segment_max_bytes=config.segment_max_bytes,
            max_unflushed_bytes=config.max_unflushed_bytes,
        )
        self.checkpoint_lsn = manifest.checkpoint_lsn or 0
        self.checkpoint_time = time.monotonic()
        self.checkpoints_written = 0
        self.last_checkpoint_status = "ok"
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._requested = False
        self._checkpoint_lock = asyncio.Lock()

    @property
    def sync(self) -> bool:
        return self.config.mode == "sync"

    # -- opening ---------------------------------------------------------------------

    @classmethod
    async def open(
        cls,
        store: Store,
        objects: ObjectStore,
        config: DurabilityConfig,
        progress: Progress | None = None,
    ) -> DurableStore:
        gc.disable()  # replay builds long-lived objects only: no cycles to find
        try:
            rec = await recover(store, objects, progress)
        finally:
            gc.enable()
        previous = rec.manifest
        epoch = (previous.epoch if previous else 0) + 1
        manifest = new_manifest(epoch, 0, previous.checkpoint_lsn if previous else None)
        if not await objects.put_if_absent(manifest.key, manifest.encode()):
            raise ReplayError(f"{manifest.key}: another server is taking over this storage prefix")
        for _attempt in range(20):
            lsn = store.lsn + 1
            record = UpdateRecord(
                lsn, now_ms(), (), (), WriteMeta(0, b"temporalstore", b"epoch %d" % epoch)
            )
            data = segment.encode(segment.SEGMENT_MAGIC, lsn, lsn, 1, encode_record(record))
            if await put_segment(objects, paths.segment(lsn), data):
                store.replay(record)
                break
            # The previous writer flushed more since we read: catch up and retry.
            rec = await recover(store, objects, progress, after=rec)
        else:
            raise ReplayError("could not claim the log: the previous writer keeps writing")
        log.info(
            "storage %s: epoch %d, LSN %d (%d records replayed in %.2fs)",
            objects.url,
            epoch,
            store.lsn,
            rec.records,
            rec.seconds,
        )
        return cls(store, objects, config, manifest, rec)

    def start(self) -> None:
        self.store.default_sync = self.sync
        self.store.sink = self.flusher
        self.flusher.start()
        self._task = asyncio.get_running_loop().create_task(self._checkpoints())

    # -- commands-facing -------------------------------------------------------------

    @property
    def durable_lsn(self) -> int:
        return self.flusher.durable_lsn

    @property
    def fenced(self) -> str | None:
        return self.flusher.fenced

    async def wait_durable(self, lsn: int, timeout: float | None = None) -> bool:
        return await self.flusher.wait_durable(lsn, timeout)

    def over_capacity(self) -> bool:
        return self.flusher.over_capacity()

    async def wait_capacity(self, timeout: float) -> bool:
        return await self.flusher.wait_capacity(timeout)

    async def read_as_of(self, dbi: int, key: bytes, lsn: int) -> tuple[Any, int | None]:
        """A key's (value, expire) just after `lsn`, from object storage: the newest
        checkpoint at or before it plus the segments up to it, replayed into a
        scratch store. Slow (it reads everything up to `lsn`), for versions that
        retention dropped from memory. Raises PrunedError if storage no longer
        reaches back that far either."""
        ckpts = sorted(
            c
            for k in await self.objects.list(paths.CHECKPOINTS)
            if (c := paths.parse_checkpoint(k)) is not None and c <= lsn
        )
        scratch = Store(databases=len(self.store.dbs), history=HistoryPolicy("versions", 1))
        base = 0
        if ckpts:
            await read_checkpoint(self.objects, scratch, ckpts[-1])
            base = ckpts[-1]
        segments = await list_segments(self.objects)
        covering = []
        for i, (first, name) in enumerate(segments):
            last = segments[i + 1][0] - 1 if i + 1 < len(segments) else None
            if first <= lsn and (last is None or last > base):
                covering.append((first, name))
        if not covering or (covering[0][0] > base + 1):
            raise PrunedError(lsn, key)
        for _first, name in covering:
            data = await self.objects.get(name)
            if data is None:
                raise PrunedError(lsn, key)
            _header, raw = await asyncio.to_thread(
                segment.decode, data, name, segment.SEGMENT_MAGIC
            )
            for record in iter_records(raw):
                if base < record.lsn <= lsn:
                    scratch.replay(record)
        db = scratch.dbs[dbi]
        return db.data.get(key), db.expires.get(key)

    def last_error(self) -> str:
        return self.flusher.stats.last_error or "flush backlog over max-unflushed-bytes"

    def info(self) -> dict[str, Any]:
        f = self.flusher
        st = f.stats
        rec = self.recovery
        return {
            "durability": self.config.mode,
            "storage": self.objects.url,
            "writer_epoch": self.manifest.epoch,
            "last_lsn": self.store.lsn,
            "durable_lsn": f.durable_lsn,
            "unflushed_bytes": f.unflushed_bytes,
            "flush_lag_ms": f.flush_lag_ms(),
            "segments_written": st.segments_written,
            "records_written": st.records_written,
            "bytes_written_raw": st.bytes_written_raw,
            "bytes_written_compressed": st.bytes_written_compressed,
            "object_puts": st.puts,
            "object_put_failures": st.put_failures,
            "last_flush_status": st.last_flush_status,
            "fenced": 0 if f.fenced is None else 1,
            "last_checkpoint_lsn": self.checkpoint_lsn,
            "last_checkpoint_age_s": int(time.monotonic() - self.checkpoint_time),
            "last_checkpoint_status": self.last_checkpoint_status,
            "checkpoints_written": self.checkpoints_written,
            "replay_records": rec.records,
            "replay_segments": rec.segments,
            "replay_seconds": f"{rec.seconds:.3f}",
        }

    # -- checkpoints and compaction --------------------------------------------------

    async def _checkpoints(self) -> None:
        cfg = self.config
        while not self._closed:
            await asyncio.sleep(0.5)
            due_records = self.store.lsn - self.checkpoint_lsn >= cfg.checkpoint_every_records
            due_time = (
                time.monotonic() - self.checkpoint_time >= cfg.checkpoint_every_seconds
                and self.store.lsn > self.checkpoint_lsn
            )
            if (due_records or due_time or self._requested) and self.fenced is None:
                self._requested = False
                try:
                    await self.checkpoint()
                except (ObjectStoreError, FencedError) as e:
                    self.last_checkpoint_status = "err"
                    log.warning("checkpoint failed: %s", e)

    def checkpoint_soon(self) -> None:
        """Ask the background task for a checkpoint at its next check (BGSAVE)."""
        self._requested = True

    async def checkpoint(self) -> int:
        """Write a checkpoint of the store as it is now and point a manifest at it."""
        async with self._checkpoint_lock:
            return await self._checkpoint()

    async def _checkpoint(self) -> int:
        lsn, _size = await write_checkpoint(self.objects, self.store, self.flusher)
        newest = await newest_manifest(self.objects)
        if newest is not None and newest.epoch > self.manifest.epoch:
            self.flusher.fence(f"{newest.key}: a newer writer owns this storage prefix")
        m = new_manifest(self.manifest.epoch, self.manifest.seq + 1, lsn)
        if not await self.objects.put_if_absent(m.key, m.encode()):
            self.flusher.fence(f"{m.key}: already written by another server")
        self.manifest = m
        previous = self.checkpoint_lsn
        self.checkpoint_lsn = lsn
        self.checkpoint_time = time.monotonic()
        self.checkpoints_written += 1
        self.last_checkpoint_status = "ok"
        # What the checkpoint covered is long-lived: stop re-walking it. The young
        # generations are collected first so that no garbage cycle is frozen with it.
        gc.collect(1)
        gc.freeze()
        log.info("checkpoint at LSN %d (previous %d)", lsn, previous)
        if self.config.keep_checkpoints > 0:
            with contextlib.suppress(ObjectStoreError):
                await self.compact()
        return lsn

    async def compact(self) -> int:
        """Delete segments wholly covered by the oldest kept checkpoint, and older
        checkpoints and manifests. Returns the number of objects deleted."""
        keep = self.config.keep_checkpoints
        ckpts = sorted(
            lsn
            for k in await self.objects.list(paths.CHECKPOINTS)
            if (lsn := paths.parse_checkpoint(k)) is not None and lsn <= self.checkpoint_lsn
        )
        if len(ckpts) < keep:
            return 0
        floor = ckpts[-keep]
        deleted = 0
        segments = await list_segments(self.objects)
        for i, (_first, key) in enumerate(segments[:-1]):
            if segments[i + 1][0] - 1 <= floor:
                await self.objects.delete(key)
                deleted += 1
        for lsn in ckpts[:-keep]:
            await self.objects.delete(paths.checkpoint(lsn))
            deleted += 1
        for k in await self.objects.list(paths.MANIFESTS):
            p = paths.parse_manifest(k)
            if (
                p is not None
                and p < (self.manifest.epoch, self.manifest.seq)
                and k != self.manifest.key
            ):
                m_epoch, m_seq = p
                if (m_epoch, m_seq) < (self.manifest.epoch, self.manifest.seq - 1):
                    await self.objects.delete(k)
                    deleted += 1
        return deleted

    # -- closing ---------------------------------------------------------------------

    async def close(self, timeout: float = 30.0) -> None:
        """Flush everything, write a final checkpoint, release the object store."""
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        await self.flusher.stop()
        try:
            if self.fenced is None:
                if not await self.flusher.drain(timeout):
                    log.error(
                        "shutdown: %d bytes of writes could not be flushed: %s",
                        self.flusher.unflushed_bytes,
                        self.last_error(),
                    )
                elif self.store.lsn > self.checkpoint_lsn:
                    await asyncio.wait_for(self.checkpoint(), timeout)
        except (ObjectStoreError, FencedError, TimeoutError) as e:
            log.error("shutdown: final checkpoint failed: %s", e)
        finally:
            await self.objects.close()
