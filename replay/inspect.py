"""`temporalstore inspect --storage URL`: list what a storage prefix holds, verify
every checksum, and print totals. Exits 1 if anything fails to verify."""

from __future__ import annotations

import asyncio
import sys

from tqdm import tqdm

from flusher import paths, segment
from flusher.log import SegmentLog
from flusher.manifest import Manifest
from flusher.objectapi import ObjectStore, ObjectStoreError
from flusher.objectstore import open_object_store


async def inspect(objects: ObjectStore, out: list[str]) -> int:
    """Append a report to `out`; return the number of problems found."""
    problems = 0
    log = SegmentLog(objects)
    manifests = sorted(k for k in await objects.list(paths.MANIFESTS))
    out.append(f"storage {objects.url}")
    out.append(f"manifests: {len(manifests)}")
    for key in manifests:
        data = await objects.get(key)
        try:
            m = Manifest.decode(data or b"", key)
            out.append(
                f"  {key}  epoch={m.epoch} seq={m.seq} checkpoint={m.checkpoint_lsn} "
                f"writer={m.writer}"
            )
        except segment.CorruptObject as e:
            problems += 1
            out.append(f"  CORRUPT {e}")
    checkpoints = sorted(k for k in await objects.list(paths.CHECKPOINTS))
    segments = sorted(k for k in await objects.list(paths.SEGMENTS))
    out.append(f"checkpoints: {len(checkpoints)}")
    records = raw_bytes = stored = 0
    first_lsn: int | None = None
    last_lsn = 0
    expected: int | None = None
    bar = tqdm(
        total=len(checkpoints) + len(segments),
        desc="verifying",
        unit=" objects",
        disable=None,
        file=sys.stderr,
    )
    for key in checkpoints:
        try:
            h, _raw, size = await log.verify(key, segment.CHECKPOINT_MAGIC)
            out.append(f"  {key}  lsn={h.first} items={h.count} bytes={size} raw={h.raw_len}")
        except segment.CorruptObject as e:
            problems += 1
            out.append(f"  CORRUPT {e}")
        bar.update(1)
    out.append(f"segments: {len(segments)}")
    headers: list[tuple[str, segment.Header | None, int]] = []
    for key in segments:
        try:
            h, _raw, size = await log.verify(key, segment.SEGMENT_MAGIC)
            headers.append((key, h, size))
        except segment.CorruptObject as e:
            problems += 1
            out.append(f"  CORRUPT {e}")
            headers.append((key, None, 0))
        bar.update(1)
    owner = 0  # the epoch mark of the last claim (see flusher.log)
    claimed = False
    for i, (key, maybe, size) in enumerate(headers):
        if maybe is None:
            continue
        h = maybe
        ahead = bool(h.flags & segment.FLAG_AHEAD)
        mark = segment.mark_of(h.flags)
        if ahead and owner and mark and mark != owner and not h.flags & segment.FLAG_CLAIM:
            out.append(f"  STRAY {key}: a fenced writer's PUT that landed late (skipped)")
            continue
        hole = expected is not None and h.first != expected
        if (hole or (claimed and ahead)) and all(
            g is not None and g.flags & segment.FLAG_AHEAD for _k, g, _s in headers[i:]
        ):
            out.append(
                f"  UNFINISHED from {key}: {len(headers) - i} segment(s) cut behind PUTs in "
                "flight, past a hole (never durable; set aside at the next takeover)"
            )
            break
        if hole:
            problems += 1
            out.append(f"  GAP before {key}: expected LSN {expected}, found {h.first}")
        claimed = bool(h.flags & segment.FLAG_CLAIM)
        if claimed:
            owner = mark
        expected = h.last + 1
        first_lsn = h.first if first_lsn is None else first_lsn
        last_lsn = h.last
        records += h.count
        raw_bytes += h.raw_len
        stored += size
    bar.close()
    lsn_range = "none" if first_lsn is None else f"{first_lsn}-{last_lsn}"
    ratio = f"{raw_bytes / stored:.2f}x" if stored else "-"
    out.append(
        f"totals: records={records} lsn_range={lsn_range} bytes_compressed={stored} "
        f"bytes_raw={raw_bytes} compression={ratio} problems={problems}"
    )
    return problems


def main(storage: str, endpoint_url: str | None) -> int:
    async def run() -> int:
        objects = open_object_store(storage, endpoint_url)
        lines: list[str] = []
        try:
            problems = await inspect(objects, lines)
        finally:
            await objects.close()
        print("\n".join(lines))
        return 1 if problems else 0

    try:
        return asyncio.run(run())
    except ObjectStoreError as e:
        print(f"temporalstore inspect: {e}", file=sys.stderr)
        return 1
