"""The commit path's common cases in a straight line (issue 13: fewer instructions
per write).

`version_one` appends the version entry of one key write when nothing unusual is in
the way (no tables, a main-line database, `versions:N` or `all` retention, a chain
that already holds a list, no full copy due); `Store._version` does everything else
and calls it first. `set_string` is `Store.apply(db, key, (SET, value, None))` for a
bytes value written over a string or nothing, on a database that is not a branch's.
Both store and count exactly what the general code does (tests/test_commitpath.py
compares them, field by field, with it).

Compiled by mypyc with the store (tools/compiled.py): the module-level callables are
`Final`, so the compiled code keeps them in C statics instead of looking them up in
the module's dict, and the typed locals (`list`, `dict`) make their operations C calls.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

from store.accounting import COMPACT_STRING_BYTES, REPLACED_STRING_BYTES, entry_bytes
from store.chains import StoredUndo, VersionEntry
from store.dataset import STRING_KEY_BYTES
from store.ops import CREATED, RESTORE, SET, Undo
from store.records import WriteMeta

if TYPE_CHECKING:
    from store.database import Database
    from store.keyspace import Store

_new_tuple: Final = tuple.__new__
_dict_get: Final = dict.get
_VERSION_ENTRY: Final = VersionEntry


def version_one(
    store: Store,
    dbi: Any,
    key: bytes,
    undo: Undo,
    cmd: str,
    lsn: Any,
    t: Any,
    meta: WriteMeta | None,
) -> bool:
    """Append the version entry of `key`'s write (and trim its chain) as
    `Store._version` does, when it is the common case; False, having done nothing,
    when it is not."""
    if store.tables or type(dbi) is not int:
        return False
    keep = store.history
    kind = keep.kind
    if kind != "versions" and kind != "all":
        return False
    db: Database = store.dbs[dbi]
    chain = _dict_get(db.chains, key)
    if type(chain) is not list:  # a new key, or a packed first version
        return False
    versions: list[VersionEntry] = chain
    every = store.snapshot_every
    n = len(versions)
    if n % every == every - 1:  # a full copy may be due
        return False
    size = 0
    stored: StoredUndo = undo
    if len(undo) == 1:
        # compact_undo and entry_bytes' common case (a replaced string) inline: no
        # call per write.
        u = undo[0]
        if len(u) == 3 and type(u[1]) is bytes and u[0] == RESTORE:
            old: bytes = u[1]
            if u[2] is None:
                stored = old
                size = COMPACT_STRING_BYTES + len(old)
            elif type(u[2]) is int:
                size = REPLACED_STRING_BYTES + len(old)
    entry: VersionEntry = _new_tuple(_VERSION_ENTRY, (lsn, t, cmd, stored, meta, None))
    versions.append(entry)
    if not size:
        size = entry_bytes(entry)
    mem = store.mem
    mem.main_bytes += size
    mem.main_versions += 1
    if kind == "versions" and n >= 2 * keep.limit:  # trim_versions' first test, inline
        store.trim_versions(db, key, versions, keep.limit)
    return True


def set_string(store: Store, db: Database, key: bytes, value: bytes) -> None:
    """`store.apply(db, key, (SET, value, None))` for a bytes `value`: the same op,
    undo, expiry change and dataset size, without the op table's call."""
    data = db.data
    expires = db.expires
    if db.overlay or type(data) is not dict or type(expires) is not dict:
        store.apply(db, key, (SET, value, None))
        return
    d: dict[bytes, Any] = data
    old = d.get(key)
    if old is not None and type(old) is not bytes:  # a collection's size is sampled
        store.apply(db, key, (SET, value, None))
        return
    e: dict[bytes, int] = expires
    oldexp = e.get(key) if e else None
    d[key] = value
    if oldexp is not None:
        del e[key]
    if old is None:
        db.used += STRING_KEY_BYTES + len(key) + len(value)
        undo: Undo = CREATED if oldexp is None else ((RESTORE, None, oldexp),)
    else:
        was: bytes = old
        db.used += len(value) - len(was)
        undo = ((RESTORE, was, oldexp),)
    store.pending.append((db.ident, key, (SET, value, None), undo, store.cmd))
