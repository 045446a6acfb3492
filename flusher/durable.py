"""The running durable side of a server: the flusher as the store's sink,
checkpoints every N records or seconds and at shutdown, compaction, and as-of
reads from storage. What commands reach through `commands.session.Durability`.

It starts on a store already rebuilt and a prefix already taken over
(`replay.startup.take_over`); the CLI wires the two together.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from flusher import paths
from flusher.checkpoint import read_checkpoint, write_checkpoint
from flusher.compaction import compact
from flusher.flusher import FencedError, Flusher
from flusher.log import LogGap, MissingSegment, SegmentLog
from flusher.manifest import Manifest, new_manifest, newest_manifest
from flusher.metered import OPS, MeteredObjectStore
from flusher.objectapi import ObjectStore, ObjectStoreError
from store import R_LSN, HistoryPolicy, PrunedError, Store
from store.settings import DEFAULTS
from store.tasks import cancel_and_wait

if TYPE_CHECKING:
    from flusher.raft import RaftAppender

log = logging.getLogger("temporalstore")

RELOAD_DRAIN_S = 60.0
"""How long DEBUG RELOAD waits for every write to be durable before it drops memory."""
CHECKPOINT_POLL_S = 0.5
"""How often the background task asks whether a checkpoint is due."""
SUPERSEDED_POLL_S = 1.0
"""How often the background task looks for the manifest a newer writer takes this
prefix over with (one GET of a known key): a writer that keeps flushing would
otherwise hold the next log position ahead of the newcomer's claim indefinitely."""


@dataclass
class DurabilityConfig:
    mode: str = DEFAULTS.durability
    flush_interval_ms: int = DEFAULTS.flush_interval_ms
    segment_max_bytes: int = DEFAULTS.segment_max_bytes
    max_unflushed_bytes: int = DEFAULTS.max_unflushed_bytes
    checkpoint_every_records: int = DEFAULTS.checkpoint_every_records
    checkpoint_every_seconds: float = DEFAULTS.checkpoint_every_seconds
    # Bytes of records (encoded, before compression) logged since the last checkpoint
    # that make the next one due (0: none): what a restart replays after its
    # checkpoint stays about this much, whatever the size of the records.
    checkpoint_every_bytes: int = DEFAULTS.checkpoint_every_bytes
    keep_checkpoints: int = DEFAULTS.keep_checkpoints
    # --s3-put-cost: dollars per 1,000 PUTs, for INFO's estimate of the storage bill.
    s3_put_cost: float = 0.0
    # --checkpoint-cpulist: the CPUs the checkpoint child runs on (empty: the server's).
    checkpoint_cpus: frozenset[int] = frozenset()


class ReplayFigures(Protocol):
    """What INFO shows of the recovery the server started from."""

    @property
    def records(self) -> int: ...

    @property
    def segments(self) -> int: ...

    @property
    def seconds(self) -> float: ...

    @property
    def raw_bytes(self) -> int: ...


class DurableStore:
    """The flusher, checkpoints and compaction of one writer epoch."""

    def __init__(
        self,
        store: Store,
        objects: ObjectStore,
        config: DurabilityConfig,
        manifest: Manifest,
        replayed: ReplayFigures,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.store = store
        self.objects = objects
        self.log = SegmentLog(objects)
        self.config = config
        self.manifest = manifest
        self.recovery = replayed
        self.clock = clock
        self.flusher = Flusher(
            objects,
            durable_lsn=store.lsn,
            flush_interval_ms=config.flush_interval_ms,
            segment_max_bytes=config.segment_max_bytes,
            max_unflushed_bytes=config.max_unflushed_bytes,
            clock=clock,
            epoch=manifest.epoch,
        )
        # Asked before every write (proxy.pipeline): the compiled check itself, not a
        # Python method calling it.
        self.over_capacity: Callable[[], bool] = self.flusher.capacity.over
        # How a sync connection waits (`Flusher.on_durable`): the flusher's method
        # itself, not one calling it.
        self.on_durable: Callable[[int, Callable[[Exception | None], None]], None] = (
            self.flusher.on_durable
        )
        # Read by the dispatcher before every write: a plain attribute, kept by the
        # flusher (`Flusher.on_fenced`), not a property reading the flusher's.
        self.fenced: str | None = None
        self.flusher.on_fenced = self._fenced
        self.raft: RaftAppender | None = None  # set by a node of a group on etcd
        self.checkpoint_lsn = manifest.checkpoint_lsn or 0
        self.checkpoint_time = clock()
        # What the flusher had logged (`logged_bytes`) when the last checkpoint was
        # taken: less the segments replayed after it at the start, which a restart now
        # would replay again.
        self.logged_at_checkpoint = -replayed.raw_bytes
        # The size of the last checkpoint this writer stored (0: none yet).
        self.checkpoint_bytes = 0
        self.checkpoints_written = 0
        self.last_checkpoint_status = "ok"
        self._task: asyncio.Task[None] | None = None
        self._closed = False
        self._requested = False
        self._checkpoint_lock = asyncio.Lock()
        # Rebuilds a store from this storage as a restart does (DEBUG RELOAD).
        self.rebuild: Callable[[Store], Awaitable[Any]] | None = None
        # Run once a checkpoint is stored: the server gives the C heap's free memory
        # back there (commands.allocator.trim; the object was hundreds of MiB).
        self.after_checkpoint: Callable[[], None] | None = None

    @property
    def sync(self) -> bool:
        return self.config.mode == "sync"

    def start(self) -> None:
        """Become the store's sink and start flushing and checkpointing."""
        self.store.default_sync = self.sync
        f = self.flusher
        self.store.sink = f
        self.store.sink_batch = (f, f.raw, f.batch_started)  # its `append`, inline
        self.flusher.start()
        self._task = asyncio.get_running_loop().create_task(self._checkpoints())

    # -- commands-facing -------------------------------------------------------------

    @property
    def durable_lsn(self) -> int:
        return self.flusher.durable_lsn

    def _fenced(self, why: str) -> None:
        self.fenced = why

    async def wait_durable(self, lsn: int, timeout: float | None = None) -> bool:
        return await self.flusher.wait_durable(lsn, timeout)

    @property
    def raft_lsn(self) -> int:
        """Records up to here survive the loss of this node: in object storage, or
        committed in etcd's log (raft tables)."""
        if self.raft is None:
            return self.flusher.durable_lsn
        return max(self.flusher.durable_lsn, self.raft.committed)

    async def wait_raft(self, lsn: int) -> None:
        """Until records up to `lsn` are in etcd's log (or in object storage); raises
        when they cannot be put there (no quorum, or no longer the leader)."""
        if self.raft is None:
            if not await self.flusher.wait_durable(lsn):
                raise ObjectStoreError(self.last_error())
            return
        await self.raft.wait(lsn)

    async def wait_capacity(self, timeout: float) -> bool:
        return await self.flusher.wait_capacity(timeout)

    async def drain(self, timeout: float) -> bool:
        """Flush everything pending now, without stopping (graceful shutdown, before
        connections close). True if every record committed so far is durable."""
        if self.fenced is not None:
            return False
        return await self.flusher.drain(timeout)

    async def read_as_of(self, dbi: int, key: bytes, lsn: int) -> tuple[Any, int | None]:
        """A key's (value, expire) just after `lsn`, from object storage: the newest
        checkpoint at or before it plus the segments up to it, replayed into a
        scratch store. Slow (it reads everything up to `lsn`), for versions that
        retention dropped from memory. Raises PrunedError if storage no longer
        reaches back that far either."""
        ckpts = await self.log.checkpoints(upto=lsn)
        scratch = Store(databases=len(self.store.dbs), history=HistoryPolicy("versions", 1))
        base = 0
        if ckpts:
            await read_checkpoint(self.objects, scratch, ckpts[-1])
            base = ckpts[-1]
        walked = False
        try:
            walk = self.log.walk(await self.log.segments(), base, upto=lsn)
            async with contextlib.aclosing(walk):
                async for seg in walk:
                    walked = True
                    for record in seg.records():
                        if base < record[R_LSN] <= lsn:
                            scratch.replay(record)
        except (LogGap, MissingSegment):
            raise PrunedError(lsn, key) from None
        if not walked:
            raise PrunedError(lsn, key)
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
            "puts_in_flight": f.in_flight,
            "puts_in_flight_limit": f.put_limit.limit,
            "puts_in_flight_lowered": f.put_limit.lowered,
            "last_flush_status": st.last_flush_status,
            "fenced": 0 if f.fenced is None else 1,
            "last_checkpoint_lsn": self.checkpoint_lsn,
            "last_checkpoint_age_s": int(self.clock() - self.checkpoint_time),
            "last_checkpoint_status": self.last_checkpoint_status,
            "checkpoints_written": self.checkpoints_written,
            "checkpoint_in_progress": int(self._checkpoint_lock.locked()),
            "log_bytes_since_checkpoint": self.log_since_checkpoint(),
            "replay_records": rec.records,
            "replay_segments": rec.segments,
            "replay_seconds": f"{rec.seconds:.3f}",
            **self._request_fields(),
        }

    def _request_fields(self) -> dict[str, Any]:
        """Every request made to object storage (segments, checkpoints, manifests,
        compaction), where the store is metered, and what the PUTs cost."""
        if not isinstance(self.objects, MeteredObjectStore):
            return {}
        st = self.objects.stats
        fields: dict[str, Any] = {f"object_requests_{op}": st.requests[op] for op in OPS}
        fields["object_request_errors"] = sum(st.errors.values())
        fields["s3_put_cost_per_1000"] = f"{self.config.s3_put_cost:g}"
        fields["s3_put_cost_estimate_usd"] = f"{st.put_cost(self.config.s3_put_cost):.6f}"
        return fields

    # -- checkpoints and compaction --------------------------------------------------

    def logged_bytes(self) -> int:
        """Bytes of records this writer has encoded for the log (stored or not yet)."""
        f = self.flusher
        return f.stats.bytes_written_raw + f.pending_bytes

    def log_since_checkpoint(self) -> int:
        """Bytes of records after the last checkpoint: what a restart would replay."""
        return self.logged_bytes() - self.logged_at_checkpoint

    def checkpoint_due(self) -> bool:
        """Enough records, bytes of records or time since the last checkpoint, or one
        was asked for."""
        cfg = self.config
        due_records = self.store.lsn - self.checkpoint_lsn >= cfg.checkpoint_every_records
        # ... at least as many bytes as the last checkpoint stored, as Redis rewrites
        # its AOF once it has doubled (auto-aof-rewrite-percentage 100): a big store is
        # not checkpointed over and over (each one a fork and a whole image), and a
        # restart replays at most about a checkpoint's worth after loading one.
        every = cfg.checkpoint_every_bytes
        due_bytes = (
            every > 0
            and self.store.lsn > self.checkpoint_lsn
            and self.log_since_checkpoint() >= max(every, self.checkpoint_bytes)
        )
        due_time = (
            self.clock() - self.checkpoint_time >= cfg.checkpoint_every_seconds
            and self.store.lsn > self.checkpoint_lsn
        )
        return (due_records or due_bytes or due_time or self._requested) and self.fenced is None

    async def superseded(self) -> bool:
        """Fence this writer if a newer one has taken the prefix over: its takeover
        writes manifest (epoch + 1, 0) before it claims the log (replay.startup)."""
        if self.fenced is not None:
            return True
        key = paths.manifest(self.manifest.epoch + 1, 0)
        if await self.objects.get(key) is None:
            return False
        with contextlib.suppress(FencedError):  # what `fence` raises to its caller
            self.flusher.fence(f"{key}: a newer writer owns this storage prefix")
        return True

    async def _checkpoints(self) -> None:
        checked = self.clock()
        while not self._closed:
            await asyncio.sleep(CHECKPOINT_POLL_S)
            if self.clock() - checked >= SUPERSEDED_POLL_S and self.fenced is None:
                checked = self.clock()
                try:
                    await self.superseded()
                except ObjectStoreError as e:
                    log.warning("could not look for a newer writer: %s", e)
            if self.checkpoint_due():
                self._requested = False
                try:
                    await self.checkpoint()
                except (ObjectStoreError, FencedError) as e:
                    self.last_checkpoint_status = "err"
                    log.warning("checkpoint failed: %s", e)

    async def reload(self, save: bool, dropping: Callable[[], None]) -> None:
        """DEBUG RELOAD: a checkpoint first (if `save`), every write made durable,
        then the store's in-memory state dropped (`dropping` is told just before) and
        rebuilt from storage as a restart does (`rebuild`, set by whoever took the
        prefix over: replay.recover). If the rebuild fails the dropped state is put
        back and the error raised."""
        if self.rebuild is None:
            raise ObjectStoreError("this server cannot rebuild its store from storage")
        async with self._checkpoint_lock:  # no background checkpoint of a half-built store
            await self._reload(save, dropping)

    async def _reload(self, save: bool, dropping: Callable[[], None]) -> None:
        assert self.rebuild is not None
        if save:
            await self._checkpoint()
        if not await self.drain(RELOAD_DRAIN_S):
            raise ObjectStoreError(self.last_error())
        store = self.store
        lsn = store.lsn
        dropping()
        undo = store.reset()
        try:
            await self.rebuild(store)
            if store.lsn != lsn:
                raise ObjectStoreError(f"storage holds LSN {store.lsn}, the store had {lsn}")
        except BaseException:
            undo()
            raise
        log.warning("DB reloaded by DEBUG RELOAD (LSN %d)", lsn)

    def checkpoint_soon(self) -> None:
        """Ask the background task for a checkpoint at its next check (BGSAVE)."""
        self._requested = True

    async def checkpoint(self) -> int:
        """Write a checkpoint of the store as it is now and point a manifest at it."""
        async with self._checkpoint_lock:
            return await self._checkpoint()

    async def _checkpoint(self) -> int:
        # Taken with the image's LSN (no await between): records logged after it
        # count towards the next checkpoint.
        logged = self.logged_bytes()
        lsn, size = await write_checkpoint(
            self.objects, self.store, self.flusher, self.config.checkpoint_cpus
        )
        newest = await newest_manifest(self.objects)
        if newest is not None and newest.epoch > self.manifest.epoch:
            self.flusher.fence(f"{newest.key}: a newer writer owns this storage prefix")
        m = new_manifest(self.manifest.epoch, self.manifest.seq + 1, lsn)
        if not await self.objects.put_if_absent(m.key, m.encode()):
            self.flusher.fence(f"{m.key}: already written by another server")
        self.manifest = m
        previous = self.checkpoint_lsn
        self.checkpoint_lsn = lsn
        self.checkpoint_time = self.clock()
        self.logged_at_checkpoint = logged
        self.checkpoint_bytes = size
        self.checkpoints_written += 1
        self.last_checkpoint_status = "ok"
        if self.after_checkpoint is not None:
            self.after_checkpoint()
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
        return await compact(
            self.log, self.config.keep_checkpoints, self.checkpoint_lsn, self.manifest
        )

    # -- closing ---------------------------------------------------------------------

    async def close(self, timeout: float = 30.0, release_objects: bool = True) -> None:
        """Flush everything, write a final checkpoint, release the object store
        (unless the process goes on reading it, as a replica)."""
        self._closed = True
        await cancel_and_wait(self._task)
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
            if release_objects:
                await self.objects.close()
