"""The durable log as it lies in object storage: one reader for everyone who
walks it (recovery, as-of reads from storage, `temporalstore inspect`).

`SegmentLog` lists segments and checkpoints, reads and verifies one object, and
walks the segments that hold the LSNs after a point in LSN order, checking that
they follow each other without a gap. Its errors name the object and the LSN.

One hole is not an error: the writer runs several PUTs at once, and a segment cut
while an earlier one was still in flight is flagged `segment.FLAG_AHEAD`. Storage
may hold it without the earlier one (the writer crashed, or is still writing);
its records were never acknowledged as durable, since the durable LSN only moves
over segments that have all landed. So a hole followed only by flagged segments
is where the log ends for now (`SegmentLog.unfinished` names those segments), and
so is a flagged segment right after a new writer's claim (`segment.FLAG_CLAIM`:
a writer's first segment after its claim is never flagged, so that one was left
by the writer before). A hole followed by any unflagged segment is a `LogGap`.

A writer fenced with PUTs in flight may have one land after the new writer's claim
(it was on the wire): a stray. Segments carry their writer's epoch mark
(`segment.epoch_mark`), and only a claim changes the writer, so a flagged segment
with another mark than the last claim's is skipped (`SegmentLog.strays`); an
unflagged one is an error.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, Iterator
from dataclasses import dataclass
from typing import NamedTuple

from flusher import paths, segment
from flusher.codec import DecodedRecords, decode_records, iter_records
from flusher.objectapi import ObjectStore
from store import UpdateRecord


class LogError(Exception):
    """The log cannot be read as one contiguous, verified sequence of records."""


class MissingSegment(LogError):
    """A segment was listed but is gone (compaction, or another writer's cleanup)."""


class LogGap(LogError):
    """The segments do not continue where the previous LSN ended."""


class SegmentRef(NamedTuple):
    first: int  # the first LSN, as the object's name gives it
    key: str


class Verified(NamedTuple):
    header: segment.Header
    body: bytes  # decompressed
    size: int  # bytes as stored


@dataclass
class LogSegment:
    """One verified segment of a walk."""

    ref: SegmentRef
    header: segment.Header
    body: bytes
    left: int  # segments of the walk after this one, itself included

    def records(self) -> Iterator[UpdateRecord]:
        return iter_records(self.body)

    def rows(self) -> DecodedRecords:
        """The records as replay takes them (see `DecodedRecords`)."""
        return decode_records(self.body)

    def check_count(self, next_lsn: int) -> None:
        """Raise unless the records read (up to `next_lsn`) are the ones the header
        promises."""
        h = self.header
        count = next_lsn - self.ref.first
        if count != h.count or next_lsn - 1 != h.last:
            raise LogError(
                f"{self.ref.key}: header promises LSN {h.first}-{h.last} "
                f"({h.count} records), body holds {count}"
            )


def _retrieve(f: asyncio.Future[tuple[segment.Header, bytes]]) -> None:
    """A read the walk no longer wants: its error (if any) is dropped, not logged."""
    if not f.cancelled():
        f.exception()


class SegmentLog:
    def __init__(self, objects: ObjectStore) -> None:
        self.objects = objects
        # Set by `walk`: segments past where the log ends for now, all cut while an
        # earlier segment was still in flight (see the module's docstring).
        self.unfinished: list[SegmentRef] = []
        # Set by `walk`: segments a fenced writer left after a newer one's claim.
        self.strays: list[SegmentRef] = []

    async def segments(self) -> list[SegmentRef]:
        """Every segment, in LSN order."""
        found = [
            SegmentRef(p, k)
            for k in await self.objects.list(paths.SEGMENTS)
            if (p := paths.parse_segment(k))
        ]
        found.sort()
        return found

    async def checkpoints(self, upto: int | None = None) -> list[int]:
        """The LSNs of every checkpoint (at or before `upto`), oldest first."""
        return sorted(
            lsn
            for k in await self.objects.list(paths.CHECKPOINTS)
            if (lsn := paths.parse_checkpoint(k)) is not None and (upto is None or lsn <= upto)
        )

    async def verify(self, key: str, magic: bytes) -> Verified:
        """Read one object and check its header and checksum (`CorruptObject`
        otherwise; an object that vanished reads as empty, so as truncated)."""
        data = await self.objects.get(key) or b""
        header, body = await asyncio.to_thread(segment.decode, data, key, magic)
        return Verified(header, body, len(data))

    async def read(self, ref: SegmentRef) -> tuple[segment.Header, bytes]:
        """A listed segment, verified, whose header starts where its name says."""
        data = await self.objects.get(ref.key)
        if data is None:
            raise MissingSegment(f"{ref.key}: listed but missing (LSN {ref.first})")
        header, body = await asyncio.to_thread(segment.decode, data, ref.key, segment.SEGMENT_MAGIC)
        if header.first != ref.first:
            raise LogError(f"{ref.key}: header says LSN {header.first}, name says {ref.first}")
        return header, body

    async def walk(
        self, segments: list[SegmentRef], after: int, upto: int | None = None
    ) -> AsyncGenerator[LogSegment, None]:
        """The segments that hold LSNs after `after` (up to `upto`), verified, in
        order. Each must start no later than the LSN after the previous one's last
        (`LogGap` otherwise, unless only flagged segments follow: see the module's
        docstring), read once the caller is done with the previous one."""
        self.unfinished = []
        self.strays = []
        expected = after + 1
        claimed = False  # the previous segment was a claim
        owner = 0  # the epoch mark of the last claim walked (0: unknown)
        todo: list[tuple[int, SegmentRef]] = []
        for i, ref in enumerate(segments):
            nxt = segments[i + 1].first if i + 1 < len(segments) else None
            if nxt is not None and nxt - 1 <= after:
                continue  # wholly at or below where the walk starts
            if upto is not None and ref.first > upto:
                break
            todo.append((i, ref))
        # The next segment is read (and verified, off the event loop's thread) while
        # the caller works on this one; its errors still surface in order, when it
        # is its turn.
        ahead: asyncio.Future[tuple[segment.Header, bytes]] | None = None
        try:
            for j, (i, ref) in enumerate(todo):
                if ref.first > expected:
                    if await self._all_ahead(segments[i:]):
                        self.unfinished = segments[i:]
                        return
                    raise LogGap(
                        f"{ref.key}: gap in LSNs: expected LSN {expected}, "
                        f"segment starts at {ref.first}"
                    )
                current = ahead or asyncio.ensure_future(self.read(ref))
                ahead = None
                header, body = await current
                if j + 1 < len(todo):
                    ahead = asyncio.ensure_future(self.read(todo[j + 1][1]))
                mark = segment.mark_of(header.flags)
                if owner and mark and mark != owner and not header.flags & segment.FLAG_CLAIM:
                    if not header.flags & segment.FLAG_AHEAD:
                        raise LogError(
                            f"{ref.key}: LSN {ref.first} was written by another writer than "
                            "the one whose claim precedes it"
                        )
                    self.strays.append(ref)
                    continue
                if claimed and header.flags & segment.FLAG_AHEAD:
                    if await self._all_ahead(segments[i + 1 :]):
                        self.unfinished = segments[i:]
                        return
                    raise LogGap(
                        f"{ref.key}: LSN {ref.first} was cut behind a segment in flight, "
                        "yet follows a new writer's claim"
                    )
                yield LogSegment(ref, header, body, len(segments) - i)
                expected = max(expected, header.last + 1)
                claimed = bool(header.flags & segment.FLAG_CLAIM)
                if claimed:
                    owner = mark
        finally:
            if ahead is not None:
                ahead.cancel()
                ahead.add_done_callback(_retrieve)

    async def _all_ahead(self, refs: list[SegmentRef]) -> bool:
        """Whether every segment of `refs` was cut while an earlier segment was in
        flight (one gone since the listing holds nothing to object to)."""
        for ref in refs:
            data = await self.objects.get(ref.key)
            if data is None:
                continue
            try:
                flags = segment.read_header(data, ref.key, segment.SEGMENT_MAGIC).flags
            except segment.CorruptObject:
                return False
            if not flags & segment.FLAG_AHEAD:
                return False
        return True
