"""Raft durability: acknowledged once etcd has committed the record.

A write to a `DURABILITY RAFT` table is held (like a sync write) until `RaftAppender`
has put it in the group's log in etcd (`flusher.coordination.RaftLog`), which
replicates it through etcd's own Raft group. The appender takes *every* record from
the last one object storage or etcd holds up to the newest one (from the replication
backlog, which keeps all records not yet in object storage), so the log is one
contiguous stretch after what object storage holds: a new primary applies object
storage, then the log, and has every acknowledged raft write. Writers waiting together
share one append (group commit). Each entry is keyed by the LSN of its last record and
holds the encoded records back to back; entries are trimmed once object storage holds
them. An append is fenced on the leader key's value, so a deposed primary cannot
append; without a quorum it fails within its timeout and the waiting writes get an
error, never OK.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from flusher.backlog import Backlog
from flusher.coordination import CoordinationError, RaftLog
from store.tasks import cancel_and_wait

log = logging.getLogger("temporalstore")

APPEND_TIMEOUT_S = 5.0
MAX_BATCH_BYTES = 1024 * 1024  # etcd refuses requests past 1.5 MiB by default
TRIM_EVERY_S = 1.0


class RaftUnavailable(Exception):
    """Records could not be committed in etcd (no quorum, or no longer the leader)."""


class RaftAppender:
    def __init__(
        self,
        raft_log: RaftLog,
        backlog: Backlog,
        leader_value: Callable[[], bytes | None],
        durable_lsn: Callable[[], int],
    ) -> None:
        self.log = raft_log
        self.backlog = backlog
        self.leader_value = leader_value
        self.durable_lsn = durable_lsn
        self.committed = durable_lsn()
        self.wanted = 0
        self._wake = asyncio.Event()
        self._done = asyncio.Event()
        self._failures = 0
        self.last_failure = ""
        self._task: asyncio.Task[None] | None = None
        self._trimmed = 0

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def stop(self) -> None:
        await cancel_and_wait(self._task)

    def _covered(self) -> int:
        return max(self.committed, self.durable_lsn())

    async def wait(self, lsn: int) -> None:
        """Until records up to `lsn` are committed in etcd (or in object storage)."""
        while self._covered() < lsn:
            self.wanted = max(self.wanted, lsn)
            self._wake.set()
            self._done.clear()
            failures = self._failures
            await self._done.wait()
            if self._failures != failures:
                raise RaftUnavailable(self.last_failure)

    async def _run(self) -> None:
        while True:
            try:
                async with asyncio.timeout(TRIM_EVERY_S):
                    await self._wake.wait()
            except TimeoutError:
                await self._trim()
                continue
            self._wake.clear()
            while self._covered() < self.wanted:
                try:
                    await self._append()
                except (CoordinationError, RaftUnavailable) as e:
                    self._failures += 1
                    self.last_failure = str(e)
                    log.warning("raft log append failed: %s", e)
                    self._done.set()
                    break
                self._done.set()

    async def _append(self) -> None:
        start = self._covered() + 1
        records = self.backlog.since(start)
        if records is None:
            raise RaftUnavailable(f"records from LSN {start} are no longer held")
        if not records:
            return
        batch: list[bytes] = []
        size = 0
        for data in records:
            if batch and size + len(data) > MAX_BATCH_BYTES:
                break
            batch.append(data)
            size += len(data)
        value = self.leader_value()
        if value is None:
            raise RaftUnavailable("this node is not the leader of its group")
        last = start + len(batch) - 1
        await self.log.append_many([(last, b"".join(batch))], value, APPEND_TIMEOUT_S)
        self.committed = max(self.committed, last)

    async def _trim(self) -> None:
        durable = self.durable_lsn()
        if durable > self._trimmed:
            try:
                await self.log.trim_through(durable, APPEND_TIMEOUT_S)
                self._trimmed = durable
            except CoordinationError as e:
                log.info("raft log trim failed (retried): %s", e)
