"""Databases, the history policy and the single commit point.

`Store.apply` mutates through `store.ops` and remembers the undo; `Store.commit`
is the one place that assigns the next LSN, appends one entry per touched key to
its version chain and hands one `UpdateRecord` to the sink. A command (or a whole
MULTI/EXEC block) that changed nothing commits nothing.
"""

from __future__ import annotations

import contextlib
import heapq
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

from store.ops import DEL, RESTORE, Op, Undo, apply_op
from store.values import copy_value


def now_ms() -> int:
    return int(time.time() * 1000)


class WriteMeta(NamedTuple):
    """Who wrote, and why: attached to a connection's writes and kept in history."""

    client_id: int
    author: bytes | None = None
    message: bytes | None = None


class UpdateRecord(NamedTuple):
    """One committed change: what the flusher persists and replay applies."""

    lsn: int
    time_ms: int
    ops: tuple[tuple[int, bytes | None, Op], ...]  # (database, key, op)
    cmds: tuple[str, ...]  # the command behind each op
    meta: WriteMeta | None


class VersionEntry(NamedTuple):
    lsn: int
    time_ms: int
    cmd: str
    undo: Undo
    meta: WriteMeta | None

    @property
    def created(self) -> bool:
        """This version brought the key into existence (nothing older to read)."""
        return len(self.undo) == 1 and self.undo[0][0] == RESTORE and self.undo[0][1] is None


class PrunedError(Exception):
    """A version that retention has removed."""

    def __init__(self, lsn: int, key: bytes) -> None:
        self.lsn = lsn
        self.key = key
        super().__init__(f"PRUNED version {lsn} of {key!r} is no longer retained")


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


class Database:
    """One numbered database: values, absolute expiry times and version chains."""

    __slots__ = ("chains", "data", "expires", "heap", "index", "on_expire")

    def __init__(
        self, index: int, on_expire: Callable[[Database, bytes], None] | None = None
    ) -> None:
        self.index = index
        self.on_expire = on_expire
        self.data: dict[bytes, Any] = {}
        self.expires: dict[bytes, int] = {}
        self.chains: dict[bytes, list[VersionEntry]] = {}
        self.heap: list[tuple[int, bytes]] = []  # (expire_ms, key) for active expiry

    def get(self, key: bytes) -> Any:
        """The live value, or None; an expired key is removed on the way (lazy expiry)."""
        v = self.data.get(key)
        if v is not None and self.expires:
            at = self.expires.get(key)
            if at is not None and at <= now_ms():
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
        t = now_ms()
        exp = self.expires
        return iter([k for k in self.data if exp.get(k, t + 1) > t])

    def ttl_ms(self, key: bytes) -> int | None:
        return self.expires.get(key)

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


class Store:
    """The versioned keyspace and its single commit point."""

    def __init__(
        self,
        databases: int = 16,
        history: HistoryPolicy | None = None,
        sink: RecordSink | None = None,
    ) -> None:
        self.dbs = [Database(i, self._expired) for i in range(databases)]
        self.expired_keys = 0
        self.history = history or HistoryPolicy()
        self.sink: RecordSink = sink or CountingSink()
        self.lsn = 0
        self.last_time_ms = 0
        self.cmd = ""  # the command being executed, named in its version entries
        self.pending: list[tuple[int, bytes | None, Op, Undo, str]] = []
        # (db, key) -> callbacks run when a commit touches the key (WATCH, blocking)
        self.observers: dict[tuple[int, bytes], list[TouchCallback]] = {}
        self.dirty_all: list[Callable[[int], None]] = []  # told of whole-db changes

    # -- writing -----------------------------------------------------------------

    def apply(self, db: Database, key: bytes, op: Op) -> None:
        """Apply one op now (later reads see it); it is committed by `commit`."""
        undo = apply_op(db, key, op)
        self.pending.append((db.index, key, op, undo, self.cmd))

    def commit(self, meta: WriteMeta | None = None) -> int:
        """Give everything applied since the last commit one LSN; return it (0 if none)."""
        pending = self.pending
        if not pending:
            return 0
        self.pending = []
        lsn = self.lsn = self.lsn + 1
        t = now_ms()
        if t < self.last_time_ms:
            t = self.last_time_ms
        self.last_time_ms = t
        ops = []
        cmds = []
        for dbi, key, op, _undo, cmd in pending:
            ops.append((dbi, key, op))
            cmds.append(cmd)
        self._version(pending, lsn, t, meta)
        self.sink.append(UpdateRecord(lsn, t, tuple(ops), tuple(cmds), meta))
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
        pending: list[tuple[int, bytes | None, Op, Undo, str]],
        lsn: int,
        t: int,
        meta: WriteMeta | None,
    ) -> None:
        """Append one version entry per touched key, trimmed by the history policy."""
        dbs = self.dbs
        keep = self.history
        for dbi, key, _op, undo, cmd in pending:
            if key is None:
                continue
            chains = dbs[dbi].chains
            chain = chains.get(key)
            entry = VersionEntry(lsn, t, cmd, undo, meta)
            if chain is None:
                chains[key] = [entry]
            else:
                chain.append(entry)
                if keep.kind == "versions":
                    if len(chain) > 2 * keep.limit:
                        del chain[: -keep.limit]
                elif keep.kind == "ms" and chain[0].time_ms < t - keep.limit:
                    cut = t - keep.limit
                    i = 0
                    while i < len(chain) - 1 and chain[i].time_ms < cut:
                        i += 1
                    del chain[:i]

    def replay(self, record: UpdateRecord) -> None:
        """Apply a persisted record exactly as it was committed (same LSN, time and
        versions), without handing it to the sink."""
        pending: list[tuple[int, bytes | None, Op, Undo, str]] = []
        dbs = self.dbs
        for (dbi, key, op), cmd in zip(record.ops, record.cmds, strict=True):
            if key is None:
                if op[0] == "swapdb":
                    self.apply_swap(dbi, op[1])
                continue
            pending.append((dbi, key, op, apply_op(dbs[dbi], key, op), cmd))
        self._version(pending, record.lsn, record.time_ms, record.meta)
        self.lsn = record.lsn
        if record.time_ms > self.last_time_ms:
            self.last_time_ms = record.time_ms

    def rollback_pending(self) -> None:
        """Undo everything applied since the last commit (a handler failed midway)."""
        while self.pending:
            dbi, key, _op, undo, _cmd = self.pending.pop()
            if key is not None:
                db = self.dbs[dbi]
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

    def value_as_of(self, dbi: int, key: bytes, lsn: int) -> tuple[Any, int | None]:
        """The key's (value, expire_ms) just after `lsn`, rebuilt from the latest value
        by undoing newer versions. Raises PrunedError if history no longer reaches it."""
        db = self.dbs[dbi]
        scratch = Database(-1)
        cur = db.data.get(key)
        if cur is not None:
            scratch.data[key] = copy_value(cur)
            exp = db.expires.get(key)
            if exp is not None:
                scratch.expires[key] = exp
        chain = db.chains.get(key, ())
        i = len(chain) - 1
        while i >= 0 and chain[i].lsn > lsn:
            for u in chain[i].undo:
                apply_op(scratch, key, u)
            i -= 1
        if i < 0 and chain and chain[0].lsn > lsn and not chain[0].created:
            raise PrunedError(lsn, key)
        return scratch.data.get(key), scratch.expires.get(key)
