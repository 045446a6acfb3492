"""The Store: the versioned keyspace's databases and its one commit point.

A write is a transaction on the store. `begin` names the command (and who it
writes for) and returns a savepoint; `apply` mutates through `store.ops` and
remembers the undo, and `db_op` applies a database-level change (SWAPDB, a seal,
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
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from store import bulkreplay, dataset, image, moves, windex
from store.accounting import HistoryMemory, recount
from store.asof import PrunedError as PrunedError
from store.asof import states_back, value_as_of
from store.asof import undo_versions as undo_versions
from store.branches import Branches
from store.bulkreplay import lsn_bytes, run_bytes
from store.chains import V_LSN, V_TIME, _entry_time
from store.chains import Chains as Chains
from store.chains import VersionEntry as VersionEntry
from store.chains import _entry_lsn as _entry_lsn
from store.chains import cmd_code as cmd_code
from store.chains import cmd_names as cmd_names
from store.chains import translate_codes as translate_codes
from store.coldhistory import Tierer, warm
from store.commitpath import TRIM_STEP as TRIM_STEP
from store.commitpath import one_cmd, version_key, version_one
from store.database import DB_STATE, tick_lru_clock
from store.database import Database as Database
from store.database import now_ms as now_ms
from store.dataset import counted_apply
from store.ops import DEL, Op, Undo
from store.policy import HistoryPolicy as HistoryPolicy
from store.policy import Snapshot as Snapshot
from store.policy import TablePolicy as TablePolicy
from store.records import R_CMDS, R_LSN, R_META, R_OPS, R_TIME, Writer
from store.records import CountingSink as CountingSink
from store.records import LsnMismatch as LsnMismatch
from store.records import RecordSink as RecordSink
from store.records import UpdateRecord as UpdateRecord
from store.records import WriteMeta as WriteMeta
from store.views import ViewDatabase, make_view

_time = time.time  # not Final: tests set the commit clock through it

# Every attribute of a Store, for `Store.reset` (a compiled Store has no __dict__ to
# copy; tests/test_store.py checks the list against a pure-Python Store's).
# fmt: off
STORE_STATE = (
    "_index_lsns", "_index_many", "_index_times", "_index_weighed", "_index_weight",
    "_pin", "_run_starts", "_tail_first", "_tail_n", "_time_ms", "_time_o", "_time_tail",
    "branches", "cmd",
    "commit_time", "dbs", "default_sync", "deferred_trims", "dirty_all", "expired_keys",
    "expiry_held", "extra_state", "follower", "functions", "history", "index_from",
    "index_keys", "last_time_ms", "lsn", "mem", "observers", "on_expired", "pending",
    "sink", "sink_batch", "snapshot_every", "snapshots", "spill", "tables", "tiered", "tierer",
    "views",
    "writer",
)
# fmt: on
TouchCallback = Callable[[int, bytes], None]
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
        # History out of memory (store.coldhistory): the spill file, once the server
        # gives one, and what moves entries there.
        self.spill: Any = None
        self.tierer = Tierer(self)
        self.tiered = False  # some entry went out (commitpath.version_one's pure path)
        self.expired_keys = 0
        # Told of each key expiry (lazy or active) while keyspace notifications want
        # `expired` events (commands.notify); None otherwise.
        self.on_expired: Callable[[Any, bytes], None] | None = None
        # A replica's store: it changes only by its primary's records, so expiry hides
        # keys whose time has come instead of deleting them.
        self.follower = False
        # CLIENT PAUSE holds expiry too: keys whose time has come read as missing but
        # are not deleted (as on a replica) until the pause ends.
        self.expiry_held = False
        self.history = history or HistoryPolicy()
        self.sink: RecordSink = sink or CountingSink()
        # (sink, batch, started): while `sink` is that sink, the commit appends to its
        # list `batch` without a call, then calls `started` if `batch` was empty; what
        # `sink.append(record)` does must be exactly that (flusher.Flusher).
        self.sink_batch: tuple[object, list[UpdateRecord], Callable[[], None]] | None = None
        self.lsn = 0
        self.last_time_ms = 0
        # The open transaction: the command whose ops are being applied (named in
        # their version entries), who it writes for, what it applied (with the undo
        # of each op) and, once a database-level op needed it, its commit time.
        self.cmd = ""
        self.writer: Writer | None = None
        self.pending: list[tuple[Any, bytes | None, Op, Undo, str]] = []
        self.commit_time = 0
        # (db, key) -> callbacks run when a commit touches the key (WATCH, blocking)
        self.observers: dict[tuple[int, bytes], list[TouchCallback]] = {}
        self.dirty_all: list[Callable[[int], None]] = []  # told of whole-db changes
        # The time index: commit time of every LSN, for TIME points and views. The
        # commit adds to the tails (a count, and a run where its time is new); the arrays
        # take them in before any read of `index_lsns` or `index_times`, and every 1,024
        # commits.
        self._index_lsns = array("q")
        self._index_times = array("q")
        # The tails: `_tail_n` commits with consecutive LSNs from `_tail_first`, and
        # their times as runs (the commits of one millisecond share a time object):
        # run i has time `_time_tail[i]` and starts at commit `_run_starts[i]` of the
        # tail.
        self._tail_first = 0
        self._tail_n = 0
        # Boxed items (`Any`): compiled, an item of a `list[int]` is unboxed when read
        # and boxed anew for `is`, which then never holds (a run per commit).
        self._time_tail: list[Any] = []
        self._run_starts: list[int] = []
        # The last commit time boxed, for the versions of one millisecond to share.
        self._time_ms = 0
        self._time_o: Any = 0
        # The version index: what each of those commits wrote (store.windex), known
        # for LSNs from index_from on.
        self.index_keys: list[Any] = []
        self.index_from = 0
        # Keys the version index refers to (counted up to entry `_index_weighed`): past
        # 2 * INDEX_KEYS it is cut to INDEX_KEYS from the front (store.windex).
        self._index_weight = 0
        self._index_weighed = 0
        self._index_many = 0  # key references of multi-key commits not yet weighed
        self.snapshots: dict[bytes, Snapshot] = {}
        self.mem = HistoryMemory()  # what history holds (store.accounting)
        self._pin: int | None = None  # pin_lsn's cache
        self.deferred_trims = False  # some Database.trim_next is not empty
        self.snapshot_every = 64  # collections keep a full copy every N versions
        # (db, LSN, clock) -> the view connections checked out there share, while any does
        self.views: weakref.WeakValueDictionary[tuple[int, int, int], ViewDatabase] = (
            weakref.WeakValueDictionary()
        )
        # Tables: "<namespace>:<table>" -> policy for every key under that prefix.
        self.tables: dict[bytes, TablePolicy] = {}
        self.default_sync = False  # the default table's durability (server flag)
        self.branches = Branches(self)  # name -> Branch
        # name -> (save, load) of other parts' state kept in checkpoints.
        self.extra_state: dict[str, tuple[Callable[[], Any], Callable[[Any], None]]] = {}
        self.extra_state["tables"] = (self._save_tables, self._load_tables)
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

    def apply(self, db: Database, key: bytes, op: Op) -> None:
        """Apply one op now (later reads see it); it is committed by `commit`."""
        if db.overlay:
            db.own(key)
        undo = counted_apply(db, key, op)  # apply_op, keeping the dataset's size
        self.pending.append((db.ident, key, op, undo, self.cmd))

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

    def trim_versions(self, db: Database, key: bytes, chain: list[Any], limit: int) -> None:
        """`versions:limit` retention after a write: a chain is cut back to `limit`
        once it reaches twice that; one a pin stopped trimming waits TRIM_STEP
        versions (a stale mark, more than a step ahead, is ignored). While some chain
        waits, a chain past twice its limit looks its mark up once every TRIM_STEP
        versions, not at every write (a pinned key's writes, issue 11)."""
        n = len(chain)
        over = n - 2 * limit
        if over > 0 and (not db.trim_next or over & (TRIM_STEP - 1) == 1):
            due = db.trim_next.get(key, 0)
            if n >= due or due - n > TRIM_STEP:
                self._trim(db, key, chain, n - limit)

    def _trim(self, db: Database, key: bytes, chain: list[VersionEntry], cut: int) -> None:
        """Drop chain[:cut], keeping every version newer than the oldest snapshot or
        branch fork. O(log n), and a chain the pin stopped short is tried again only
        after TRIM_STEP more versions: O(1) amortized per write under any pin. Its
        pinned accounting catches up then, or at `settle_trims` (which everything
        that reports or caps pinned history calls first)."""
        if db.chains.cold:  # entries out of memory come back first (store.coldhistory)
            cut += warm(self, db, key, chain)
        pin = self.pin_lsn()
        # Under a seal the versions kept are all newer than it: no search needed.
        pinned = 0 if chain[0][V_LSN] > pin else bisect_right(chain, pin, 0, cut, key=_entry_lsn)
        table = self.table_of(key) if self.tables else None
        stop = cut
        if pinned < cut:
            cut = pinned
        if cut > 0:
            self.mem.cut(db.ident, key, chain, cut, table)
            floor = db.floors[key] = chain[cut - 1][V_LSN]
            if floor > db.floor_mark:
                db.floor_mark = floor
            del chain[:cut]
        if cut < stop:
            # Past retention but pinned: counted as pinned history (once).
            self.mem.mark_pinned(db.ident, key, chain, 0, stop - cut, table)
            db.trim_next[key] = len(chain) + TRIM_STEP
            self.deferred_trims = True
        elif db.trim_next:
            db.trim_next.pop(key, None)

    def settle_trims(self) -> None:
        """Run the trims that pinned chains deferred (see `_trim`), so that what
        history pins is counted exactly: before INFO, TS.SNAPSHOTS, TS.TABLE INFO
        and the pinned-history caps read it. O(chains deferred)."""
        if not self.deferred_trims:
            return
        self.deferred_trims = False
        for db in [*self.dbs, *(d for b in self.branches.values() for d in b.dbs)]:
            due, db.trim_next = db.trim_next, {}
            for key in due:
                chain = dict.get(db.chains, key)
                if type(chain) is not list:
                    continue
                cut = self._retention_cut(key, chain)
                if cut:
                    self._trim(db, key, chain, cut)

    def _retention_cut(self, key: bytes, chain: list[VersionEntry]) -> int:
        """How many of `chain`'s oldest entries the key's retention drops, as of its
        newest version (0: none; a chain under `versions:N` is cut once it reaches
        2N, as on the write path)."""
        keep = self.retention_of(key)
        if keep.kind == "versions":
            return len(chain) - keep.limit if len(chain) > 2 * keep.limit else 0
        if keep.kind == "ms" and chain:
            t = chain[-1][V_TIME] - keep.limit
            return bisect_left(chain, t, 0, len(chain) - 1, key=_entry_time)
        return 0

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

    def retention_of(self, key: bytes) -> HistoryPolicy:
        """The history `key` keeps: its table's RETAIN, else the server's policy."""
        if self.tables:
            policy = self.policy_of(key)
            if policy is not None:
                return policy.retain
        return self.history

    def policy_of(self, key: bytes) -> TablePolicy | None:
        t = self.table_of(key)
        return None if t is None else self.tables[t]

    def durability_of(self, key: bytes) -> str:
        """async, sync or raft: the durability of the table `key` belongs to."""
        policy = self.policy_of(key)
        if policy is None:
            return "sync" if self.default_sync else "async"
        return policy.durability

    def _save_tables(self) -> Any:
        return [
            (name, p.durability, str(p.retain), p.snapshot_every, p.max_pinned)
            for name, p in self.tables.items()
        ]

    def _load_tables(self, saved: Any) -> None:
        # Checkpoints written before MAXPINNED existed hold four fields per table.
        self.tables = {
            name: TablePolicy(durability, HistoryPolicy.parse(retain), every, *rest)
            for name, durability, retain, every, *rest in saved
        }

    def pin_lsn(self) -> int:
        """Versions newer than this are needed by a sealed snapshot or a branch.
        Cached: snapshots and branches change only by database-level ops and
        checkpoint loads, which forget it."""
        pin = self._pin
        if pin is None:
            pins = [snap.lsn for snap in self.snapshots.values()]
            # A fork at LSN 0 (the empty state) needs no history of the main line.
            pins.extend(b.fork_lsn for b in self.branches.values() if b.fork_lsn)
            pin = self._pin = min(pins) if pins else 1 << 62
        return pin

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
        versions), without handing it to the sink."""
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
        self.index_lsns.append(record[R_LSN])
        self.index_times.append(record[R_TIME])
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

    def _expired(self, db: Database, key: bytes) -> None:
        if self.follower or self.expiry_held:
            return  # a replica hides the key; its primary's deletion comes as a record
        saved = self.cmd
        self.cmd = "expired"
        self.apply(db, key, (DEL,))
        self.cmd = saved
        self.expired_keys += 1
        if self.on_expired is not None:
            self.on_expired(db.ident, key)

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

    def value_as_of(self, dbi: Any, key: bytes, lsn: int) -> tuple[Any, int | None]:
        """The key's (value, expire_ms) just after `lsn` (`store.asof.value_as_of`)."""
        return value_as_of(self, dbi, key, lsn)

    def states_back(
        self, dbi: Any, key: bytes, chain: list[VersionEntry], lsns: Iterable[int]
    ) -> Iterator[tuple[Any, int | None]]:
        """The key's states just after each of `lsns`, newest first, walking back one
        version at a time (`store.asof.states_back`)."""
        return states_back(self, dbi, key, chain, lsns)

    # -- points in time ----------------------------------------------------------------

    def lsn_at_time(self, t_ms: int) -> int:
        """The last LSN committed at or before `t_ms` (0 before the first)."""
        i = bisect_right(self.index_times, t_ms)
        return self.index_lsns[i - 1] if i else 0

    def keys_written(self, ident: Any, lo: int, hi: int) -> set[bytes] | None:
        """Keys of database `ident` written with lo < LSN <= hi, from the version
        index; None when that is not known (a SWAPDB in between, or a range before
        the index's start)."""
        if lo + 1 < self.index_from:
            return None
        skip = len(self.index_lsns) - len(self.index_keys)
        return windex.keys_written(self.index_lsns, self.index_keys, ident, lo, hi, skip)

    @property
    def index_lsns(self) -> array[int]:
        """The time index's LSNs, one per commit (ascending)."""
        if self._tail_n:
            self._take_tails()
        return self._index_lsns

    @index_lsns.setter
    def index_lsns(self, lsns: array[int]) -> None:
        self._take_tails()
        self._index_lsns = lsns

    @property
    def index_times(self) -> array[int]:
        """The time index's commit times, beside `index_lsns`."""
        if self._tail_n:
            self._take_tails()
        return self._index_times

    @index_times.setter
    def index_times(self, times: array[int]) -> None:
        self._take_tails()
        self._index_times = times

    def _take_tails(self) -> None:
        """Move the commits' LSNs and times from the tails into the arrays: the LSNs
        as bytes made from the range (`bulkreplay.lsn_bytes`), the times one run at a
        time, the bytes of its time repeated (one `struct` call per run, where one per
        commit cost ~280 instructions a commit)."""
        n = self._tail_n
        if n:
            first = self._tail_first
            lsns = [lsn_bytes(first + i, min(256, n - i)) for i in range(0, n, 256)]
            self._index_lsns.frombytes(b"".join(lsns))
            self._index_times.frombytes(run_bytes(self._time_tail, self._run_starts, n))
            self._tail_n = 0
            self._time_tail = []
            self._run_starts = []

    def reset_index_weight(self) -> None:
        """The index was replaced (an image loaded): weigh it again."""
        self._index_weight = self._index_weighed = 0

    def bound_index(self) -> None:
        """Keep the version index to about INDEX_KEYS key references
        (`store.windex.bound`). O(1) amortized per commit."""
        keys = self.index_keys
        weight, weighed, index_from = windex.bound(
            keys, self.index_lsns, self._index_weight, self._index_weighed
        )
        self._index_weight, self._index_weighed = weight, weighed
        if index_from:
            self.index_from = index_from

    def time_of(self, lsn: int) -> int:
        """When `lsn` was committed (0 for LSN 0)."""
        i = bisect_right(self.index_lsns, lsn)
        return self.index_times[i - 1] if i else 0

    def views_memory(self) -> tuple[int, int]:
        """(views, estimated bytes they hold)."""
        views = list(self.views.values())
        return len(views), sum(v.cached_bytes() for v in views)

    def view(self, dbi: int, lsn: int) -> Database:
        """Database `dbi` just after `lsn`, read-only, made in O(1) and shared by every
        caller at the same point while one holds it (`store.views`)."""
        at = self.time_of(lsn) if lsn < self.lsn else now_ms()
        k = (dbi, lsn, at)
        view = self.views.get(k)
        if view is None:
            view = self.views[k] = make_view(self, dbi, lsn, at)
        return view

    # -- database-level changes ----------------------------------------------------

    def checkpoint_extra(self) -> dict[str, Any]:
        """State of other parts (tables, branches, function libraries) for checkpoints,
        by name; a part with nothing to keep (None) is left out."""
        extra = {name: fn() for name, (fn, _load) in self.extra_state.items()}
        return {name: value for name, value in extra.items() if value is not None}

    def load_checkpoint_extra(self, extra: dict[str, Any]) -> None:
        self._pin = None  # the image brought its snapshots and branches
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
        elif name == "import":  # keys of a slot range taken from another shard
            moves.install(self, op[1])
        elif name == "forget":  # ... and given to another shard
            moves.forget(self, dbi, op[1])
        else:
            raise ValueError(f"unknown database op {name!r}")
        self._pin = None  # a seal, unseal, branch or drop moves what history is pinned
        if self.deferred_trims:
            self.settle_trims()  # trimming resumes at once where a pin went away
