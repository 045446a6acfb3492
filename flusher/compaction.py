"""Compaction: deleting what the kept checkpoints make unnecessary.

With `keep` checkpoints kept, every segment wholly at or below the oldest kept
checkpoint's LSN is deleted, then older checkpoints, then manifests older than
the one before the current (a reader that just listed the current one may still
be reading its predecessor's checkpoint).
"""

from __future__ import annotations

from flusher import paths
from flusher.log import SegmentLog
from flusher.manifest import Manifest


async def compact(log: SegmentLog, keep: int, checkpoint_lsn: int, current: Manifest) -> int:
    """Delete what the newest `keep` checkpoints up to `checkpoint_lsn` cover, and
    manifests older than `current`'s predecessor. Returns the objects deleted."""
    objects = log.objects
    ckpts = await log.checkpoints(upto=checkpoint_lsn)
    if len(ckpts) < keep:
        return 0
    floor = ckpts[-keep]
    deleted = 0
    segments = await log.segments()
    for i, (_first, key) in enumerate(segments[:-1]):
        if segments[i + 1].first - 1 <= floor:
            await objects.delete(key)
            deleted += 1
    for lsn in ckpts[:-keep]:
        await objects.delete(paths.checkpoint(lsn))
        deleted += 1
    for k in await objects.list(paths.MANIFESTS):
        p = paths.parse_manifest(k)
        if p is not None and p < (current.epoch, current.seq) and k != current.key:
            m_epoch, m_seq = p
            if (m_epoch, m_seq) < (current.epoch, current.seq - 1):
                await objects.delete(k)
                deleted += 1
    return deleted
