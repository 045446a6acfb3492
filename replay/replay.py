"""Rebuilding a store from object storage: the newest manifest, its checkpoint,
then every segment after it in LSN order, each verified.

Replay never starts silently empty over data it could not read: an unreadable
manifest, a checkpoint or segment whose checksum fails, or a gap in the LSNs
raises `ReplayError` naming the object and the LSN. A prefix with no manifest and
no segments is a new, empty store.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from flusher import paths, segment
from flusher.checkpoint import Manifest, newest_manifest, read_checkpoint
from flusher.codec import iter_items
from flusher.objectstore import ObjectStore, ObjectStoreError
from store import Store
from store.keyspace import LsnMismatch

Progress = Callable[[int, int], None]  # (records applied, segments left)


class ReplayError(Exception):
    """The store cannot be rebuilt from what object storage holds."""


@dataclass
class Recovery:
    manifest: Manifest | None = None
    checkpoint_lsn: int = 0
    lsn: int = 0  # the last LSN applied
    records: int = 0
    segments: int = 0
    seconds: float = 0.0
    segment_firsts: list[int] = field(default_factory=list)  # every segment seen


async def list_segments(objects: ObjectStore) -> list[tuple[int, str]]:
    found = [(p, k) for k in await objects.list(paths.SEGMENTS) if (p := paths.parse_segment(k))]
    found.sort()
    return found


async def recover(
    store: Store,
    objects: ObjectStore,
    progress: Progress | None = None,
    after: Recovery | None = None,
) -> Recovery:
    """Rebuild `store`; with `after`, only catch up on segments written since."""
    started = time.monotonic()
    rec = after or Recovery()
    try:
        if after is None:
            rec.manifest = await newest_manifest(objects)
            if rec.manifest is not None and rec.manifest.checkpoint_lsn is not None:
                await read_checkpoint(objects, store, rec.manifest.checkpoint_lsn)
                rec.checkpoint_lsn = rec.lsn = rec.manifest.checkpoint_lsn
        segments = await list_segments(objects)
        if rec.manifest is None and segments:
            raise ReplayError(
                f"{segments[0][1]}: segments exist but there is no manifest; "
                "refusing to start over data that cannot be placed"
            )
        rec.segment_firsts = [first for first, _ in segments]
        base = rec.lsn
        for i, (first, key) in enumerate(segments):
            nxt = segments[i + 1][0] if i + 1 < len(segments) else None
            if nxt is not None and nxt - 1 <= base:
                continue  # wholly at or below what we have
            if first > rec.lsn + 1:
                raise ReplayError(
                    f"{key}: gap in LSNs: expected LSN {rec.lsn + 1}, segment starts at {first}"
                )
            data = await objects.get(key)
            if data is None:
                raise ReplayError(f"{key}: listed but missing (LSN {first})")
            header, raw = await asyncio.to_thread(segment.decode, data, key, segment.SEGMENT_MAGIC)
            if header.first != first:
                raise ReplayError(f"{key}: header says LSN {header.first}, name says {first}")
            expected = first
            items = iter_items(raw)
            while True:
                # In slices, so the event loop answers LOADING between them.
                try:
                    nxt_lsn, applied = store.replay_items(items, expected, rec.lsn, 5000)
                except LsnMismatch as e:
                    raise ReplayError(f"{key}: {e}") from None
                taken = nxt_lsn - expected
                expected = nxt_lsn
                if applied:
                    rec.lsn = expected - 1
                    rec.records += applied
                if taken < 5000:
                    break
                if progress is not None:
                    progress(rec.records, len(segments) - i)
                await asyncio.sleep(0)
            count = expected - first
            if count != header.count or expected - 1 != header.last:
                raise ReplayError(
                    f"{key}: header promises LSN {header.first}-{header.last} "
                    f"({header.count} records), body holds {count}"
                )
            rec.segments += 1
        if progress is not None:
            progress(rec.records, 0)
    except segment.CorruptObject as e:
        raise ReplayError(str(e)) from None
    except ObjectStoreError as e:
        raise ReplayError(f"object storage unreadable: {e}") from None
    except (ValueError, TypeError, KeyError, IndexError) as e:
        raise ReplayError(f"undecodable data after LSN {rec.lsn}: {e!r}") from None
    rec.seconds += time.monotonic() - started
    return rec
