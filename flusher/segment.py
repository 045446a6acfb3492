"""The segment and checkpoint object formats: a fixed header, then a
zstd-compressed body.

Header (48 bytes, big-endian):
    magic      4s   b"TSSG" (segment) or b"TSCK" (checkpoint)
    version    H    format version (1)
    flags      H    1 = body is zstd-compressed; segments only: 2 = cut while an
                    earlier segment was still being written (`FLAG_AHEAD`), 4 = a
                    new writer's claim on its place in the log (`FLAG_CLAIM`);
                    the high byte: the writer's epoch mark (`epoch_mark`), 0 unknown
    first      Q    first LSN (segment) / the image's LSN (checkpoint)
    last       Q    last LSN (segment) / same as first (checkpoint)
    count      I    records (segment) / items (checkpoint)
    raw_len    Q    body length before compression
    body_len   Q    body length as stored
    checksum   I    CRC-32 of the header's first 44 bytes and the stored body
"""

from __future__ import annotations

import queue
import struct
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass

import zstandard

SEGMENT_MAGIC = b"TSSG"
CHECKPOINT_MAGIC = b"TSCK"
VERSION = 1
FLAG_ZSTD = 1
FLAG_AHEAD = 2
FLAG_CLAIM = 4


def epoch_mark(epoch: int) -> int:
    """The flags bits that tell one writer epoch's segments from its neighbours'
    (1-255 in the high byte; 0, as in older segments, is unknown)."""
    return (epoch % 255 + 1) << 8 if epoch > 0 else 0


def mark_of(flags: int) -> int:
    return flags & 0xFF00


_HEADER = struct.Struct(">4sHHQQIQQ")
HEADER_SIZE = _HEADER.size + 4
SEGMENT_LEVEL = 1
"""zstd's level for segments. Level 1 (zstd's "fast" strategy) costs about a seventh
less per record than level 3 ("double fast") on a segment of counter updates and a
fifth less on hash writes, and its tables (64 KB, not 1 MB) cost less to set up per
segment; on segments of these records it compresses as well or better (docs/
benchmarks.md). Segments are compressed on the server's core, once per write."""
CHECKPOINT_LEVEL = 3
"""zstd's level for checkpoints: written by a child process off the serving path,
kept for long, read at every restart."""


class CorruptObject(Exception):
    """An object whose header or checksum does not verify."""


@dataclass(frozen=True)
class Header:
    magic: bytes
    version: int
    flags: int
    first: int
    last: int
    count: int
    raw_len: int
    body_len: int


REUSE_BELOW = 64 * 1024
"""Bodies smaller than this are compressed by one compressor per thread, kept: a new
one costs ten times the compression of a sync write's segment of a few KB (setting up
its context). Larger bodies get a new one, so that no thread keeps the large context
they grow (the compression is the same either way)."""

_kept = threading.local()


def _compress(raw: bytes, level: int = SEGMENT_LEVEL) -> bytes:
    if len(raw) >= REUSE_BELOW or level != SEGMENT_LEVEL:
        return zstandard.ZstdCompressor(level=level).compress(raw)
    c: zstandard.ZstdCompressor | None = getattr(_kept, "zstd", None)
    if c is None:
        c = _kept.zstd = zstandard.ZstdCompressor(level=level)
    return c.compress(raw)


def encode(magic: bytes, first: int, last: int, count: int, raw: bytes, flags: int = 0) -> bytes:
    body = _compress(raw, CHECKPOINT_LEVEL if magic == CHECKPOINT_MAGIC else SEGMENT_LEVEL)
    head = _HEADER.pack(magic, VERSION, FLAG_ZSTD | flags, first, last, count, len(raw), len(body))
    crc = zlib.crc32(body, zlib.crc32(head))
    return head + struct.pack(">I", crc) + body


def read_header(data: bytes, name: str, magic: bytes) -> Header:
    if len(data) < HEADER_SIZE:
        raise CorruptObject(f"{name}: truncated header ({len(data)} bytes)")
    h = Header(*_HEADER.unpack_from(data))
    if h.magic != magic:
        raise CorruptObject(f"{name}: bad magic {h.magic!r}")
    if h.version != VERSION:
        raise CorruptObject(f"{name}: unknown format version {h.version}")
    return h


def verify(data: bytes, name: str, magic: bytes) -> Header:
    """Check an object's header, length and checksum; return its header."""
    h = read_header(data, name, magic)
    body_len = len(data) - HEADER_SIZE
    if body_len != h.body_len:
        raise CorruptObject(
            f"{name}: truncated body ({body_len} of {h.body_len} bytes, LSN {h.first}-{h.last})"
        )
    (crc,) = struct.unpack_from(">I", data, _HEADER.size)
    body = memoryview(data)[HEADER_SIZE:]
    if zlib.crc32(body, zlib.crc32(data[: _HEADER.size])) != crc:
        raise CorruptObject(f"{name}: checksum mismatch (LSN {h.first}-{h.last})")
    return h


def decode(data: bytes, name: str, magic: bytes) -> tuple[Header, bytes]:
    """Verify an object and return its header and decompressed body."""
    h = verify(data, name, magic)
    body = memoryview(data)[HEADER_SIZE:]  # no copy of the compressed body
    raw = zstandard.ZstdDecompressor().decompress(body, max_output_size=h.raw_len)
    if len(raw) != h.raw_len:
        raise CorruptObject(f"{name}: body decompresses to {len(raw)} bytes, not {h.raw_len}")
    return h, raw


CHUNK = 1 << 20
"""Bytes of a body `body_chunks` decompresses at a time, by default."""


def body_chunks(data: bytes, h: Header, name: str, chunk: int = CHUNK) -> Iterator[bytes]:
    """The decompressed body of a verified object (`verify` gave `h`), in pieces,
    decompressed by a thread while the caller works on the pieces before: loading
    a checkpoint need not wait for the whole body first. Raises `CorruptObject`
    (when its turn comes) if the body does not decompress to `h.raw_len` bytes."""
    q: queue.SimpleQueue[bytes | BaseException | None] = queue.SimpleQueue()
    threading.Thread(target=_decompress, args=(data, h, name, chunk, q), daemon=True).start()
    while True:
        item = q.get()
        if item is None:
            return
        if isinstance(item, BaseException):
            raise item
        yield item


def _decompress(
    data: bytes,
    h: Header,
    name: str,
    chunk_size: int,
    q: queue.SimpleQueue[bytes | BaseException | None],
) -> None:
    total = 0
    try:
        body = memoryview(data)[HEADER_SIZE:]
        for chunk in zstandard.ZstdDecompressor().read_to_iter(
            body, read_size=chunk_size, write_size=chunk_size
        ):
            total += len(chunk)
            if total > h.raw_len:
                break
            q.put(chunk)
        if total != h.raw_len:
            raise CorruptObject(
                f"{name}: body decompresses to {'more than ' if total > h.raw_len else ''}"
                f"{total} bytes, not {h.raw_len}"
            )
        q.put(None)
    except Exception as e:  # handed to the reader, which raises it
        q.put(CorruptObject(f"{name}: {e}") if isinstance(e, zstandard.ZstdError) else e)
