"""Branches: copy-on-write overlays of the main line or of another branch.

A branch forks its parent (the main line, or a branch) at an LSN. Each of its
databases reads its own writes first, then the parent as it was at the fork (which
reads its own, then its parent's, ...); creating one copies nothing, and it holds only
the keys it changed (a key is copied in the first time the branch changes it). Branch
writes take LSNs from the one server-wide sequence and are recorded with the database
named (branch, number), so replay puts them back on the branch. Branches pin history
at their fork point (retention keeps every version newer than the oldest fork).
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator, MutableMapping
from typing import Any

from store import database as _database
from store.accounting import payload_bytes
from store.asof import undo_versions, value_as_of
from store.chains import V_CMD, V_LSN, V_META, V_TIME, V_UNDO, _entry_lsn, compact_undo, undo_ops
from store.core import StoreCore
from store.database import Database
from store.records import WriteMeta
from store.values import copy_value

_MISSING = object()


class Overlay(MutableMapping[bytes, Any]):
    """A mapping of a branch's own entries over the main line's as of the fork."""

    __slots__ = ("base", "deleted", "hidden", "own")

    def __init__(self, base: Any) -> None:
        self.own: dict[bytes, Any] = {}
        self.deleted: set[bytes] = set()
        self.base: _BaseAt = base  # key -> value at the fork or None
        # How many of the keys in own or deleted the base has: len() and bool() are
        # then O(1) (a key never leaves own-or-deleted once in it).
        self.hidden = 0

    def _shadow(self, key: bytes) -> None:
        """`key` is about to enter own or deleted."""
        if key not in self.own and key not in self.deleted and self.base(key) is not None:
            self.hidden += 1

    def recount(self) -> None:
        """Recompute `hidden` (after own and deleted were loaded whole)."""
        self.hidden = sum(1 for k in {*self.own, *self.deleted} if self.base(k) is not None)

    def __getitem__(self, key: bytes) -> Any:
        v = self.get(key, _MISSING)
        if v is _MISSING:
            raise KeyError(key)
        return v

    def get(self, key: bytes, default: Any = None) -> Any:
        v = self.own.get(key, _MISSING)
        if v is not _MISSING:
            return v
        if key in self.deleted:
            return default
        b = self.base(key)
        return default if b is None else b

    def __contains__(self, key: object) -> bool:
        return isinstance(key, bytes) and self.get(key) is not None

    def __setitem__(self, key: bytes, value: Any) -> None:
        self._shadow(key)
        self.own[key] = value
        self.deleted.discard(key)

    def __delitem__(self, key: bytes) -> None:
        if key not in self:
            raise KeyError(key)
        self._shadow(key)
        self.own.pop(key, None)
        self.deleted.add(key)

    def pop(self, key: bytes, *default: Any) -> Any:
        v = self.get(key, _MISSING)
        if v is _MISSING:
            if default:
                return default[0]
            raise KeyError(key)
        self._shadow(key)
        self.own.pop(key, None)
        self.deleted.add(key)
        return v

    def __iter__(self) -> Iterator[bytes]:
        yield from list(self.own)
        for key in self.base.live_keys():
            if key not in self.own and key not in self.deleted:
                yield key

    def __len__(self) -> int:
        return len(self.own) + self.base.live_count() - self.hidden

    def __bool__(self) -> bool:
        return bool(self.own) or self.base.live_count() > self.hidden


class _BaseAt:
    """The parent's values (or expiries) as of the fork, computed on first use."""

    def __init__(self, store: StoreCore, source: Any, fork_lsn: int, expiries: bool) -> None:
        self.store = store
        self.source = source  # the parent database: a number (main line) or (branch, number)
        self.fork_lsn = fork_lsn
        self.expiries = expiries
        self.cache: dict[bytes, tuple[Any, int | None]] = {}
        self.count: int | None = None
        self.scans = 0  # walks of the whole main line (tests check they stay rare)

    def state(self, key: bytes) -> tuple[Any, int | None]:
        st = self.cache.get(key)
        if st is None:
            st = value_as_of(self.store, self.source, key, self.fork_lsn)
            self.cache[key] = st
        return st

    def __call__(self, key: bytes) -> Any:
        value, expire = self.state(key)
        return (
            expire if self.expiries and value is not None else value if not self.expiries else None
        )

    def live_count(self) -> int:
        """How many keys the base has: counted once (the base does not change)."""
        if self.count is None:
            self.count = sum(1 for _ in self.live_keys())
        return self.count

    def candidates(self) -> dict[bytes, None]:
        """Every key the parent may have held at the fork (a superset)."""
        if self.fork_lsn == 0:
            return {}  # a branch of the empty state (FROM VERSION 0) has no base keys
        parent = self.store.db_of(self.source)
        if isinstance(parent, BranchDatabase):
            return parent.candidate_keys()
        return dict.fromkeys([*parent.data, *parent.chains])

    def live_keys(self) -> Iterator[bytes]:
        self.scans += 1
        for key in self.candidates():
            if self.state(key)[0] is not None:
                if not self.expiries or self.state(key)[1] is not None:
                    yield key


class BranchDatabase(Database):
    """One numbered database of a branch."""

    def __init__(
        self, store: StoreCore, branch: bytes, index: int, fork_lsn: int, parent: bytes | None
    ) -> None:
        super().__init__(index, store._expired)
        self.chains.time_of = store.time_of
        self.ident = (branch, index)
        self.overlay = True
        self.fork_lsn = fork_lsn
        self.store = store
        self.parent_ident: Any = index if parent is None else (parent, index)
        self.base_values = _BaseAt(store, self.parent_ident, fork_lsn, False)
        self.base_expires = _BaseAt(store, self.parent_ident, fork_lsn, True)
        self.odata = Overlay(self.base_values)
        self.oexpires = Overlay(self.base_expires)
        # Every reader and apply_op sees the overlays as the database's mappings.
        self.data = self.odata
        self.expires = self.oexpires

    def get(self, key: bytes) -> Any:
        """As `Database.get`, without asking the overlay whether it has expiries
        (that counts the main line's keys at the fork)."""
        v: Any = self.odata.get(key)
        if v is None:
            return v
        self.atime[key] = _database.LRU_CLOCK.now
        return self.unexpired(key, v, self.oexpires.get(key))

    def peek(self, key: bytes) -> Any:
        v: Any = self.odata.get(key)
        return v if v is None else self.unexpired(key, v, self.oexpires.get(key))

    def own(self, key: bytes) -> None:
        data = self.odata
        if key in data.own or key in data.deleted:
            return
        value, expire = self.base_values.state(key)
        if value is not None:
            data[key] = copy_value(value)
            if expire is not None:
                self.expires[key] = expire

    def changed(self) -> set[bytes]:
        """Keys this branch wrote (set or deleted)."""
        return set(self.chains)

    def candidate_keys(self) -> dict[bytes, None]:
        """Every key this database may hold (a superset: its own, and its parent's)."""
        keys = self.base_values.candidates()
        keys.update(dict.fromkeys([*self.odata.own, *self.chains]))
        return keys

    def as_of(self, key: bytes, lsn: int) -> tuple[Any, int | None]:
        """The key on this branch just after `lsn`."""
        chain = self.chains.get(key)
        if not chain or lsn < chain[0][V_LSN]:
            return value_as_of(self.store, self.parent_ident, key, min(lsn, self.fork_lsn))
        newer = chain[bisect_right(chain, lsn, key=_entry_lsn) :]
        return undo_versions(key, self.data.get(key), self.expires.get(key), reversed(newer))


class Branch:
    def __init__(
        self,
        store: StoreCore,
        name: bytes,
        fork_lsn: int,
        created_ms: int,
        parent: bytes | None = None,
    ) -> None:
        self.name = name
        self.fork_lsn = fork_lsn
        self.created_ms = created_ms
        self.parent = parent  # None: the main line
        self.dbs = [BranchDatabase(store, name, i, fork_lsn, parent) for i in range(len(store.dbs))]

    def latest_lsn(self) -> int:
        latest = self.fork_lsn
        for db in self.dbs:
            for chain in db.chains.values():
                if chain:
                    latest = max(latest, chain[-1][V_LSN])
        return latest

    def changed_keys(self) -> int:
        return sum(len(db.chains) for db in self.dbs)


class Branches(dict[bytes, Branch]):
    """A store's branches by name: created and dropped by database-level ops
    ("branch", name, fork_lsn[, parent]) and ("dropbranch", name), and kept in
    checkpoints. A branch of a branch names its parent; one of the main line has none
    (records written before branches of branches existed have no fourth field)."""

    def __init__(self, store: StoreCore) -> None:
        super().__init__()
        self.store = store

    def create(
        self, name: bytes, fork_lsn: int, created_ms: int, parent: bytes | None = None
    ) -> None:
        self[name] = Branch(self.store, name, fork_lsn, created_ms, parent)

    def lineage(self, name: bytes) -> list[Branch]:
        """The branch, then its parent, ... up to the one forked from the main line."""
        out = [self[name]]
        while out[-1].parent is not None:
            out.append(self[out[-1].parent])
        return out

    def children(self, name: bytes) -> list[bytes]:
        return sorted(n for n, b in self.items() if b.parent == name)

    def descendants(self, name: bytes) -> list[bytes]:
        """Every branch forked (directly or not) from `name`, deepest first."""
        out: list[bytes] = []
        for child in self.children(name):
            out += self.descendants(child)
            out.append(child)
        return out

    def data_bytes(self) -> int:
        """Estimated bytes of the values branches hold of their own (the keys they
        changed), in O(those keys)."""
        n = 0
        for b in self.values():
            for db in b.dbs:
                n += sum(map(payload_bytes, db.odata.own.values()))
        return n

    def save(self) -> Any:
        out = []
        for b in self.values():
            dbs = []
            for db in b.dbs:
                data, expires = db.odata, db.oexpires
                chains = {
                    k: [
                        (
                            e[V_LSN],
                            e[V_TIME],
                            e[V_CMD],
                            undo_ops(e[V_UNDO]),  # the ops, as saved before compact undos
                            None if e[V_META] is None else tuple(e[V_META]),
                        )
                        for e in c
                    ]
                    for k, c in db.chains.items()
                }
                dbs.append(
                    (data.own, list(data.deleted), expires.own, list(expires.deleted), chains)
                )
            # A branch of the main line is saved as before branches of branches existed.
            parent = () if b.parent is None else (b.parent,)
            out.append((b.name, b.fork_lsn, b.created_ms, dbs, *parent))
        return out

    def load(self, saved: Any) -> None:
        self.clear()
        for name, fork_lsn, created_ms, dbs, *parent in saved:
            b = Branch(self.store, name, fork_lsn, created_ms, *parent)
            for db, (own, deleted, exp_own, exp_deleted, chains) in zip(b.dbs, dbs, strict=False):
                data, expires = db.odata, db.oexpires
                data.own = dict(own)
                data.deleted = set(deleted)
                expires.own = dict(exp_own)
                expires.deleted = set(exp_deleted)
                data.recount()
                expires.recount()
                for k, c in chains.items():
                    db.chains[k] = [
                        (
                            lsn,
                            t,
                            cmd,
                            compact_undo(undo),
                            None if m is None else WriteMeta(*m),
                            None,
                        )
                        for lsn, t, cmd, undo, m in c
                    ]
            self[name] = b


__all__ = ["Branch", "BranchDatabase", "Branches", "Overlay", "_entry_lsn"]
