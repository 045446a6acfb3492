"""Replay of persisted records in bulk (`Store.replay_records`): runs of the common
record (one SET without TTL creating a key on the main line) applied with C-level
passes, the rest one by one with the result `Store.replay` gives."""

from __future__ import annotations

import itertools
import operator
import struct
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, Final

from store.accounting import COMPACT_STRING_BYTES, PACKED_BYTES, entry_bytes
from store.chains import _CMD_BITS, _CMD_MASK, StoredUndo, VersionEntry, _cmd_codes, _cmd_names
from store.core import StoreCore, lsn_bytes
from store.dataset import STRING_KEY_BYTES
from store.ops import CREATED, RESTORE, SET
from store.records import LsnMismatch, UpdateRecord

if TYPE_CHECKING:
    from store.database import Database

_FIRST = operator.itemgetter(0)
_dict_get: Final = dict.get  # a slot as it is (Chains.get unpacks)
BULK_RUN = 256
"""Records replay tries to apply in bulk at a time (`_replay_run`): runs this
short keep what the passes over them touch in the CPU's caches."""


def replay_records(
    store: StoreCore,
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


def _replay_run(store: StoreCore, chunk: list[Any], lo: int, hi: int, expected: int) -> bool:
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
    store: StoreCore,
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
    `cmd`, in main database `dbi`, LSN `expected + i`; `time_bytes` the commit
    times packed as the time index's array (native `q`), `last_time` the last of
    them, `nbytes` the lengths of the keys and values, summed) as `replay_rows`
    would apply them; False (nothing applied) when the run is not one this can
    apply (see `_apply_overwrites`). When every key is distinct and absent from
    the database (no value, no expiry, no history) the checks and the updates are
    C-level passes over the run; otherwise (keys written before: overwrites) one
    pass in order, compiled, doing what `Store.replay` does for each."""
    n = len(keys)
    code = _cmd_codes.get(cmd)  # None: one by one gives the command its code
    if code is None or not 0 <= dbi < len(store.dbs):
        return False
    db = store.dbs[dbi]
    chains = db.chains
    data = db.data
    # Absent everywhere: passes over the keys (no set of them is built). The values
    # found are the overwriting pass' too (one lookup per key, not two).
    olds = list(map(data.get, keys))
    if (
        olds.count(None) != n
        or (db.expires and not db.expires.keys().isdisjoint(keys))
        or not dict.keys(chains).isdisjoint(keys)
    ):
        return _apply_overwrites(
            store, db, keys, values, olds, time_bytes, last_time, cmd, expected
        )
    # Distinct: then the update adds one entry per key. Else (a key set twice in
    # the run) the keys it added are taken out again, all of them new: the
    # database is as it was, and the pass in order applies the run.
    had = len(data)
    data.update(zip(keys, values, strict=True))
    if len(data) != had + n:
        for k in keys:
            data.pop(k, None)
        return _apply_overwrites(
            store, db, keys, values, olds, time_bytes, last_time, cmd, expected
        )
    _index_run(store, dbi, keys, time_bytes, expected)
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


def _index_run(
    store: StoreCore, dbi: int, keys: Sequence[bytes], time_bytes: bytes, lsn: int
) -> None:
    """The time and version index of a run of one-key commits from `lsn` on, one
    per key of `keys` in database `dbi` (as `Store.replay` adds them, one by one)."""
    n = len(keys)
    # array.extend converts item by item through argument parsing: the run's LSNs
    # and times go in as bytes.
    store.add_commits(lsn_bytes(lsn, n), time_bytes)
    index_keys = store.index_keys
    weighed = store._index_weighed == len(index_keys)
    if dbi == 0:
        index_keys.extend(keys)
    else:
        index_keys.extend([((dbi, k),) for k in keys])
    if weighed:
        store._index_weighed += n
        store._index_weight += n


def _apply_overwrites(
    store: StoreCore,
    db: Database,
    keys: Sequence[bytes],
    values: Sequence[bytes],
    olds: list[Any],
    time_bytes: bytes,
    last_time: int,
    cmd: str,
    expected: int,
) -> bool:
    """`apply_run` for a run whose keys may exist (values, expiries, version chains)
    or repeat: per record, what `Store.replay` does for a SET without TTL (the op
    through `store.ops`, the dataset's count through `store.dataset`, the version
    entry through `store.commitpath.version_one` or `version_key`), in a straight
    line: the value replaced (its expiry cleared), the replaced value kept as the
    entry's undo (the bytes alone when no expiry was cleared, as `compact_undo`
    keeps them), a packed first version unpacked, a new key's version packed, the
    chain trimmed under `versions:N`. False (nothing applied) where that is not
    the whole story: tables (per-prefix retention), history out of memory,
    `ms:N` retention, or a key holding anything but a string."""
    keep = store.history
    kind = keep.kind
    counted = kind == "versions"
    if store.tables or store.tiered or (not counted and kind != "all"):
        return False
    chains = db.chains
    if db.overlay or chains.cold or type(db.data) is not dict or type(db.expires) is not dict:
        return False
    data: dict[bytes, Any] = db.data
    expires: dict[bytes, int] = db.expires
    n = len(keys)
    if olds.count(None) + operator.countOf(map(type, olds), bytes) != n:
        return False  # a collection or a buffer: its size and undo are the op table's
    code = _cmd_codes[cmd]
    times: list[int] = array("q", time_bytes).tolist()
    # Distinct keys (the common case): each one's old value is the one looked up.
    distinct = len(set(keys)) == n
    _index_run(store, db.index, keys, time_bytes, expected)
    lsns = store.index_lsns
    base = lsns[0]
    raw: dict[bytes, Any] = chains  # its own slots: packed ints, lists
    mem = store.mem
    limit = keep.limit
    used = 0
    packed = 0
    versions = 0
    size = 0
    for i in range(n):
        key = keys[i]
        value = values[i]
        lsn = expected + i
        old = olds[i] if distinct else data.get(key)
        data[key] = value
        oldexp = expires.pop(key, None) if expires else None
        slot = _dict_get(raw, key)
        stored: StoredUndo
        if old is None:
            used += STRING_KEY_BYTES + len(key) + len(value)
            if oldexp is None:
                if slot is None:  # a new key: its creation packed
                    raw[key] = lsn << _CMD_BITS | code
                    packed += 1
                    continue
                stored = CREATED
            else:
                stored = ((RESTORE, None, oldexp),)
        else:
            was: bytes = old
            used += len(value) - len(was)
            stored = was if oldexp is None else ((RESTORE, was, oldexp),)
        entry: VersionEntry = (lsn, times[i], cmd, stored, None, None)
        versions += 1
        if slot is None:  # history gone, a value left (a key made before history)
            raw[key] = [entry]
            size += entry_bytes(entry)
            continue
        chain: list[VersionEntry]
        if type(slot) is int:  # a packed first version: unpacked, timed by the index
            born: int = slot
            at = born >> _CMD_BITS
            # The time index holds every LSN in order, mostly without gaps: the
            # creation's time found where it would be then (else Store.time_of).
            j = at - base
            t0 = store.time_at(j) if 0 <= j < len(lsns) and lsns[j] == at else store.time_of(at)
            created: VersionEntry = (at, t0, _cmd_names[born & _CMD_MASK], CREATED, None, None)
            chain = [created]
            raw[key] = chain
            size += entry_bytes(created) - PACKED_BYTES
            mem.main_packed -= 1
        else:
            chain = slot
        chain.append(entry)
        if type(stored) is bytes:
            size += COMPACT_STRING_BYTES + len(stored)
        else:
            size += entry_bytes(entry)
        if counted and len(chain) > 2 * limit:
            store.trim_versions(db, key, chain, limit)
    db.used += used
    mem.main_bytes += size + packed * PACKED_BYTES
    mem.main_packed += packed
    mem.main_versions += packed + versions
    store.lsn = expected + n - 1
    if last_time > store.last_time_ms:
        store.last_time_ms = last_time
    return True


def replay_rows(
    store: StoreCore,
    rows: Iterable[Any],
    typed: Callable[[Any], UpdateRecord],
    expected: int,
    skip_through: int,
) -> tuple[int, int]:
    """`replay_records` one record at a time."""
    dbs = store.dbs
    add_commit = store.add_commit
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
                    add_commit(lsn, t)
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
