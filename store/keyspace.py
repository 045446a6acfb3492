"""The Store: the versioned keyspace's databases and its one commit point, at the top
of store/'s layers.

`Store` extends `store.core.StoreCore` (the fields, and the operations the features
build on) with the commit and with what the features make of the keyspace: reads in
the past (`store.asof`), views (`store.views`), branches (`store.branches`), history
out of memory (`store.coldhistory`), checkpoint images (`store.image`) and replay in
bulk (`store.bulkreplay`). None of them imports it (the layers contract of store/ in
pyproject.toml).

A write is a transaction on the store. `begin` names the command (and who it
writes for) and returns a savepoint; `apply` (the core's) mutates through `store.ops`
and remembers the undo, and `db_op` applies a database-level change (SWAPDB, a seal,
a table, a branch) with the LSN and time its commit will have. `commit` is the one
place that assigns the next LSN, appends one entry per touched key to its version
chain, hands one `UpdateRecord` to the sink and tells the writer its LSN;
`rollback_to` undoes what was applied after a savepoint. A command (or a whole
MULTI/EXEC block) that changed nothing commits nothing.

The names this module held before it was split by subject (`X as X` imports) are
still importable from it.
"""

from __future__ import annotations

import contextlib
import time
import weakref
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from store import bulkreplay, dataset, image, moves, windex
from store.accounting import HistoryMemory, recount
from store.asof import PrunedError as PrunedError
from store.asof import states_back, value_as_of
from store.asof import undo_versions as undo_versions
from store.branches import Branches
from store.chains import Chains as Chains
from store.chains import VersionEntry as VersionEntry
from store.chains import _entry_lsn as _entry_lsn
from store.chains import cmd_code as cmd_code
from store.chains import cmd_names as cmd_names
from store.chains import translate_codes as translate_codes
from store.coldhistory import Tierer
from store.commitpath import one_cmd, version_key, version_one
from store.core import TRIM_STEP as TRIM_STEP
from store.core import StoreCore, TouchCallback
from store.database import DB_STATE, tick_lru_clock
from store.database import Database as Database
from store.database import now_ms as now_ms
from store.dataset import counted_apply
from store.ops import Op, Undo
from store.policy import HistoryPolicy as HistoryPolicy
from store.policy import Snapshot as Snapshot
from store.policy import TablePolicy as TablePolicy
from store.records import R_CMDS, R_LSN, R_META, R_OPS, R_TIME, Writer
from store.records import CountingSink as CountingSink
from store.records import LsnMismatch as LsnMismatch
from store.records import RecordSink as RecordSink
from store.records import UpdateRecord as UpdateRecord
from store.records import WriteMeta as WriteMeta
from store.views import KeyTimes, ViewDatabase, make_view

_time = time.time  # not Final: tests set the commit clock through it

# Every attribute of a Store, for `Store.reset` (a compiled Store has no __dict__ to
# copy; tests/test_store.py checks the list against a pure-Python Store's).
# fmt: off
STORE_STATE = (
    "_index_lsns", "_index_many", "_index_weighed", "_index_weight",
    "_pin", "_run_starts", "_tail_first", "_tail_n", "_time_ms", "_time_o", "_time_run_at",
    "_time_runs", "_time_tail",
    "branches", "cmd",
    "commit_time", "dbs", "default_sync", "deferred_trims", "dirty_all", "expired_keys",
    "expiry_held", "extra_state", "follower", "functions", "history", "index_from",
    "index_keys", "last_time_ms", "lsn", "mem", "observers", "on_expired", "pending",
    "sink", "sink_batch", "snapshot_every", "snapshots", "spill", "tables", "tiered", "tierer",
    "views",
    "writer",
)
# fmt: on
# What `Store.reset` keeps: how the server is wired to the store (and its expiry
# count, a statistic), not its data.
_WIRING = (
    "sink",
    "sink_batch",
    "on_expired",
    "follower",
    "default_sync",
    "observers",
    "dirty_all",
    "expired_keys",
    "snapshot_every",
    "spill",
)


class Store(StoreCore):
    """The versioned keyspace and its single commit point: the core's state and
    operations, with the commit and the features built on them."""

    def __init__(
        self,
        databases: int = 16,
        history: HistoryPolicy | None = None,
        sink: RecordSink | None = None,
    ) -> None:
        super().__init__(databases, history, sink)
        self.tierer = Tierer(self)  # moves history out of memory (store.coldhistory)
        # (db, LSN, clock) -> the view connections checked out there share, while any does
        self.views: weakref.WeakValueDictionary[tuple[Any, ...], ViewDatabase] = (
            weakref.WeakValueDictionary()
        )
        self.branches: Branches = Branches(self)  # name -> Branch
        self.extra_state["branches"] = (self.branches.save, self.branches.load)
        # FUNCTION LOAD's libraries (name -> code), server-wide; a new dict on each
        # change (commands.scripting compiles them again when it sees a new one).
        self.functions: dict[bytes, bytes] = {}
        self.extra_state["functions"] = (self._save_functions, self._load_functions)

    def reset(self) -> Callable[[], None]:
        """Drop the in-memory state (DEBUG RELOAD, before rebuilding from storage): an
        empty store again, keeping its wiring (sink, observers, expiry hook, follower
        flag, default durability, the parts registered in `extra_state`) and its
        Database objects (sessions hold them). Returns what puts the dropped state
        back, should the rebuild fail."""
        old = {name: getattr(self, name) for name in STORE_STATE}
        old_dbs = [(db, [getattr(db, a) for a in DB_STATE]) for db in self.dbs]
        Store.__init__(self, len(self.dbs), self.history, self.sink)
        for name in _WIRING:
            setattr(self, name, old[name])
        self.extra_state = {**old["extra_state"], **self.extra_state}
        self.dbs = [db for db, _ in old_dbs]
        for db in self.dbs:
            Database.__init__(db, db.index, self._expired)
            db.chains.time_of = self.time_of
            db.chains.spill = self.spill

        def undo() -> None:
            for name, value in old.items():
                setattr(self, name, value)
            for db, values in old_dbs:
                for attr, value in zip(DB_STATE, values, strict=True):
                    setattr(db, attr, value)

        return undo

    # -- the transaction -----------------------------------------------------------

    def begin(self, cmd: str, writer: Writer | None = None) -> int:
        """Run command `cmd` in the open transaction (a command, or one command of a
        MULTI/EXEC block): its ops are named `cmd`, and the commit records `writer`'s
        metadata and tells it the LSN. Returns the savepoint `rollback_to` takes to
        undo this command alone. No object per command: these are the store's fields."""
        self.cmd = cmd
        self.writer = writer
        return len(self.pending)

    def db_op(self, dbi: int, op: Op) -> int:
        """Apply a database-level op now, in the open transaction, with the LSN and
        time its commit will have (the time is taken now and the commit keeps it);
        return that LSN."""
        self.pending.append((dbi, None, op, (), self.cmd))
        t = self.commit_time
        if not t:
            t = self.commit_time = max(now_ms(), self.last_time_ms)
        lsn = self.lsn + 1
        self.apply_db_op(dbi, op, lsn, t)
        return lsn

    def rollback_to(self, savepoint: int = 0) -> None:
        """Undo every key op applied after `savepoint` (what `begin` returned), newest
        first; 0 undoes the whole transaction. Database-level ops are not undone:
        handlers apply them last, after every check."""
        pending = self.pending
        while len(pending) > savepoint:
            dbi, key, _op, undo, _cmd = pending.pop()
            if key is not None:
                db = self.db_of(dbi)
                for u in undo:
                    counted_apply(db, key, u)
        if not pending:
            self.commit_time = 0

    def commit(self) -> int:
        """Give everything applied since the last commit one LSN, hand its record to
        the sink and tell the writer (its `last_write_lsn`, and `last_sync_lsn` when
        the commit touched sync-durability data); return the LSN (0 if none)."""
        pending = self.pending
        if not pending:
            return 0
        self.pending = []
        writer = self.writer
        self.writer = None
        meta = None if writer is None else writer.meta
        lsn = self.lsn = self.lsn + 1
        t = self.commit_time
        # The sink's list when the commit appends to it (`sink_batch`), read once: each
        # read of a typed tuple's item checks all its types (compiled), the sink's slowly.
        direct = self.sink_batch
        batch: list[UpdateRecord] | None = None
        if direct is not None:
            sink: object = direct[0]
            if sink is self.sink:
                batch = direct[1]
        if t:
            self.commit_time = 0
            # A seal in this commit set the clock past it (`apply_db_op`): keep that.
            if t > self.last_time_ms:
                self.last_time_ms = t
        elif batch is not None and len(batch) & 31:
            # One clock read per pass of the event loop (and per 32 commits in it): a
            # commit that is not its first takes the time of the last (the batch
            # holds the records committed in this pass until its end).
            t = self.last_time_ms
        else:
            t = int(_time() * 1000)
            if t < self.last_time_ms:
                t = self.last_time_ms
            self.last_time_ms = t
        # Boxed once: the entry, the record and the index take the same objects, and
        # commits in the same millisecond the same time object.
        lsn_o: Any = lsn
        t_o: Any
        if t == self._time_ms:
            t_o = self._time_o
        else:
            t_o = t  # boxed here, once (compiled, a chained assignment boxes twice)
            self._time_o = t_o
            self._time_ms = t
        if len(pending) == 1:
            dbi, key, op, undo, cmd = pending[0]
            ops: tuple[tuple[Any, bytes | None, Op], ...] = ((dbi, key, op),)
            cmds: tuple[str, ...] = one_cmd(cmd)
            common = key is not None and type(dbi) is int and not dbi
            self.index_keys.append(key if common else windex.entry(ops))
            if key is not None and not version_one(self, dbi, key, undo, cmd, lsn_o, t_o, meta):
                version_key(self, dbi, key, undo, cmd, lsn_o, t_o, meta)
        else:
            ops = tuple([(p[0], p[1], p[2]) for p in pending])
            cmds = tuple([p[4] for p in pending])
            self.index_keys.append(windex.entry(ops))
            self._index_many += len(ops)
            self._version(pending, lsn_o, t_o, meta)
        n = self._tail_n
        if n and lsn != self._tail_first + n:  # not the tail's next LSN: start anew
            self._take_tails()
            n = 0
        if not n:
            self._tail_first = lsn
        self._tail_n = n + 1
        tail = self._time_tail
        if not n or t_o is not tail[-1]:  # a new run of one commit time
            tail.append(t_o)
            self._run_starts.append(n)
        if not len(self.index_keys) & 1023 or self._index_many > 1024:
            # Weighed every 1,024 commits, or 1,024 keys of commits writing several
            # (the time index's tails taken in first: `bound_index` reads it).
            self._index_many = 0
            self.bound_index()
        record: UpdateRecord = (lsn_o, t_o, ops, cmds, meta)
        if batch is not None:
            batch.append(record)
            if len(batch) == 1 and direct is not None:
                direct[2]()
        else:
            self.sink.append(record)
        if writer is not None:
            writer.last_write_lsn = lsn_o
            if not self.tables:
                if self.default_sync:
                    writer.last_sync_lsn = lsn
            else:
                modes = {self.durability_of(key) for _d, key, _o, _u, _c in pending if key}
                if "sync" in modes:
                    writer.last_sync_lsn = lsn
                if "raft" in modes:
                    writer.last_raft_lsn = lsn
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
        (never past what a sealed snapshot still needs): the common case in a straight
        line (`store.commitpath.version_one`), else `store.commitpath.version_key`."""
        for dbi, key, _op, undo, cmd in pending:
            if key is not None and not version_one(self, dbi, key, undo, cmd, lsn, t, meta):
                version_key(self, dbi, key, undo, cmd, lsn, t, meta)

    def replay_records(
        self,
        rows: Iterator[Any],
        typed: Callable[[Any], UpdateRecord],
        expected: int,
        skip_through: int,
        limit: int,
    ) -> tuple[int, int]:
        """`store.bulkreplay.replay_records` into this store."""
        return bulkreplay.replay_records(self, rows, typed, expected, skip_through, limit)

    def replay(self, record: UpdateRecord) -> None:
        """Apply a persisted record exactly as it was committed (same LSN, time and
        versions), without handing it to the sink (the core's hook: `store.bulkreplay`
        replays through it what it does not apply in bulk)."""
        pending: list[tuple[Any, bytes | None, Op, Undo, str]] = []
        for (dbi, key, op), cmd in zip(record[R_OPS], record[R_CMDS], strict=True):
            if key is None:
                self.apply_db_op(dbi, op, record[R_LSN], record[R_TIME])
                continue
            db = self.db_of(dbi)
            if db.overlay:
                db.own(key)
            pending.append((dbi, key, op, counted_apply(db, key, op), cmd))
        self._version(pending, record[R_LSN], record[R_TIME], record[R_META])
        self.index_keys.append(windex.entry(record[R_OPS]))
        self.add_commit(record[R_LSN], record[R_TIME])
        self.lsn = record[R_LSN]
        if record[R_TIME] > self.last_time_ms:
            self.last_time_ms = record[R_TIME]

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

    def notify_replayed(self, n: int) -> None:
        """Tell observers (WATCH, blocked readers) of the keys the last `n` commits
        wrote, from the version index: a replica's replayed records wake them as
        its primary's commits did there."""
        if not self.observers or n <= 0:
            return
        obs = self.observers
        for e in self.index_keys[-n:]:
            for d, k in ((0, e),) if type(e) is bytes else e:
                if k is None:
                    if type(d) is int:
                        self.touch_db(d)
                    continue
                cbs = obs.get((d, k))
                if cbs:
                    for cb in list(cbs):
                        cb(d, k)

    def touch_db(self, dbi: int) -> None:
        """A whole database changed identity (SWAPDB): tell every observer of it."""
        for (d, key), cbs in list(self.observers.items()):
            if d == dbi:
                for cb in list(cbs):
                    cb(d, key)

    def swap_dbs(self, a: int, b: int) -> None:
        """SWAPDB: exchange two databases' contents (and histories) as one change.
        Observers of a key in either content hear of it (touchAllWatchedKeysInDb),
        through the callback's `on_swap` if it has one (WATCH's)."""
        self.db_op(a, ("swapdb", b))
        da, db_ = self.dbs[a].data, self.dbs[b].data
        for (d, key), cbs in list(self.observers.items()):
            if d in (a, b) and (key in da or key in db_):
                for cb in list(cbs):
                    getattr(cb, "on_swap", cb)(d, key)

    def apply_swap(self, a: int, b: int) -> None:
        da, db_ = self.dbs[a], self.dbs[b]
        for attr in ("data", "expires", "chains", "heap", "atime", "used", "sizes"):
            va, vb = getattr(da, attr), getattr(db_, attr)
            setattr(da, attr, vb)
            setattr(db_, attr, va)

    def tick(self) -> None:
        """The server cron's housekeeping: advance the LRU clock, forget the access
        times of deleted keys."""
        tick_lru_clock()
        for db in self.dbs:
            db.prune_atime()

    def active_expire(self) -> int:
        """Remove keys whose time has come (Redis' active expiry); commits them."""
        if self.follower or self.expiry_held:
            return 0
        self.begin("expired")
        n = sum(db.active_expire() for db in self.dbs if db.heap)
        if n:
            self.commit()
        return n

    # -- reads in the past -----------------------------------------------------------

    def value_as_of(self, dbi: Any, key: bytes, lsn: int) -> tuple[Any, int | None]:
        """The key's (value, expire_ms) just after `lsn` (`store.asof.value_as_of`)."""
        return value_as_of(self, dbi, key, lsn)

    def states_back(
        self, dbi: Any, key: bytes, chain: list[VersionEntry], lsns: Iterable[int]
    ) -> Iterator[tuple[Any, int | None]]:
        """The key's states just after each of `lsns`, newest first, walking back one
        version at a time (`store.asof.states_back`)."""
        return states_back(self, dbi, key, chain, lsns)

    def views_memory(self) -> tuple[int, int]:
        """(views, estimated bytes they hold)."""
        views = list(self.views.values())
        return len(views), sum(v.cached_bytes() for v in views)

    def view(self, dbi: int, lsn: int, times: KeyTimes | None = None) -> Database:
        """Database `dbi` just after `lsn`, read-only, made in O(1) and shared by every
        caller at the same point while one holds it (`store.views`); with `times`, each
        key as of its time (`store.views.KeyTimes`)."""
        at = self.time_of(lsn) if lsn < self.lsn else now_ms()
        k = (dbi, lsn, at, None if times is None else times.name)
        view = self.views.get(k)
        if view is None:
            view = self.views[k] = make_view(self, dbi, lsn, at, times)
        return view

    # -- database-level changes ----------------------------------------------------

    def export_image(self) -> Iterator[Any]:
        """The whole store as plain objects: a header map, then its items
        (`store.image` describes them)."""
        return image.export_image(self)

    def import_image(self, head: dict[str, Any], items: Iterator[Any]) -> int:
        """Fill this empty store from an image's header and items; return its LSN."""
        lsn = image.import_image(self, head, items)
        self.mem = self.history_recount()
        for db in self.dbs:
            dataset.recount(db)
        return lsn

    def history_recount(self) -> HistoryMemory:
        """What history holds, counted from scratch (after a checkpoint load, and by
        the tests that check the running counts), after the deferred trims."""
        self.settle_trims()
        return recount(self, [*self.dbs, *(d for b in self.branches.values() for d in b.dbs)])

    def branch_data_bytes(self) -> int:
        return self.branches.data_bytes()

    def _save_functions(self) -> list[list[bytes]] | None:
        return [[name, code] for name, code in self.functions.items()] or None

    def _load_functions(self, libs: Iterable[Sequence[bytes]]) -> None:
        self.functions = {bytes(name): bytes(code) for name, code in libs}

    def apply_db_op(self, dbi: int, op: Op, lsn: int, time_ms: int) -> None:
        """Changes not tied to one key (SWAPDB, snapshots); applied live and on replay."""
        name = op[0]
        if name == "swapdb":
            self.apply_swap(dbi, op[1])
        elif name == "seal":
            # ("seal", name, trigger[, meta]): seals without META have no fourth field.
            self.snapshots[op[1]] = Snapshot(op[1], lsn, time_ms, op[2], *op[3:])
            # The commits after a seal take a later millisecond than its own: the
            # seal's time then tells the versions it holds from the later ones (a
            # cluster snapshot reads the keys moved since by their times).
            self.last_time_ms = max(self.last_time_ms, time_ms + 1)
        elif name == "unseal":
            self.snapshots.pop(op[1], None)
        elif name == "table":
            # ("table", name, durability, retain, every[, max_pinned]): records written
            # before MAXPINNED existed, and tables without one, have no sixth field.
            _, table, durability, retain, every, *rest = op
            self.tables[table] = TablePolicy(durability, HistoryPolicy.parse(retain), every, *rest)
        elif name == "functions":
            self._load_functions(op[1])
        elif name == "droptable":
            self.tables.pop(op[1], None)
        elif name == "branch":
            self.branches.create(op[1], op[2], time_ms, *op[3:])
        elif name == "dropbranch":
            branch = self.branches.pop(op[1], None)
            self.mem.drop_branch(op[1], () if branch is None else branch.dbs, self.table_of)
        elif name == "import" or name == "forget":  # a slot range taken or given away
            if name == "import":
                moves.install(self, op[1])
            else:
                moves.forget(self, dbi, op[1])
            if self.mem.marks or self.snapshots or self.branches:
                # Seals and branches pin history (`HistoryMemory.marks`): count it again.
                self.mem = self.history_recount()
        else:
            raise ValueError(f"unknown database op {name!r}")
        self._pin = None  # a seal, unseal, branch or drop moves what history is pinned
        if self.deferred_trims:
            self.settle_trims()  # trimming resumes at once where a pin went away
