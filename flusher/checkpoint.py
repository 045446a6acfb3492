"""Checkpoints: a full image of the store at an LSN, as one object.

The store gives its image as plain objects (`Store.export_image`, described in
`store.image`); a checkpoint is that image as a msgpack stream (the header map,
then one value per item: batch items of plain values through the fast packer),
compressed and framed as `flusher.segment` describes. Restart time does not grow
with total history. The object is built in a forked child (see
`checkpoint_object`).
"""

from __future__ import annotations

import asyncio
import gc
import logging
import os
from collections.abc import Iterable
from typing import Any

from flusher import paths, segment
from flusher.codec import pack, pack_plain, stream_items
from flusher.flusher import Flusher
from flusher.objectapi import ObjectStore
from store import Store
from store.image import PLAIN_TAGS

log = logging.getLogger("temporalstore")


def image(store: Store) -> tuple[bytes, int]:
    """The raw (uncompressed) checkpoint body and its item count: the store's
    image (`Store.export_image`), one msgpack value per item."""
    parts = [
        pack_plain(item) if type(item) is tuple and item[0] in PLAIN_TAGS else pack(item)
        for item in store.export_image()
    ]
    return b"".join(parts), len(parts)


def load_image(store: Store, raw: bytes, name: str) -> int:
    """Fill an empty store from a checkpoint body; return its LSN."""
    return load_image_chunks(store, [raw], len(raw), name)


def load_image_chunks(store: Store, chunks: Iterable[bytes], raw_len: int, name: str) -> int:
    """`load_image` of a body given in pieces (`raw_len` bytes in all)."""
    it = stream_items(chunks, raw_len)
    head: Any = next(it)
    if head["databases"] > len(store.dbs):
        raise segment.CorruptObject(
            f"{name}: holds {head['databases']} databases, the server has {len(store.dbs)}"
        )
    return store.import_image(head, it)


def cpulist(text: str) -> frozenset[int]:
    """CPUs written as Redis' `bgsave_cpulist`: `N`, `N-M` or `N-M:STEP`, comma
    separated (empty: none, the server's own are inherited). ValueError if not."""
    cpus: set[int] = set()
    for part in filter(None, text.replace(" ", "").split(",")):
        span, _, step = part.partition(":")
        lo, dash, hi = span.partition("-")
        try:
            first, last = int(lo), int(hi) if dash else int(lo)
            stride = int(step) if step else 1
        except ValueError:
            raise ValueError(f"{text!r} is not a CPU list (like 0-3,5)") from None
        if first < 0 or last < first or stride < 1:
            raise ValueError(f"{text!r} is not a CPU list (like 0-3,5)")
        cpus.update(range(first, last + 1, stride))
    return frozenset(cpus)


async def write_checkpoint(
    objects: ObjectStore,
    store: Store,
    flusher: Flusher | None = None,
    cpus: frozenset[int] = frozenset(),
) -> tuple[int, int]:
    """Write the store's image; return (lsn, bytes stored). Segments up to the
    image's LSN are made durable first, so the log stays contiguous with the
    checkpoint (fencing relies on it). `cpus`: where the child that builds it runs
    (`checkpoint_object`)."""
    lsn, data = await checkpoint_object(store, cpus)
    if flusher is not None:
        await flusher.wait_durable(lsn)
    await objects.put(paths.checkpoint(lsn), data)
    return lsn, len(data)


async def checkpoint_object(store: Store, cpus: frozenset[int] = frozenset()) -> tuple[int, bytes]:
    """(LSN, the compressed checkpoint object) of the store as it is now.

    As Redis' BGSAVE: a forked child serializes its copy-on-write snapshot of the
    store and sends the object back through a pipe, so the event loop keeps serving
    while the image is built (a consistent cut at the fork). The child runs on
    `cpus` when given (as Redis' `bgsave_cpulist`: off the server's core when the
    server is pinned), else where the server may. Where fork is not available or
    the child fails, the image is taken in one go on the event loop."""
    lsn = store.lsn
    child = _fork_image(store, lsn, cpus) if hasattr(os, "fork") else None
    if child is not None:
        pid, fd = child
        try:
            data = await asyncio.to_thread(_read_all, fd)
        finally:
            os.close(fd)
        _pid, status = await asyncio.to_thread(os.waitpid, pid, 0)
        code = os.waitstatus_to_exitcode(status)
        if code == 0 and data:
            return lsn, data
        log.warning("checkpoint child exited with %d; taking the image in-process", code)
    lsn = store.lsn
    raw, count = image(store)
    return lsn, await asyncio.to_thread(
        segment.encode, segment.CHECKPOINT_MAGIC, lsn, lsn, count, raw
    )


def _fork_image(store: Store, lsn: int, cpus: frozenset[int]) -> tuple[int, int] | None:
    """Fork a child (on `cpus`, if any) that writes the checkpoint object to a pipe
    and exits; (its pid, the read end) or None if it could not be started."""
    r, w = os.pipe()
    try:
        pid = os.fork()
    except OSError as e:
        os.close(r)
        os.close(w)
        log.warning("cannot fork for a checkpoint (%s); taking the image in-process", e)
        return None
    if pid:
        os.close(w)
        return pid, r
    code = 1  # the child: never returns
    try:
        gc.disable()  # collection would touch (and so copy) every page
        if cpus:
            _set_cpus(cpus)
        os.close(r)
        # Hold no client or listening socket open past the parent's close; keep the
        # pipe and what the image reads (the history spill file).
        _close_all_but([w, *(store.spill.descriptors() if store.spill else [])])
        raw, count = image(store)
        data = segment.encode(segment.CHECKPOINT_MAGIC, lsn, lsn, count, raw)
        view = memoryview(data)
        while view:
            view = view[os.write(w, view) :]
        code = 0
    finally:
        os._exit(code)


def _close_all_but(keep: list[int]) -> None:
    """Close every descriptor from 3 on but those of `keep`."""
    low = 3
    for fd in sorted(set(keep)):
        if fd >= low:
            os.closerange(low, fd)
            low = fd + 1
    os.closerange(low, 1 << 16)


def _set_cpus(cpus: frozenset[int]) -> None:
    """Move this process to `cpus`; as Redis, a list the machine cannot honour is
    logged and the process stays where it was."""
    try:
        os.sched_setaffinity(0, cpus)
    except (OSError, ValueError, AttributeError) as e:
        log.warning("checkpoint child: cannot run on CPUs %s: %s", sorted(cpus), e)


def _read_all(fd: int) -> bytes:
    parts = []
    while chunk := os.read(fd, 1 << 20):
        parts.append(chunk)
    return b"".join(parts)


async def read_checkpoint(objects: ObjectStore, store: Store, lsn: int) -> None:
    key = paths.checkpoint(lsn)
    data = await objects.get(key)
    if data is None:
        raise segment.CorruptObject(f"{key}: named by the manifest but missing")
    header = await asyncio.to_thread(segment.verify, data, key, segment.CHECKPOINT_MAGIC)
    if header.first != lsn:
        raise segment.CorruptObject(f"{key}: holds LSN {header.first}, not {lsn}")
    # Decompressed by a thread while the items already there are loaded.
    load_image_chunks(store, segment.body_chunks(data, header, key), header.raw_len, key)
