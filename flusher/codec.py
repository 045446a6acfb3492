"""Serialization of update records and store images with msgpack.

Values keep their exact type (and so their Redis encoding) through extension
types: lists, sets, hash tables, sorted sets, raw strings and streams. Tuples and
lists both come back as tuples, which is what ops and version entries are.
The format is documented in docs/storage-format.md.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any, NamedTuple

import msgpack

from flusher import plainpack
from flusher.plainpack import pack_records
from store import R_CMDS, R_LSN, R_META, R_OPS, R_TIME, UpdateRecord, WriteMeta
from store.stream import Node, Stream
from store.values import HashSet, HashTable, ZSet

EXT_LIST = 1
EXT_SET = 2
EXT_HASHSET = 3
EXT_HASHTABLE = 4
EXT_ZSET = 5
EXT_RAW = 6
EXT_STREAM = 7


def _default(obj: Any) -> Any:
    t = type(obj)
    if t is tuple:
        return list(obj)
    if t is deque:
        return msgpack.ExtType(EXT_LIST, _pack_nested(list(obj)))
    if t is set:
        return msgpack.ExtType(EXT_SET, _pack_nested(list(obj)))
    if t is HashSet:
        return msgpack.ExtType(EXT_HASHSET, _pack_nested(list(obj)))
    if t is HashTable:
        return msgpack.ExtType(EXT_HASHTABLE, _pack_nested(dict(obj)))
    if t is WriteMeta:
        return list(obj)
    if t is ZSet:
        return msgpack.ExtType(EXT_ZSET, _pack_nested([obj.big, list(obj.scores.items())]))
    if t is Stream:
        state = [list(obj.entries.items()), [n.state() for n in obj.nodes], obj.meta()]
        if obj.groups or obj.dead:
            state.append(obj.groups_state())
        if obj.dead:  # deleted entries' fields still in a node (DUMP writes them)
            state.append(list(obj.dead.items()))
        return msgpack.ExtType(EXT_STREAM, _pack_nested(state))
    raise TypeError(f"cannot serialize {t.__name__}")


def _ext(code: int, data: bytes) -> Any:
    if code == EXT_RAW:
        return bytearray(data)
    inner = unpack(data)
    if code == EXT_LIST:
        return deque(inner)
    if code == EXT_SET:
        return set(inner)
    if code == EXT_HASHSET:
        return HashSet(inner)
    if code == EXT_HASHTABLE:
        return HashTable(inner)
    if code == EXT_ZSET:
        z = ZSet()
        for member, score in inner[1]:
            z.add(member, score)
        z.big = inner[0]
        return z
    if code == EXT_STREAM:
        entries, nodes, meta = inner[:3]
        s = Stream()
        if len(inner) > 3:  # consumer groups (older data has none)
            s.set_groups_state(inner[3])
        if len(inner) > 4:
            s.dead = dict(inner[4])
        s.entries = dict(entries)
        s.nodes = [Node.from_state(n) for n in nodes]
        s.set_meta(meta)
        return s
    return msgpack.ExtType(code, data)


# strict_types: subclasses (HashTable, bytearray) reach _default instead of being
# written as their base type, so their Redis encoding survives. One packer, reused.
_PACKER = msgpack.Packer(default=_default, use_bin_type=True, strict_types=True)


def _pack(obj: Any) -> bytes:
    data: bytes = _PACKER.pack(obj)
    return data


def _pack_nested(obj: Any) -> bytes:
    """Extension payloads are packed while the shared packer is busy: a fresh one."""
    data: bytes = msgpack.packb(obj, default=_default, use_bin_type=True, strict_types=True)
    return data


def unpack(data: bytes) -> Any:
    return msgpack.unpackb(data, ext_hook=_ext, use_list=False, raw=False, strict_map_key=False)


# Records whose ops hold only plain values (bytes, numbers, tuples of them: SET,
# INCR, HSET, LPUSH, ...) need no extension types; a packer without strict_types
# writes their tuples as arrays in C, the same bytes the strict packer writes
# through `_default`, without a Python call per tuple.
_PLAIN_PACKER = msgpack.Packer(use_bin_type=True)
_PLAIN = frozenset({bytes, str, int, float, bool, type(None)})


def _plain(op: tuple[Any, ...]) -> bool:
    """Holds only plain values, at most two tuples deep (e.g. HSET's pairs)."""
    for x in op:
        t = type(x)
        if t in _PLAIN:
            continue
        if t is not tuple:
            return False
        for y in x:
            ty = type(y)
            if ty in _PLAIN:
                continue
            if ty is not tuple:
                return False
            for z in y:
                if type(z) not in _PLAIN:
                    return False
    return True


# Our encoder of plain records when it runs compiled (faster than msgpack there, four
# times slower as Python); else msgpack's plain packer below.
_OWN_PLAIN = plainpack.COMPILED


def encode_record(r: UpdateRecord) -> bytes:
    if _OWN_PLAIN:
        plain = pack_records([r])
        if plain is not None:
            return plain
    for _dbi, _key, op in r[R_OPS]:
        if not _plain(op):
            meta = None if r[R_META] is None else tuple(r[R_META])
            return _pack((r[R_LSN], r[R_TIME], r[R_OPS], r[R_CMDS], meta))
    data: bytes = _PLAIN_PACKER.pack(r)
    return data


def encode_records(records: list[UpdateRecord]) -> bytes:
    """`records` encoded back to back: the bytes of `encode_record` on each. Plain
    records (the common case) by `flusher.plainpack` when compiled, without msgpack;
    else in one call to the packer when all are plain (an array of them, less its
    header)."""
    if _OWN_PLAIN:
        plain = pack_records(records)
        if plain is not None:
            return plain
    for r in records:
        for _dbi, _key, op in r[R_OPS]:
            if not _plain(op):
                return b"".join([encode_record(r) for r in records])
    n = len(records)
    data: bytes = _PLAIN_PACKER.pack(records)
    return data[1 if n < 16 else 3 if n < 0x10000 else 5 :]


def record_offsets(body: bytes, n: int) -> list[int]:
    """Where each of the `n` records encoded back to back in `body` ends."""
    unpacker = msgpack.Unpacker(max_buffer_size=max(len(body), 1024))
    unpacker.feed(body)
    ends = []
    for _ in range(n):
        unpacker.skip()
        ends.append(unpacker.tell())
    return ends


def _record(t: Any) -> UpdateRecord:
    lsn, time_ms, ops, cmds, meta = t
    return (lsn, time_ms, ops, cmds, None if meta is None else WriteMeta(*meta))


record_of_row: Callable[[Any], UpdateRecord] = _record
"""The `UpdateRecord` of a decoded record (a row of `decode_records`)."""


def decode_record(data: bytes) -> UpdateRecord:
    return _record(unpack(data))


def _unpacker(size: int) -> Any:
    """An unpacker of values packed back to back, for a body of `size` bytes."""
    return msgpack.Unpacker(
        None,
        ext_hook=_ext,
        use_list=False,
        raw=False,
        strict_map_key=False,
        max_buffer_size=max(size, 1024),
    )


def fed_unpacker(body: bytes | memoryview) -> Any:
    """An unpacker of the msgpack values packed back to back in `body`, fed (a
    copy: a view of the part of a body still to be read is enough)."""
    unpacker = _unpacker(len(body))
    unpacker.feed(body)
    return unpacker


def iter_items(body: bytes) -> Iterator[Any]:
    """msgpack values packed back to back (a segment or checkpoint body)."""
    return iter(fed_unpacker(body))


def stream_items(chunks: Iterable[bytes], size: int) -> Iterator[Any]:
    """`iter_items` of a body given in pieces (`size` bytes in all): each value as
    soon as its bytes are there."""
    unpacker = _unpacker(size)
    for chunk in chunks:
        unpacker.feed(chunk)
        yield from unpacker


def iter_records(body: bytes) -> Iterator[UpdateRecord]:
    """Update records packed back to back (a segment body), typed."""
    return map(_record, iter_items(body))


class DecodedRecords(NamedTuple):
    """A segment body's records for replay, which takes millions of them: `rows`
    are the decoded tuples, the fields of `UpdateRecord` in order with the
    metadata as stored, and `typed` makes the `UpdateRecord` of a row. Replay reads
    the common record's fields straight from its row; typing every row would cost
    it a tenth of its speed."""

    rows: Iterator[Any]
    typed: Callable[[Any], UpdateRecord]


def decode_records(body: bytes) -> DecodedRecords:
    return DecodedRecords(iter_items(body), _record)


def pack(obj: Any) -> bytes:
    """Any store value or structure (checkpoint items)."""
    return _pack(obj)


def pack_plain(obj: Any) -> bytes:
    """A structure of plain values only (bytes, str, numbers, None, tuples of them):
    the bytes `pack` gives, faster. Anything else would lose its type: use `pack`."""
    data: bytes = _PLAIN_PACKER.pack(obj)
    return data


def records_from(body: bytes, lsn: int) -> bytes:
    """The records of `body` (encoded back to back) from `lsn` on, re-encoded."""
    rows, typed = decode_records(body)
    return b"".join(encode_record(typed(row)) for row in rows if row[0] >= lsn)
