"""Replay of a segment body without decoding the common record into objects.

Most records of a log are plain SETs: `[lsn, time, [[db, key, ["set", value,
nil]]], [cmd], nil]` (docs/storage-format.md). `BodyRecords.plain_run` walks the
msgpack bytes of such records itself and gives a run of them as columns (keys,
the commit times packed), which `store.bulkreplay.apply_run` applies with C-level
passes; msgpack would have built eleven objects per record (the record, its ops,
the op, the names, the ints) only for replay to take them apart and free them.
Every other record is decoded by the codec's unpacker, made at the first such
record and fed the body from there: the two take turns over it, so the rows and
the runs are the body's records in order, and a body of plain records is never
copied into an unpacker.

The walk pays only when compiled (tools/compiled.py): as Python, reading a record
byte by byte is slower than msgpack's C, so `body_records` gives the codec's plain
iterator then, and replay takes the path it always had. Both give the same store
(tests/test_plainunpack.py).
"""

from __future__ import annotations

import struct
from array import array
from collections.abc import Callable
from typing import Any, Final

from mypy_extensions import i64

from flusher.codec import decode_records, fed_unpacker, record_of_row
from store import native
from store.bulkreplay import BULK_RUN, apply_run, replay_rows
from store.keyspace import Store
from store.ops import SET
from store.records import UpdateRecord

COMPILED = __name__ in native.MODULES
"""Whether this module runs compiled, so that walking the bytes here pays."""

# Final: compiled, these are constants in the C code, not lookups in the module's dict.
_NOT: Final[i64] = -1
_TIME: Final = struct.Struct("q")  # as `array('q')` holds them: the time index's


class PlainRun:
    """Consecutive plain SET records, as columns (see `BodyRecords.plain_run`)."""

    def __init__(self, dbi: int, cmd: str) -> None:
        self.dbi = dbi
        self.cmd = cmd
        self.keys: list[bytes] = []
        self.values: list[bytes] = []
        self.nbytes = 0  # of the keys and values
        # The commit times as the time index's array takes them (native `q`), one
        # piece per batch of records sharing a time (`plain_run`).
        self.time_bytes = b""
        self.last_time = 0

    def times(self) -> list[int]:
        """The records' commit times."""
        return array("q", self.time_bytes).tolist()

    def rows(self, first: int) -> list[Any]:
        """The run's records as the codec decodes them (LSNs from `first`)."""
        dbi, cmd = self.dbi, self.cmd
        return [
            (first + i, t, ((dbi, k, (SET, v, None)),), (cmd,), None)
            for i, (k, v, t) in enumerate(zip(self.keys, self.values, self.times(), strict=True))
        ]


def _uint(b: bytes, p: i64) -> tuple[i64, i64]:
    """The msgpack unsigned integer at `p` (below 2**63) and the position after
    it; `_NOT` for anything else."""
    c: i64 = b[p]
    if c < 0x80:
        return c, p + 1
    if c == 0xCF and b[p + 1] < 0x80:
        v: i64 = 0
        for i in range(p + 1, p + 9):
            v = v << 8 | b[i]
        return v, p + 9
    return _sized(b, p, 0xCC)


def _sized(b: bytes, p: i64, tag8: i64) -> tuple[i64, i64]:
    """The number after the tag at `p` if the tag is `tag8`, `tag8 + 1` or `tag8 +
    2` (a number of 8, 16 or 32 bits follows: an unsigned int from 0xCC, a binary's
    length from 0xC4), and the position after it; `_NOT` for another tag."""
    c: i64 = b[p]
    if c == tag8:
        return b[p + 1], p + 2
    if c == tag8 + 1:
        return i64(b[p + 1]) << 8 | b[p + 2], p + 3
    if c == tag8 + 2:
        return i64(b[p + 1]) << 24 | i64(b[p + 2]) << 16 | i64(b[p + 3]) << 8 | b[p + 4], p + 5
    return _NOT, p


def _plain(b: bytes, p: i64) -> tuple[i64, i64, i64, i64, i64, i64, i64, i64, i64, i64]:
    """The plain SET record at `p`: (its end, LSN, time, db, key start, key end,
    value start, value end, command name start, name end); end `_NOT` when the
    record at `p` is anything else or runs past the body."""
    try:
        if b[p] != 0x95:
            return _NOT, 0, 0, 0, 0, 0, 0, 0, 0, 0
        lsn, q = _uint(b, p + 1)
        t, q = _uint(b, q)
        if lsn == _NOT or t == _NOT or b[q] != 0x91 or b[q + 1] != 0x93:
            return _NOT, 0, 0, 0, 0, 0, 0, 0, 0, 0
        dbi: i64 = b[q + 2]
        klen, ks = _sized(b, q + 3, 0xC4)  # a binary
        if dbi >= 0x80 or klen == _NOT:
            return _NOT, 0, 0, 0, 0, 0, 0, 0, 0, 0
        q = ks + klen  # ["set", value, nil]
        if b[q] != 0x93 or b[q + 1] != 0xA3 or b[q + 2] != 0x73 or b[q + 3] != 0x65:
            return _NOT, 0, 0, 0, 0, 0, 0, 0, 0, 0
        if b[q + 4] != 0x74:
            return _NOT, 0, 0, 0, 0, 0, 0, 0, 0, 0
        vlen, vs = _sized(b, q + 5, 0xC4)
        if vlen == _NOT:
            return _NOT, 0, 0, 0, 0, 0, 0, 0, 0, 0
        q = vs + vlen
        c: i64 = b[q + 2]  # the one command's name: a fixstr
        if b[q] != 0xC0 or b[q + 1] != 0x91 or c & 0xE0 != 0xA0:
            return _NOT, 0, 0, 0, 0, 0, 0, 0, 0, 0
        cs = q + 3
        ce = cs + (c & 0x1F)
        if b[ce] != 0xC0:  # no metadata
            return _NOT, 0, 0, 0, 0, 0, 0, 0, 0, 0
        return ce + 1, lsn, t, dbi, ks, ks + klen, vs, vs + vlen, cs, ce
    except IndexError:  # runs past the body: the codec says what is wrong
        return _NOT, 0, 0, 0, 0, 0, 0, 0, 0, 0


class BodyRecords:
    """A segment body's records for replay: an iterator of the codec's rows (the
    fields of `UpdateRecord` in order), which can also give the plain SET records
    at its position as a run of columns (`plain_run`).

    The codec's unpacker is made only when a record is not a plain SET, fed the
    body from there on: a body of plain records is never copied into one, and a
    run walked here is skipped over by the unpacker (`read_bytes`) only when it
    is needed again."""

    def __init__(self, body: bytes) -> None:
        self.body = body
        self.pos: i64 = 0  # where the next record starts
        self.unpacker: Any = None
        self.base: i64 = 0  # where the unpacker's feed starts in the body

    def _codec(self) -> Any:
        """The codec's unpacker, at `pos`."""
        u = self.unpacker
        if u is None:
            self.base = self.pos
            u = self.unpacker = fed_unpacker(memoryview(self.body)[self.pos :])
        else:
            behind: i64 = self.pos - self.base - u.tell()
            if behind:
                u.read_bytes(behind)
        return u

    def __iter__(self) -> BodyRecords:
        return self

    def __next__(self) -> Any:
        u = self._codec()
        row = next(u)
        self.pos = self.base + u.tell()
        return row

    def plain_run(self, expected: int, want: int) -> PlainRun | None:
        """Up to `want` records from here if they are plain SETs with LSNs from
        `expected` on, all in one database by one command, taken; None (nothing
        taken) if the next record is not one."""
        b = self.body
        p = self.pos
        exp: i64 = expected
        first = _plain(b, p)
        end, lsn, t, dbi, _ks, _ke, _vs, _ve, cs, ce = first
        if end == _NOT or lsn != exp:
            return None
        try:
            run = PlainRun(dbi, b[cs:ce].decode())
        except UnicodeDecodeError:
            return None
        w: i64 = want
        # Filled by index (no append per record), cut to the run's length after.
        keys: list[bytes] = [b""] * w
        values: list[bytes] = [b""] * w
        clen = ce - cs
        cmd0 = cs
        prev_t = t
        n: i64 = 0
        nbytes: i64 = 0
        packed: list[bytes] = []  # the times, one piece per batch
        same: i64 = 0  # records with the time `prev_t`, not packed yet
        while n < w:
            end, lsn, t, d, ks, ke, vs, ve, cs, ce = _plain(b, p)
            if end == _NOT or lsn != exp + n or d != dbi or ce - cs != clen:
                break
            i: i64 = 0  # the same command's name
            while i < clen and b[cs + i] == b[cmd0 + i]:
                i += 1
            if i < clen:
                break
            if t != prev_t:  # records of one batch share their time: packed once
                if same:
                    packed.append(_TIME.pack(prev_t) * same)
                prev_t = t
                same = 0
            same += 1
            keys[n] = b[ks:ke]
            values[n] = b[vs:ve]
            nbytes += ke - ks + ve - vs
            n += 1
            p = end
        self.pos = p
        if n < w:
            del keys[n:]
            del values[n:]
        run.keys = keys
        run.values = values
        if same:
            packed.append(_TIME.pack(prev_t) * same)
        run.time_bytes = b"".join(packed)
        run.last_time = prev_t
        run.nbytes = nbytes
        return run

    def take_rows(self, want: int, probe: bool) -> list[Any]:
        """Up to `want` records from here as the codec decodes them; with `probe`,
        only up to the next plain SET record."""
        rows: list[Any] = []
        u = self._codec()
        b = self.body
        base = self.base
        while len(rows) < want:
            try:
                rows.append(next(u))
            except StopIteration:
                break
            if probe and _plain(b, base + u.tell())[0] != _NOT:
                break
        self.pos = base + u.tell()
        return rows


def body_records(body: bytes) -> tuple[Any, Callable[[Any], UpdateRecord]]:
    """The records of a segment body for `replay_records`: a `BodyRecords` when
    compiled (the codec's unpacker is fed only if a record needs it), else the
    codec's rows (`decode_records`)."""
    if COMPILED:
        return BodyRecords(body), record_of_row
    return decode_records(body)


def replay_records(
    store: Store,
    rows: Any,
    typed: Callable[[Any], UpdateRecord],
    expected: int,
    skip_through: int,
    limit: int,
) -> tuple[int, int]:
    """`Store.replay_records` (the same arguments, the same result and store), with
    the plain SET records of a `BodyRecords` taken as columns."""
    if not isinstance(rows, BodyRecords):
        return store.replay_records(rows, typed, expected, skip_through, limit)
    taken = 0
    applied = 0
    while taken < limit:
        want = min(BULK_RUN, limit - taken)
        run = rows.plain_run(expected, want) if expected > skip_through else None
        if run is not None:
            n = len(run.keys)
            if apply_run(
                store,
                run.dbi,
                run.keys,
                run.values,
                run.time_bytes,
                run.last_time,
                run.nbytes,
                run.cmd,
                expected,
            ):
                expected += n
            else:
                expected, n = replay_rows(store, run.rows(expected), typed, expected, skip_through)
            taken += n
            applied += n
            continue
        chunk = rows.take_rows(want, expected > skip_through)
        if not chunk:
            break
        expected, n = replay_rows(store, chunk, typed, expected, skip_through)
        taken += len(chunk)
        applied += n
    store.bound_index()
    return expected, applied
