"""Keys moving between the shards of a cluster (issue 28: a slot range moved by
fencing, flushing and replaying): what a range of hash slots holds, taken out of one
store with every version of every key, renumbered into another store's LSNs, and the
two database-level ops that put them in (`IMPORT`) and take them out (`FORGET`).

Both ops go through the commit point like SWAPDB (`Store.db_op`), so they are records
of the store's own update stream: replay applies them again (`Store.apply_db_op`), and
a restart from the stream has the keys a shard took and not the ones it gave away.

An IMPORT op is ("import", items), each item (db, key, value or None, expire or None,
chain, floor or None) as a checkpoint image's per-key item (store.image), its chain
always a list of 6-field entries (lsn, time_ms, cmd, undo ops, meta, snap). A FORGET op
is ("forget", keys) on its database: the keys leave with their whole history, no
deletion version (the history went with them).

Tables (TS.TABLE) are each shard's own: the taking store gets the tables of the moved
keys it lacks, with the giving store's policy (`carried_tables`), so the keys keep
their durability and retention; a RAFT table becomes SYNC on a shard that has no raft
log (a shard of one node: no group, no log in etcd). A table the taker has already
keeps its own policy.

LSNs. Each shard numbers its own commits. A moved version keeps its commit time and
value; its LSN becomes one of the taking store's (`renumber`): the LSN that store had
reached at that time (its time index), raised where needed so that a key's versions
keep distinct, increasing LSNs, all at or below the IMPORT's own LSN. Later writes on
the taking shard get later LSNs, so each key's chain stays ordered by LSN and by time.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from store.accounting import PACKED_BYTES, chain_bytes
from store.chains import V_LSN
from store.dataset import weigh
from store.image import key_item, load_item
from store.slots import key_slot

if TYPE_CHECKING:
    from store.core import StoreCore
    from store.database import Database

IMPORT = "import"
FORGET = "forget"
IMPORT_CMD = "cluster|import"
"""The command name the IMPORT and FORGET commits carry."""


def in_range(key: bytes, first: int, last: int) -> bool:
    return first <= key_slot(key) <= last


def range_keys(db: Database, first: int, last: int) -> list[bytes]:
    """Every key of `db` in slots first..last: live ones and those with history only."""
    keys = [k for k in db.data if in_range(k, first, last)]
    seen = set(keys)
    keys.extend(k for k in db.chains if k not in seen and in_range(k, first, last))
    return keys


def export_range(db: Database, first: int, last: int) -> list[tuple[Any, ...]]:
    """The IMPORT items of every key of `db` in slots first..last, chains in the
    giving store's LSNs."""
    return export_keys(db, range_keys(db, first, last))


def held(db: Database, key: bytes) -> bool:
    """`db` holds `key`: live, or with history only."""
    return key in db.data or key in db.chains


def export_keys(db: Database, keys: Iterable[bytes]) -> list[tuple[Any, ...]]:
    """The IMPORT items of those of `keys` that `db` holds, chains in its LSNs."""
    return [key_item(db, key, db.data.get(key), None) for key in keys if held(db, key)]


def written_since(db: Database, keys: Iterable[bytes], lsn: int) -> list[bytes]:
    """Those of `keys` with a version in `db` after `lsn` (its history keeps every
    version: a scratch store's)."""
    chains = db.chains
    out = []
    for key in keys:
        newer = chains.since(key, lsn)
        if newer and newer[-1][V_LSN] > lsn:
            out.append(key)
    return out


def carried_tables(
    giver: StoreCore, taker: StoreCore, items: list[tuple[Any, ...]], raft: bool
) -> list[tuple[Any, ...]]:
    """The `table` ops that give `taker` the tables of `items`' keys it lacks, as
    `giver` declares them (RAFT ones SYNC unless `raft`: the taker has a raft log)."""
    names = {giver.table_of(item[1]) for item in items} - {None} - set(taker.tables)
    ops = []
    for name in sorted(n for n in names if n is not None):
        p = giver.tables[name]
        durability = "sync" if p.durability == "raft" and not raft else p.durability
        op: tuple[Any, ...] = ("table", name, durability, str(p.retain), p.snapshot_every)
        ops.append((*op, p.max_pinned) if p.max_pinned else op)
    return ops


def longest_chain(items: list[tuple[Any, ...]]) -> int:
    """The most versions one item carries (the LSNs its renumbering needs): entries of
    one commit (the same LSN) are one version."""
    return max((len({e[0] for e in item[4]}) for item in items), default=0)


def renumber(store: StoreCore, items: list[tuple[Any, ...]], at: int) -> list[tuple[Any, ...]]:
    """`items` with their versions' LSNs in `store`'s numbering, none above `at` (>=
    `longest_chain(items)`; the IMPORT goes after it): each version takes the first
    LSN `store` committed at or after the version's commit time (`at` if none), so a
    read of the store at an LSN sees the versions committed by that LSN's time; raised
    past the key's previous version's, and lowered so that the key's last version is
    at most `at` (entries of one commit keep one LSN). A floor becomes the first
    retained version's LSN (less one where the state before it was readable)."""
    out = []
    for dbi, key, value, expire, chain, floor in items:
        olds = sorted({e[0] for e in chain})
        first_time: dict[int, int] = {}
        for e in chain:
            first_time.setdefault(e[0], e[1])
        n = len(olds)
        new: list[int] = []
        prev = 0
        for i, old in enumerate(olds):
            found = store.first_lsn_from(first_time[old])
            lsn = max(at if found is None else found, prev + 1)
            lsn = min(lsn, at - (n - 1 - i))  # room for the versions after it
            new.append(lsn)
            prev = lsn
        for i in range(n - 2, -1, -1):  # lowering one may have met its predecessor
            if new[i] >= new[i + 1]:
                new[i] = new[i + 1] - 1
        if n and new[0] < 1:
            raise ValueError(f"{n} versions do not fit below LSN {at}")
        to = dict(zip(olds, new, strict=True))
        moved = [(to[e[0]], *e[1:]) for e in chain]
        if floor is not None and n:
            # Readable from the floor on: the state before the first retained version
            # too where the floor is below it (its undo gives that state).
            floor = new[0] - 1 if floor < olds[0] else new[0]
        elif floor is not None:
            floor = at
        out.append((dbi, key, value, expire, moved, floor))
    return out


def install(store: StoreCore, items: Any) -> None:
    """Apply an IMPORT op: put each item's key, value, expiry, chain and floor in, and
    name the key in the version index (store.windex) at each of its versions' LSNs,
    which are committed LSNs (`renumber`'s `at`), so TS.DIFF finds it there."""
    added: dict[int, list[tuple[int, bytes]]] = {}
    lsns = store.index_lsns
    skip = len(lsns) - len(store.index_keys)
    for item in items:
        dbi, key = item[0], item[1]
        db = store.dbs[dbi]
        _drop(store, db, key)
        load_item(db, item)
        _count(store, db, key, 1)
        for lsn in {e[0] for e in item[4]}:
            i = bisect_left(lsns, lsn)
            if i < len(lsns) and lsns[i] == lsn and i >= skip:
                added.setdefault(i - skip, []).append((dbi, key))
    keys = store.index_keys
    for i, pairs in added.items():
        e = keys[i]
        keys[i] = (*(((0, e),) if type(e) is bytes else e), *pairs)


def forget(store: StoreCore, dbi: int, keys: Any) -> None:
    """Apply a FORGET op: the keys leave `dbi` with their history."""
    db = store.dbs[dbi]
    for key in keys:
        _drop(store, db, key)


def _drop(store: StoreCore, db: Database, key: bytes) -> None:
    """Take `key` out of `db` with its history, uncounted."""
    _count(store, db, key, -1)
    db.data.pop(key, None)
    db.expires.pop(key, None)
    db.floors.pop(key, None)
    db.sizes.pop(key, None)
    chains = db.chains
    v = dict.pop(chains, key, None)
    if type(v) is int and v < 0:
        chains.spill.entries(-v, free=True)
    ref = chains.cold.pop(key, None)
    if ref is not None:
        chains.spill.entries(ref, free=True)


def _count(store: StoreCore, db: Database, key: bytes, sign: int) -> None:
    """Count `key`'s value (the dataset's size) and history (`Store.mem`) in (`sign`
    1) or out (-1), as `Store.history_recount` and `dataset.recount` would count them."""
    value = db.data.get(key)
    if value is not None:
        db.used += sign * weigh(db, key, value)
    chains = db.chains
    v = dict.get(chains, key)
    mem = store.mem
    main = type(db.ident) is int
    if type(v) is int and v >= 0:
        mem.add(db.ident, sign * PACKED_BYTES, sign)
        if main:
            mem.main_packed += sign
    elif type(v) is list:
        mem.add(db.ident, sign * chain_bytes(v), sign * len(v))
    ref = -v if type(v) is int and v < 0 else chains.cold.get(key)
    if ref is not None:
        cold = chains.spill.entries(ref)
        mem.add(db.ident, sign * chain_bytes(cold), sign * len(cold))
        mem.cold_bytes += sign * chain_bytes(cold)
        mem.cold_versions += sign * len(cold)
