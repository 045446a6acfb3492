"""HyperLogLog commands: PFADD, PFCOUNT, PFMERGE, PFDEBUG, PFSELFTEST.

The value is Redis' own (commands.hll), so counts and the bytes a GET returns equal
redis-server's. Every change is a version; so is PFCOUNT's refresh of the cached
cardinality in the value (Redis propagates it as a write too), except where this
connection cannot write (a replica, a view of the past), where the count is only
computed.
"""

from __future__ import annotations

import math
import random
from time import monotonic

from commands import hll
from commands.bitstrings import string_value, unshare, write_range
from commands.errors import CommandError
from commands.registry import Flag, command
from commands.replies import OK, Reply, Simple
from commands.session import Session

W = Flag.WRITE | Flag.DENYOOM


def hll_value(s: Session, key: bytes) -> bytes | bytearray | None:
    """isHLLObjectOrReply: the value at `key` if it is a HyperLogLog."""
    v = string_value(s, key)
    if v is not None and not hll.valid_header(v):
        raise CommandError(hll.NOT_HLL)
    return v


def max_bytes(s: Session) -> int:
    return int(s.server.config.params.get("hll-sparse-max-bytes", "3000"))


def store_hll(s: Session, key: bytes, old: bytes | bytearray | None, new: bytes) -> None:
    """Write the new value, carrying only the bytes that changed when the length is
    the same (a dense value: 12 KB)."""
    if old is not None and len(old) == len(new):
        diff = int.from_bytes(old, "little") ^ int.from_bytes(new, "little")
        if not diff:
            return
        lo = ((diff & -diff).bit_length() - 1) >> 3
        hi = (diff.bit_length() - 1) >> 3
        write_range(s, key, lo, new[lo : hi + 1], len(new))
    else:
        write_range(s, key, 0, new, len(new))


def can_write(s: Session) -> bool:
    """Whether a read command may refresh a cached value: what the dispatcher asks of
    a write (not a view of the past, a replica, a leader past its lease or a fenced
    server)."""
    server = s.server
    if s.view_lsn is not None or server.read_only:
        return False
    if server.write_deadline and monotonic() >= server.write_deadline:
        return False
    return server.durability is None or not server.durability.fenced


@command("pfadd", -2, W | Flag.FAST, 1, 1, 1)
def cmd_pfadd(s: Session, argv: list[bytes]) -> Reply:
    key = argv[1]
    old = hll_value(s, key)
    h = hll.HLL(hll.new_sparse() if old is None else old, max_bytes(s))
    updated = h.add(argv[2:])
    if updated < 0:
        raise CommandError(hll.INVALID_HLL)
    if old is None:
        updated += 1
    if updated:
        h.invalidate()
        store_hll(s, key, old, bytes(h.value()))
    else:
        unshare(s, key, old)
    return 1 if updated else 0


@command("pfcount", -2, Flag.READONLY | Flag.MAY_REPLICATE, 1, -1, 1)
def cmd_pfcount(s: Session, argv: list[bytes]) -> Reply:
    if len(argv) > 2:
        raw: bytes | None = None
        for key in argv[1:]:
            v = hll_value(s, key)
            if v is None:
                continue
            regs = hll.registers(v)
            if regs is None:
                raise CommandError(hll.INVALID_HLL)
            raw = regs if raw is None else hll.max_registers(raw, regs)
        return 0 if raw is None else hll.estimate(hll.raw_histogram(raw))
    key = argv[1]
    v = hll_value(s, key)
    if v is None:
        return 0
    card = hll.cached_count(v)
    if card is None:
        card = hll.count(v)
        if card is None:
            raise CommandError(hll.INVALID_HLL)
        if can_write(s):
            write_range(s, key, 8, card.to_bytes(8, "little"), len(v))
    elif can_write(s):
        unshare(s, key, v)
    return card


@command("pfmerge", -2, W, 1, -1, 1)
def cmd_pfmerge(s: Session, argv: list[bytes]) -> Reply:
    raw = bytes(hll.REGISTERS)
    use_dense = False
    for key in argv[1:]:
        v = hll_value(s, key)
        if v is None:
            continue
        if v[4] == hll.DENSE:
            use_dense = True
        regs = hll.registers(v)
        if regs is None:
            raise CommandError(hll.INVALID_HLL)
        raw = hll.max_registers(raw, regs)
    dest = argv[1]
    old = s.db.get(dest)
    h = hll.HLL(hll.new_sparse() if old is None else old, max_bytes(s))
    if use_dense and not h.to_dense():
        raise CommandError(hll.INVALID_HLL)
    if h.dense is not None:
        # Every register of the destination is in the maximum already.
        h.dense = bytearray(hll.raw_to_dense(raw))
    else:
        for j, val in enumerate(raw):
            if val:
                h.set(j, val)
    h.invalidate()
    store_hll(s, dest, old, bytes(h.value()))
    return OK


@command("pfdebug", 3, W | Flag.ADMIN, 2, 2, 1)
def cmd_pfdebug(s: Session, argv: list[bytes]) -> Reply:
    key = argv[2]
    v = s.db.get(key)
    if v is None:
        raise CommandError("ERR The specified key does not exist")
    v = hll_value(s, key)
    assert v is not None
    unshare(s, key, v)
    sub = argv[1].lower()
    if sub in (b"getreg", b"todense"):
        converted = v[4] == hll.SPARSE
        if converted:
            h = hll.HLL(v, max_bytes(s))
            if not h.to_dense():
                raise CommandError(hll.INVALID_HLL)
            new = bytes(h.value())
            write_range(s, key, 0, new, len(new))
            v = new
        if sub == b"todense":
            return 1 if converted else 0
        return list(hll.registers(v) or b"")
    if sub == b"decode":
        if v[4] != hll.SPARSE:
            raise CommandError("ERR HLL encoding is not sparse")
        return hll.decode(v[hll.HDR :])
    if sub == b"encoding":
        return Simple(b"dense" if v[4] == hll.DENSE else b"sparse")
    raise CommandError(b"ERR Unknown PFDEBUG subcommand '%s'" % argv[1])


SELFTEST_CYCLES = 4
SELFTEST_ELEMENTS = 100_000


@command("pfselftest", 1, Flag.ADMIN)
def cmd_pfselftest(s: Session, argv: list[bytes]) -> Reply:
    """PFSELFTEST: Redis' register and estimate checks, on fewer cycles and elements
    (Redis adds 10 million; in Python that would hold the server for minutes)."""
    rng = random.Random()
    regs = bytearray(hll.DENSE_BYTES)
    for _ in range(SELFTEST_CYCLES):
        values = [rng.randrange(64) for _ in range(hll.REGISTERS)]
        for i, r in enumerate(values):
            hll.dense_set(regs, i, r)
        for i, r in enumerate(values):
            got = hll.dense_get(regs, i)
            if got != r:
                raise CommandError(b"TESTFAILED Register %d should be %d but is %d" % (i, r, got))
    dense = hll.HLL(hll.MAGIC + bytes(12 + hll.DENSE_BYTES), 0)
    sparse = hll.HLL(hll.new_sparse(), max_bytes(s))
    relerr = 1.04 / hll.REGISTERS**0.5
    seed = rng.getrandbits(64)
    checkpoint = 1
    for j in range(1, SELFTEST_ELEMENTS + 1):
        ele = ((j ^ seed) & ((1 << 64) - 1)).to_bytes(8, "little")
        dense.add([ele])
        sparse.add([ele])
        if j != checkpoint:
            continue
        if j < max_bytes(s) // 2 and sparse.sparse is None:
            raise CommandError("TESTFAILED sparse encoding not used")
        card = hll.count(dense.value())
        if card != hll.count(sparse.value()):
            raise CommandError("TESTFAILED dense/sparse disagree")
        maxerr = 1 if j == 10 else math.ceil(relerr * 6 * checkpoint)
        abserr = abs(checkpoint - (card or 0))
        if abserr > maxerr:
            raise CommandError(
                b"TESTFAILED Too big error. card:%d abserr:%d" % (checkpoint, abserr)
            )
        checkpoint *= 10
    return OK
