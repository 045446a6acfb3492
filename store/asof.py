"""Reads in the past: a key's state just after an LSN (found in its version chain
by bisection, rebuilt from the nearest full copy or the live value by undoing
newer versions); whole-database views are `store.views`."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from store.chains import V_LSN, V_SNAP, V_UNDO, VersionEntry, _entry_lsn, _entry_time, undo_ops
from store.core import StoreCore
from store.database import Database
from store.ops import RESTORE, apply_op
from store.values import copy_value


class PrunedError(Exception):
    """A version that retention has removed."""

    def __init__(self, lsn: int, key: bytes) -> None:
        self.lsn = lsn
        self.key = key
        super().__init__(
            f"PRUNED version {lsn} of {key.decode('utf-8', 'replace')} is no longer retained"
        )


def undo_versions(
    key: bytes, value: Any, expire: int | None, newest_first: Iterable[VersionEntry]
) -> tuple[Any, int | None]:
    """Start from a copy of (value, expire) and undo each version in turn (newest
    first): the key's state before the oldest of them."""
    scratch = Database(-1)
    if value is not None:
        scratch.data[key] = copy_value(value)
        if expire is not None:
            scratch.expires[key] = expire
    for entry in newest_first:
        for u in undo_ops(entry[V_UNDO]):
            apply_op(scratch, key, u)
    return scratch.data.get(key), scratch.expires.get(key)


def lsn_by_time(chain: Sequence[VersionEntry], lsn: int, t: int) -> int:
    """The LSN to read a key whose versions are `chain` at for the time `t`, where
    `lsn` is the store's LSN then. They agree unless the chain holds versions moved in
    from another shard (store.moves): those keep their commit times but were given
    this store's LSNs, so the versions at or before `t` by time are found in the
    chain itself."""
    j = bisect_right(chain, t, key=_entry_time)  # chain[:j] were committed by t
    if (j and chain[j - 1][V_LSN] > lsn) or (j < len(chain) and chain[j][V_LSN] <= lsn):
        return chain[j - 1][V_LSN] if j else chain[0][V_LSN] - 1
    return lsn


def value_as_of(store: StoreCore, dbi: Any, key: bytes, lsn: int) -> tuple[Any, int | None]:
    """The key's (value, expire_ms) just after `lsn`: find the version by bisection,
    start from the nearest newer full copy (or the latest value) and undo at most
    SNAPSHOT-EVERY versions. Raises PrunedError where retention has removed it.
    LSN 0 is the empty state before the first write, whatever retention dropped."""
    if lsn <= 0:
        return None, None
    db = store.db_of(dbi)
    if db.overlay:
        return db.as_of(key, lsn)  # type: ignore[attr-defined, no-any-return]
    chain = db.chains.since(key, lsn)
    floor = db.floors.get(key)
    if floor is not None and lsn < floor:
        raise PrunedError(lsn, key)
    i = bisect_right(chain, lsn, key=_entry_lsn)  # chain[i:] are newer than lsn
    n = len(chain)
    if i == n:
        v = db.data.get(key)
        if v is None:
            return None, None
        return (v if type(v) is bytes else copy_value(v)), db.expires.get(key)
    first_undo = chain[i][V_UNDO]
    if isinstance(first_undo, bytes):  # a replaced string, no expiry (compact_undo)
        return first_undo, None
    if len(first_undo) == 1 and first_undo[0][0] == RESTORE:
        # The state before the first newer version, whole (a replaced value).
        value, expire = first_undo[0][1], first_undo[0][2]
        if value is None or type(value) is bytes:
            return value, expire
        return copy_value(value), expire
    j = i
    while j < n and chain[j][V_SNAP] is None:
        j += 1
    if j < n:
        snap = chain[j][V_SNAP]
        assert snap is not None
        # The copy is of the state after the whole commit: when one commit left
        # several entries for this key, start undoing from its last one.
        start = j
        while start + 1 < n and chain[start + 1][V_LSN] == chain[j][V_LSN]:
            start += 1
        value, expire = snap
    else:
        start = n - 1
        value, expire = db.data.get(key), db.expires.get(key)
    return undo_versions(key, value, expire, reversed(chain[i : start + 1]))


def states_back(
    store: StoreCore, ident: Any, key: bytes, chain: Sequence[VersionEntry], lsns: Iterable[int]
) -> Iterator[tuple[Any, int | None]]:
    """The key's (value, expire_ms) just after each of `lsns` (descending LSNs of
    `chain`, the chain the caller reads: a view's is a prefix of the main line's).
    One as-of read for the first, then each step undoes only the entries between
    two consecutive LSNs: a walk over n versions costs O(n), not O(n^2). A yielded
    value is the walk's scratch copy, valid until the next step."""
    it = iter(lsns)
    first = next(it, None)
    if first is None:
        return
    value, expire = value_as_of(store, ident, key, first)
    scratch = Database(-1)
    if value is not None:
        scratch.data[key] = value  # value_as_of returned a copy (or immutable bytes)
        if expire is not None:
            scratch.expires[key] = expire
    yield value, expire
    data, expires = scratch.data, scratch.expires
    hi = bisect_right(chain, first, key=_entry_lsn)
    for lsn in it:
        lo = bisect_right(chain, lsn, 0, hi, key=_entry_lsn)
        for j in range(hi - 1, lo - 1, -1):
            for u in undo_ops(chain[j][V_UNDO]):
                apply_op(scratch, key, u)
        hi = lo
        yield data.get(key), expires.get(key)
