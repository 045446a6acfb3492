"""msgpack for the plain shapes of update records, without msgpack.

An update record whose values are all plain (bytes, str, int, float, bool, None, and
tuples of them: SET, INCR, HSET, LPUSH, ZADD, ...) is encoded here, to EXACTLY the bytes
`msgpack.Packer(use_bin_type=True).pack` gives it (the segment format does not change;
tests/test_plainpack.py checks it against msgpack over random records). Compiled by
mypyc, this skips msgpack's per-object type probing (an `isinstance` against its
`ExtType` and `Timestamp` classes for every tuple), which was most of a record's cost.

Anything else (a value of another type, an integer msgpack cannot hold, a str that is
not valid UTF-8, nesting deeper than `MAX_DEPTH`) makes `pack_records` answer None,
and the caller packs with msgpack (`flusher.codec`), which writes or refuses it.

It pays only when compiled: as Python it takes about four times msgpack's C packer per
record, so `flusher.codec` uses it only then (`COMPILED`), as replay's walk
(`flusher.plainunpack`) does.
"""

from __future__ import annotations

import struct
from typing import Any, Final

from store import native
from store.records import UpdateRecord, WriteMeta

COMPILED = __name__ in native.MODULES
"""Whether this module runs compiled, so that encoding here pays."""

MAX_DEPTH: Final = 16
"""Tuples nested deeper than this are left to msgpack."""

_STR_CACHE_MAX: Final = 4096

# Headers and small values as ready-made bytes objects (no allocation per use).
_POS_FIX: Final = [bytes((i,)) for i in range(0x80)]
_NEG_FIX: Final = [bytes((0x100 + i,)) for i in range(-32, 0)]  # index i + 32
_UINT8: Final = [bytes((0xCC, i)) for i in range(0x100)]
_BIN8: Final = [bytes((0xC4, i)) for i in range(0x100)]
_BYTE: Final = [bytes((i,)) for i in range(0x100)]
_FIXARRAY: Final = [bytes((0x90 | i,)) for i in range(16)]
_NIL: Final = b"\xc0"
_FALSE: Final = b"\xc2"
_TRUE: Final = b"\xc3"

# Final: compiled code keeps them in C statics, not the module's dict.
_be_BH: Final = struct.Struct(">BH").pack
_be_BI: Final = struct.Struct(">BI").pack
_be_BQ: Final = struct.Struct(">BQ").pack
_be_Bb: Final = struct.Struct(">Bb").pack
_be_Bh: Final = struct.Struct(">Bh").pack
_be_Bi: Final = struct.Struct(">Bi").pack
_be_Bq: Final = struct.Struct(">Bq").pack
_be_Bd: Final = struct.Struct(">Bd").pack

# str -> its msgpack encoding (header and UTF-8): op and command names repeat.
_strs: Final[dict[str, bytes]] = {}
# An op's array header and name, by name (for the length it was last seen with).
_op_heads: Final[dict[str, bytes]] = {}
# A record's commands and metadata when it has one command and no metadata: the
# command's name -> [name] and nil, encoded.
_tails: Final[dict[str, bytes]] = {}


class _Last:
    """The op name (with its item count) and command name of the last common record
    `_one` wrote, and their encodings: a batch's records mostly repeat them, and an
    identity test costs less than a dict lookup."""

    def __init__(self) -> None:
        self.name: object = None
        self.n = 0
        self.head = b""
        self.cmd: object = None
        self.tail = b""
        self.tail_nil = _NIL  # nil, then `tail`


_LAST: Final = _Last()
# A record's ops up to the key when it has one op on database i: [[i, ...
_OPS_HEAD: Final = [bytes((0x91, 0x93, i)) for i in range(0x80)]
# ... on database 0, with the key's bin8 header for each key length: [[0, bin8(n) ...
_OPS0_KEY: Final = [bytes((0x91, 0x93, 0, 0xC4, n)) for n in range(0x100)]
# An array of one pair and the bin8 header of its first item, by that item's length.
_PAIR_HEAD: Final = [bytes((0x91, 0x92, 0xC4, n)) for n in range(0x100)]


def _sized(n: int, table8: list[bytes], code16: int, code32: int, out: list[bytes]) -> bool:
    """`n` (>= 0) in its 8-bit form from `table8`, or after `code16` or `code32`: an
    unsigned int or a bin header. False past 32 bits."""
    if n < 0x100:
        out.append(table8[n])
    elif n < 0x10000:
        out.append(_be_BH(code16, n))
    elif n < 0x100000000:
        out.append(_be_BI(code32, n))
    else:
        return False
    return True


def _int(x: int, out: list[bytes]) -> bool:
    if x >= 0:
        if x < 0x80:
            out.append(_POS_FIX[x])
        elif _sized(x, _UINT8, 0xCD, 0xCE, out):
            pass
        elif x <= 0x3FFFFFFFFFFFFFFF or x < 0x10000000000000000:  # the first: a C compare
            out.append(_be_BQ(0xCF, x))
        else:
            return False
    elif x >= -32:
        out.append(_NEG_FIX[x + 32])
    elif x >= -0x80:
        out.append(_be_Bb(0xD0, x))
    elif x >= -0x8000:
        out.append(_be_Bh(0xD1, x))
    elif x >= -0x80000000:
        out.append(_be_Bi(0xD2, x))
    elif x >= -0x8000000000000000:
        out.append(_be_Bq(0xD3, x))
    else:
        return False
    return True


def _length(n: int, small: int, tiny: int, out: list[bytes]) -> None:
    """A str or array header: `tiny` | n below `small`, then 16- and 32-bit forms
    (the codes after 0xd9 and 0xdc)."""
    if n < small:
        out.append(_POS_FIX[tiny | n] if tiny < 0x80 else bytes((tiny | n,)))
    elif tiny == 0x90:
        if n < 0x10000:
            out.append(_be_BH(0xDC, n))
        else:
            out.append(_be_BI(0xDD, n))
    elif n < 0x100:
        out.append(bytes((0xD9, n)))
    elif n < 0x10000:
        out.append(_be_BH(0xDA, n))
    else:
        out.append(_be_BI(0xDB, n))


def _str(s: str, out: list[bytes]) -> bool:
    done = _strs.get(s)
    if done is not None:
        out.append(done)
        return True
    try:
        data = s.encode("utf-8")
    except UnicodeEncodeError:  # lone surrogates: msgpack refuses them too
        return False
    if len(data) >= 0x100000000:
        return False
    parts: list[bytes] = []
    _length(len(data), 32, 0xA0, parts)
    parts.append(data)
    done = b"".join(parts)
    if len(_strs) < _STR_CACHE_MAX:
        _strs[s] = done
    out.append(done)
    return True


def _array(items: tuple[Any, ...], out: list[bytes], depth: int) -> bool:
    if depth >= MAX_DEPTH:
        return False
    n = len(items)
    if n < 16:
        out.append(_FIXARRAY[n])
    else:
        _length(n, 16, 0x90, out)
    return all(_value(item, out, depth + 1) for item in items)


def _value(x: Any, out: list[bytes], depth: int) -> bool:
    # The commonest types first; the named tuples (a global lookup each) late.
    t = type(x)
    if t is bytes:
        b: bytes = x
        if not _sized(len(b), _BIN8, 0xC5, 0xC6, out):
            return False
        out.append(b)
        return True
    if t is tuple:
        return _array(x, out, depth)
    if t is int:
        return _int(x, out)
    if t is str:
        return _str(x, out)
    if x is None:
        out.append(_NIL)
        return True
    if t is WriteMeta:
        return _array(x, out, depth)
    if x is True:
        out.append(_TRUE)
        return True
    if x is False:
        out.append(_FALSE)
        return True
    if t is float:
        out.append(_be_Bd(0xCB, x))
        return True
    return False


def _fixint(x: Any) -> bytes | None:
    """`x`'s encoding when it is an int of one byte (-32 to 127), else None."""
    if type(x) is not int:
        return None
    i: int = x
    if 0 <= i < 0x80:
        return _POS_FIX[i]
    if -32 <= i < 0:
        return _NEG_FIX[i + 32]
    return None


def _one(r: UpdateRecord, pre: bytes, low: bytes, t_part: bytes, out: list[bytes]) -> int:
    """A record whose head is `pre`, `low` and `t_part` when it is the common one: one
    op on a database numbered below 128, the op a tuple of under 16 items named by a
    str, one command, no metadata (SET, INCR, HSET, LPUSH, ZADD, ...). Written in
    fewer parts than `_value` writes them (one for a string written: the op's name,
    a short bytes value and nil or a small int), with the same bytes. 0 when the
    record is not of that shape (nothing written), -1 when an op's value is left to
    msgpack, else 1. (`b"%b..." % (...)` is one C call joining its parts when
    compiled.)"""
    rt: tuple[Any, Any, Any, Any, Any] = r
    ops = rt[2]
    cmds = rt[3]
    if type(ops) is not tuple or type(cmds) is not tuple or rt[4] is not None:
        return 0
    opt: tuple[Any, ...] = ops
    cmdt: tuple[Any, ...] = cmds
    if len(opt) != 1 or len(cmdt) != 1:
        return 0
    one = opt[0]
    cmd = cmdt[0]
    if type(one) is not tuple or type(cmd) is not str:
        return 0
    onet: tuple[Any, ...] = one
    if len(onet) != 3:
        return 0
    dbi = onet[0]
    key = onet[1]
    op = onet[2]
    if type(dbi) is not int or type(key) is not bytes or type(op) is not tuple:
        return 0
    d: int = dbi
    k: bytes = key
    opx: tuple[Any, ...] = op
    n = len(opx)
    if not 0 <= d < 0x80 or len(k) >= 0x100 or not 0 < n < 16 or type(opx[0]) is not str:
        return 0
    name = opx[0]
    seen = _LAST
    if name is seen.name and n == seen.n:  # the op of the record before (no dict lookup)
        head = seen.head
    else:
        found = _op_heads.get(name)
        if found is None or found[0] != 0x90 | n:
            parts: list[bytes] = [_FIXARRAY[n]]
            if not _str(name, parts):
                return 0
            found = b"".join(parts)
            if len(_op_heads) < _STR_CACHE_MAX:
                _op_heads[name] = found
        head = seen.head = found
        seen.name = name
        seen.n = n
    if cmd is seen.cmd:
        tail = seen.tail
    else:
        known = _tails.get(cmd)
        if known is None:
            parts = [_FIXARRAY[1]]
            if not _str(cmd, parts):
                return 0
            parts.append(_NIL)
            known = b"".join(parts)
            if len(_tails) < _STR_CACHE_MAX:
                _tails[cmd] = known
        tail = seen.tail = known
        seen.tail_nil = _NIL + known
        seen.cmd = cmd
    # The op's items after its name, in at most four parts, when short: a string
    # written (SET, INCR), one value (LPUSH), one field and value (HSET).
    m1 = m2 = m3 = m4 = b""
    short = False
    if n == 3 and type(opx[1]) is bytes and len(opx[1]) < 0x100:
        v: bytes = opx[1]
        w = opx[2]
        if w is None and not d:  # SET: database 0, nil after the value (fewer parts)
            out.append(
                b"%b%b%b%b%b%b%b%b%b"
                % (pre, low, t_part, _OPS0_KEY[len(k)], k, head, _BIN8[len(v)], v, seen.tail_nil)
            )
            return 1
        last = _NIL if w is None else _fixint(w)
        if last is not None:
            m1, m2, m3, short = _BIN8[len(v)], v, last, True
    elif n == 2 and type(opx[1]) is tuple:
        items: tuple[Any, ...] = opx[1]
        item = items[0] if len(items) == 1 else None
        if type(item) is bytes:
            x: bytes = item
            if len(x) < 0x100:
                m1, m2, m3, short = _FIXARRAY[1], _BIN8[len(x)], x, True
        elif type(item) is tuple:
            pair: tuple[Any, ...] = item
            if len(pair) == 2 and type(pair[0]) is bytes and type(pair[1]) is bytes:
                f: bytes = pair[0]
                fv: bytes = pair[1]
                if len(f) < 0x100 and len(fv) < 0x100:
                    m1, m2, m3, m4, short = _PAIR_HEAD[len(f)], f, _BIN8[len(fv)], fv, True
    if short:
        out.append(
            b"%b%b%b%b%b%b%b%b%b%b%b%b"
            % (pre, low, t_part, _OPS_HEAD[d], _BIN8[len(k)], k, head, m1, m2, m3, m4, tail)
        )
        return 1
    out.append(b"%b%b%b%b%b%b%b" % (pre, low, t_part, _OPS_HEAD[d], _BIN8[len(k)], k, head))
    for i in range(1, n):
        if not _value(opx[i], out, 4):
            return -1
    out.append(tail)
    return 1


def pack_records(records: list[UpdateRecord]) -> bytes | None:
    """The records' msgpack encodings back to back, or None when one holds a value
    this module leaves to msgpack."""
    out: list[bytes] = []
    last_t = -1
    t_part = b""
    last_pre = -1
    pre_part = b""
    for r in records:
        if type(r) is tuple and len(r) == 5:
            lsn: int = r[0]
            t: int = r[1]
            # The common head: the array header, the LSN as uint16 or uint32 and the
            # commit time as uint64 (an LSN from 256 to 2**32 - 1, a time in ms after
            # 1970-02-19; 2**62 - 1 is the largest int compiled code compares in C).
            if 0x100 <= lsn < 0x100000000 and 0x100000000 <= t <= 0x3FFFFFFFFFFFFFFF:
                # The LSN's head but its low byte, and the time, are encoded once
                # per 256 LSNs and once per commit time: a batch's records share them.
                pre = lsn >> 8
                if pre != last_pre:
                    last_pre = pre
                    if pre < 0x100:
                        pre_part = (0x95CD00 | pre).to_bytes(3, "big")
                    else:
                        pre_part = (0x95CE000000 | pre).to_bytes(5, "big")
                if t != last_t:
                    last_t = t
                    t_part = b"\xcf" + t.to_bytes(8, "big")
                low = _BYTE[lsn & 0xFF]
                done = _one(r, pre_part, low, t_part, out)
                if done > 0:
                    continue
                out.append(pre_part)
                out.append(low)
                out.append(t_part)
                if done == 0 and _value(r[2], out, 1) and _value(r[3], out, 1):
                    if _value(r[4], out, 1):
                        continue
                return None
        if not _value(r, out, 0):
            return None
    return b"".join(out)


def pack(x: Any) -> bytes | None:
    """One value's msgpack encoding, or None (as `pack_records`)."""
    out: list[bytes] = []
    if not _value(x, out, 0):
        return None
    return b"".join(out)
