"""Redis 7.0's RDB value encodings, write side: what `DUMP` replies, byte for byte as
redis-server 7.0 writes the same value where the value's layout is known here.

Encodings are chosen as Redis chooses them: a hash or sorted set in its listpack form
until it outgrew the listpack limits (the store's `HashTable` and `ZSet.big` record
that, as OBJECT ENCODING does), a set as an intset while its members are integers, a
list as a quicklist of listpacks split as RPUSH would split it under
`list-max-listpack-size`, a stream as its radix tree of listpacks. Strings of up to
11 characters that are integers take the integer encodings, longer than 20 bytes are
LZF-compressed (liblzf, through python-lzf: the same compressor as Redis', given the
same output bound, so the bytes match) when `rdbcompression` is yes.

Where equality is not possible (the order of a hash table or of a large set is
Redis' hash order, which changes with every process' random seed; a list's quicklist
nodes when Redis did not build them by appending), the payload still restores to the
same value in Redis and here.
"""

from __future__ import annotations

import struct
from collections import deque
from typing import TYPE_CHECKING, Any

import lzf

from commands.encodings import object_encoding
from commands.parsing import string2ll
from commands.rdb import (
    QUICKLIST_PACKED,
    QUICKLIST_PLAIN,
    RDB_VERSION,
    STREAM_DELETED,
    STREAM_SAMEFIELDS,
    T_HASH,
    T_HASH_LISTPACK,
    T_LIST_QUICKLIST_2,
    T_SET,
    T_SET_INTSET,
    T_STREAM_LISTPACKS_2,
    T_STRING,
    T_ZSET_2,
    T_ZSET_LISTPACK,
    crc64,
)
from commands.zset_ranges import listpack_score
from store.stream import Node, Stream, StreamID
from store.stream import _backlen as backlen_size
from store.values import HashSet, HashTable, ZSet

if TYPE_CHECKING:
    from commands.session import Session

U64 = (1 << 64) - 1
_QUICKLIST_LEVELS = (4096, 8192, 16384, 32768, 65536)  # list-max-listpack-size -1 .. -5
SIZE_SAFETY_LIMIT = 8192
SIZE_ESTIMATE_OVERHEAD = 8
PACKED_THRESHOLD = 1 << 30  # an element this large gets a plain node of its own


def rdb_len(n: int) -> bytes:
    if n < 64:
        return bytes((n,))
    if n < 16384:
        return bytes((0x40 | (n >> 8), n & 0xFF))
    if n <= 0xFFFFFFFF:
        return b"\x80" + n.to_bytes(4, "big")
    return b"\x81" + n.to_bytes(8, "big")


def rdb_string(s: bytes, compress: bool) -> bytes:
    """rdbSaveRawString: integer encodings, LZF past 20 bytes, else length and bytes."""
    n = len(s)
    if n <= 11:
        v = string2ll(s)
        if v is not None:
            if -128 <= v <= 127:
                return b"\xc0" + v.to_bytes(1, "little", signed=True)
            if -32768 <= v <= 32767:
                return b"\xc1" + v.to_bytes(2, "little", signed=True)
            if -(2**31) <= v < 2**31:
                return b"\xc2" + v.to_bytes(4, "little", signed=True)
    if compress and n > 20:
        # Redis gives lzf_compress an output of n - 4 bytes; python-lzf adds one.
        packed: bytes | None = lzf.compress(bytes(s), n - 5)
        if packed:
            return b"\xc3" + rdb_len(len(packed)) + rdb_len(n) + packed
    return rdb_len(n) + s


# -- listpacks --------------------------------------------------------------------------


def _backlen(n: int) -> bytes:
    size = backlen_size(n)
    if size == 1:
        return bytes((n,))
    out = [n & 127]
    for _ in range(size - 1):
        n >>= 7
        out.append((n & 127) | 128)
    out[-1] &= 127  # the first byte written has no continuation bit
    out[0] |= 128
    return bytes(reversed(out))


def lp_int(v: int) -> bytes:
    if 0 <= v <= 127:
        enc = bytes((v,))
    elif -4096 <= v <= 4095:
        u = v & 0x1FFF
        enc = bytes((0xC0 | (u >> 8), u & 0xFF))
    elif -32768 <= v <= 32767:
        enc = b"\xf1" + v.to_bytes(2, "little", signed=True)
    elif -8388608 <= v <= 8388607:
        enc = b"\xf2" + v.to_bytes(3, "little", signed=True)
    elif -(2**31) <= v < 2**31:
        enc = b"\xf3" + v.to_bytes(4, "little", signed=True)
    else:
        enc = b"\xf4" + (v & U64).to_bytes(8, "little")
    return enc + _backlen(len(enc))


def lp_entry(s: bytes | int) -> bytes:
    """One listpack entry: an integer encoding when the string is one (lpStringToInt64)."""
    if isinstance(s, int):
        return lp_int(s)
    if len(s) <= 20:
        v = string2ll(s)
        if v is not None:
            return lp_int(v)
    n = len(s)
    if n < 64:
        enc = bytes((0x80 | n,)) + s
    elif n < 4096:
        enc = bytes((0xE0 | (n >> 8), n & 0xFF)) + s
    else:
        enc = b"\xf0" + n.to_bytes(4, "little") + s
    return enc + _backlen(len(enc))


def _lp_wrap(body: bytes, count: int) -> bytes:
    total = 7 + len(body)
    return total.to_bytes(4, "little") + min(count, 65535).to_bytes(2, "little") + body + b"\xff"


def lp_of(items: list[bytes | int]) -> bytes:
    return _lp_wrap(b"".join(map(lp_entry, items)), len(items))


# -- values -----------------------------------------------------------------------------


def _fill_allows(fill: int, new_sz: int, count: int) -> bool:
    """_quicklistNodeAllowInsert's size and count test (Redis 7.0)."""
    if fill < 0:
        level = -fill - 1
        if level < len(_QUICKLIST_LEVELS) and new_sz <= _QUICKLIST_LEVELS[level]:
            return True
    if new_sz > SIZE_SAFETY_LIMIT:
        return False
    return count < fill


def _list(items: deque[bytes], compress: bool, fill: int) -> bytes:
    nodes: list[tuple[int, bytes]] = []
    body: list[bytes] = []
    size = 0  # the open node's listpack bytes (0: no open node)

    def close() -> None:
        if size:
            nodes.append((QUICKLIST_PACKED, _lp_wrap(b"".join(body), len(body))))

    for item in items:
        sz = len(item)
        if sz >= PACKED_THRESHOLD:
            close()
            body, size = [], 0
            nodes.append((QUICKLIST_PLAIN, bytes(item)))
            continue
        entry = lp_entry(item)
        if size and _fill_allows(fill, size + sz + SIZE_ESTIMATE_OVERHEAD, len(body)):
            body.append(entry)
            size += len(entry)
            continue
        close()
        body, size = [entry], 7 + len(entry)
    close()
    out = [rdb_len(len(nodes))]
    for container, blob in nodes:
        out.append(rdb_len(container))
        out.append(rdb_string(blob, compress))
    return b"".join(out)


def intset_blob(members: list[int]) -> bytes:
    lo, hi = min(members), max(members)
    if lo >= -32768 and hi <= 32767:
        width = 2
    else:
        width = 4 if lo >= -(2**31) and hi < 2**31 else 8
    head = width.to_bytes(4, "little") + len(members).to_bytes(4, "little")
    return head + b"".join(v.to_bytes(width, "little", signed=True) for v in sorted(members))


def d2string(d: float) -> bytes:
    """How Redis writes a score into a listpack (d2string; -0 stays -0)."""
    if d == 0 and struct.pack("<d", d)[7] & 0x80:
        return b"-0"
    return listpack_score(d)


# -- streams ----------------------------------------------------------------------------


def _id_bytes(sid: StreamID) -> bytes:
    return sid[0].to_bytes(8, "big") + sid[1].to_bytes(8, "big")


def _signed64(v: int) -> int:
    v &= U64
    return v - (1 << 64) if v >> 63 else v


def stream_node_listpack(s: Stream, node: Node) -> bytes:
    """The listpack of one radix tree node: the master entry, then every entry, the
    deleted ones flagged, with their fields where the stream still has them (from an
    XDEL or trim made since it was loaded; else none)."""
    fields = node.fields
    nf = len(fields)
    ents = [lp_int(node.live), lp_int(node.deleted), lp_int(nf)]
    ents.extend(map(lp_entry, fields))
    ents.append(lp_int(0))
    mms, mseq = node.master
    entries = s.entries
    dead = s.dead
    for sid in node.ids:
        head = (lp_int(_signed64(sid[0] - mms)), lp_int(_signed64(sid[1] - mseq)))
        entry = entries.get(sid)
        flag = 0
        if entry is not None:
            fv = entry[1]
        else:
            flag = STREAM_DELETED
            fv = dead.get(sid, ())
        n = len(fv) // 2
        if fv and fv[0::2] == fields:
            ents += (lp_int(flag | STREAM_SAMEFIELDS), *head)
            ents.extend(map(lp_entry, fv[1::2]))
            ents.append(lp_int(n + 3))
        else:
            ents += (lp_int(flag), *head, lp_int(n))
            ents.extend(map(lp_entry, fv))
            ents.append(lp_int(2 * n + 4))
    return _lp_wrap(b"".join(ents), len(ents))


def _stream(s: Stream, compress: bool) -> bytes:
    out = [rdb_len(len(s.nodes))]
    for node in s.nodes:
        out.append(rdb_string(_id_bytes(node.master), compress))
        out.append(rdb_string(stream_node_listpack(s, node), compress))
    out.append(rdb_len(len(s.entries)))
    for sid in (s.last_id, s.first_id, s.max_deleted_id):
        out += (rdb_len(sid[0]), rdb_len(sid[1]))
    out.append(rdb_len(s.entries_added))
    out.append(rdb_len(len(s.groups)))
    for name in sorted(s.groups):
        g = s.groups[name]
        out += (rdb_string(name, compress), rdb_len(g.last_id[0]), rdb_len(g.last_id[1]))
        out.append(rdb_len(g.entries_read & U64))
        pel = sorted(g.pel.items())
        out.append(rdb_len(len(pel)))
        for sid, (when, count, _consumer) in pel:
            out += (_id_bytes(sid), when.to_bytes(8, "little", signed=True), rdb_len(count))
        out.append(rdb_len(len(g.consumers)))
        for cname in sorted(g.consumers):
            out += (rdb_string(cname, compress), g.consumers[cname].to_bytes(8, "little"))
            mine = [sid for sid, nack in pel if nack[2] == cname]
            out.append(rdb_len(len(mine)))
            out.extend(map(_id_bytes, mine))
    return b"".join(out)


# -- DUMP -------------------------------------------------------------------------------


def serialize(
    value: Any, compress: bool = True, fill: int = -2, encoding: bytes | None = None
) -> bytes:
    """The RDB type byte and serialized value (rdbSaveObjectType + rdbSaveObject).
    `encoding` is the value's OBJECT ENCODING (None: from its type), which picks the
    compact form (listpack, intset) or the table form (hashtable, skiplist)."""
    t = type(value)
    if t is bytes or t is bytearray:
        return bytes((T_STRING,)) + rdb_string(bytes(value), compress)
    if t is deque:
        return bytes((T_LIST_QUICKLIST_2,)) + _list(value, compress, fill)
    if t is Stream:
        return bytes((T_STREAM_LISTPACKS_2,)) + _stream(value, compress)
    if encoding is None:
        compact = t is dict or t is set or (t is ZSet and not value.big)
    else:
        compact = encoding in (b"listpack", b"intset")
    if t is ZSet:
        if compact:
            flat: list[bytes | int] = []
            for sc, m in value.order:
                flat += (m, d2string(sc))
            return bytes((T_ZSET_LISTPACK,)) + rdb_string(lp_of(flat), compress)
        out = [bytes((T_ZSET_2,)), rdb_len(len(value))]
        for sc, m in reversed(value.order):
            out += (rdb_string(m, compress), struct.pack("<d", sc))
        return b"".join(out)
    if t is dict or t is HashTable:
        if compact:
            items: list[bytes | int] = [x for pair in value.items() for x in pair]
            return bytes((T_HASH_LISTPACK,)) + rdb_string(lp_of(items), compress)
        out = [bytes((T_HASH,)), rdb_len(len(value))]
        for f, v in value.items():
            out += (rdb_string(f, compress), rdb_string(v, compress))
        return b"".join(out)
    if t is set or t is HashSet:
        if compact:
            blob = intset_blob([int(m) for m in value])
            return bytes((T_SET_INTSET,)) + rdb_string(blob, compress)
        out = [bytes((T_SET,)), rdb_len(len(value))]
        out.extend(rdb_string(m, compress) for m in value)
        return b"".join(out)
    raise TypeError(f"cannot serialize {t.__name__}")


def trailer(body: bytes) -> bytes:
    """The payload trailer: RDB version (2 bytes) and the CRC-64 of all before it."""
    body += RDB_VERSION.to_bytes(2, "little")
    return body + crc64(body).to_bytes(8, "little")


def dump_payload(
    value: Any, compress: bool = True, fill: int = -2, encoding: bytes | None = None
) -> bytes:
    return trailer(serialize(value, compress, fill, encoding))


# -- whole files (SYNC/PSYNC payloads) ---------------------------------------------------

OP_FUNCTION2, OP_AUX, OP_RESIZEDB, OP_EXPIRETIME_MS, OP_SELECTDB, OP_EOF = (
    0xF5, 0xFA, 0xFB, 0xFC, 0xFE, 0xFF,
)  # fmt: skip


def rdb_file(
    aux: list[tuple[bytes, bytes]],
    functions: list[bytes],
    dbs: list[tuple[int, list[tuple[bytes, bytes, int | None]]]],
) -> bytes:
    """A whole RDB file as rdbSaveRio writes it: the signature, `aux` fields, function
    libraries (their code), then per database its SELECTDB and RESIZEDB opcodes and
    its keys (key, `serialize`d value, expiry in ms or None), then EOF and the CRC-64."""
    out = [b"REDIS%04d" % RDB_VERSION]
    for name, value in aux:
        out += (bytes((OP_AUX,)), rdb_string(name, False), rdb_string(value, False))
    for code in functions:
        out += (bytes((OP_FUNCTION2,)), rdb_string(code, False))
    for dbi, keys in dbs:
        if not keys:
            continue
        expiring = sum(1 for _k, _v, at in keys if at is not None)
        out += (bytes((OP_SELECTDB,)), rdb_len(dbi))
        out += (bytes((OP_RESIZEDB,)), rdb_len(len(keys)), rdb_len(expiring))
        for key, ser, at in keys:
            if at is not None:
                out += (bytes((OP_EXPIRETIME_MS,)), at.to_bytes(8, "little", signed=True))
            out += (ser[:1], rdb_string(key, False), ser[1:])
    out.append(bytes((OP_EOF,)))
    body = b"".join(out)
    return body + crc64(body).to_bytes(8, "little")


def _compress(s: Session) -> bool:
    return s.server.config.params.get("rdbcompression", "yes") == "yes"


def _fill(s: Session) -> int:
    try:
        return int(s.server.config.params.get("list-max-listpack-size", "-2"))
    except ValueError:
        return -2


def dump_of(s: Session, value: object) -> bytes:
    """DUMP's payload of a value (also what MIGRATE sends)."""
    # The form OBJECT ENCODING reports is the form written (as Redis writes its own).
    return dump_payload(value, _compress(s), _fill(s), object_encoding(value))
