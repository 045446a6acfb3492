"""The keyspace's state and the operations its features build on: the bottom of
store/'s layers.

`StoreCore` holds every field of the Store (the numbered databases, the open
transaction, the time and version index, tables, sealed snapshots, what history
holds) and the operations the features call on them: applying an op in the open
transaction, the database a record names, retention and its trims (taking entries
out of memory back first), tables' policies, the time index, the other parts' state
kept in checkpoints. The features (reads in the past `asof`, `views`, `branches`,
history out of memory `coldhistory`, the commit's common cases `commitpath`,
checkpoint images `image`, replay in bulk `bulkreplay`) take a `StoreCore` and
never import the Store; `store.keyspace.Store` extends it with the commit and with
what the features make (branches, views, the tierer). Where a feature needs the
Store's own work, the core declares it as a hook the Store implements (`replay`).

A real class, not a Protocol: compiled (tools/compiled.py), the features read its
fields and call its methods natively.
"""

from __future__ import annotations

import struct
import sys
from array import array
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from typing import Any, Final

from store import windex
from store.accounting import HistoryMemory, chain_bytes
from store.chains import V_LSN, V_TIME, VersionEntry, _entry_lsn, _entry_time
from store.database import Database
from store.dataset import counted_apply
from store.ops import DEL, Op, Undo
from store.policy import HistoryPolicy, Snapshot, TablePolicy
from store.records import CountingSink, RecordSink, UpdateRecord, Writer

# A chain that a pin stopped trimming is tried again after this many more versions, so
# the check (and its pinned accounting) costs O(1) amortized per write.
TRIM_STEP: Final = 64  # a power of two (`StoreCore.trim_versions` masks with it)

TouchCallback = Callable[[int, bytes], None]

# `lsn_bytes`: the 256 low bytes, each alone, joined by the other seven bytes of an LSN.
_LOW_BYTES = [bytes([i]) for i in range(256)]
_LITTLE = sys.byteorder == "little"
_LSN_LIMIT = 1 << 63
_pack_q = struct.Struct("=q").pack  # an `array("q")` item: native order and size


def _joined(high: int, lows: list[bytes]) -> bytes:
    """The LSNs `high * 256 + low` for each of `lows` (one byte each, at least one)
    as `array('q')` holds them."""
    rest = high.to_bytes(7, sys.byteorder)
    joined = rest.join(lows)
    return joined + rest if _LITTLE else rest + joined


def run_bytes(times: list[int], starts: list[int], n: int) -> bytes:
    """The `array("q")` bytes of `n` commit times given as runs: run i is
    `times[i]`, from item `starts[i]` up to the next run's start (or `n`)."""
    if not times:
        return b""
    ends = [*starts[1:], n]
    return b"".join([_pack_q(t) * (e - s) for t, s, e in zip(times, starts, ends, strict=True)])


def lsn_bytes(first: int, n: int) -> bytes:
    """The LSNs `first` to `first + n - 1` as the version index's `array('q')`
    holds them (its bytes), without an int object per LSN for `struct.pack` to
    parse or `array.extend` to convert: up to 256 consecutive LSNs span at most two
    blocks of 256 that share their seven high bytes, so their bytes are the low
    bytes joined by those seven (`bytes.join`, in C; half the instructions)."""
    if not 0 < n <= 256 or first < 0 or first + n > _LSN_LIMIT:
        return struct.pack(f"{n}q", *range(first, first + n))
    high, low = divmod(first, 256)
    end = low + n
    if end <= 256:
        return _joined(high, _LOW_BYTES[low:end])
    return _joined(high, _LOW_BYTES[low:]) + _joined(high + 1, _LOW_BYTES[: end - 256])


class StoreCore:
    """The versioned keyspace's state and the operations its features build on
    (`store.keyspace.Store` is the whole store)."""

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
        # gives one.
        self.spill: Any = None
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
        # take them in before any read of `index_lsns` or the times, and every 1,024
        # commits. The LSNs one per commit (the version index's positions); the times
        # as runs (issue 29: 8 bytes a commit less): run i is time `_time_runs[i]`
        # from the commit at position `_time_run_at[i]` of `index_lsns` on. Commit
        # times never go back (a commit takes at least the last one's), so both arrays
        # are in order and bisected.
        self._index_lsns = array("q")
        self._time_runs = array("q")
        self._time_run_at = array("q")
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
        # Tables: "<namespace>:<table>" -> policy for every key under that prefix.
        self.tables: dict[bytes, TablePolicy] = {}
        self.default_sync = False  # the default table's durability (server flag)
        # name -> Branch: the core reads a branch's databases (`dbs`) and fork point
        # (`fork_lsn`); the Store puts its `store.branches.Branches` here.
        self.branches: dict[bytes, Any] = {}
        # name -> (save, load) of other parts' state kept in checkpoints.
        self.extra_state: dict[str, tuple[Callable[[], Any], Callable[[Any], None]]] = {}
        self.extra_state["tables"] = (self._save_tables, self._load_tables)

    # -- hooks: the Store's own work, which the features call through the core ------

    def replay(self, record: UpdateRecord) -> None:
        """Apply a persisted record exactly as it was committed (same LSN, time and
        versions), without handing it to the sink: `store.keyspace.Store.replay`
        (the commit's versioning and the database-level ops are the Store's)."""
        raise NotImplementedError

    # -- the open transaction ------------------------------------------------------

    def apply(self, db: Database, key: bytes, op: Op) -> None:
        """Apply one op now (later reads see it); it is committed by `commit`."""
        if db.overlay:
            db.own(key)
        undo = counted_apply(db, key, op)  # apply_op, keeping the dataset's size
        self.pending.append((db.ident, key, op, undo, self.cmd))

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

    # -- retention ----------------------------------------------------------------

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
            cut += self.warm(db, key, chain)
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

    def warm(self, db: Database, key: bytes, chain: list[Any]) -> int:
        """Take `key`'s entries out of memory (store.coldhistory) back in, in front of
        `chain` (the part in memory, changed in place); how many came back."""
        chains = db.chains
        ref = chains.cold.pop(key, None)
        if ref is None:
            return 0
        entries = chains.spill.entries(ref, free=True)
        chain[:0] = entries
        self.mem.cold_bytes -= chain_bytes(entries)
        self.mem.cold_versions -= len(entries)
        return len(entries)

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

    # -- points in time ----------------------------------------------------------------

    def lsn_at_time(self, t_ms: int) -> int:
        """The last LSN committed at or before `t_ms` (0 before the first)."""
        lsns = self.index_lsns  # the tails taken in
        runs = self._time_runs
        r = bisect_right(runs, t_ms)  # runs[:r] are at or before t_ms
        if not r:
            return 0
        last = self._time_run_at[r] - 1 if r < len(runs) else len(lsns) - 1
        return lsns[last]

    def first_lsn_from(self, t_ms: int) -> int | None:
        """The first LSN committed at or after `t_ms` (None after the last)."""
        lsns = self.index_lsns
        r = bisect_left(self._time_runs, t_ms)
        return lsns[self._time_run_at[r]] if r < len(self._time_runs) else None

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
        """The time index's commit times, one per item of `index_lsns`: a new array
        made from the runs (checkpoints and tests; reads use `time_of`, `time_at`)."""
        n = len(self.index_lsns)
        starts = self._time_run_at.tolist()
        return array("q", run_bytes(self._time_runs.tolist(), starts, n))

    @index_times.setter
    def index_times(self, times: array[int]) -> None:
        """Replace the times (one per item of `index_lsns`, set first)."""
        self._take_tails()
        self._time_runs = array("q")
        self._time_run_at = array("q")
        self._add_times(times, 0)

    def add_commit(self, lsn: int, t: int) -> None:
        """Index one commit (replay's, one at a time)."""
        lsns = self.index_lsns
        lsns.append(lsn)
        self._time_from(t, len(lsns) - 1)

    def add_commits(self, lsns: bytes, times: bytes) -> None:
        """Index commits in bulk: their LSNs and times as `array("q")` bytes."""
        at = len(self.index_lsns)
        self._index_lsns.frombytes(lsns)
        self._add_times(array("q", times), at)

    def _add_times(self, times: array[int], at: int) -> None:
        """The times of the commits from position `at` on, run by run: each run's
        end found by bisection (commit times are in order)."""
        i = 0
        n = len(times)
        while i < n:
            t = times[i]
            self._time_from(t, at + i)
            j = bisect_right(times, t, i)
            if times[j - 1] != t:  # not in order: take this one alone
                j = i + 1
            i = j

    def _time_from(self, t: int, i: int) -> None:
        """The commit at position `i` was made at `t`: a new run where `t` is not the
        last run's time."""
        runs = self._time_runs
        if not runs or runs[-1] != t:
            runs.append(t)
            self._time_run_at.append(i)

    def time_at(self, i: int) -> int:
        """The commit time of the commit at position `i` of `index_lsns`."""
        return self._time_runs[bisect_right(self._time_run_at, i) - 1]

    def _take_tails(self) -> None:
        """Move the commits' LSNs and times from the tails into the arrays: the LSNs
        as bytes made from the range (`lsn_bytes`), the times one run at a
        time, the bytes of its time repeated (one `struct` call per run, where one per
        commit cost ~280 instructions a commit)."""
        n = self._tail_n
        if n:
            first = self._tail_first
            at = len(self._index_lsns)
            lsns = [lsn_bytes(first + i, min(256, n - i)) for i in range(0, n, 256)]
            self._index_lsns.frombytes(b"".join(lsns))
            for t, start in zip(self._time_tail, self._run_starts, strict=True):
                self._time_from(t, at + start)
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
        return self.time_at(i - 1) if i else 0

    # -- checkpoints -----------------------------------------------------------------

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
