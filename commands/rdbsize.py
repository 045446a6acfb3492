"""Sizes of a value in Redis' layouts, for DEBUG OBJECT: the length of its RDB
serialization (`serializedlength`, without LZF compression) and the quicklist a list
would be cut into under list-max-listpack-size (`ql_nodes` and the rest).

These are computed from the value's contents with Redis' encoding rules (listpack
entries, intsets, RDB lengths, integer strings and LZF compression of strings, where
python-lzf is installed); they are what redis-server would
store for the same contents, not the size of our own structures (MEMORY USAGE gives
that).
"""

from __future__ import annotations

import importlib
from collections import deque
from collections.abc import Iterable
from typing import Any

from commands.parsing import string2ll
from store.stream import MAX_ID, MIN_ID, Stream
from store.values import ZSet

try:  # python-lzf: liblzf, the compressor Redis bundles
    _LZF: Any = importlib.import_module("lzf")
except ImportError:  # then lengths are given uncompressed
    _LZF = None
_SIZE_LIMITS = {-1: 4096, -2: 8192, -3: 16384, -4: 32768, -5: 65536}
_SAFETY_LIMIT = 8192
_LISTPACK_HEADER = 7  # 4 bytes total size, 2 bytes count, 1 end byte


def _len_bytes(n: int) -> int:
    """rdbSaveLen: 1, 2, 5 or 9 bytes."""
    return 1 if n < 64 else 2 if n < 16384 else 5 if n <= 0xFFFFFFFF else 9


def rdb_string(b: bytes) -> int:
    """rdbSaveRawString: an integer in 8/16/32 bits, LZF-compressed past 20 bytes when
    that saves at least 4 (rdbcompression yes), or a length and the bytes."""
    if len(b) <= 11:
        n = string2ll(b)
        if n is not None:
            if -(2**7) <= n < 2**7:
                return 2
            if -(2**15) <= n < 2**15:
                return 3
            if -(2**31) <= n < 2**31:
                return 5
    if len(b) > 20 and _LZF is not None:
        packed = _LZF.compress(b, len(b) - 4)
        if packed:
            return 1 + _len_bytes(len(packed)) + _len_bytes(len(b)) + len(packed)
    return _len_bytes(len(b)) + len(b)


def _backlen(n: int) -> int:
    return 1 if n < 128 else 2 if n < 16384 else 3 if n < 2097152 else 4 if n < 268435456 else 5


def lp_entry(b: bytes) -> int:
    """The bytes one element takes in a listpack (encoding, data, back length)."""
    n = string2ll(b) if len(b) <= 20 else None
    if n is not None:
        if 0 <= n < 128:
            size = 1
        elif -(2**12) <= n < 2**12:
            size = 2
        elif -(2**15) <= n < 2**15:
            size = 3
        elif -(2**23) <= n < 2**23:
            size = 4
        elif -(2**31) <= n < 2**31:
            size = 5
        else:
            size = 9
    else:
        size = (1 if len(b) < 64 else 2 if len(b) < 4096 else 5) + len(b)
    return size + _backlen(size)


def listpack_bytes(items: Iterable[bytes]) -> int:
    return _LISTPACK_HEADER + sum(map(lp_entry, items))


def _score(score: float) -> bytes:
    """A score as a listpack stores it (an integer when it is one, else %.17g)."""
    if abs(score) < 2**63 and score == int(score):
        return b"%d" % int(score)
    return b"%.17g" % score


def quicklist_nodes(items: Iterable[bytes], fill: int, packed_threshold: int) -> list[int]:
    """The byte sizes of the nodes Redis would cut a list into."""
    limit = _SIZE_LIMITS.get(fill, 65536) if fill < 0 else _SAFETY_LIMIT
    nodes: list[int] = []
    size = count = 0
    for item in items:
        if len(item) >= packed_threshold:  # a plain node of its own
            if count:
                nodes.append(size)
            nodes.append(len(item))
            size = count = 0
            continue
        entry = lp_entry(item)
        fits = count and (
            size + entry <= limit if fill < 0 else size + entry <= limit and count < fill
        )
        if count and not fits:
            nodes.append(size)
            size = count = 0
        if not count:
            size = _LISTPACK_HEADER
        size += entry
        count += 1
    if count:
        nodes.append(size)
    return nodes


def quicklist_figures(
    items: deque[bytes], params: dict[str, str], packed_threshold: int
) -> tuple[int, float, int, int, int]:
    """DEBUG OBJECT's ql_nodes, ql_avg_node, ql_listpack_max, ql_compressed and
    ql_uncompressed_size for a list."""
    fill = int(params.get("list-max-listpack-size", "-2"))
    nodes = quicklist_nodes(items, fill, packed_threshold)
    compressed = int(params.get("list-compress-depth", "0")) != 0
    avg = len(items) / len(nodes) if nodes else 0.0
    return len(nodes), avg, fill, int(compressed), sum(nodes)


def serialized_length(v: Any, fill: int = -2, packed_threshold: int = 1 << 30) -> int:
    """rdbSavedObjectLen for the value's contents (listpack blobs uncompressed)."""
    if isinstance(v, bytes | bytearray):
        return rdb_string(bytes(v))
    if isinstance(v, deque):
        nodes = quicklist_nodes(v, fill, packed_threshold)
        return _len_bytes(len(nodes)) + sum(1 + _len_bytes(n) + n for n in nodes)
    if isinstance(v, ZSet):
        if not v.big:
            return _blob(listpack_bytes(x for m, sc in v.scores.items() for x in (m, _score(sc))))
        return _len_bytes(len(v)) + sum(rdb_string(m) + 8 for m in v.scores)
    if isinstance(v, dict):
        if type(v) is dict:
            return _blob(listpack_bytes(x for kv in v.items() for x in kv))
        return _len_bytes(len(v)) + sum(rdb_string(f) + rdb_string(x) for f, x in v.items())
    if isinstance(v, set):
        if type(v) is set:
            width = max((_int_width(int(m)) for m in v), default=2)
            return _blob(8 + width * len(v))
        return _len_bytes(len(v)) + sum(map(rdb_string, v))
    if isinstance(v, Stream):
        entries = v.range(MIN_ID, MAX_ID)
        body = sum(listpack_bytes(e[1]) + 16 for e in entries)
        return _len_bytes(len(entries)) + body + 3 * 8 + _len_bytes(len(v.groups))
    return 0


def _blob(n: int) -> int:
    return _len_bytes(n) + n


def _int_width(n: int) -> int:
    return 2 if -(2**15) <= n < 2**15 else 4 if -(2**31) <= n < 2**31 else 8
