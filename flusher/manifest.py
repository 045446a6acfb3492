"""Manifests: which checkpoint is current, and which writer epoch owns the prefix.

A manifest is small JSON written create-if-absent under `manifest/<epoch>-<seq>.json`
(see `flusher.paths`): a new writer takes a prefix over by writing the next epoch,
and a writer that finds a newer epoch than its own is fenced. The newest manifest
(highest epoch, then sequence) is the one recovery starts from.
"""

from __future__ import annotations

import json
import os
import socket
import time
import zlib
from dataclasses import dataclass
from typing import Any

from flusher import paths, segment
from flusher.objectapi import ObjectStore

MANIFEST_FORMAT = 2  # 2: with a checksum (format 1 manifests are still read)


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
