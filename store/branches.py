"""Branches: copy-on-write overlays of the main line.

A branch forks the main line at an LSN. Each of its databases reads its own
writes first, then the main line as it was at the fork; creating one copies
nothing, and it holds only the keys it changed (a key is copied in the first time
the branch changes it). Branch writes take LSNs from the one server-wide sequence
and are recorded with the database named (branch, number), so replay puts them
back on the branch. Branches pin the main line's history at their fork point.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Iterator, MutableMapping
from typing import TYPE_CHECKING, Any

from store.asof import undo_versions
from store.chains import VersionEntry, _entry_lsn
from store.database import Database
from store.records import WriteMeta
from store.values import copy_value

if TYPE_CHECKING:
    from store.keyspace import Store

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
    """The main line's values (or expiries) as of the fork, computed on first use."""

    def __init__(self, store: Store, dbi: int, fork_lsn: int, expiries: bool) -> None:
        self.store = store
        self.dbi = dbi
        self.fork_lsn = fork_lsn
        self.expiries = expiries
        self.cache: dict[bytes, tuple[Any, int | None]] = {}
        self.count: int | None = None
        self.scans = 0  # walks of the whole main line (tests check they stay rare)

    def state(self, key: bytes) -> tuple[Any, int | None]:
        st = self.cache.get(key)
        if st is None:
            st = self.store.value_as_of(self.dbi, key, self.fork_lsn)
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

    def live_keys(self) -> Iterator[bytes]:
        self.scans += 1
        main = self.store.dbs[self.dbi]
        for key in dict.fromkeys([*main.data, *main.chains]):
            if self.state(key)[0] is not None:
                if not self.expiries or self.state(key)[1] is not None:
                    yield key


class BranchDatabase(Database):
    """One numbered database of a branch."""

    def __init__(self, store: Store, branch: bytes, index: int, fork_lsn: int) -> None:
        super().__init__(index, store._expired)
        self.chains.time_of = store.time_of
        self.ident = (branch, index)
        self.overlay = True
        self.fork_lsn = fork_lsn
        self.store = store
        self.base_values = _BaseAt(store, index, fork_lsn, False)
        self.base_expires = _BaseAt(store, index, fork_lsn, True)
        self.odata = Overlay(self.base_values)
        self.oexpires = Overlay(self.base_expires)
        # Every reader and apply_op sees the overlays as the database's mappings.
        self.data = self.odata
        self.expires = self.oexpires

    def get(self, key: bytes) -> Any:
        """As `Database.get`, without asking the overlay whether it has expiries
        (that counts the main line's keys at the fork)."""
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

    def as_of(self, key: bytes, lsn: int) -> tuple[Any, int | None]:
        """The key on this branch just after `lsn`."""
        chain = self.chains.get(key)
        if not chain or lsn < chain[0].lsn:
            return self.store.value_as_of(self.index, key, min(lsn, self.fork_lsn))
        newer = chain[bisect_right(chain, lsn, key=_entry_lsn) :]
        return undo_versions(key, self.data.get(key), self.expires.get(key), reversed(newer))


class Branch:
    def __init__(self, store: Store, name: bytes, fork_lsn: int, created_ms: int) -> None:
        self.name = name
        self.fork_lsn = fork_lsn
        self.created_ms = created_ms
        self.dbs = [BranchDatabase(store, name, i, fork_lsn) for i in range(len(store.dbs))]

    def latest_lsn(self) -> int:
        latest = self.fork_lsn
        for db in self.dbs:
            for chain in db.chains.values():
                if chain:
                    latest = max(latest, chain[-1].lsn)
        return latest

    def changed_keys(self) -> int:
        return sum(len(db.chains) for db in self.dbs)


class Branches(dict[bytes, Branch]):
    """A store's branches by name: created and dropped by database-level ops
    ("branch", name, fork_lsn) and ("dropbranch", name), and kept in checkpoints."""

    def __init__(self, store: Store) -> None:
        super().__init__()
        self.store = store

    def create(self, name: bytes, fork_lsn: int, created_ms: int) -> None:
        self[name] = Branch(self.store, name, fork_lsn, created_ms)

    def save(self) -> Any:
        out = []
        for b in self.values():
            dbs = []
            for db in b.dbs:
                data, expires = db.odata, db.oexpires
                chains = {
                    k: [
                        (e.lsn, e.time_ms, e.cmd, e.undo, None if e.meta is None else tuple(e.meta))
                        for e in c
                    ]
                    for k, c in db.chains.items()
                }
                dbs.append(
                    (data.own, list(data.deleted), expires.own, list(expires.deleted), chains)
                )
            out.append((b.name, b.fork_lsn, b.created_ms, dbs))
        return out

    def load(self, saved: Any) -> None:
        self.clear()
        for name, fork_lsn, created_ms, dbs in saved:
            b = Branch(self.store, name, fork_lsn, created_ms)
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
                        VersionEntry(lsn, t, cmd, undo, None if m is None else WriteMeta(*m))
                        for lsn, t, cmd, undo, m in c
                    ]
            self[name] = b


__all__ = ["Branch", "BranchDatabase", "Branches", "Overlay", "_entry_lsn"]
