"""Databases, the history policy and the single commit point.

`Store.apply` mutates through `store.ops` and remembers the undo; `Store.commit`
is the one place that assigns the next LSN, appends one entry per touched key to
its version chain and hands one `UpdateRecord` to the sink. A command (or a whole
MULTI/EXEC block) that changed nothing commits nothing.
"""

from __future__ import annotations

import contextlib
import heapq
import itertools
import time
from array import array
from bisect import bisect_right
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from store import image
from store.ops import CREATED, DEL, RESTORE, SET, Op, Undo, apply_op
from store.values import copy_value

_time = time.time


def now_ms() -> int:
    return int(_time() * 1000)


class WriteMeta(NamedTuple):
    """Who wrote, and why: attached to a connection's writes and kept in history."""

    client_id: int
    author: bytes | None = None
    message: bytes | None = None


class UpdateRecord(NamedTuple):
    """One committed change: what the flusher persists and replay applies."""

    lsn: int
    time_ms: int
    ops: tuple[tuple[Any, bytes | None, Op], ...]  # (database, key, op)
    cmds: tuple[str, ...]  # the command behind each op
    meta: WriteMeta | None


class VersionEntry(NamedTuple):
    lsn: int
    time_ms: int
    cmd: str
    undo: Undo
    meta: WriteMeta | None
    # Every SNAPSHOT-EVERY versions a collection keeps a copy of its state after this
    # version, so an as-of read replays at most that many undos.
    snap: tuple[Any, int | None] | None = None

    @property
    def created(self) -> bool:
        """This version brought the key into existence (nothing older to read)."""
        return len(self.undo) == 1 and self.undo[0][0] == RESTORE and self.undo[0][1] is None


# A key whose only version created it (no metadata) keeps that version packed in
# one int: its LSN shifted past a small code naming the command. The commit time is
# the time index's; the undo is CREATED. Most keys are written once, and this saves
# a list, a VersionEntry and a time per key (most of the history's memory).
_CMD_BITS = 10
_CMD_MASK = (1 << _CMD_BITS) - 1
_cmd_names: list[str] = []
_cmd_codes: dict[str, int] = {}
_dict_get = dict.get


def cmd_code(cmd: str) -> int | None:
    """The packing code of a command name (None once the code space is full)."""
    code = _cmd_codes.get(cmd)
    if code is None and len(_cmd_names) <= _CMD_MASK:
        code = _cmd_codes[cmd] = len(_cmd_names)
        _cmd_names.append(cmd)
    return code


def cmd_names() -> list[str]:
    """The command names packed versions refer to, by code (checkpoints keep them)."""
    return list(_cmd_names)


def translate_codes(names: list[str]) -> list[int | None] | None:
    """This process's codes for another's command `names` (a checkpoint's): None
    when they are the same codes, so packed versions can be taken as they are."""
    table = [cmd_code(name) for name in names]
    return None if all(c == i for i, c in enumerate(table)) else table


class Chains(dict[bytes, Any]):
    """key -> version chain (oldest first). Reads (`get`, `[]`, `items`, `values`)
    always see lists of `VersionEntry`; a packed first version is unpacked on the
    way (and stays packed). Only the commit point writes packed entries."""

    __slots__ = ("time_of",)

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.time_of: Callable[[int], int] = _no_time

    def born(self, key: bytes) -> tuple[int, str] | None:
        """(LSN, command) of a key whose chain is one packed creation, else None."""
        v = self.packed(key)
        return None if v is None else (v >> _CMD_BITS, _cmd_names[v & _CMD_MASK])

    def set_born(self, key: bytes, lsn: int, cmd: str) -> bool:
        """Record a key's creating version packed; False where it cannot be."""
        code = cmd_code(cmd)
        if code is None:
            return False
        self[key] = lsn << _CMD_BITS | code
        return True

    def add_born(self, key: bytes, lsn: int, cmd: str) -> None:
        """Record a key's creating version (committed earlier: its time is indexed),
        packed where it can be."""
        if not self.set_born(key, lsn, cmd):
            self[key] = [self._created(lsn, cmd)]

    def _created(self, lsn: int, cmd: str) -> VersionEntry:
        return VersionEntry(lsn, self.time_of(lsn), cmd, CREATED, None)

    def packed(self, key: bytes) -> int | None:
        """The packed creating version of `key`, if that is all its chain is."""
        v = _dict_get(self, key)
        return v if type(v) is int else None

    def raw_many(self, keys: list[bytes]) -> list[Any]:
        """What the chains of `keys` hold as stored: packed ints, lists or None."""
        return list(map(_dict_get.__get__(self), keys))

    def add_packed(
        self, keys: Iterable[bytes], packed: Iterable[int], names: list[str], table: Any
    ) -> None:
        """Take packed versions written by a process whose command codes were `names`;
        `table` is `translate_codes(names)` (None: the same codes, no work per key)."""
        if table is None:
            self.update(zip(keys, packed, strict=True))
            return
        for key, v in zip(keys, packed, strict=True):
            self.add_born(key, v >> _CMD_BITS, names[v & _CMD_MASK])

    def unpack(self, v: Any) -> list[VersionEntry]:
        if type(v) is not int:
            return v  # type: ignore[no-any-return]
        return [self._created(v >> _CMD_BITS, _cmd_names[v & _CMD_MASK])]

    def get(self, key: bytes, default: Any = None) -> Any:
        v = _dict_get(self, key, default)
        return self.unpack(v) if type(v) is int else v

    def __getitem__(self, key: bytes) -> list[VersionEntry]:
        return self.unpack(dict.__getitem__(self, key))

    def values(self) -> list[list[VersionEntry]]:  # type: ignore[override]
        return [self.unpack(v) for v in dict.values(self)]

    def items(self) -> list[tuple[bytes, list[VersionEntry]]]:  # type: ignore[override]
        return [(k, self.unpack(v)) for k, v in dict.items(self)]


def _no_time(lsn: int) -> int:
    return 0


class LsnMismatch(Exception):
    """A replayed record's LSN is not the next one."""

    def __init__(self, got: int, expected: int) -> None:
        self.got = got
        self.expected = expected
        super().__init__(f"record LSN {got} where {expected} was expected")


class PrunedError(Exception):
    """A version that retention has removed."""

    def __init__(self, lsn: int, key: bytes) -> None:
        self.lsn = lsn
        self.key = key
        super().__init__(
            f"PRUNED version {lsn} of {key.decode('utf-8', 'replace')} is no longer retained"
        )


class Snapshot(NamedTuple):
    name: bytes
    lsn: int
    time_ms: int
    trigger: bytes


class RecordSink(Protocol):
    def append(self, record: UpdateRecord) -> None: ...


class CountingSink:
    """The sink until records are persisted: counts what it is given."""

    def __init__(self) -> None:
        self.records = 0
        self.ops = 0
        self.last_lsn = 0

    def append(self, record: UpdateRecord) -> None:
        self.records += 1
        self.ops += len(record.ops)
        self.last_lsn = record.lsn


@dataclass(frozen=True)
class HistoryPolicy:
    """How much of each key's version chain stays in memory."""

    kind: str = "versions"  # "all" | "versions" | "ms"
    limit: int = 64

    @classmethod
    def parse(cls, text: str) -> HistoryPolicy:
        if text == "all":
            return cls("all", 0)
        kind, _, n = text.partition(":")
        if kind in ("versions", "ms") and n.isdigit() and int(n) > 0:
            return cls(kind, int(n))
        raise ValueError(f"invalid history policy {text!r}: use all, versions:N or ms:N")

    def __str__(self) -> str:
        return "all" if self.kind == "all" else f"{self.kind}:{self.limit}"


class TablePolicy(NamedTuple):
    """A table's durability, history retention and full-copy frequency."""

    durability: str  # "async" | "sync"
    retain: HistoryPolicy
    snapshot_every: int


class Database:
    """One numbered database: values, absolute expiry times and version chains."""

    __slots__ = (
        "chains",
        "data",
        "expires",
        "floors",
        "frozen_ms",
        "heap",
        "ident",
        "index",
        "on_expire",
        "overlay",
    )

    def __init__(
        self, index: int, on_expire: Callable[[Database, bytes], None] | None = None
    ) -> None:
        self.index = index
        # How records name this database: its number, or (branch, number) on a branch.
        self.ident: Any = index
        self.overlay = False  # a branch database: copy a key in before changing it
        self.on_expire = on_expire
        self.data: dict[bytes, Any] = {}
        self.expires: dict[bytes, int] = {}
        self.chains = Chains()
        self.heap: list[tuple[int, bytes]] = []  # (expire_ms, key) for active expiry
        # key -> LSN of the newest version retention dropped: older states are gone.
        self.floors: dict[bytes, int] = {}
        # A historical view reads with the clock stopped at its point in time.
        self.frozen_ms: int | None = None

    def get(self, key: bytes) -> Any:
        """The live value, or None; an expired key is removed on the way (lazy expiry)."""
        v = self.data.get(key)
        if v is not None and self.expires:
            at = self.expires.get(key)
            if at is not None and at <= (self.frozen_ms or now_ms()):
                if self.frozen_ms is not None:
                    return None
                self.expire_now(key)
                return None
        return v

    def __contains__(self, key: bytes) -> bool:
        return self.get(key) is not None

    def __len__(self) -> int:
        return len(self.data)

    def keys(self) -> Iterator[bytes]:
        """Live keys (expired ones are skipped, not removed)."""
        if not self.expires:
            return iter(list(self.data))
        t = self.frozen_ms or now_ms()
        exp = self.expires
        return iter([k for k in self.data if exp.get(k, t + 1) > t])

    def ttl_ms(self, key: bytes) -> int | None:
        return self.expires.get(key)

    def own(self, key: bytes) -> None:
        """Make `key` this database's own before it changes (branches copy on write)."""

    def expire_now(self, key: bytes) -> None:
        """Remove a key whose time has come. Inside a store this is a versioned
        deletion (as Redis propagates a DEL), so history shows when it expired."""
        if self.on_expire is not None:
            self.on_expire(self, key)
        else:
            self.data.pop(key, None)
            self.expires.pop(key, None)

    def schedule_expiry(self, key: bytes, at: int) -> None:
        heapq.heappush(self.heap, (at, key))

    def active_expire(self, budget: int = 200) -> int:
        """Remove up to `budget` keys whose time has come; return how many."""
        heap = self.heap
        t = now_ms()
        n = 0
        while heap and heap[0][0] <= t and n < budget:
            at, key = heapq.heappop(heap)
            if self.expires.get(key) == at:
                self.expire_now(key)
                n += 1
        if len(heap) > 4 * len(self.expires) + 1024:
            self.heap = [(at, k) for k, at in self.expires.items()]
            heapq.heapify(self.heap)
        return n


TouchCallback = Callable[[int, bytes], None]
DbOpHandler = Callable[[int, Op, int, int], None]


# Called with every new Store (branches register their ops and checkpoint state).
STORE_INIT_HOOKS: list[Callable[[Store], None]] = []


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
        for u in entry.undo:
            apply_op(scratch, key, u)
    return scratch.data.get(key), scratch.expires.get(key)


def _entry_lsn(e: VersionEntry) -> int:
    return e.lsn


class Store:
    """The versioned keyspace and its single commit point."""

    def __init__(
        self,
        databases: int = 16,
        history: HistoryPolicy | None = None,
        sink: RecordSink | None = None,
    ) -> None:
        self.dbs = [Database(i, self._expired) for i in range(databases)]
        for db in self.dbs:
            db.chains.time_of = self.time_of
        self.expired_keys = 0
        self.history = history or HistoryPolicy()
        self.sink: RecordSink = sink or CountingSink()
        self.lsn = 0
        self.last_time_ms = 0
        self.cmd = ""  # the command being executed, named in its version entries
        self.pending: list[tuple[Any, bytes | None, Op, Undo, str]] = []
        # (db, key) -> callbacks run when a commit touches the key (WATCH, blocking)
        self.observers: dict[tuple[int, bytes], list[TouchCallback]] = {}
        self.dirty_all: list[Callable[[int], None]] = []  # told of whole-db changes
        # The time index: commit time of every LSN, for TIME points and views.
        self.index_lsns = array("q")
        self.index_times = array("q")
        self.snapshots: dict[bytes, Snapshot] = {}
        self.snapshot_every = 64  # collections keep a full copy every N versions
        self._views: dict[tuple[int, int], Database] = {}
        # Tables: "<namespace>:<table>" -> policy for every key under that prefix.
        self.tables: dict[bytes, TablePolicy] = {}
        self.default_sync = False  # the default table's durability (server flag)
        self.last_commit_sync = False  # did the last commit touch sync data?
        # Database-level ops registered by other parts (tables, branches).
        self.db_ops: dict[str, DbOpHandler] = {}
        # name -> (save, load) of other parts' state kept in checkpoints.
        self.extra_state: dict[str, tuple[Callable[[], Any], Callable[[Any], None]]] = {}
        self.extra_state["tables"] = (self._save_tables, self._load_tables)
        self.branches: dict[bytes, Any] = {}  # name -> store.branches.Branch
        for hook in STORE_INIT_HOOKS:
            hook(self)

    # -- writing -----------------------------------------------------------------

    def apply(self, db: Database, key: bytes, op: Op) -> None:
        """Apply one op now (later reads see it); it is committed by `commit`."""
        if db.overlay:
            db.own(key)
        undo = apply_op(db, key, op)
        self.pending.append((db.ident, key, op, undo, self.cmd))

    def commit(self, meta: WriteMeta | None = None) -> int:
        """Give everything applied since the last commit one LSN; return it (0 if none)."""
        pending = self.pending
        if not pending:
            return 0
        self.pending = []
        lsn = self.lsn = self.lsn + 1
        t = int(_time() * 1000)
        if t < self.last_time_ms:
            t = self.last_time_ms
        self.last_time_ms = t
        if len(pending) == 1:
            dbi, key, op, _undo, cmd = pending[0]
            ops: tuple[tuple[Any, bytes | None, Op], ...] = ((dbi, key, op),)
            cmds: tuple[str, ...] = (cmd,)
        else:
            ops = tuple([(p[0], p[1], p[2]) for p in pending])
            cmds = tuple([p[4] for p in pending])
        self._version(pending, lsn, t, meta)
        if self.tables:
            self.last_commit_sync = any(
                self.is_sync(key) for _d, key, _o, _u, _c in pending if key is not None
            )
        else:
            self.last_commit_sync = self.default_sync
        self.index_lsns.append(lsn)
        self.index_times.append(t)
        if self._views:
            self._views.clear()
        self.sink.append(UpdateRecord(lsn, t, ops, cmds, meta))
        if self.observers:
            obs = self.observers
            for dbi, key, _op, _undo, _cmd in pending:
                if key is not None:
                    cbs = obs.get((dbi, key))
                    if cbs:
                        for cb in list(cbs):
                            cb(dbi, key)
        return lsn

    def _version(
        self,
        pending: list[tuple[Any, bytes | None, Op, Undo, str]],
        lsn: int,
        t: int,
        meta: WriteMeta | None,
    ) -> None:
        """Append one version entry per touched key, trimmed by the history policy
        (never past what a sealed snapshot still needs)."""
        dbs = self.dbs
        tables = self.tables
        for dbi, key, _op, undo, cmd in pending:
            if key is None:
                continue
            keep = self.history
            every = self.snapshot_every
            if tables:
                policy = self.policy_of(key)
                if policy is not None:
                    keep = policy.retain
                    every = policy.snapshot_every
            db = dbs[dbi] if type(dbi) is int else self.db_of(dbi)
            chains = db.chains
            chain = _dict_get(chains, key)
            if chain is None:
                if undo is CREATED and meta is None and chains.set_born(key, lsn, cmd):
                    continue
                chains[key] = [VersionEntry(lsn, t, cmd, undo, meta)]
                continue
            if type(chain) is int:
                chain = chains[key] = chains.unpack(chain)
            snap = None
            if len(chain) % every == every - 1:
                v = db.data.get(key)
                # A full copy every `every` versions, but never more often than every
                # len/8 versions, so a write costs O(1) amortized even on a huge
                # collection (an as-of read then undoes up to len/8 versions).
                if (
                    v is not None
                    and type(v) is not bytes
                    and (len(v) <= 8 * every or len(chain) % (len(v) // 8) < every)
                ):
                    snap = (copy_value(v), db.expires.get(key))
            chain.append(VersionEntry(lsn, t, cmd, undo, meta, snap))
            if keep.kind == "versions":
                if len(chain) > 2 * keep.limit:
                    self._trim(db, key, chain, len(chain) - keep.limit)
            elif keep.kind == "ms" and chain[0].time_ms < t - keep.limit:
                cut = t - keep.limit
                i = 0
                while i < len(chain) - 1 and chain[i].time_ms < cut:
                    i += 1
                self._trim(db, key, chain, i)

    def _trim(self, db: Database, key: bytes, chain: list[VersionEntry], cut: int) -> None:
        """Drop chain[:cut], keeping every version newer than the oldest snapshot."""
        pin = self.pin_lsn()
        while cut > 0 and chain[cut - 1].lsn > pin:
            cut -= 1
        if cut > 0:
            db.floors[key] = chain[cut - 1].lsn
            del chain[:cut]

    def db_of(self, ident: Any) -> Database:
        """The database a record names: a number, or (branch, number)."""
        if type(ident) is int:
            return self.dbs[ident]
        db: Database = self.branches[ident[0]].dbs[ident[1]]
        return db

    def table_of(self, key: bytes) -> bytes | None:
        """The declared table owning `key` ("ns:table" for "ns:table:..."), if any."""
        i = key.find(b":")
        if i < 0:
            return None
        j = key.find(b":", i + 1)
        if j < 0:
            return None
        prefix = key[:j]
        return prefix if prefix in self.tables else None

    def policy_of(self, key: bytes) -> TablePolicy | None:
        t = self.table_of(key)
        return None if t is None else self.tables[t]

    def is_sync(self, key: bytes) -> bool:
        policy = self.policy_of(key)
        return self.default_sync if policy is None else policy.durability == "sync"

    def _save_tables(self) -> Any:
        return [
            (name, p.durability, str(p.retain), p.snapshot_every) for name, p in self.tables.items()
        ]

    def _load_tables(self, saved: Any) -> None:
        self.tables = {
            name: TablePolicy(durability, HistoryPolicy.parse(retain), every)
            for name, durability, retain, every in saved
        }

    def pin_lsn(self) -> int:
        """Versions newer than this are needed by a sealed snapshot or a branch."""
        pins = [snap.lsn for snap in self.snapshots.values()]
        pins.extend(b.fork_lsn for b in self.branches.values())
        return min(pins) if pins else 1 << 62

    def replay_records(
        self,
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

        The common record, one SET without TTL creating a key on the main line,
        takes a short path with the result `replay` would give; others go there."""
        dbs = self.dbs
        add_lsn, add_time = self.index_lsns.append, self.index_times.append
        codes = _cmd_codes
        applied = 0
        last_t = self.last_time_ms
        for row in itertools.islice(rows, limit):
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
                        chains[key] = lsn << _CMD_BITS | code
                        add_lsn(lsn)
                        add_time(t)
                        last_t = t
                        continue
            self.replay(typed(row))
            last_t = self.last_time_ms
        if applied:
            self.lsn = expected - 1
            if last_t > self.last_time_ms:
                self.last_time_ms = last_t
        return expected, applied

    def replay(self, record: UpdateRecord) -> None:
        """Apply a persisted record exactly as it was committed (same LSN, time and
        versions), without handing it to the sink."""
        pending: list[tuple[Any, bytes | None, Op, Undo, str]] = []
        for (dbi, key, op), cmd in zip(record.ops, record.cmds, strict=True):
            if key is None:
                self.apply_db_op(dbi, op, record.lsn, record.time_ms)
                continue
            db = self.db_of(dbi)
            if db.overlay:
                db.own(key)
            pending.append((dbi, key, op, apply_op(db, key, op), cmd))
        self._version(pending, record.lsn, record.time_ms, record.meta)
        self.index_lsns.append(record.lsn)
        self.index_times.append(record.time_ms)
        self.lsn = record.lsn
        if record.time_ms > self.last_time_ms:
            self.last_time_ms = record.time_ms

    def rollback_pending(self) -> None:
        """Undo everything applied since the last commit (a handler failed midway)."""
        while self.pending:
            dbi, key, _op, undo, _cmd = self.pending.pop()
            if key is not None:
                db = self.db_of(dbi)
                for u in undo:
                    apply_op(db, key, u)

    # -- observing ---------------------------------------------------------------

    def observe(self, dbi: int, key: bytes, cb: TouchCallback) -> None:
        self.observers.setdefault((dbi, key), []).append(cb)

    def unobserve(self, dbi: int, key: bytes, cb: TouchCallback) -> None:
        cbs = self.observers.get((dbi, key))
        if cbs is not None:
            with contextlib.suppress(ValueError):
                cbs.remove(cb)
            if not cbs:
                del self.observers[(dbi, key)]

    def touch_db(self, dbi: int) -> None:
        """A whole database changed identity (SWAPDB): tell every observer of it."""
        for (d, key), cbs in list(self.observers.items()):
            if d == dbi:
                for cb in list(cbs):
                    cb(d, key)

    def swap_dbs(self, a: int, b: int) -> None:
        """SWAPDB: exchange two databases' contents (and histories) as one change."""
        self.apply_swap(a, b)
        self.pending.append((a, None, ("swapdb", b), (), self.cmd))
        self.touch_db(a)
        self.touch_db(b)

    def apply_swap(self, a: int, b: int) -> None:
        da, db_ = self.dbs[a], self.dbs[b]
        for attr in ("data", "expires", "chains", "heap"):
            va, vb = getattr(da, attr), getattr(db_, attr)
            setattr(da, attr, vb)
            setattr(db_, attr, va)

    def _expired(self, db: Database, key: bytes) -> None:
        saved = self.cmd
        self.cmd = "expired"
        self.apply(db, key, (DEL,))
        self.cmd = saved
        self.expired_keys += 1

    def active_expire(self) -> int:
        """Remove keys whose time has come (Redis' active expiry); commits them."""
        n = sum(db.active_expire() for db in self.dbs if db.heap)
        if n:
            self.commit()
        return n

    def value_as_of(self, dbi: Any, key: bytes, lsn: int) -> tuple[Any, int | None]:
        """The key's (value, expire_ms) just after `lsn`: find the version by bisection,
        start from the nearest newer full copy (or the latest value) and undo at most
        SNAPSHOT-EVERY versions. Raises PrunedError where retention has removed it."""
        db = self.db_of(dbi)
        if db.overlay:
            return db.as_of(key, lsn)  # type: ignore[attr-defined, no-any-return]
        chain = db.chains.get(key, ())
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
        first = chain[i]
        if len(first.undo) == 1 and first.undo[0][0] == RESTORE:
            # The state before the first newer version, whole (a replaced value).
            value, expire = first.undo[0][1], first.undo[0][2]
            if value is None or type(value) is bytes:
                return value, expire
            return copy_value(value), expire
        j = i
        while j < n and chain[j].snap is None:
            j += 1
        if j < n:
            snap = chain[j].snap
            assert snap is not None
            # The copy is of the state after the whole commit: when one commit left
            # several entries for this key, start undoing from its last one.
            start = j
            while start + 1 < n and chain[start + 1].lsn == chain[j].lsn:
                start += 1
            value, expire = snap
        else:
            start = n - 1
            value, expire = db.data.get(key), db.expires.get(key)
        return undo_versions(key, value, expire, reversed(chain[i : start + 1]))

    # -- points in time ----------------------------------------------------------------

    def lsn_at_time(self, t_ms: int) -> int:
        """The last LSN committed at or before `t_ms` (0 before the first)."""
        i = bisect_right(self.index_times, t_ms)
        return self.index_lsns[i - 1] if i else 0

    def time_of(self, lsn: int) -> int:
        """When `lsn` was committed (0 for LSN 0)."""
        i = bisect_right(self.index_lsns, lsn)
        return self.index_times[i - 1] if i else 0

    def view(self, dbi: int, lsn: int) -> Database:
        """A read-only database holding every key as it was just after `lsn`, with
        its clock stopped then (cached until the next commit)."""
        cached = self._views.get((dbi, lsn))
        if cached is not None:
            return cached
        db = self.dbs[dbi]
        view = Database(dbi)
        view.frozen_ms = self.time_of(lsn) if lsn < self.lsn else now_ms()
        for key in dict.fromkeys([*db.data, *db.chains]):
            value, expire = self.value_as_of(dbi, key, lsn)
            if value is not None and (expire is None or expire > view.frozen_ms):
                view.data[key] = value
                if expire is not None:
                    view.expires[key] = expire
            chain = db.chains.get(key)
            if chain:
                view.chains[key] = chain[: bisect_right(chain, lsn, key=_entry_lsn)]
        if len(self._views) > 16:
            self._views.clear()
        self._views[(dbi, lsn)] = view
        return view

    # -- database-level changes ----------------------------------------------------

    def checkpoint_extra(self) -> dict[str, Any]:
        """State of other parts (tables, branches) for checkpoints, by name."""
        return {name: fn() for name, (fn, _load) in self.extra_state.items()}

    def load_checkpoint_extra(self, extra: dict[str, Any]) -> None:
        for name, value in extra.items():
            entry = self.extra_state.get(name)
            if entry is None:
                raise ValueError(f"checkpoint holds unknown state {name!r}")
            entry[1](value)

    def export_image(self) -> Iterator[Any]:
        """The whole store as plain objects: a header map, then its items
        (`store.image` describes them)."""
        return image.export_image(self)

    def import_image(self, head: dict[str, Any], items: Iterator[Any]) -> int:
        """Fill this empty store from an image's header and items; return its LSN."""
        return image.import_image(self, head, items)

    def apply_db_op(self, dbi: int, op: Op, lsn: int, time_ms: int) -> None:
        """Changes not tied to one key (SWAPDB, snapshots); applied live and on replay."""
        name = op[0]
        if name == "swapdb":
            self.apply_swap(dbi, op[1])
        elif name == "seal":
            self.snapshots[op[1]] = Snapshot(op[1], lsn, time_ms, op[2])
        elif name == "unseal":
            self.snapshots.pop(op[1], None)
        elif name == "table":
            _, table, durability, retain, every = op
            self.tables[table] = TablePolicy(durability, HistoryPolicy.parse(retain), every)
        elif name == "droptable":
            self.tables.pop(op[1], None)
        else:
            handler = self.db_ops.get(name)
            if handler is None:
                raise ValueError(f"unknown database op {name!r}")
            handler(dbi, op, lsn, time_ms)

    def db_op(self, dbi: int, op: Op) -> int:
        """Commit a database-level op as its own version now; return its LSN."""
        self.pending.append((dbi, None, op, (), self.cmd))
        lsn = self.lsn + 1
        self.apply_db_op(dbi, op, lsn, max(now_ms(), self.last_time_ms))
        return lsn
