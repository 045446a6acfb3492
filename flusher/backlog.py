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

from flusher.codec import record_offsets

BACKLOG_BYTES = 8 * 1024 * 1024  # beyond what is not yet durable (Redis keeps 1 MiB)


class Backlog:
    def __init__(
        self, next_lsn: int, durable_lsn: Callable[[], int], max_bytes: int = BACKLOG_BYTES
    ) -> None:
        # Records first_lsn.. are records[head:], consecutive LSNs (a list with a
        # moving head, so a follower finds its place by subtraction), then `chunks`.
        self.records: list[bytes] = []
        self.head = 0
        self.first_lsn = next_lsn
        # (first LSN, last LSN, records encoded back to back) as the flusher encodes
        # them, a batch at a time: cut into records only when someone reads them.
        self.chunks: list[tuple[int, int, bytes]] = []
        self.next_lsn = next_lsn  # after the last record held
        self.nbytes = 0
        self.max_bytes = max_bytes
        self.durable_lsn = durable_lsn
        # Hands over what is committed and not yet encoded (the flusher's batch), so
        # a reader sees every committed record.
        self.fill: Callable[[], None] = _nothing
        self._arrived = asyncio.Event()

    def append(self, lsn: int, data: bytes) -> None:
        """One encoded record."""
        self.append_chunk(lsn, lsn, data)

    def append_chunk(self, first: int, last: int, data: bytes) -> None:
        """Records `first`..`last`, encoded back to back in `data`."""
        if first != self.next_lsn:  # a gap (cannot happen while one writer appends)
            self.records.clear()
            self.chunks.clear()
            self.head, self.nbytes, self.first_lsn = 0, 0, first
        self.chunks.append((first, last, data))
        self.next_lsn = last + 1
        self.nbytes += len(data)
        if self.nbytes > self.max_bytes:
            self._trim()
        self._arrived.set()

    def _trim(self) -> None:
        """Drop the oldest durable records past `max_bytes` (whole chunks once the
        records cut out are gone)."""
        durable = self.durable_lsn()
        records = self.records
        while self.nbytes > self.max_bytes and self.first_lsn <= durable:
            if self.head < len(records):
                self.nbytes -= len(records[self.head])
                self.head += 1
                self.first_lsn += 1
            elif self.chunks and self.chunks[0][1] <= durable:
                _first, last, data = self.chunks.pop(0)
                self.nbytes -= len(data)
                self.first_lsn = last + 1
            else:
                break
        if self.head > len(records) // 2:
            del records[: self.head]
            self.head = 0

    def _cut(self) -> None:
        """Cut the chunks into records."""
        records = self.records
        for first, last, data in self.chunks:
            if first == last:
                records.append(data)
                continue
            start = 0
            for end in record_offsets(data, last - first + 1):
                records.append(data[start:end])
                start = end
        self.chunks.clear()

    def since(self, lsn: int) -> list[bytes] | None:
        """The encoded records from `lsn` on, oldest first; None when `lsn` is older
        than what is held (read those from object storage first)."""
        self.fill()
        if lsn < self.first_lsn:
            return None
        if self.chunks:
            self._cut()
        return self.records[self.head + lsn - self.first_lsn :]

    @property
    def last_lsn(self) -> int:
        self.fill()
        return self.next_lsn - 1

    async def wait_after(self, lsn: int) -> None:
        """Until a record after `lsn` is held."""
        while self.last_lsn <= lsn:
            self._arrived.clear()
            await self._arrived.wait()


def _nothing() -> None:
    """A backlog fed record by record has nothing to wait for."""
