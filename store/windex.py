"""The version index: the keys each commit wrote, beside the time index.

`Store.index_keys[i]` names what the commit `Store.index_lsns[i]` wrote: the key
itself for the common commit (one op on database 0), else a tuple of (database
ident, key) pairs; a SWAPDB appears as (database, None). One list append per commit.
`keys_written` answers "which keys of this database changed between two LSNs" in
O(commits in between), so TS.DIFF need not visit keys that did not change. The
index covers LSNs from `Store.index_from` on (checkpoints written before the index
existed do not hold it, and the oldest entries go once the index refers to more
than 2 * INDEX_KEYS keys: a range reaching before that is not known, and TS.DIFF
then compares every key).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterable, Sequence
from typing import Any

# Key references the index keeps (about 60 bytes each with the key): past twice
# this many, the oldest entries go (Store.bound_index).
INDEX_KEYS = 1 << 17


def entry(ops: Sequence[tuple[Any, bytes | None, Any]]) -> Any:
    """The index entry of a commit's ops."""
    if len(ops) == 1:
        dbi, key, _op = ops[0]
        if dbi == 0 and key is not None:
            return key
    return tuple([(d, k) for d, k, op in ops if k is not None or op[0] == "swapdb"])


def keys_written(
    lsns: Sequence[int], entries: Sequence[Any], ident: Any, lo: int, hi: int, skip: int = 0
) -> set[bytes] | None:
    """Keys of database `ident` written by commits with lo < LSN <= hi; None when a
    SWAPDB happened in between (every key may have changed). `entries` covers
    `lsns[skip:]` (the oldest entries were cut)."""
    start = max(0, bisect_right(lsns, lo) - skip)
    stop = bisect_right(lsns, hi) - skip
    out: set[bytes] = set()
    main0 = ident == 0
    for i in range(start, stop):
        e = entries[i]
        if type(e) is bytes:
            if main0:
                out.add(e)
            continue
        for d, k in e:
            if k is None:
                if type(d) is int:
                    return None
            elif d == ident:
                out.add(k)
    return out


def export(entries: list[Any]) -> list[Any]:
    """The index as plain lists (a checkpoint's header)."""
    return [e if type(e) is bytes else [[d, k] for d, k in e] for e in entries]


def restore(saved: Iterable[Any]) -> list[Any]:
    """The index from a checkpoint's header (idents back to ints or (branch, n))."""
    out: list[Any] = []
    for e in saved:
        if type(e) is bytes:
            out.append(e)
        else:
            out.append(tuple([(d if type(d) is int else tuple(d), k) for d, k in e]))
    return out


def bound(keys: list[Any], lsns: Sequence[int], weight: int, weighed: int) -> tuple[int, int, int]:
    """Keep the version index `keys` (beside the time index's `lsns`) to about
    INDEX_KEYS key references: past twice that, the oldest entries go (cut from
    `keys` here) and the index starts later (a diff reaching before it compares every
    key instead). `weight` is what entries up to `weighed` refer to. Returns the new
    (weight, weighed, index_from), index_from 0 where nothing was cut."""
    # The new entries only (islice would walk the whole list to its start): one per
    # key for the common entry, a key, plus the length of the others.
    new = keys[weighed:]
    weight += len(new)
    for e in new:
        if type(e) is not bytes:
            weight += len(e) - 1
    weighed = len(keys)
    if weight <= 2 * INDEX_KEYS:
        return weight, weighed, 0
    n = weight - INDEX_KEYS
    if set(map(type, keys[:n])) == {bytes}:  # the common entries: one key each
        weight -= n
    else:
        n = 0
    while weight > INDEX_KEYS:
        e = keys[n]
        weight -= 1 if type(e) is bytes else len(e)
        n += 1
    skip = len(lsns) - len(keys)
    # Past the newest entry when one commit alone wrote more than INDEX_KEYS keys (a
    # FLUSHALL of a big database): the index then starts after it.
    index_from = lsns[skip + n] if skip + n < len(lsns) else lsns[-1] + 1
    del keys[:n]
    return weight, weighed - n, index_from
