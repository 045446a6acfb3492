"""Redis' HyperLogLog representation (the string value PFADD, PFCOUNT and PFMERGE keep),
written after the description in Redis 7.0's hyperloglog.c so that registers, bytes and
counts equal redis-server's.

A value is a 16-byte header ("HYLL", the encoding byte, 3 unused bytes, the cached
cardinality in 8 little-endian bytes whose top bit marks it stale) and then either
16384 registers of 6 bits packed from the least significant bit (dense, 12288 bytes),
or a run-length code (sparse): ZERO `00llllll` (1-64 zero registers), XZERO
`01llllll llllllll` (1-16384 zero registers), VAL `1vvvvvll` (1-4 registers of value
1-32). A new value is sparse; it turns dense when a register needs a value over 32 or
the code would grow past `hll-sparse-max-bytes`.

The sparse code is edited the way Redis edits it (the same splits and the same merges
of neighbouring VAL opcodes), on a list of opcodes, so the bytes come out identical.
Whole-array work (histograms, merges) is done on byte strings and big integers, not
register by register.
"""

from __future__ import annotations

import math
import struct
from bisect import bisect_right
from collections.abc import Iterator

HDR = 16
P = 14
Q = 64 - P
REGISTERS = 1 << P
P_MASK = REGISTERS - 1
DENSE_BYTES = REGISTERS * 6 // 8
DENSE_SIZE = HDR + DENSE_BYTES
DENSE = 0
SPARSE = 1
SPARSE_VAL_MAX = 32
SPARSE_VAL_MAX_LEN = 4
ZERO_MAX_LEN = 64
XZERO_MAX_LEN = 16384
ALPHA_INF = 0.721347520444481703680
SEED = 0xADC83B19
MAGIC = b"HYLL"

INVALID_HLL = "INVALIDOBJ Corrupted HLL object detected"
NOT_HLL = "WRONGTYPE Key is not a valid HyperLogLog string value."

_M = 0xC6A4A7935BD1E995
_MASK64 = (1 << 64) - 1
_BLOCKS = [struct.Struct(f"<{i}Q") for i in range(16)]

# Opcode kinds in the decoded sparse form.
ZERO, XZERO, VAL = 0, 1, 2


def murmur64a(data: bytes, seed: int = SEED) -> int:
    """MurmurHash64A as Redis has it (little-endian blocks on every platform)."""
    n = len(data)
    h = (seed ^ (n * _M)) & _MASK64
    blocks = n >> 3
    if blocks:
        unpack = (
            _BLOCKS[blocks].unpack_from if blocks < 16 else struct.Struct(f"<{blocks}Q").unpack_from
        )
        for k in unpack(data):
            k = (k * _M) & _MASK64
            k ^= k >> 47
            h ^= (k * _M) & _MASK64
            h = (h * _M) & _MASK64
    if n & 7:
        h ^= int.from_bytes(data[blocks << 3 :], "little")
        h = (h * _M) & _MASK64
    h ^= h >> 47
    h = (h * _M) & _MASK64
    return h ^ (h >> 47)


def pat_len(ele: bytes) -> tuple[int, int]:
    """(register index, length of the 0...01 pattern) of an element (hllPatLen)."""
    h = murmur64a(ele)
    rest = (h >> P) | (1 << Q)
    return h & P_MASK, (rest & -rest).bit_length()


def new_sparse() -> bytearray:
    """createHLLObject: a sparse value of one XZERO covering every register."""
    return bytearray(MAGIC + b"\x01" + bytes(11) + bytes(((XZERO_MAX_LEN - 1) >> 8 | 0x40, 0xFF)))


def valid_header(v: bytes | bytearray) -> bool:
    """isHLLObjectOrReply's checks: length, magic, encoding, dense length."""
    if len(v) < HDR or v[:4] != MAGIC or v[4] > SPARSE:
        return False
    return v[4] != DENSE or len(v) == DENSE_SIZE


# ---------------------------------------------------------------------------- dense


def dense_get(regs: bytearray | bytes, idx: int) -> int:
    pos = idx * 6
    b = pos >> 3
    w = regs[b] | (regs[b + 1] << 8 if b + 1 < len(regs) else 0)
    return (w >> (pos & 7)) & 63


def dense_set(regs: bytearray, idx: int, val: int) -> None:
    pos = idx * 6
    b = pos >> 3
    fb = pos & 7
    regs[b] = (regs[b] & ~(63 << fb) & 0xFF) | ((val << fb) & 0xFF)
    if b + 1 < len(regs):
        regs[b + 1] = (regs[b + 1] & ~(63 >> (8 - fb))) | (val >> (8 - fb))


def _table(f: object) -> bytes:
    return bytes(f(i) & 0xFF for i in range(256))  # type: ignore[operator]


_LO6 = _table(lambda b: b & 63)
_HI2 = _table(lambda b: b >> 6)
_LO4_SHL2 = _table(lambda b: (b & 15) << 2)
_HI4 = _table(lambda b: b >> 4)
_LO2_SHL4 = _table(lambda b: (b & 3) << 4)
_HI6 = _table(lambda b: b >> 2)
_SHL6 = _table(lambda b: b << 6)
_SHR2 = _table(lambda b: b >> 2)
_SHL4 = _table(lambda b: b << 4)
_SHL2 = _table(lambda b: b << 2)
_LO4 = _table(lambda b: b & 15)


def _or(a: bytes, b: bytes) -> bytes:
    n = len(a)
    return (int.from_bytes(a, "little") | int.from_bytes(b, "little")).to_bytes(n, "little")


def dense_to_raw(regs: bytes | bytearray) -> bytes:
    """The 16384 registers of a dense code, one byte each, in register order."""
    b0, b1, b2 = bytes(regs[0::3]), bytes(regs[1::3]), bytes(regs[2::3])
    out = bytearray(REGISTERS)
    out[0::4] = b0.translate(_LO6)
    out[1::4] = _or(b0.translate(_HI2), b1.translate(_LO4_SHL2))
    out[2::4] = _or(b1.translate(_HI4), b2.translate(_LO2_SHL4))
    out[3::4] = b2.translate(_HI6)
    return bytes(out)


def raw_to_dense(raw: bytes | bytearray) -> bytes:
    """Registers (one byte each, values < 64) packed as the dense code."""
    r0, r1, r2, r3 = (bytes(raw[i::4]) for i in range(4))
    out = bytearray(DENSE_BYTES)
    out[0::3] = _or(r0, r1.translate(_SHL6))
    out[1::3] = _or(r1.translate(_SHR2), r2.translate(_LO4).translate(_SHL4))
    out[2::3] = _or(r2.translate(_HI4), r3.translate(_SHL2))
    return bytes(out)


# --------------------------------------------------------------------------- sparse


def opcodes(code: bytes | bytearray) -> Iterator[tuple[int, int, int]]:
    """The (kind, run length, value) of each opcode of a sparse code. An XZERO cut
    short by the end of the string reads its missing byte as 0, as Redis reads the
    string's terminating NUL there."""
    i = 0
    n = len(code)
    while i < n:
        c = code[i]
        if c < 0x40:
            yield ZERO, (c & 0x3F) + 1, 0
            i += 1
        elif c < 0x80:
            yield XZERO, (((c & 0x3F) << 8) | (code[i + 1] if i + 1 < n else 0)) + 1, 0
            i += 2
        else:
            yield VAL, (c & 3) + 1, ((c >> 2) & 0x1F) + 1
            i += 1


def sparse_to_raw(code: bytes | bytearray) -> bytes | None:
    """Registers of a sparse code (after the header), or None when it does not cover
    exactly the 16384 registers (hllMerge / hllSparseToDense's validity)."""
    out = bytearray(REGISTERS)
    idx = 0
    for _kind, runlen, val in opcodes(code):
        if val:
            if idx + runlen > REGISTERS:
                return None
            out[idx : idx + runlen] = bytes((val,)) * runlen
        idx += runlen
    return bytes(out) if idx == REGISTERS else None


def sparse_histogram(code: bytes | bytearray) -> tuple[list[int], bool]:
    """hllSparseRegHisto: (histogram, valid)."""
    histo = [0] * 64
    idx = 0
    for _kind, runlen, val in opcodes(code):
        histo[val] += runlen
        idx += runlen
    return histo, idx == REGISTERS


def raw_histogram(raw: bytes) -> list[int]:
    """How many registers hold each value (counted until every register is)."""
    histo = [0] * 64
    left = len(raw)
    for v in range(64):
        if not left:
            break
        n = histo[v] = raw.count(v)
        left -= n
    return histo


def _op_size(kind: int) -> int:
    return 2 if kind == XZERO else 1


class Sparse:
    """A sparse code decoded into opcodes (kind, run length, value) with the index of
    each one's first register, edited as hllSparseSet edits the bytes."""

    __slots__ = ("firsts", "ops", "size", "truncated")

    def __init__(self, code: bytes | bytearray) -> None:
        self.ops = list(opcodes(code))
        self.firsts = []
        idx = 0
        nbytes = 0
        for kind, runlen, _val in self.ops:
            self.firsts.append(idx)
            idx += runlen
            nbytes += 2 if kind == XZERO else 1
        self.truncated = nbytes > len(code)
        self.size = HDR + len(code)

    def encode(self) -> bytes:
        out = bytearray()
        for kind, runlen, val in self.ops:
            if kind == VAL:
                out.append(0x80 | (val - 1) << 2 | (runlen - 1))
            elif kind == ZERO:
                out.append(runlen - 1)
            else:
                out += bytes(((runlen - 1) >> 8 | 0x40, (runlen - 1) & 0xFF))
        if self.truncated:  # a last XZERO cut after its first byte stays cut
            del out[-1]
        return bytes(out)

    def set(self, index: int, count: int, max_bytes: int) -> int | None:
        """hllSparseSet: 1 when the register grew, 0 when not, -1 on a corrupt code,
        None when the value must turn dense first (then set in the dense code)."""
        if count > SPARSE_VAL_MAX:
            return None
        ops = self.ops
        firsts = self.firsts
        i = bisect_right(firsts, index) - 1
        if i < 0 or (self.truncated and i == len(ops) - 1):
            return -1
        kind, runlen, val = ops[i]
        first = firsts[i]
        if index > first + runlen - 1:
            return -1
        prev = i - 1 if i > 0 else -1
        if kind == VAL and val >= count:
            return 0
        if runlen == 1 and kind != XZERO:
            ops[i] = (VAL, 1, count)
        else:
            last = first + runlen - 1
            seq: list[tuple[int, int, int]] = []
            if kind == VAL:
                if index != first:
                    seq.append((VAL, index - first, val))
                seq.append((VAL, 1, count))
                if index != last:
                    seq.append((VAL, last - index, val))
            else:
                if index != first:
                    n = index - first
                    seq.append((XZERO if n > ZERO_MAX_LEN else ZERO, n, 0))
                seq.append((VAL, 1, count))
                if index != last:
                    n = last - index
                    seq.append((XZERO if n > ZERO_MAX_LEN else ZERO, n, 0))
            delta = len(seq) + sum(op[0] == XZERO for op in seq) - _op_size(kind)
            if delta > 0 and self.size + delta > max_bytes:
                return None
            starts = []
            at = first
            for op in seq:
                starts.append(at)
                at += op[1]
            ops[i : i + 1] = seq
            firsts[i : i + 1] = starts
            self.size += delta
        # Merge neighbouring VAL opcodes of equal value, scanning up to 5 opcodes.
        p = prev if prev >= 0 else 0
        scan = 5
        while p < len(ops) and scan:
            scan -= 1
            k1, l1, v1 = ops[p]
            if k1 != VAL:
                p += 1
                continue
            if p + 1 < len(ops):
                k2, l2, v2 = ops[p + 1]
                if k2 == VAL and v1 == v2 and l1 + l2 <= SPARSE_VAL_MAX_LEN:
                    ops[p] = (VAL, l1 + l2, v1)
                    del ops[p + 1]
                    del firsts[p + 1]
                    self.size -= 1
                    continue
            p += 1
        return 1


# ------------------------------------------------------------------- the value


class HLL:
    """A value being changed: its header and either a dense register array or a
    decoded sparse code."""

    __slots__ = ("dense", "header", "max_bytes", "sparse")

    def __init__(self, value: bytes | bytearray, max_bytes: int) -> None:
        self.header = bytearray(value[:HDR])
        self.max_bytes = max_bytes
        self.dense: bytearray | None = None
        self.sparse: Sparse | None = None
        if value[4] == DENSE:
            self.dense = bytearray(value[HDR:])
        else:
            self.sparse = Sparse(value[HDR:])

    def to_dense(self) -> bool:
        """hllSparseToDense; False when the sparse code is corrupt."""
        if self.dense is not None:
            return True
        assert self.sparse is not None
        raw = sparse_to_raw(self.sparse.encode())
        if raw is None:
            return False
        self.dense = bytearray(raw_to_dense(raw))
        self.sparse = None
        self.header[4] = DENSE
        return True

    def set(self, index: int, count: int) -> int:
        """Raise register `index` to `count`: 1 if it grew, 0 if not, -1 if corrupt."""
        if self.sparse is not None:
            r = self.sparse.set(index, count, self.max_bytes)
            if r is not None:
                return r
            if not self.to_dense():
                return -1
        regs = self.dense
        assert regs is not None
        if count > dense_get(regs, index):
            dense_set(regs, index, count)
            return 1
        return 0

    def add(self, elements: list[bytes]) -> int:
        """PFADD's loop: how many elements changed a register, or -1 if corrupt."""
        updated = 0
        j = 0
        n = len(elements)
        while j < n and self.sparse is not None:
            r = self.set(*pat_len(elements[j]))
            if r < 0:
                return -1
            updated += r
            j += 1
        if j < n:
            # Dense: only the largest count per register matters.
            best: dict[int, int] = {}
            for ele in elements[j:]:
                idx, count = pat_len(ele)
                if count > best.get(idx, 0):
                    best[idx] = count
            regs = self.dense
            assert regs is not None
            for idx, count in best.items():
                if count > dense_get(regs, idx):
                    dense_set(regs, idx, count)
                    updated += 1
        return updated

    def invalidate(self) -> None:
        self.header[15] |= 0x80

    def value(self) -> bytearray:
        if self.dense is not None:
            return self.header + self.dense
        assert self.sparse is not None
        return self.header + self.sparse.encode()


def registers(value: bytes | bytearray) -> bytes | None:
    """Registers of a valid-headed value, one byte each (None: corrupt sparse code)."""
    if value[4] == DENSE:
        return dense_to_raw(value[HDR:])
    return sparse_to_raw(value[HDR:])


_HIGH = int.from_bytes(b"\x80" * REGISTERS, "little")
_ALL = int.from_bytes(b"\xff" * REGISTERS, "little")


def max_registers(a: bytes, b: bytes) -> bytes:
    """Register-wise maximum of two register arrays (values < 128), on big integers."""
    x = int.from_bytes(a, "little")
    y = int.from_bytes(b, "little")
    ge = (((x | _HIGH) - y) & _HIGH) >> 7  # 1 in each lane where x >= y
    keep = ge * 0xFF
    return ((x & keep) | (y & (_ALL ^ keep))).to_bytes(REGISTERS, "little")


def _sigma(x: float) -> float:
    if x == 1.0:
        return math.inf
    y = 1.0
    z = x
    while True:
        x *= x
        z_prev = z
        z += x * y
        y += y
        if z_prev == z:
            return z


def _tau(x: float) -> float:
    if x == 0.0 or x == 1.0:
        return 0.0
    y = 1.0
    z = 1 - x
    while True:
        x = math.sqrt(x)
        z_prev = z
        y *= 0.5
        z -= math.pow(1 - x, 2) * y
        if z_prev == z:
            return z / 3


def estimate(histo: list[int]) -> int:
    """Ertl's estimator from the register histogram, as hllCount computes it."""
    m = float(REGISTERS)
    z = m * _tau((m - histo[Q + 1]) / m)
    for j in range(Q, 0, -1):
        z += histo[j]
        z *= 0.5
    z += m * _sigma(histo[0] / m)
    e = ALPHA_INF * m * m / z
    f = math.floor(e)
    return int(f + 1 if e - f >= 0.5 else f)


def count(value: bytes | bytearray) -> int | None:
    """The cardinality of a valid-headed value (None: corrupt sparse code)."""
    if value[4] == DENSE:
        return estimate(raw_histogram(dense_to_raw(value[HDR:])))
    histo, valid = sparse_histogram(value[HDR:])
    return estimate(histo) if valid else None


def cached_count(value: bytes | bytearray) -> int | None:
    """The cached cardinality, when it is valid."""
    if value[15] & 0x80:
        return None
    return int.from_bytes(value[8:16], "little")


def with_count(value: bytes | bytearray, card: int) -> bytearray:
    out = bytearray(value)
    out[8:16] = card.to_bytes(8, "little")
    return out


def decode(code: bytes | bytearray) -> bytes:
    """PFDEBUG DECODE's text of a sparse code."""
    parts = []
    for kind, runlen, val in opcodes(code):
        if kind == ZERO:
            parts.append(b"z:%d" % runlen)
        elif kind == XZERO:
            parts.append(b"Z:%d" % runlen)
        else:
            parts.append(b"v:%d,%d" % (val, runlen))
    return b" ".join(parts)
