"""Opening a storage prefix for writing: recover, then take the prefix over.

`take_over` rebuilds the store (replay), then writes a manifest with the next
writer epoch (create-if-absent, so two new servers cannot both win) and claims
the next place in the log with a takeover record written put-if-absent. A
previous writer still running finds that name taken at its next flush, or our
manifest at its next look for one, and is fenced: it can never interleave
segments with us, and cannot hold the next place ahead of our claim for long.
The CLI then starts the durable layer (`flusher.durable.DurableStore`) on the
store and the manifest.

A writer that crashed with several PUTs in flight may have left segments past a
hole (`Recovery.unfinished`: none of their records was acknowledged as durable).
Once the claim holds the hole's place (so the previous writer, were it still
running, can never fill it), they are copied to `orphaned/<epoch>/` and deleted,
with a warning naming their LSNs: the new writer's segments take their places.
Strays (`Recovery.strays`: a fenced writer's PUTs that landed after a newer
writer's claim, never durable) are set aside the same way, before the claim.
"""

from __future__ import annotations

import gc
import logging
import time

from flusher import paths
from flusher.flusher import put_record
from flusher.log import SegmentRef
from flusher.manifest import Manifest, new_manifest, newest_manifest
from flusher.objectapi import ObjectStore
from replay.replay import Progress, Recovery, ReplayError, recover
from store import Store, UpdateRecord, WriteMeta, now_ms

log = logging.getLogger("temporalstore")

CLAIM_SECONDS = 30.0
"""How long a takeover goes on catching up with a previous writer that keeps
flushing. That writer fences itself within `flusher.durable.SUPERSEDED_POLL_S` of
seeing our manifest, after which the next claim holds."""


async def take_over(
    store: Store,
    objects: ObjectStore,
    progress: Progress | None = None,
    after: Recovery | None = None,
) -> tuple[Manifest, Recovery]:
    """Rebuild `store` from `objects` and make this process the prefix's writer:
    (the new manifest, what recovery did). With `after` (a replica being promoted,
    whose store is already at `store.lsn`), only catch up on what storage holds
    beyond that."""
    gc.disable()  # replay builds long-lived objects only: no cycles to find
    try:
        rec = await recover(store, objects, progress, after=after)
    finally:
        gc.enable()
    # A promoted replica read its manifest long ago: the epoch follows the newest.
    previous = rec.manifest if after is None else await newest_manifest(objects)
    epoch = (previous.epoch if previous else 0) + 1
    manifest = new_manifest(epoch, 0, previous.checkpoint_lsn if previous else None)
    if not await objects.put_if_absent(manifest.key, manifest.encode()):
        raise ReplayError(f"{manifest.key}: another server is taking over this storage prefix")
    deadline = time.monotonic() + CLAIM_SECONDS
    while True:
        await set_aside(objects, epoch, rec.strays)
        lsn = store.lsn + 1
        record: UpdateRecord = (
            lsn,
            now_ms(),
            (),
            (),
            WriteMeta(0, b"temporalstore", b"epoch %d" % epoch),
        )
        if await put_record(objects, record, epoch):
            store.replay(record)
            await set_aside(objects, epoch, rec.unfinished)
            break
        if time.monotonic() >= deadline:
            raise ReplayError("could not claim the log: the previous writer keeps writing")
        # The previous writer flushed more since we read: catch up and retry.
        rec = await recover(store, objects, progress, after=rec)
    log.info(
        "storage %s: epoch %d, LSN %d (%d records replayed in %.2fs)",
        objects.url,
        epoch,
        store.lsn,
        rec.records,
        rec.seconds,
    )
    return manifest, rec


async def set_aside(objects: ObjectStore, epoch: int, unfinished: list[SegmentRef]) -> None:
    """Move segments a crashed writer left past a hole out of the log (to
    `orphaned/<epoch>/`), newest first: a crash halfway leaves the rest still past
    the hole, for the next takeover."""
    for ref in reversed(unfinished):
        data = await objects.get(ref.key)
        if data is None:
            continue
        await objects.put(paths.orphaned(epoch, ref.first), data)
        await objects.delete(ref.key)
    if unfinished:
        log.warning(
            "storage %s: set aside %d segment(s) from LSN %d that a writer stopped or "
            "fenced with PUTs in flight left out of the log (never durable): %s",
            objects.url,
            len(unfinished),
            unfinished[0].first,
            ", ".join(paths.orphaned(epoch, r.first) for r in unfinished),
        )
