"""Replay of persisted records in bulk (`Store.replay_records`): runs of the common
record (one SET without TTL creating a key on the main line) applied with C-level
passes, the rest one by one with the result `Store.replay` gives."""

from __future__ import annotations

import itertools
import operator
import struct
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from store.accounting import PACKED_BYTES
from store.chains import _CMD_BITS, _cmd_codes
from store.dataset import STRING_KEY_BYTES
from store.ops import SET
from store.records import LsnMismatch, UpdateRecord

if TYPE_CHECKING:
    from store.keyspace import Store

_FIRST = operator.itemgetter(0)
BULK_RUN = 256
"""Records replay tries to apply in bulk at a time (`_replay_run`): runs this
short keep what the passes over them touch in the CPU's caches."""

# `lsn_bytes`: the 256 low bytes, each alone, joined by the other seven bytes of an LSN.
_LOW_BYTES = [bytes([i]) for i in range(256)]
_LITTLE = sys.byteorder == "little"
_LSN_LIMIT = 1 << 63
_pack_q = struct.Struct("=q").pack  # an `array("q")` item: native order and size


def _joined(high: int, lows: list[bytes]) -> bytes:
    """The LSNs `high * 256 + low` for each of `lows` (one byte each, at least one)
    as `array('q')` holds them."""
    rest = high.to_bytes(7, sys.byteorder)
    joined = rest.join(lows)
    return joined + rest if _LITTLE else rest + joined


def run_bytes(times: list[int], starts: list[int], n: int) -> bytes:
    """The `array("q")` bytes of `n` commit times given as runs: run i is
    `times[i]`, from item `starts[i]` up to the next run's start (or `n`)."""
    ends = [*starts[1:], n]
    return b"".join([_pack_q(t) * (e - s) for t, s, e in zip(times, starts, ends, strict=True)])


def lsn_bytes(first: int, n: int) -> bytes:
    """The LSNs `first` to `first + n - 1` as the version index's `array('q')`
    holds them (its bytes), without an int object per LSN for `struct.pack` to
    parse or `array.extend` to convert: up to 256 consecutive LSNs span at most two
    blocks of 256 that share their seven high bytes, so their bytes are the low
    bytes joined by those seven (`bytes.join`, in C; half the instructions)."""
    if not 0 < n <= 256 or first < 0 or first + n > _LSN_LIMIT:
        return struct.pack(f"{n}q", *range(first, first + n))
    high, low = divmod(first, 256)
    end = low + n
    if end <= 256:
        return _joined(high, _LOW_BYTES[low:end])
    return _joined(high, _LOW_BYTES[low:]) + _joined(high + 1, _LOW_BYTES[: end - 256])


def replay_records(
    store: Store,
    rows: Iterator[Any],
    typed: Callable[[Any], UpdateRecord],
    expected: int,
    skip_through: int,
    limit: int,
) -> tuple[int, int]:
    """Replay up to `limit` records from `rows` as the codec decoded them (the
    fields of `UpdateRecord` in order; `typed(row)` is its `UpdateRecord`): they
    must carry consecutive LSNs from `expected` (else `LsnMismatch`); those at
    or below `skip_through` are counted, not applied. Returns (the next expected
    LSN, records applied); fewer than `limit` were taken only when `rows` ran
    out.

    Runs of the common record, one SET without TTL creating a key on the main
    line, are applied in bulk (`_replay_run`); the rest one by one, the common
    record by a short path with the result `replay` would give, others there."""
    chunk = list(itertools.islice(rows, limit))
    applied = 0
    for lo in range(0, len(chunk), BULK_RUN):
        hi = min(lo + BULK_RUN, len(chunk))
        if expected > skip_through and _replay_run(store, chunk, lo, hi, expected):
            expected += hi - lo
            applied += hi - lo
            continue
        expected, n = replay_rows(store, chunk[lo:hi], typed, expected, skip_through)
        applied += n
    store.bound_index()
    return expected, applied


def _replay_run(store: Store, chunk: list[Any], lo: int, hi: int, expected: int) -> bool:
    """Apply `chunk[lo:hi]` at once if every record in it is the common one (a
    SET without TTL, no metadata, creating a distinct key absent from one main
    database, LSNs from `expected` on) as `replay_rows` would; False (nothing
    applied) otherwise. The checks and the updates are C-level passes over the
    run, not Python code per record."""
    n = hi - lo
    rows = chunk[lo:hi]
    count = operator.countOf
    try:
        # countOf: C-level counts (identity first), cheaper than building sets.
        if count(map(len, rows), 5) != n:
            return False
        lsns, times, opss, cmdss, metas = zip(*rows, strict=True)
        if metas.count(None) != n or lsns != tuple(range(expected, expected + n)):
            return False
        cmds = cmdss[0]
        if count(map(type, times), int) != n or cmdss.count(cmds) != n:
            return False
        if type(cmds) is not tuple or len(cmds) != 1:
            return False
        if count(map(len, opss), 1) != n:
            return False
        triples = list(map(_FIRST, opss))
        if count(map(len, triples), 3) != n:
            return False
        dbis, keys, ops = zip(*triples, strict=True)
        dbi = dbis[0]
        if count(map(type, dbis), int) != n or dbis.count(dbi) != n:
            return False
        if count(map(len, ops), 3) != n:
            return False
        names, values, ttls = zip(*ops, strict=True)
        if names.count(SET) != n or ttls.count(None) != n:
            return False
        if count(map(type, values), bytes) != n or count(map(type, keys), bytes) != n:
            return False
    except (TypeError, ValueError):
        return False  # not the common record's shape: one by one says why
    nbytes = sum(map(len, keys)) + sum(map(len, values))
    time_bytes = struct.pack(f"{n}q", *times)
    return apply_run(store, dbi, keys, values, time_bytes, times[-1], nbytes, cmds[0], expected)


def apply_run(
    store: Store,
    dbi: int,
    keys: Sequence[bytes],
    values: Sequence[bytes],
    time_bytes: bytes,
    last_time: int,
    nbytes: int,
    cmd: str,
    expected: int,
) -> bool:
    """Apply a run of common records given as columns (record i: a SET of
    `keys[i]` to `values[i]` without TTL or metadata, by the command named
    `cmd`, in database `dbi`, LSN `expected + i`; `time_bytes` the commit
    times packed as the time index's array (native `q`), `last_time` the last of
    them, `nbytes` the lengths of the keys and values, summed) if every
    key is distinct and absent from that main database (no value, no expiry, no
    history), as `replay_rows` would apply them; False (nothing applied)
    otherwise. The checks and the updates are C-level passes over the run."""
    n = len(keys)
    code = _cmd_codes.get(cmd)  # None: one by one gives the command its code
    if code is None or not 0 <= dbi < len(store.dbs):
        return False
    db = store.dbs[dbi]
    chains = db.chains
    data = db.data
    # Absent everywhere: passes over the keys (no set of them is built).
    if (
        not data.keys().isdisjoint(keys)
        or (db.expires and not db.expires.keys().isdisjoint(keys))
        or not dict.keys(chains).isdisjoint(keys)
    ):
        return False
    # Distinct: then the update adds one entry per key. Else (a key set twice in
    # the run, rare) the keys it added are taken out again, all of them new: the
    # database is as it was, and one by one applies the run.
    had = len(data)
    data.update(zip(keys, values, strict=True))
    if len(data) != had + n:
        for k in keys:
            data.pop(k, None)
        return False
    # array.extend converts item by item through argument parsing: the run's LSNs
    # and times go in as bytes.
    store.index_lsns.frombytes(lsn_bytes(expected, n))
    store.index_times.frombytes(time_bytes)
    index_keys = store.index_keys
    weighed = store._index_weighed == len(index_keys)
    if dbi == 0:
        index_keys.extend(keys)
    else:
        index_keys.extend([((dbi, k),) for k in keys])
    if weighed:
        store._index_weighed += n
        store._index_weight += n
    db.used += n * STRING_KEY_BYTES + nbytes
    step = 1 << _CMD_BITS
    packed = range(expected * step | code, (expected + n) * step, step)
    dict.update(chains, zip(keys, packed, strict=True))
    store.mem.main_bytes += n * PACKED_BYTES
    store.mem.main_packed += n
    store.mem.main_versions += n
    store.lsn = expected + n - 1
    if last_time > store.last_time_ms:
        store.last_time_ms = last_time
    return True


def replay_rows(
    store: Store,
    rows: Iterable[Any],
    typed: Callable[[Any], UpdateRecord],
    expected: int,
    skip_through: int,
) -> tuple[int, int]:
    """`replay_records` one record at a time."""
    dbs = store.dbs
    add_lsn, add_time = store.index_lsns.append, store.index_times.append
    add_key = store.index_keys.append
    codes = _cmd_codes
    applied = 0
    packed = 0
    last_t = store.last_time_ms
    for row in rows:
        lsn, t, ops, cmds, meta = row
        if lsn != expected:
            raise LsnMismatch(lsn, expected)
        expected += 1
        if lsn <= skip_through:
            continue
        applied += 1
        if meta is None and len(ops) == 1:
            dbi, key, op = ops[0]
            if type(dbi) is int and op[0] == SET and op[2] is None and type(op[1]) is bytes:
                db = dbs[dbi]
                data = db.data
                chains = db.chains
                code = codes.get(cmds[0])
                if (
                    code is not None
                    and key not in data
                    and key not in db.expires
                    and key not in chains
                ):
                    data[key] = op[1]
                    db.used += STRING_KEY_BYTES + len(key) + len(op[1])
                    chains[key] = lsn << _CMD_BITS | code
                    add_lsn(lsn)
                    add_time(t)
                    add_key(key if dbi == 0 else ((dbi, key),))
                    last_t = t
                    packed += 1
                    continue
        store.replay(typed(row))
        last_t = store.last_time_ms
    store.mem.main_bytes += packed * PACKED_BYTES
    store.mem.main_packed += packed
    store.mem.main_versions += packed
    if applied:
        store.lsn = expected - 1
        if last_t > store.last_time_ms:
            store.last_time_ms = last_t
    return expected, applied
