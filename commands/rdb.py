"""Redis 7.0's RDB value encodings, read side: the pieces DUMP payloads and RDB files
are made of (lengths, strings, LZF, listpacks, ziplists, intsets, zipmaps) and
`load_value`, which turns one serialized value of any RDB type Redis 7.0 writes or
still loads into the store's value types. `rdb_write` is the write side; `rdb_file`
reads whole RDB files (`temporalstore import --rdb`).

Errors are `RdbError` (RESTORE answers them as Redis does, `Bad data format`);
module values raise `RdbModuleError`, naming the module type as Redis does.
"""

from __future__ import annotations

import struct
from collections import deque
from typing import Any

import lzf

from store.stream import (
    INVALID_ENTRIES_READ,
    Group,
    Node,
    Stream,
    StreamID,
    estimate_entries_read,
    format_id,
)
from store.stream import _backlen as backlen_size  # listpack back-length bytes
from store.values import (
    HASH_MAX_LISTPACK_ENTRIES,
    ZSET_MAX_LISTPACK_ENTRIES,
    HashTable,
    ZSet,
    new_hash,
    new_set,
)

RDB_VERSION = 10  # what Redis 7.0 writes and the newest payload it accepts

# RDB object types (rdb.h). 20 and 21 are Redis 7.2's (RDB 11): files only.
T_STRING = 0
T_LIST = 1
T_SET = 2
T_ZSET = 3
T_HASH = 4
T_ZSET_2 = 5
T_MODULE = 6
T_MODULE_2 = 7
T_HASH_ZIPMAP = 9
T_LIST_ZIPLIST = 10
T_SET_INTSET = 11
T_ZSET_ZIPLIST = 12
T_HASH_ZIPLIST = 13
T_LIST_QUICKLIST = 14
T_STREAM_LISTPACKS = 15
T_HASH_LISTPACK = 16
T_ZSET_LISTPACK = 17
T_LIST_QUICKLIST_2 = 18
T_STREAM_LISTPACKS_2 = 19
T_SET_LISTPACK = 20
T_STREAM_LISTPACKS_3 = 21
MAX_TYPE_70 = T_STREAM_LISTPACKS_2

ENC_INT8, ENC_INT16, ENC_INT32, ENC_LZF = 0, 1, 2, 3
QUICKLIST_PLAIN, QUICKLIST_PACKED = 1, 2
STREAM_DELETED, STREAM_SAMEFIELDS = 1, 2

_CRC64_POLY = 0x95AC9329AC4BC9B5  # Jones, reflected (Redis' crc64)


def _crc64_table() -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ _CRC64_POLY if c & 1 else c >> 1
        table.append(c)
    return table


_CRC64 = _crc64_table()


def crc64(data: bytes | memoryview, crc: int = 0) -> int:
    """Redis' crc64 (Jones polynomial, reflected), continuing from `crc`."""
    t = _CRC64
    for b in data:
        crc = t[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc


class RdbError(ValueError):
    """Serialized data that is not valid (truncated, corrupt, unknown encoding)."""


class RdbEmptyKey(RdbError):
    """A collection with no elements (read whole: the reader is past it). Redis refuses
    it in a DUMP payload and skips it in an RDB file."""


class RdbModuleError(RdbError):
    """A module value: no module type is loaded here."""


_MODULE_CHARSET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def module_type_name(module_id: int) -> str:
    """moduleTypeNameByID: the 9-character name in a module type ID's top 54 bits."""
    out = []
    mid = module_id >> 10
    for _ in range(9):
        out.append(_MODULE_CHARSET[mid & 63])
        mid >>= 6
    return bytes(reversed(out)).decode()


def lzf_decompress(data: bytes, size: int) -> bytes:
    try:
        out = lzf.decompress(data, size) if size else b""
    except ValueError:
        raise RdbError("invalid LZF compressed string") from None
    if out is None or len(out) != size:
        raise RdbError("invalid LZF compressed string")
    return bytes(out)


class Reader:
    """A cursor over serialized RDB data; every read checks the bounds."""

    __slots__ = ("buf", "end", "pos")

    def __init__(self, buf: bytes, pos: int = 0, end: int | None = None) -> None:
        self.buf = buf
        self.pos = pos
        self.end = len(buf) if end is None else end

    def take(self, n: int) -> bytes:
        p = self.pos
        if n < 0 or p + n > self.end:
            raise RdbError("unexpected end of data")
        self.pos = p + n
        return self.buf[p : p + n]

    def byte(self) -> int:
        p = self.pos
        if p >= self.end:
            raise RdbError("unexpected end of data")
        self.pos = p + 1
        return self.buf[p]

    def length_or_encoding(self) -> tuple[int, bool]:
        """An RDB length, or (encoding, True) for a specially encoded string."""
        b = self.byte()
        kind = b >> 6
        if kind == 0:
            return b & 0x3F, False
        if kind == 1:
            return ((b & 0x3F) << 8) | self.byte(), False
        if kind == 3:
            return b & 0x3F, True
        if b == 0x80:
            return int.from_bytes(self.take(4), "big"), False
        if b == 0x81:
            return int.from_bytes(self.take(8), "big"), False
        raise RdbError(f"unknown length encoding {b}")

    def length(self) -> int:
        n, enc = self.length_or_encoding()
        if enc:
            raise RdbError("an encoded string where a length was expected")
        return n

    def string(self) -> bytes:
        n, enc = self.length_or_encoding()
        if not enc:
            return self.take(n)
        if n == ENC_INT8:
            return b"%d" % int.from_bytes(self.take(1), "little", signed=True)
        if n == ENC_INT16:
            return b"%d" % int.from_bytes(self.take(2), "little", signed=True)
        if n == ENC_INT32:
            return b"%d" % int.from_bytes(self.take(4), "little", signed=True)
        if n == ENC_LZF:
            clen = self.length()
            ulen = self.length()
            return lzf_decompress(self.take(clen), ulen)
        raise RdbError(f"unknown string encoding {n}")

    def millis(self) -> int:
        return int.from_bytes(self.take(8), "little", signed=True)

    def binary_double(self) -> float:
        v: float = struct.unpack("<d", self.take(8))[0]
        return v

    def old_double(self) -> float:
        n = self.byte()
        if n == 253:
            return float("nan")
        if n == 254:
            return float("inf")
        if n == 255:
            return float("-inf")
        return _to_float(self.take(n))

    def stream_id(self) -> StreamID:
        raw = self.take(16)
        return int.from_bytes(raw[:8], "big"), int.from_bytes(raw[8:], "big")


def _to_float(b: bytes | int) -> float:
    if isinstance(b, int):
        return float(b)
    try:
        return float(b)
    except ValueError:
        raise RdbError("invalid double") from None


# -- compact blobs ----------------------------------------------------------------------

Item = bytes | int


def _as_bytes(v: Item) -> bytes:
    return b"%d" % v if isinstance(v, int) else v


def listpack_items(lp: bytes) -> list[Item]:
    """The elements of a listpack (integers as int)."""
    n = len(lp)
    if n < 7 or int.from_bytes(lp[0:4], "little") != n or lp[-1] != 0xFF:
        raise RdbError("invalid listpack header")
    out: list[Item] = []
    i, end = 6, n - 1
    frombytes = int.from_bytes
    while i < end:
        b = lp[i]
        v: Item
        if b < 0x80:
            v, size = b, 1
        elif b < 0xC0:
            size = 1 + (b & 0x3F)
            v = lp[i + 1 : i + size]
        elif b < 0xE0:
            u = ((b & 0x1F) << 8) | lp[i + 1]
            v, size = (u - 8192 if u >= 4096 else u), 2
        elif b < 0xF0:
            size = 2 + (((b & 0x0F) << 8) | lp[i + 1])
            v = lp[i + 2 : i + size]
        elif b == 0xF0:
            size = 5 + frombytes(lp[i + 1 : i + 5], "little")
            v = lp[i + 5 : i + size]
        elif 0xF1 <= b <= 0xF4:
            width = (2, 3, 4, 8)[b - 0xF1]
            v, size = frombytes(lp[i + 1 : i + 1 + width], "little", signed=True), 1 + width
        else:
            raise RdbError("invalid listpack entry")
        i += size + backlen_size(size)
        if i > end:
            raise RdbError("listpack entry past the end")
        out.append(v)
    return out


def ziplist_items(zl: bytes) -> list[Item]:
    """The elements of a ziplist (integers as int)."""
    n = len(zl)
    if n < 11 or int.from_bytes(zl[0:4], "little") != n or zl[-1] != 0xFF:
        raise RdbError("invalid ziplist header")
    out: list[Item] = []
    i, end = 10, n - 1
    frombytes = int.from_bytes
    while i < end:
        i += 1 if zl[i] < 254 else 5
        if i >= end:
            raise RdbError("ziplist entry past the end")
        enc = zl[i]
        top = enc >> 6
        v: Item
        if top == 0:
            ln = enc & 0x3F
            v = zl[i + 1 : i + 1 + ln]
            i += 1 + ln
        elif top == 1:
            ln = ((enc & 0x3F) << 8) | zl[i + 1]
            v = zl[i + 2 : i + 2 + ln]
            i += 2 + ln
        elif top == 2:
            ln = frombytes(zl[i + 1 : i + 5], "big")
            v = zl[i + 5 : i + 5 + ln]
            i += 5 + ln
        else:
            width = {0xC0: 2, 0xD0: 4, 0xE0: 8, 0xF0: 3, 0xFE: 1}.get(enc)
            if width is not None:
                v = frombytes(zl[i + 1 : i + 1 + width], "little", signed=True)
                i += 1 + width
            elif 0xF1 <= enc <= 0xFD:
                v = (enc & 0x0F) - 1
                i += 1
            else:
                raise RdbError("invalid ziplist entry")
        if i > end:
            raise RdbError("ziplist entry past the end")
        out.append(v)
    return out


def intset_items(blob: bytes) -> list[int]:
    if len(blob) < 8:
        raise RdbError("invalid intset")
    width = int.from_bytes(blob[0:4], "little")
    count = int.from_bytes(blob[4:8], "little")
    if width not in (2, 4, 8) or len(blob) != 8 + width * count:
        raise RdbError("invalid intset")
    return [
        int.from_bytes(blob[j : j + width], "little", signed=True)
        for j in range(8, 8 + width * count, width)
    ]


def zipmap_pairs(zm: bytes) -> list[tuple[bytes, bytes]]:
    out: list[tuple[bytes, bytes]] = []
    r = Reader(zm, 1)

    def zm_len() -> int:
        b = r.byte()
        if b < 254:
            return b
        if b == 254:
            return int.from_bytes(r.take(4), "little")
        raise RdbError("invalid zipmap length")

    while True:
        if r.pos < r.end and zm[r.pos] == 255:
            return out
        field = r.take(zm_len())
        vlen = zm_len()
        free = r.byte()
        value = r.take(vlen)
        r.take(free)
        out.append((field, value))


def _pairs(items: list[Item]) -> list[tuple[bytes, bytes]]:
    if len(items) % 2:
        raise RdbError("odd number of elements")
    flat = [_as_bytes(v) for v in items]
    return list(zip(flat[0::2], flat[1::2], strict=True))


# -- values -----------------------------------------------------------------------------


def _nonempty(value: Any) -> Any:
    if not len(value):
        raise RdbEmptyKey("empty key")
    return value


def _hash(pairs: list[tuple[bytes, bytes]], compact: bool = False) -> dict[bytes, bytes]:
    """A hash; `compact` (it was a listpack or ziplist): Redis keeps that form unless
    there are too many entries, whatever their lengths."""
    h: dict[bytes, bytes] = {}
    for f, v in pairs:
        if f in h:
            raise RdbError("duplicate hash field")
        h[f] = v
    _nonempty(h)
    if compact:
        return HashTable(h) if len(h) > HASH_MAX_LISTPACK_ENTRIES else h
    return new_hash(h)


def _set(members: list[bytes]) -> set[bytes]:
    s = set(members)
    if len(s) != len(members):
        raise RdbError("duplicate set member")
    return new_set(_nonempty(s))


def _zset(pairs: list[tuple[bytes, float]], compact: bool = False) -> ZSet:
    """A sorted set; `compact` as for `_hash`."""
    z = ZSet()
    for m, sc in pairs:
        if sc != sc:
            raise RdbError("NaN score")
        if z.add(m, sc) is not None:
            raise RdbError("duplicate sorted set member")
    if compact:
        z.big = len(z) > ZSET_MAX_LISTPACK_ENTRIES
    return _nonempty(z)  # type: ignore[no-any-return]


def load_value(r: Reader, rtype: int, max_type: int = MAX_TYPE_70) -> Any:
    """Read one value of RDB type `rtype` (RdbError when it is not valid)."""
    if rtype > max_type or rtype == 8 or rtype < 0:
        raise RdbError(f"unknown RDB type {rtype}")
    if rtype == T_STRING:
        return r.string()
    if rtype in (T_LIST, T_SET, T_HASH, T_ZSET, T_ZSET_2):
        n = r.length()
        if rtype == T_LIST:
            return _nonempty(deque(r.string() for _ in range(n)))
        if rtype == T_SET:
            return _set([r.string() for _ in range(n)])
        if rtype == T_HASH:
            return _hash([(r.string(), r.string()) for _ in range(n)])
        rd = r.old_double if rtype == T_ZSET else r.binary_double
        return _zset([(r.string(), rd()) for _ in range(n)])
    if rtype in (T_MODULE, T_MODULE_2):
        raise RdbModuleError(
            "The RDB file contains module data I can't load: no matching module type "
            f"'{module_type_name(r.length())}'"
        )
    if rtype in (T_LIST_QUICKLIST, T_LIST_QUICKLIST_2):
        return _quicklist(r, rtype == T_LIST_QUICKLIST_2)
    if rtype >= T_STREAM_LISTPACKS and rtype != T_HASH_LISTPACK and rtype != T_ZSET_LISTPACK:
        if rtype in (T_STREAM_LISTPACKS, T_STREAM_LISTPACKS_2, T_STREAM_LISTPACKS_3):
            return load_stream(r, rtype)
    blob = r.string()
    if rtype == T_HASH_ZIPMAP:
        return _hash(zipmap_pairs(blob))
    if rtype == T_LIST_ZIPLIST:
        return _nonempty(deque(_as_bytes(v) for v in ziplist_items(blob)))
    if rtype == T_SET_INTSET:
        return _set([b"%d" % v for v in intset_items(blob)])
    if rtype == T_SET_LISTPACK:
        return _set([_as_bytes(v) for v in listpack_items(blob)])
    items = ziplist_items(blob) if rtype in (T_ZSET_ZIPLIST, T_HASH_ZIPLIST) else []
    if rtype in (T_HASH_LISTPACK, T_ZSET_LISTPACK):
        items = listpack_items(blob)
    pairs = _pairs(items)
    if rtype in (T_HASH_ZIPLIST, T_HASH_LISTPACK):
        return _hash(pairs, True)
    return _zset([(m, _to_float(sc)) for m, sc in pairs], True)


def _quicklist(r: Reader, v2: bool) -> deque[bytes]:
    out: deque[bytes] = deque()
    for _ in range(r.length()):
        container = r.length() if v2 else QUICKLIST_PACKED
        blob = r.string()
        if container == QUICKLIST_PLAIN:
            out.append(blob)
        elif container == QUICKLIST_PACKED:
            items = listpack_items(blob) if v2 else ziplist_items(blob)
            if not items:
                continue  # Redis skips empty nodes
            out.extend(_as_bytes(v) for v in items)
        else:
            raise RdbError("unknown quicklist container")
    return _nonempty(out)  # type: ignore[no-any-return]


# -- streams ----------------------------------------------------------------------------


def _stream_node(
    master: StreamID, lp: bytes, entries: dict[StreamID, Any], dead: dict[StreamID, Any]
) -> Node:
    """One radix tree node: its live entries go to `entries`, the fields of its
    deleted ones (Redis keeps them until the node goes) to `dead`."""
    items = listpack_items(lp)
    if not items:
        raise RdbError("empty listpack inside stream")
    try:
        live, deleted, nfields = (int(items[0]), int(items[1]), int(items[2]))
        fields = tuple(_as_bytes(v) for v in items[3 : 3 + nfields])
        if len(fields) != nfields or items[3 + nfields] != 0:
            raise RdbError("invalid stream master entry")
        ids: list[StreamID] = []
        i = 4 + nfields
        n = len(items)
        seen_live = 0
        while i < n:
            flags = int(items[i])
            ms = (master[0] + int(items[i + 1])) & 0xFFFFFFFFFFFFFFFF
            seq = (master[1] + int(items[i + 2])) & 0xFFFFFFFFFFFFFFFF
            i += 3
            if flags & STREAM_SAMEFIELDS:
                values = items[i : i + nfields]
                i += nfields
                pairs = zip(fields, map(_as_bytes, values), strict=True)
                fv = tuple(x for pair in pairs for x in pair)
            else:
                count = int(items[i])
                fv = tuple(_as_bytes(v) for v in items[i + 1 : i + 1 + 2 * count])
                i += 1 + 2 * count
            i += 1  # lp-count
            if i > n:
                raise RdbError("stream entry past the listpack's end")
            sid = (ms, seq)
            if ids and sid <= ids[-1]:
                raise RdbError("stream IDs out of order")
            ids.append(sid)
            if not flags & STREAM_DELETED:
                entries[sid] = (format_id(sid), fv)
                seen_live += 1
            elif fv:
                dead[sid] = fv
    except (TypeError, ValueError, IndexError) as e:
        raise RdbError(f"invalid stream listpack: {e}") from None
    if seen_live != live or len(ids) - live != deleted:
        raise RdbError("stream listpack counts do not match")
    return Node(master, fields, ids, live, deleted, len(lp))


def load_stream(r: Reader, rtype: int) -> Stream:
    s = Stream()
    entries: dict[StreamID, Any] = {}
    for _ in range(r.length()):
        key = r.string()
        if len(key) != 16:
            raise RdbError("stream node key is not a 128 bit ID")
        master = (int.from_bytes(key[:8], "big"), int.from_bytes(key[8:], "big"))
        lp = r.string()
        dead: dict[StreamID, Any] = {}
        node = _stream_node(master, lp, entries, dead)
        if s.nodes and node.ids[0] <= s.nodes[-1].ids[-1]:
            raise RdbError("stream nodes out of order")
        if node.live:  # (a node whose entries are all deleted is not kept)
            s.nodes.append(node)
            s.dead.update(dead)
    s.entries = dict(sorted(entries.items()))
    length = r.length()
    if length != len(entries):
        raise RdbError("stream length does not match its entries")
    s.last_id = (r.length(), r.length())
    if rtype >= T_STREAM_LISTPACKS_2:
        s.first_id = (r.length(), r.length())
        s.max_deleted_id = (r.length(), r.length())
        s.entries_added = r.length()
    else:
        s.first_id = next(iter(s.entries), (0, 0))
        s.entries_added = length
    if s.entries and next(reversed(s.entries)) > s.last_id:
        raise RdbError("stream last ID is smaller than an entry's")
    for _ in range(r.length()):
        name = r.string()
        last = (r.length(), r.length())
        if rtype >= T_STREAM_LISTPACKS_2:
            read = r.length()
            entries_read = INVALID_ENTRIES_READ if read >= 1 << 63 else read
        else:
            entries_read = estimate_entries_read(s, last)
        g = Group(last, entries_read)
        pel: dict[StreamID, tuple[int, int]] = {}
        for _ in range(r.length()):
            sid = r.stream_id()
            pel[sid] = (r.millis(), r.length())
        for _ in range(r.length()):
            cname = r.string()
            g.consumers[cname] = r.millis()
            if rtype >= T_STREAM_LISTPACKS_3:
                r.millis()  # active time (7.2): not kept
            for _ in range(r.length()):
                sid = r.stream_id()
                nack = pel.get(sid)
                if nack is None or sid in g.pel:
                    raise RdbError("consumer entry not found in the group's PEL")
                g.pel[sid] = (nack[0], nack[1], cname)
        if len(g.pel) != len(pel):
            raise RdbError("a PEL entry has no consumer")
        g.pel = dict(sorted(g.pel.items()))
        if name in s.groups:
            raise RdbError("duplicate consumer group")
        s.groups[name] = g
    return s


# -- DUMP payloads ----------------------------------------------------------------------


def payload_ok(p: bytes, skip_checksum: bool = False) -> bool:
    """verifyDumpPayload: at least version and CRC, version <= 10, CRC-64 right (not
    checked under DEBUG SET-SKIP-CHECKSUM-VALIDATION 1)."""
    if len(p) < 10:
        return False
    if int.from_bytes(p[-10:-8], "little") > RDB_VERSION:
        return False
    return skip_checksum or int.from_bytes(p[-8:], "little") == crc64(memoryview(p)[:-8])


def load_payload(p: bytes) -> Any:
    """The value of a verified DUMP payload (RdbError when it is not valid). As in
    Redis, a value may run on into the trailer's bytes: they are read like any."""
    r = Reader(p)
    return load_value(r, r.byte())
