"""Rebuilding a store from object storage: the newest manifest, its checkpoint,
then every segment after it in LSN order (`flusher.log.SegmentLog.walk`), each
verified.

Replay never starts silently empty over data it could not read: an unreadable
manifest, a checkpoint or segment whose checksum fails, or a gap in the LSNs
raises `ReplayError` naming the object and the LSN. A prefix with no manifest and
no segments is a new, empty store. The one hole that is not an error is a writer's
unfinished tail (segments cut while an earlier one was still in flight, after a
hole: `flusher.log`): replay stops before it and names it in
`Recovery.unfinished`; a new writer sets it aside (`replay.startup`).
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from flusher import segment
from flusher.checkpoint import read_checkpoint
from flusher.codec import decode_records
from flusher.log import LogError, SegmentLog, SegmentRef
from flusher.manifest import Manifest, newest_manifest
from flusher.objectapi import ObjectStore, ObjectStoreError
from flusher.plainunpack import body_records, replay_records
from store import Store
from store.keyspace import LsnMismatch

Progress = Callable[[int, int], None]  # (records applied, segments left)
SLICE = 5000
"""Records replayed between two returns to the event loop (which answers LOADING)."""


class ReplayError(Exception):
    """The store cannot be rebuilt from what object storage holds."""


@dataclass
class Recovery:
    manifest: Manifest | None = None
    checkpoint_lsn: int = 0
    lsn: int = 0  # the last LSN applied
    stored: int = 0  # the last LSN object storage was seen to hold
    records: int = 0
    segments: int = 0
    raw_bytes: int = 0  # of the segments replayed (their bodies, uncompressed)
    seconds: float = 0.0
    segment_firsts: list[int] = field(default_factory=list)  # every segment seen
    # Segments past a hole, never durable: the log ends before them (for now).
    unfinished: list[SegmentRef] = field(default_factory=list)
    # Segments a fenced writer's PUTs left after a newer writer's claim: skipped.
    strays: list[SegmentRef] = field(default_factory=list)


async def recover(
    store: Store,
    objects: ObjectStore,
    progress: Progress | None = None,
    after: Recovery | None = None,
) -> Recovery:
    """Rebuild `store`; with `after`, only catch up on segments written since."""
    started = time.monotonic()
    rec = after or Recovery()
    log = SegmentLog(objects)
    try:
        if after is None:
            rec.manifest = await newest_manifest(objects)
            if rec.manifest is not None and rec.manifest.checkpoint_lsn is not None:
                await read_checkpoint(objects, store, rec.manifest.checkpoint_lsn)
                rec.checkpoint_lsn = rec.lsn = rec.stored = rec.manifest.checkpoint_lsn
        segments = await log.segments()
        if rec.manifest is None and segments:
            raise ReplayError(
                f"{segments[0].key}: segments exist but there is no manifest; "
                "refusing to start over data that cannot be placed"
            )
        rec.segment_firsts = [ref.first for ref in segments]
        # From what storage was seen to hold; records the store has already (a
        # replica's, from its link) are counted, not applied.
        skip = store.lsn
        async with contextlib.aclosing(log.walk(segments, rec.stored)) as walk:
            async for seg in walk:
                expected = seg.ref.first
                rows, typed = body_records(seg.body)
                while True:
                    try:
                        nxt_lsn, applied = replay_records(store, rows, typed, expected, skip, SLICE)
                    except LsnMismatch as e:
                        raise ReplayError(f"{seg.ref.key}: {e}") from None
                    taken = nxt_lsn - expected
                    expected = nxt_lsn
                    if applied:
                        rec.lsn = expected - 1
                        rec.records += applied
                    if taken < SLICE:
                        break
                    if progress is not None:
                        progress(rec.records, seg.left)
                    await asyncio.sleep(0)
                seg.check_count(expected)
                rec.stored = expected - 1
                rec.segments += 1
                rec.raw_bytes += len(seg.body)
        rec.unfinished = log.unfinished
        rec.strays = log.strays
        if progress is not None:
            progress(rec.records, 0)
    except (segment.CorruptObject, LogError) as e:
        raise ReplayError(str(e)) from None
    except ObjectStoreError as e:
        raise ReplayError(f"object storage unreadable: {e}") from None
    except (ValueError, TypeError, KeyError, IndexError) as e:
        raise ReplayError(f"undecodable data after LSN {rec.lsn}: {e!r}") from None
    rec.seconds += time.monotonic() - started
    return rec


def replay_body(store: Store, body: bytes) -> tuple[int, int]:
    """Apply records encoded back to back (a replica link's frame, a raft log entry):
    they must be consecutive; those the store has already are skipped. Returns the
    (first, last) LSNs the body held (LsnMismatch if they do not follow the store's)."""
    rows, typed = decode_records(body)
    it = iter(rows)
    head = next(it, None)
    if head is None:
        return store.lsn + 1, store.lsn
    first = head[0]
    if first > store.lsn + 1:
        raise LsnMismatch(first, store.lsn + 1)
    expected = first
    rows_left = itertools.chain([head], it)
    while True:
        nxt, _applied = store.replay_records(rows_left, typed, expected, store.lsn, SLICE)
        if nxt - expected < SLICE:
            return first, nxt - 1
        expected = nxt
