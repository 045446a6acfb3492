"""Checkpoints (a full image of the store at an LSN) and manifests (which
checkpoint is current, and which writer epoch owns the prefix).

A checkpoint image is a msgpack stream: first a header map (lsn, last_time_ms,
databases), then one item per key: (db, key, value or None, expire or None,
version chain), so that restart time does not grow with total history. The
image is built in a forked child (see `checkpoint_object`).
"""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import os
import socket
import time
import zlib
from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from flusher import paths, segment
from flusher.codec import iter_items, pack, pack_plain
from flusher.flusher import Flusher
from flusher.objectstore import ObjectStore
from store import Database, Snapshot, Store, VersionEntry, WriteMeta
from store.keyspace import cmd_names, translate_codes
from store.ops import CREATED

MANIFEST_FORMAT = 2  # 2: with a checksum (format 1 manifests are still read)
log = logging.getLogger("temporalstore")


@dataclass(frozen=True)
class Manifest:
    epoch: int
    seq: int
    checkpoint_lsn: int | None
    writer: str = ""
    created_ms: int = 0

    @property
    def key(self) -> str:
        return paths.manifest(self.epoch, self.seq)

    def _fields(self) -> dict[str, Any]:
        return {
            "format": MANIFEST_FORMAT,
            "epoch": self.epoch,
            "seq": self.seq,
            "checkpoint_lsn": self.checkpoint_lsn,
            "writer": self.writer,
            "created_ms": self.created_ms,
        }

    def encode(self) -> bytes:
        d = self._fields()
        d["crc32"] = _manifest_crc(d)
        return json.dumps(d, sort_keys=True).encode()

    @classmethod
    def decode(cls, data: bytes, name: str) -> Manifest:
        """A manifest as stored under `name`: its checksum (format 2) must hold and
        its epoch and sequence must be the ones its name gives."""
        try:
            d = json.loads(data)
            if d["format"] not in (1, MANIFEST_FORMAT):
                raise ValueError(f"unknown manifest format {d['format']!r}")
            if d["format"] == MANIFEST_FORMAT:
                crc = d.pop("crc32")
                if crc != _manifest_crc(d):
                    raise ValueError("checksum mismatch")
            ckpt = d["checkpoint_lsn"]
            m = cls(
                epoch=int(d["epoch"]),
                seq=int(d["seq"]),
                checkpoint_lsn=None if ckpt is None else int(ckpt),
                writer=str(d.get("writer", "")),
                created_ms=int(d.get("created_ms", 0)),
            )
        except (ValueError, KeyError, TypeError) as e:
            raise segment.CorruptObject(f"{name}: unreadable manifest ({e})") from None
        named = paths.parse_manifest(name)
        if named is not None and named != (m.epoch, m.seq):
            raise segment.CorruptObject(f"{name}: names epoch {m.epoch} seq {m.seq}")
        return m


def _manifest_crc(fields: dict[str, Any]) -> int:
    """CRC32 of a manifest's fields (without the checksum), as sorted JSON."""
    return zlib.crc32(json.dumps(fields, sort_keys=True).encode())


def writer_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def new_manifest(epoch: int, seq: int, checkpoint_lsn: int | None) -> Manifest:
    return Manifest(epoch, seq, checkpoint_lsn, writer_id(), int(time.time() * 1000))


async def newest_manifest(objects: ObjectStore) -> Manifest | None:
    """The manifest with the highest (epoch, seq), or None for a new prefix."""
    names = [(p, k) for k in await objects.list(paths.MANIFESTS) if (p := paths.parse_manifest(k))]
    if not names:
        return None
    _, key = max(names)
    data = await objects.get(key)
    if data is None:
        raise segment.CorruptObject(f"{key}: listed but missing")
    return Manifest.decode(data, key)


# -- images ---------------------------------------------------------------------------


BATCH = 4096
"""Keys per batch item (see `_items`)."""


def _items(store: Store) -> Iterator[bytes]:
    yield pack(
        {
            "lsn": store.lsn,
            "last_time_ms": store.last_time_ms,
            "databases": len(store.dbs),
            "index_lsns": store.index_lsns.tobytes(),
            "index_times": store.index_times.tobytes(),
            "snapshots": [tuple(snap) for snap in store.snapshots.values()],
            "extra": store.checkpoint_extra(),
            "cmd_names": cmd_names(),
        }
    )
    for db in store.dbs:
        yield from _db_items(db)


def _db_items(db: Database) -> Iterator[bytes]:
    data, expires, chains, floors = db.data, db.expires, db.chains, db.floors
    index = db.index
    # The common key, a string written once with no expiry, goes into batch items
    # of parallel arrays: restart loads them with two dict updates. A slice of keys
    # that is all such keys is checked with C-level set operations, not per key.
    all_keys = list(data)
    all_values = list(data.values())
    all_raw = chains.raw_many(all_keys)
    for i in range(0, len(all_keys), BATCH):
        ks, vs, ps = all_keys[i : i + BATCH], all_values[i : i + BATCH], all_raw[i : i + BATCH]
        if (
            set(map(type, ps)) == _INT
            and set(map(type, vs)) == _BYTES
            and (not expires or expires.keys().isdisjoint(ks))
            and (not floors or floors.keys().isdisjoint(ks))
        ):
            yield pack_plain((BATCH_TAG, index, ks, vs, ps))
            continue
        keys: list[bytes] = []
        values: list[bytes] = []
        packed: list[int] = []
        for key, value, p in zip(ks, vs, ps, strict=True):
            if type(p) is int and type(value) is bytes and key not in expires and key not in floors:
                keys.append(key)
                values.append(value)
                packed.append(p)
            else:
                yield pack(_item(db, key, value, chains.born(key)))
        if keys:
            yield pack_plain((BATCH_TAG, index, keys, values, packed))
    for key in chains:
        if key not in data:  # history of a key that no longer exists
            yield pack(_item(db, key, None, chains.born(key)))


_INT = {int}
_BYTES = {bytes}
BATCH_TAG = "b"


def _item(db: Database, key: bytes, value: Any, born: tuple[int, str] | None) -> Any:
    chain: Any = born
    if born is None:
        chain = [
            (e.lsn, e.time_ms, e.cmd, e.undo, None if e.meta is None else tuple(e.meta), e.snap)
            for e in db.chains.get(key, ())
        ]
    return (db.index, key, value, db.expires.get(key), chain, db.floors.get(key))


def image(store: Store) -> tuple[bytes, int]:
    """The raw (uncompressed) checkpoint body and its item count."""
    parts = list(_items(store))
    return b"".join(parts), len(parts)


def load_image(store: Store, raw: bytes, name: str) -> int:
    """Fill an empty store from a checkpoint body; return its LSN."""
    it = iter_items(raw)
    head: Any = next(it)
    if head["databases"] > len(store.dbs):
        raise segment.CorruptObject(
            f"{name}: holds {head['databases']} databases, the server has {len(store.dbs)}"
        )
    store.index_lsns = array("q", head["index_lsns"])
    store.index_times = array("q", head["index_times"])
    dbs = store.dbs
    names: list[str] = head.get("cmd_names", [])
    table = translate_codes(names)
    for item in it:
        if item[0] == BATCH_TAG:
            _tag, dbi, keys, values, packed = item
            db = dbs[dbi]
            db.data.update(zip(keys, values, strict=True))
            db.chains.add_packed(keys, packed, names, table)
            continue
        dbi, key, value, expire, chain, floor = item
        db = dbs[dbi]
        if value is not None:
            db.data[key] = value
            if expire is not None:
                db.expires[key] = expire
                db.schedule_expiry(key, expire)
        if not chain:
            pass
        elif type(chain[0]) is int:
            # (LSN, command): the key's one version created it (see store.Chains).
            db.chains.add_born(key, *chain)
        else:
            db.chains[key] = [
                VersionEntry(
                    lsn,
                    t,
                    cmd,
                    CREATED if undo == CREATED else undo,
                    None if meta is None else WriteMeta(*meta),
                    snap,
                )
                for lsn, t, cmd, undo, meta, snap in chain
            ]
        if floor is not None:
            db.floors[key] = floor
    store.snapshots = {
        name: Snapshot(name, lsn, t, trigger) for name, lsn, t, trigger in head["snapshots"]
    }
    store.load_checkpoint_extra(head["extra"])
    store.lsn = int(head["lsn"])
    store.last_time_ms = int(head["last_time_ms"])
    return store.lsn


async def write_checkpoint(
    objects: ObjectStore, store: Store, flusher: Flusher | None = None
) -> tuple[int, int]:
    """Write the store's image; return (lsn, bytes stored). Segments up to the
    image's LSN are made durable first, so the log stays contiguous with the
    checkpoint (fencing relies on it)."""
    lsn, data = await checkpoint_object(store)
    if flusher is not None:
        await flusher.wait_durable(lsn)
    await objects.put(paths.checkpoint(lsn), data)
    return lsn, len(data)


async def checkpoint_object(store: Store) -> tuple[int, bytes]:
    """(LSN, the compressed checkpoint object) of the store as it is now.

    As Redis' BGSAVE: a forked child serializes its copy-on-write snapshot of the
    store and sends the object back through a pipe, so the event loop keeps serving
    while the image is built (a consistent cut at the fork). Where fork is not
    available or the child fails, the image is taken in one go on the event loop."""
    lsn = store.lsn
    child = _fork_image(store, lsn) if hasattr(os, "fork") else None
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


def _fork_image(store: Store, lsn: int) -> tuple[int, int] | None:
    """Fork a child that writes the checkpoint object to a pipe and exits;
    (its pid, the read end) or None if it could not be started."""
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
        os.close(r)
        # Hold no client or listening socket open past the parent's close.
        os.closerange(3, w)
        os.closerange(w + 1, 1 << 16)
        raw, count = image(store)
        data = segment.encode(segment.CHECKPOINT_MAGIC, lsn, lsn, count, raw)
        view = memoryview(data)
        while view:
            view = view[os.write(w, view) :]
        code = 0
    finally:
        os._exit(code)


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
    header, raw = await asyncio.to_thread(segment.decode, data, key, segment.CHECKPOINT_MAGIC)
    if header.first != lsn:
        raise segment.CorruptObject(f"{key}: holds LSN {header.first}, not {lsn}")
    load_image(store, raw, key)
