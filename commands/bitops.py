"""Bitmap commands on string values, as Redis 7.0's bitops.c behaves.

SETBIT key offset 0|1 · GETBIT key offset · BITCOUNT key [start end [BYTE|BIT]]
BITPOS key bit [start [end [BYTE|BIT]]] · BITOP AND|OR|XOR|NOT dest key [key ...]
BITFIELD key [GET type offset] [SET type offset value] [INCRBY type offset incr]
         [OVERFLOW WRAP|SAT|FAIL] ... · BITFIELD_RO key [GET type offset] ...

Bit 0 is the most significant bit of the first byte. Writes that change part of a
string carry only the bytes they change (the SETRANGE op), so a bitmap's history holds
small versions; whole ranges are counted and searched on big integers, not bit by bit.
"""

from __future__ import annotations

from commands.bitstrings import string_value, unshare, write_range
from commands.errors import SYNTAX, CommandError
from commands.parsing import get_int, string2ll
from commands.registry import Flag, command
from commands.replies import Reply
from commands.session import Session
from store.ops import DEL, SET

W = Flag.WRITE | Flag.DENYOOM
OFFSET_ERROR = "ERR bit offset is not an integer or out of range"
BIT_ERROR = "ERR bit is not an integer or out of range"
BITFIELD_TYPE_ERROR = (
    "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported "
    "but i64 is."
)
_U64 = (1 << 64) - 1
_I64_MAX = (1 << 63) - 1


def _wrap64(n: int) -> int:
    """A number as C's int64 arithmetic leaves it."""
    return ((n + (1 << 63)) & _U64) - (1 << 63)


def bit_offset(s: Session, arg: bytes, bits: int = 0) -> int:
    """getBitOffsetFromArgument: a bit offset, `#n` meaning n * bits when bits > 0."""
    usehash = bits > 0 and arg[:1] == b"#"
    n = string2ll(arg[1:] if usehash else arg)
    if n is None:
        raise CommandError(OFFSET_ERROR)
    if usehash:
        n = _wrap64(n * bits)
    if n < 0 or (n >> 3) >= s.server.limits.proto_max_bulk:
        raise CommandError(OFFSET_ERROR)
    return n


@command("setbit", 4, W, 1, 1, 1)
def cmd_setbit(s: Session, argv: list[bytes]) -> Reply:
    offset = bit_offset(s, argv[2])
    on = get_int(argv[3], BIT_ERROR)
    if on & ~1:
        raise CommandError(BIT_ERROR)
    key = argv[1]
    v = string_value(s, key)
    byte = offset >> 3
    shift = 7 - (offset & 7)
    n = 0 if v is None else len(v)
    old = v[byte] if v is not None and byte < n else 0
    bitval = (old >> shift) & 1
    if v is None or byte >= n or bitval != on:
        new = (old & ~(1 << shift)) | (on << shift)
        write_range(s, key, byte, bytes((new,)), max(n, byte + 1))
    else:
        unshare(s, key, v)
    return bitval


@command("getbit", 3, Flag.READONLY | Flag.FAST, 1, 1, 1)
def cmd_getbit(s: Session, argv: list[bytes]) -> Reply:
    offset = bit_offset(s, argv[2])
    v = string_value(s, argv[1])
    byte = offset >> 3
    if v is None or byte >= len(v):
        return 0
    return (v[byte] >> (7 - (offset & 7))) & 1


def _unit(arg: bytes) -> bool:
    """BYTE or BIT: True for BIT."""
    u = arg.lower()
    if u == b"bit":
        return True
    if u == b"byte":
        return False
    raise CommandError(SYNTAX)


def _clamp(start: int, end: int, total: int) -> tuple[int, int]:
    if start < 0:
        start += total
    if end < 0:
        end += total
    start = max(start, 0)
    end = max(end, 0)
    return start, min(end, total - 1)


_CHUNK = 1 << 16
_SKIP = {1: bytes(_CHUNK), 0: b"\xff" * _CHUNK}


def popcount(v: bytes | bytearray, start: int, end: int) -> int:
    """Set bits in bytes start..end-1, a chunk at a time; all-zero chunks (most of a
    sparse bitmap) are only compared."""
    n = 0
    zeros = _SKIP[1]
    for i in range(start, end, _CHUNK):
        j = min(i + _CHUNK, end)
        chunk = v[i:j]
        if chunk != zeros[: j - i]:
            n += int.from_bytes(chunk, "big").bit_count()
    return n


def first_byte_not(v: bytes | bytearray, bit: int, start: int, end: int) -> int:
    """The first byte in start..end-1 holding a `bit` bit, or -1."""
    skip = _SKIP[bit]
    pad = skip[:1]
    for i in range(start, end, _CHUNK):
        j = min(i + _CHUNK, end)
        chunk = v[i:j]
        if chunk != skip[: j - i]:
            return i + len(chunk) - len(chunk.lstrip(pad))
    return -1


def _bit_in_byte(v: bytes | bytearray, i: int, lo: int, hi: int, bit: int) -> int:
    """The first bit lo..hi (0 = most significant) of byte i equal to `bit`, or -1."""
    b = v[i]
    for k in range(lo, hi + 1):
        if (b >> (7 - k)) & 1 == bit:
            return i * 8 + k
    return -1


def find_bit(v: bytes | bytearray, bit: int, start_bit: int, end_bit: int) -> int:
    """The first bit start_bit..end_bit (inclusive, within `v`) equal to `bit`, or -1."""
    first, last = start_bit >> 3, end_bit >> 3
    if first == last:
        return _bit_in_byte(v, first, start_bit & 7, end_bit & 7, bit)
    pos = _bit_in_byte(v, first, start_bit & 7, 7, bit)
    if pos >= 0:
        return pos
    i = first_byte_not(v, bit, first + 1, last)
    if i >= 0:
        return _bit_in_byte(v, i, 0, 7, bit)
    return _bit_in_byte(v, last, 0, end_bit & 7, bit)


@command("bitcount", -2, Flag.READONLY, 1, 1, 1)
def cmd_bitcount(s: Session, argv: list[bytes]) -> Reply:
    v = string_value(s, argv[1])
    if v is None:
        return 0
    argc = len(argv)
    if argc == 2:
        return popcount(v, 0, len(v))
    if argc > 5 or argc == 3:
        raise CommandError(SYNTAX)
    start = get_int(argv[2])
    end = get_int(argv[3])
    if start < 0 and end < 0 and start > end:
        return 0
    isbit = argc == 5 and _unit(argv[4])
    total = len(v) * 8 if isbit else len(v)
    start, end = _clamp(start, end, total)
    if start > end:
        return 0
    if not isbit:
        return popcount(v, start, end + 1)
    first, last = start >> 3, end >> 3
    n = popcount(v, first, last + 1)
    n -= (v[first] >> (8 - (start & 7))).bit_count()  # bits before start
    return n - (v[last] & ((1 << (7 - (end & 7))) - 1)).bit_count()  # after end


@command("bitpos", -3, Flag.READONLY, 1, 1, 1)
def cmd_bitpos(s: Session, argv: list[bytes]) -> Reply:
    bit = get_int(argv[2])
    if bit not in (0, 1):
        raise CommandError("ERR The bit argument must be 1 or 0.")
    v = string_value(s, argv[1])
    if v is None:
        return -1 if bit else 0
    argc = len(argv)
    end_given = False
    if argc == 3:
        start, end, isbit = 0, len(v) - 1, False
    elif argc <= 6:
        start = get_int(argv[3])
        isbit = argc == 6 and _unit(argv[5])
        if argc >= 5:
            end = get_int(argv[4])
            end_given = True
        else:
            end = len(v) * 8 + 7 if isbit else len(v) - 1
        start, end = _clamp(start, end, len(v) * 8 if isbit else len(v))
    else:
        raise CommandError(SYNTAX)
    if start > end:
        return -1
    if isbit:
        start_bit, end_bit = start, end
    else:
        start_bit, end_bit = start * 8, end * 8 + 7
    pos = find_bit(v, bit, start_bit, end_bit)
    if pos >= 0:
        return pos
    if bit or end_given:
        return -1
    return end_bit + 1


_BITOPS = {b"and": 0, b"or": 1, b"xor": 2, b"not": 3}


@command("bitop", -4, W, 2, -1, 1)
def cmd_bitop(s: Session, argv: list[bytes]) -> Reply:
    op = _BITOPS.get(argv[1].lower())
    if op is None:
        raise CommandError(SYNTAX)
    if op == 3 and len(argv) != 4:
        raise CommandError("ERR BITOP NOT must be called with a single source key.")
    srcs = [string_value(s, k) or b"" for k in argv[3:]]
    maxlen = max(len(v) for v in srcs)
    dest = argv[2]
    if not maxlen:
        if s.db.get(dest) is not None:
            s.store.apply(s.db, dest, (DEL,))
        return 0
    nums = [int.from_bytes(v.ljust(maxlen, b"\0"), "big") for v in srcs]
    acc = nums[0]
    if op == 0:
        for x in nums[1:]:
            acc &= x
    elif op == 1:
        for x in nums[1:]:
            acc |= x
    elif op == 2:
        for x in nums[1:]:
            acc ^= x
    else:
        acc ^= (1 << (maxlen * 8)) - 1
    s.store.apply(s.db, dest, (SET, bytearray(acc.to_bytes(maxlen, "big")), None))
    return maxlen


# BITFIELD ---------------------------------------------------------------------------

GET, SETOP, INCRBY = 0, 1, 2
WRAP, SAT, FAIL = 0, 1, 2
_OVERFLOW = {b"wrap": WRAP, b"sat": SAT, b"fail": FAIL}


def bitfield_type(arg: bytes) -> tuple[bool, int]:
    """getBitfieldTypeFromArgument: (signed, bits); i1..i64, u1..u63."""
    sign = arg[:1]
    if sign not in (b"i", b"u"):
        raise CommandError(BITFIELD_TYPE_ERROR)
    signed = sign == b"i"
    bits = string2ll(arg[1:].split(b"\0", 1)[0])
    if bits is None or bits < 1 or bits > (64 if signed else 63):
        raise CommandError(BITFIELD_TYPE_ERROR)
    return signed, bits


def overflow(value: int, incr: int, bits: int, signed: bool, mode: int) -> int | None:
    """value + incr stored in `bits` bits: itself, wrapped, saturated, or None when it
    does not fit and the mode is FAIL. Redis' checks (checkSignedBitfieldOverflow and
    checkUnsignedBitfieldOverflow) compare with limits computed in wrapping int64
    arithmetic; so do these, so that e.g. SET i32 with -2**63 saturates to the maximum
    as it does there."""
    if signed:
        hi = _I64_MAX if bits == 64 else (1 << (bits - 1)) - 1
        lo = -hi - 1
        maxincr = _wrap64(hi - value)
        minincr = _wrap64(lo - value)
        if (
            value > hi
            or (bits != 64 and incr > maxincr)
            or (value >= 0 and incr > 0 and incr > maxincr)
        ):
            limit = hi
        elif (
            value < lo
            or (bits != 64 and incr < minincr)
            or (value < 0 and incr < 0 and incr < minincr)
        ):
            limit = lo
        else:
            return value + incr
    else:
        hi = (1 << bits) - 1
        if value > hi or (incr > 0 and incr > _wrap64(hi - value)):
            limit = hi
        elif incr < 0 and incr < _wrap64(-value):
            limit = 0
        else:
            return value + incr
    if mode == FAIL:
        return None
    if mode == SAT:
        return limit
    total = (value + incr) & ((1 << bits) - 1)
    if signed and total >> (bits - 1):
        total -= 1 << bits
    return total


class _Bits:
    """Bytes of a string being read and changed by one BITFIELD call: the stored
    value with the changed bytes laid over it (never copied as a whole)."""

    __slots__ = ("base", "changed", "length")

    def __init__(self, base: bytes | bytearray, length: int) -> None:
        self.base = base
        self.changed: dict[int, int] = {}
        self.length = length

    def byte(self, i: int) -> int:
        b = self.changed.get(i)
        if b is not None:
            return b
        return self.base[i] if i < len(self.base) else 0

    def get(self, offset: int, bits: int) -> int:
        first, last = offset >> 3, (offset + bits - 1) >> 3
        x = 0
        for i in range(first, last + 1):
            x = (x << 8) | (self.byte(i) if i < self.length else 0)
        shift = (last - first + 1) * 8 - (offset & 7) - bits
        return (x >> shift) & ((1 << bits) - 1)

    def set(self, offset: int, bits: int, value: int) -> None:
        first, last = offset >> 3, (offset + bits - 1) >> 3
        width = (last - first + 1) * 8
        shift = width - (offset & 7) - bits
        mask = ((1 << bits) - 1) << shift
        x = 0
        for i in range(first, last + 1):
            x = (x << 8) | self.byte(i)
        x = (x & ~mask) | ((value << shift) & mask)
        for i in range(last, first - 1, -1):
            self.changed[i] = x & 0xFF
            x >>= 8


def _bitfield(s: Session, argv: list[bytes], readonly_cmd: bool) -> Reply:
    ops: list[tuple[int, int, int, bool, int, int]] = []  # opcode, offset, value, ...
    mode = WRAP
    writes = False
    highest = 0
    j = 2
    argc = len(argv)
    while j < argc:
        rem = argc - j - 1
        sub = argv[j].lower()
        if sub == b"get" and rem >= 2:
            opcode = GET
        elif sub == b"set" and rem >= 3:
            opcode = SETOP
        elif sub == b"incrby" and rem >= 3:
            opcode = INCRBY
        elif sub == b"overflow" and rem >= 1:
            m = _OVERFLOW.get(argv[j + 1].lower())
            if m is None:
                raise CommandError("ERR Invalid OVERFLOW type specified")
            mode = m
            j += 2
            continue
        else:
            raise CommandError(SYNTAX)
        signed, bits = bitfield_type(argv[j + 1])
        offset = bit_offset(s, argv[j + 2], bits)
        value = 0
        if opcode != GET:
            writes = True
            highest = max(highest, offset + bits - 1)
            value = get_int(argv[j + 3])
        ops.append((opcode, offset, value, signed, bits, mode))
        j += 3 if opcode == GET else 4
    key = argv[1]
    if writes and readonly_cmd:
        raise CommandError("ERR BITFIELD_RO only supports the GET subcommand")
    v = string_value(s, key)
    base: bytes | bytearray = b"" if v is None else v
    oldlen = len(base)
    length = max(oldlen, (highest >> 3) + 1) if writes else oldlen
    buf = _Bits(base, length)
    out: list[Reply] = []
    for opcode, offset, value, signed, bits, m in ops:
        old = buf.get(offset, bits)
        if signed and bits < 64 and old >> (bits - 1):
            old -= 1 << bits
        elif signed and old >> 63:
            old -= 1 << 64
        if opcode == GET:
            out.append(old)
            continue
        if opcode == INCRBY:
            new = overflow(old, value, bits, signed, m)
            reply = new
        else:
            # SET stores the value as C stores an int64 in the field (u: as uint64).
            stored = value if signed else value & _U64
            new = overflow(stored, 0, bits, signed, m)
            reply = old
        if new is None:
            out.append(None)
            continue
        out.append(reply)
        buf.set(offset, bits, new & ((1 << bits) - 1))
    if writes:
        changed = {i: b for i, b in buf.changed.items() if i >= oldlen or base[i] != b}
        if changed or length != oldlen or v is None:
            lo = min(changed, default=0)
            hi = max(changed, default=-1)
            data = bytes(buf.byte(i) for i in range(lo, hi + 1))
            write_range(s, key, lo, data, length)
        else:
            unshare(s, key, v)
    return out


@command("bitfield", -2, W, 1, 1, 1)
def cmd_bitfield(s: Session, argv: list[bytes]) -> Reply:
    return _bitfield(s, argv, False)


@command("bitfield_ro", -2, Flag.READONLY | Flag.FAST, 1, 1, 1)
def cmd_bitfield_ro(s: Session, argv: list[bytes]) -> Reply:
    return _bitfield(s, argv, True)
