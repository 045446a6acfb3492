"""A store's whole state as plain Python objects, and back (checkpoint images).

`export_image` gives a header map and then one item per key, as tuples, lists,
bytes, numbers and the store's value types; `import_image` fills an empty store
from them. Turning them into bytes (msgpack, zstd, the object's framing) is the
flusher's business (`flusher.checkpoint`); nothing here knows of it.

The header: lsn, last_time_ms, databases, index_lsns and index_times (the time
index as machine arrays), index_keys and index_from (the version index,
`store.windex`), snapshots, extra (other parts' state, by name) and
cmd_names (the command codes packed versions refer to).

Items, one per key, 6 fields: (db, key, value or None, expire or None, chain,
floor or None). The chain is either (LSN, command) for a key whose one version
created it, or a list of 6-field entries (lsn, time_ms, cmd, undo, meta, snap); the
undo is always its ops (an entry that keeps a replaced string's bytes alone in memory,
`store.chains.compact_undo`, is written as ((RESTORE, bytes, None),) and read back
compact).
The common key, a string written once with no expiry, goes instead into batch
items of parallel arrays, 5 fields: (BATCH_TAG, db, keys, values, packed
versions); they hold plain values only. The next commonest, a string with no expiry
and no floor whose versions are all plain string writes (no metadata, no full copy,
each undo "the key did not exist" or a replaced string's bytes: a key overwritten by
SETs), goes into string-chain items, 9 fields: (STRINGS_TAG, db, keys, values, counts,
lsns, times, codes, undos): key i has the next counts[i] versions of the flat arrays
lsns, times, codes (command codes, as packed versions') and undos (the replaced bytes,
or None for a creation). Plain values only, and loaded with C-level passes.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from itertools import repeat
from typing import TYPE_CHECKING, Any

from store import windex
from store.chains import (
    V_CMD,
    V_LSN,
    V_META,
    V_SNAP,
    V_TIME,
    V_UNDO,
    VersionEntry,
    _cmd_codes,
    cmd_names,
    compact_undo,
    translate_codes,
    undo_ops,
)
from store.core import StoreCore
from store.ops import CREATED
from store.policy import Snapshot
from store.records import WriteMeta

if TYPE_CHECKING:
    from store.database import Database

BATCH = 4096
"""Keys per batch item."""
BATCH_TAG = "b"
STRINGS_TAG = "s"
PLAIN_TAGS = (BATCH_TAG, STRINGS_TAG)  # items of plain values only
_INT = {int}
_BYTES = {bytes}


def export_image(store: StoreCore) -> Iterator[Any]:
    """The header map, then every item, of the store as it is now."""
    yield {
        "lsn": store.lsn,
        "last_time_ms": store.last_time_ms,
        "databases": len(store.dbs),
        "index_lsns": store.index_lsns.tobytes(),
        "index_times": store.index_times.tobytes(),
        "index_keys": windex.export(store.index_keys),
        "index_from": store.index_from,
        # A seal without META is saved as before snapshots had metadata.
        "snapshots": [tuple(snap) if snap.meta else snap[:4] for snap in store.snapshots.values()],
        "extra": store.checkpoint_extra(),
        "cmd_names": cmd_names(),
    }
    for db in store.dbs:
        yield from _db_items(db)


def _db_items(db: Database) -> Iterator[Any]:
    data, expires, chains, floors = db.data, db.expires, db.chains, db.floors
    index = db.index
    # Batch items load with two dict updates at restart. A slice of keys that is
    # all such keys is checked with C-level set operations, not per key.
    all_keys = list(data)
    all_values = list(data.values())
    all_raw = chains.raw_many(all_keys)
    # A key whose history is frozen, all or in part (store.coldhistory), is read
    # back whole: a string-chain item as any other.
    whole = chains.whole
    for i in range(0, len(all_keys), BATCH):
        ks, vs, ps = all_keys[i : i + BATCH], all_values[i : i + BATCH], all_raw[i : i + BATCH]
        if (
            set(map(type, ps)) == _INT
            and min(ps) >= 0  # not a key whose history is out of memory (store.coldhistory)
            and set(map(type, vs)) == _BYTES
            and (not expires or expires.keys().isdisjoint(ks))
            and (not floors or floors.keys().isdisjoint(ks))
        ):
            yield (BATCH_TAG, index, ks, vs, ps)
            continue
        keys: list[bytes] = []
        values: list[bytes] = []
        packed: list[int] = []
        strings = _Strings()
        for key, value, p in zip(ks, vs, ps, strict=True):
            if type(value) is not bytes or key in expires or key in floors:
                yield key_item(db, key, value, chains.born(key))
            elif type(p) is int and p >= 0:
                keys.append(key)
                values.append(value)
                packed.append(p)
            elif p is None or not strings.add(key, value, whole(key, p)):
                yield key_item(db, key, value, chains.born(key))
        if keys:
            yield (BATCH_TAG, index, keys, values, packed)
        if strings.keys:
            yield strings.item(index)
    for key in chains:
        if key not in data:  # history of a key that no longer exists
            yield key_item(db, key, None, chains.born(key))


class _Strings:
    """A string-chain item being built (see the module's docstring)."""

    def __init__(self) -> None:
        self.keys: list[bytes] = []
        self.values: list[bytes] = []
        self.counts: list[int] = []
        self.lsns: list[int] = []
        self.times: list[int] = []
        self.codes: list[int] = []
        self.undos: list[bytes | None] = []

    def add(self, key: bytes, value: bytes, chain: list[VersionEntry]) -> bool:
        """Take `key` if every version of its `chain` is a plain string write."""
        if not chain:
            return False
        undos: list[bytes | None] = []
        for e in chain:
            if e[V_META] is not None or e[V_SNAP] is not None or e[V_CMD] not in _cmd_codes:
                return False
            undo = e[V_UNDO]
            if isinstance(undo, bytes):
                undos.append(undo)
            elif undo is CREATED or undo == CREATED:  # equal only: read back from pages
                undos.append(None)
            else:
                replaced = compact_undo(undo)  # entries read back keep their ops
                if type(replaced) is not bytes:
                    return False
                undos.append(replaced)
        for e in chain:
            self.lsns.append(e[V_LSN])
            self.times.append(e[V_TIME])
            self.codes.append(_cmd_codes[e[V_CMD]])
        self.undos.extend(undos)
        self.keys.append(key)
        self.values.append(value)
        self.counts.append(len(chain))
        return True

    def item(self, index: int) -> tuple[Any, ...]:
        return (
            STRINGS_TAG,
            index,
            self.keys,
            self.values,
            self.counts,
            self.lsns,
            self.times,
            self.codes,
            self.undos,
        )


def _load_strings(db: Database, item: Any, names: list[str]) -> None:
    """A string-chain item into `db` (`names`: the image's command names by code)."""
    _tag, _dbi, keys, values, counts, lsns, times, codes, undos = item
    db.data.update(zip(keys, values, strict=True))
    cmds = list(map(names.__getitem__, codes))
    undone = [CREATED if u is None else u for u in undos]
    entries: list[VersionEntry] = list(
        zip(lsns, times, cmds, undone, repeat(None), repeat(None), strict=False)
    )
    raw: dict[bytes, Any] = db.chains  # the slots themselves
    p = 0
    for key, c in zip(keys, counts, strict=True):
        raw[key] = entries[p : p + c]
        p += c


def key_item(db: Database, key: bytes, value: Any, born: tuple[int, str] | None) -> Any:
    """The per-key item of `key` (`born`: its packed creation, else None: every entry)."""
    chain: Any = born
    if born is None:
        chain = [
            (
                e[V_LSN],
                e[V_TIME],
                e[V_CMD],
                undo_ops(e[V_UNDO]),  # the ops: the image format is the same as before
                None if e[V_META] is None else tuple(e[V_META]),
                e[V_SNAP],
            )
            for e in db.chains.get(key, ())
        ]
    return (db.index, key, value, db.expires.get(key), chain, db.floors.get(key))


def load_item(db: Database, item: Any) -> None:
    """One per-key item (db, key, value, expire, chain, floor) into `db` (its database)."""
    _dbi, key, value, expire, chain, floor = item
    if value is not None:
        db.data[key] = value
        if expire is not None:
            db.expires[key] = expire
            db.schedule_expiry(key, expire)
    if not chain:
        pass
    elif type(chain[0]) is int:
        # (LSN, command): the key's one version created it (see store.Chains).
        db.chains.add_born(key, *chain)
    else:
        write_meta = WriteMeta
        db.chains[key] = [
            (
                lsn,
                t,
                cmd,
                CREATED if undo == CREATED else compact_undo(undo),
                None if meta is None else write_meta(*meta),
                snap,
            )
            for lsn, t, cmd, undo, meta, snap in chain
        ]
    if floor is not None:
        db.floors[key] = floor
        db.floor_mark = max(db.floor_mark, floor)


def import_image(store: StoreCore, head: dict[str, Any], items: Iterator[Any]) -> int:
    """Fill an empty store from an image's header and items; return its LSN. The
    caller has checked that the store has at least `head["databases"]` databases."""
    store.index_lsns = array("q", head["index_lsns"])
    store.index_times = array("q", head["index_times"])
    if "index_keys" in head:
        store.index_keys = windex.restore(head["index_keys"])
        store.index_from = int(head["index_from"])
        store.reset_index_weight()
    else:  # written before the version index: it starts after this image
        store.index_keys = [()] * len(store.index_lsns)
        store.index_from = int(head["lsn"]) + 1
    dbs = store.dbs
    names: list[str] = list(head.get("cmd_names", ()))
    table = translate_codes(names)
    for item in items:
        if item[0] == BATCH_TAG:
            _tag, dbi, keys, values, packed = item
            db = dbs[dbi]
            db.data.update(zip(keys, values, strict=True))
            db.chains.add_packed(keys, packed, names, table)
            continue
        if item[0] == STRINGS_TAG:
            _load_strings(dbs[item[1]], item, names)
            continue
        load_item(dbs[item[0]], item)
    store.snapshots = {
        name: Snapshot(name, lsn, t, trigger, *rest)
        for name, lsn, t, trigger, *rest in head["snapshots"]
    }
    store.load_checkpoint_extra(head["extra"])
    store.lsn = int(head["lsn"])
    store.last_time_ms = int(head["last_time_ms"])
    return store.lsn
