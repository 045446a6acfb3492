"""The replication backlog: the newest committed records, encoded once.

The flusher hands every record it encodes to `Backlog.append` (its `tap`), so the
primary can stream records to replicas without encoding them twice. The backlog
keeps at least every record not yet durable in object storage (a replica that is
further behind catches up from storage, which holds the rest) and, beyond that, up
to `max_bytes` of older records so that a replica reconnecting after a short break
resumes from memory. Followers wait on `wait_after(lsn)`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

BACKLOG_BYTES = 8 * 1024 * 1024  # beyond what is not yet durable (Redis keeps 1 MiB)


class Backlog:
    def __init__(
        self, next_lsn: int, durable_lsn: Callable[[], int], max_bytes: int = BACKLOG_BYTES
    ) -> None:
        # Records first_lsn.. are records[head:], consecutive LSNs (a list with a
        # moving head, so a follower finds its place by subtraction).
        self.records: list[bytes] = []
        self.head = 0
        self.first_lsn = next_lsn
        self.nbytes = 0
        self.max_bytes = max_bytes
        self.durable_lsn = durable_lsn
        self._arrived = asyncio.Event()

    def append(self, lsn: int, data: bytes) -> None:
        records = self.records
        if lsn != self.last_lsn + 1:  # a gap (cannot happen while one writer appends)
            records.clear()
            self.head, self.nbytes, self.first_lsn = 0, 0, lsn
        records.append(data)
        self.nbytes += len(data)
        if self.nbytes > self.max_bytes:
            durable = self.durable_lsn()
            while self.nbytes > self.max_bytes and self.first_lsn <= durable:
                self.nbytes -= len(records[self.head])
                self.head += 1
                self.first_lsn += 1
            if self.head > len(records) // 2:
                del records[: self.head]
                self.head = 0
        self._arrived.set()

    def since(self, lsn: int) -> list[bytes] | None:
        """The encoded records from `lsn` on, oldest first; None when `lsn` is older
        than what is held (read those from object storage first)."""
        if lsn < self.first_lsn:
            return None
        return self.records[self.head + lsn - self.first_lsn :]

    @property
    def last_lsn(self) -> int:
        return self.first_lsn + len(self.records) - self.head - 1

    async def wait_after(self, lsn: int) -> None:
        """Until a record after `lsn` is held."""
        while self.last_lsn <= lsn:
            self._arrived.clear()
            await self._arrived.wait()
