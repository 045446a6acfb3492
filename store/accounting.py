"""What history holds in memory, counted as it changes (O(1) per version).

Every retained version is counted when its commit appends it and uncounted when
trimming cuts it: `versions` and `bytes` for the main line, per branch for branch
databases. The bytes are an estimate (a fixed cost per entry plus the size of the
undo's payload: string lengths, a fixed cost per collection item), cheap enough
for the write path; the process' resident set stays the authority for maxmemory.

Pinned history is what retention (the history policy or a table's RETAIN) would
have dropped but a sealed snapshot or a branch fork still needs: `Store._trim`
counts an entry as pinned once, when trimming first stops short of it because of a
pin, and uncounts it when it is finally cut. Pinned bytes are kept per bucket of
`BUCKET` LSNs (so a snapshot's share, the pinned versions newer than it and not
newer than the next pin, is known to within a bucket at its boundaries) and per
table (for the tables' MAXPINNED caps).
"""

from __future__ import annotations

import itertools
import operator
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from store.chains import V_LSN, V_SNAP, V_UNDO, VersionEntry, _entry_lsn

ENTRY_BYTES: Final = 160  # a VersionEntry, its undo tuple and op tuple, the list slot
# ... whose undo restores a string (its bytes are counted besides).
REPLACED_STRING_BYTES: Final = ENTRY_BYTES + 33
# ... whose undo is kept as the replaced bytes alone (`store.chains.compact_undo`):
# without the undo's two tuples (48 + 64 bytes).
COMPACT_STRING_BYTES: Final = REPLACED_STRING_BYTES - 112
FIELD_BYTES: Final = ENTRY_BYTES + 66  # and two strings: a field and its old value
PACKED_BYTES: Final = 40  # a key's packed creating version: one int in the chains dict
ITEM_BYTES: Final = 64  # one field, member or item of a collection in an undo or a copy
SEQUENCE_BYTES: Final = 56  # the tuple (or collection) holding them
BUCKET_BITS: Final = 6
BUCKET: Final = 1 << BUCKET_BITS


def payload_bytes(x: Any) -> int:
    """Estimated size of one argument of an undo op (or of a full copy)."""
    t = type(x)
    if t is bytes:
        return len(x) + 33
    if t is bytearray:  # a string written in place (SETRANGE, APPEND, bitmaps, HLLs)
        return len(x) + 57
    if x is None or t is int or t is float:
        return 0
    try:
        return ITEM_BYTES * len(x) + SEQUENCE_BYTES
    except TypeError:
        return ITEM_BYTES


def entry_bytes(e: VersionEntry) -> int:
    """Estimated size of one version entry (its undo ops and any full copy)."""
    undo = e[V_UNDO]
    if isinstance(undo, bytes):  # the common one: a replaced string, kept compact
        n = COMPACT_STRING_BYTES + len(undo)
    else:
        # Lengths tested apart from the condition: `len(u) == 3` there narrows `u` to a
        # fixed-length tuple, which the compiled build unpacks at every read.
        ops = len(undo)
        if ops == 1 and e[V_SNAP] is None:
            u = undo[0]
            width = len(u)
            if width == 2:  # one argument: the loop below without its slice and calls
                x = u[1]
                if type(x) is tuple:  # fields, items or members (HSET, HDEL, ZREM, ...)
                    return ENTRY_BYTES + ITEM_BYTES * len(x) + SEQUENCE_BYTES
                if type(x) is int:  # a count (LPOP, RPOP)
                    return ENTRY_BYTES
            elif width == 3:
                x = u[1]
                y = u[2]
                if type(x) is bytes and (y is None or type(y) is int):
                    return REPLACED_STRING_BYTES + len(x)  # a replaced string, an expiry
                if type(x) is bytes and type(y) is bytes:  # a field, its old value (HSETF)
                    return FIELD_BYTES + len(x) + len(y)
        n = ENTRY_BYTES
        for u in undo:
            for x in u[1:]:
                n += payload_bytes(x)
    if e[V_SNAP] is not None:
        n += payload_bytes(e[V_SNAP][0])
    return n


def chain_bytes(chain: Iterable[VersionEntry]) -> int:
    return sum(map(entry_bytes, chain))


def _pin_bucket(pinned: dict[int, list[int]], bucket: int, size: int, n: int) -> None:
    """Count `n` more pinned entries of `size` bytes in all in LSN bucket `bucket`."""
    c = pinned.get(bucket)
    if c is None:
        pinned[bucket] = [size, n]
    else:
        c[0] = c[0] + size
        c[1] = c[1] + n


class HistoryMemory:
    """The running counts (see the module docstring)."""

    __slots__ = (
        "branches",
        "cold_bytes",
        "cold_versions",
        "main_bytes",
        "main_packed",
        "main_versions",
        "marks",
        "pinned",
        "pinned_bytes",
        "pinned_tables",
        "pinned_versions",
    )

    def __init__(self) -> None:
        self.main_bytes = 0
        self.main_versions = 0
        # Of those, packed creations (one int each: nothing to move out of memory) and
        # entries moved out of memory to the spill file (store.coldhistory).
        self.main_packed = 0
        self.cold_bytes = 0
        self.cold_versions = 0
        # branch name -> [bytes, versions] of its own versions
        self.branches: dict[bytes, list[int]] = {}
        self.pinned_bytes = 0
        self.pinned_versions = 0
        # LSN bucket -> [bytes, versions] of pinned entries with LSNs in it
        self.pinned: dict[int, list[int]] = {}
        self.pinned_tables: dict[bytes, int] = {}  # table -> pinned bytes of its keys
        # (database ident, key) -> LSN of the newest of its entries counted as pinned
        self.marks: dict[tuple[Any, bytes], int] = {}

    def add(self, ident: Any, nbytes: int, versions: int = 1) -> None:
        if type(ident) is int:
            self.main_bytes += nbytes
            self.main_versions += versions
        else:
            c = self.branches.setdefault(ident[0], [0, 0])
            c[0] += nbytes
            c[1] += versions

    def drop_branch(
        self, name: bytes, dbs: Iterable[Any], table_of: Callable[[bytes], bytes | None]
    ) -> None:
        """A dropped branch's versions and values go with it, and so does what its
        chains (`dbs`, the branch's databases) had counted as pinned."""
        self.branches.pop(name, None)
        chains = {db.ident: db.chains for db in dbs}
        for mk in [m for m in self.marks if type(m[0]) is not int and m[0][0] == name]:
            mark = self.marks.pop(mk)
            chain = dict.get(chains[mk[0]], mk[1]) if mk[0] in chains else None
            if type(chain) is list:
                self._unpin(chain, bisect_right(chain, mark, key=_entry_lsn), table_of(mk[1]))

    def mark_pinned(
        self,
        ident: Any,
        key: bytes,
        chain: Sequence[VersionEntry],
        start: int,
        stop: int,
        table: bytes | None,
    ) -> None:
        """chain[start:stop] is past retention but pinned: count what was not yet.

        The mark is an LSN, so a version's entries (a transaction writes one entry
        per write of the key, all with its LSN) are counted together, once all of
        them are past retention: never a part of one, nor the newest, which its
        transaction may still be adding to."""
        last = chain[stop - 1][V_LSN]
        if stop < len(chain) and chain[stop][V_LSN] == last:
            stop = bisect_left(chain, last, start, stop, key=_entry_lsn)
            if stop == start:
                return
            last = chain[stop - 1][V_LSN]
        mk = (ident, key)
        mark = self.marks.get(mk, 0)
        if last <= mark:
            return
        total = 0
        n = 0
        pinned = self.pinned
        if stop - start >= 2 and chain[stop - 2][V_LSN] == mark:
            first = stop - 1  # one write since the last mark: the common case
        else:
            first = bisect_right(chain, mark, start, stop, key=_entry_lsn)
        # The entries' counts summed per bucket of LSNs (consecutive entries share
        # one) before they go into `pinned`: typed sums, one dict update per bucket.
        bucket = -1
        bucket_bytes = 0
        bucket_n = 0
        for i in range(first, stop):
            e = chain[i]
            b = entry_bytes(e)
            lsn: int = e[V_LSN]
            if lsn >> BUCKET_BITS != bucket:
                if bucket_n:
                    _pin_bucket(pinned, bucket, bucket_bytes, bucket_n)
                bucket = lsn >> BUCKET_BITS
                bucket_bytes = 0
                bucket_n = 0
            bucket_bytes += b
            bucket_n += 1
            total += b
            n += 1
        if bucket_n:
            _pin_bucket(pinned, bucket, bucket_bytes, bucket_n)
        self.marks[mk] = last
        self.pinned_bytes += total
        self.pinned_versions += n
        if table is not None:
            self.pinned_tables[table] = self.pinned_tables.get(table, 0) + total

    def cut(
        self, ident: Any, key: bytes, chain: list[VersionEntry], stop: int, table: bytes | None
    ) -> None:
        """chain[:stop] is being dropped: uncount it (and its pinned share)."""
        mk = (ident, key)
        mark = self.marks.get(mk, 0)
        if mark:
            self._unpin(chain, bisect_right(chain, mark, 0, stop, key=_entry_lsn), table)
            if stop == len(chain) or chain[stop][V_LSN] > mark:
                del self.marks[mk]  # no counted entry is left
        total = 0
        for i in range(stop):
            total += entry_bytes(chain[i])
        self.add(ident, -total, -stop)

    def _unpin(self, chain: Sequence[VersionEntry], stop: int, table: bytes | None) -> None:
        """chain[:stop] was counted as pinned: uncount it."""
        unpinned = 0
        pinned = self.pinned
        for i in range(stop):
            e = chain[i]
            b = entry_bytes(e)
            bucket = e[V_LSN] >> BUCKET_BITS
            c = pinned[bucket]
            c[0] -= b
            c[1] -= 1
            if not c[1]:
                del pinned[bucket]
            unpinned += b
        if stop:
            self.pinned_bytes -= unpinned
            self.pinned_versions -= stop
            if table is not None:
                left = self.pinned_tables.get(table, 0) - unpinned
                if left > 0:
                    self.pinned_tables[table] = left
                else:
                    self.pinned_tables.pop(table, None)

    def pinned_between(self, lo: int, hi: int | None) -> tuple[int, int]:
        """(bytes, versions) of pinned entries with lo < LSN <= hi (hi None: no
        bound), to within a bucket at each end."""
        b_lo = (lo + 1) >> BUCKET_BITS
        b_hi = None if hi is None else (hi + 1) >> BUCKET_BITS
        nbytes = versions = 0
        for bucket, (b, n) in self.pinned.items():
            if bucket >= b_lo and (b_hi is None or bucket < b_hi):
                nbytes += b
                versions += n
        return nbytes, versions


def recount(store: Any, dbs: Iterable[Any]) -> HistoryMemory:
    """What the chains of `dbs` (a Store's, and its branches') hold, counted from
    scratch; `store` gives retention and pins (`Store.history_recount`). Entries out
    of memory (store.coldhistory) are read back and counted, also apart."""
    mem = HistoryMemory()
    pin = store.pin_lsn()
    for db in dbs:
        chains = db.chains
        # Most chains are packed ints: counted, and skipped, in C-level passes.
        raws = dict.values(chains)
        lists = list(map(operator.is_not, map(type, raws), itertools.repeat(int)))
        packed = len(lists) - lists.count(True)
        cold = chains.cold
        if store.tiered:  # keys whose entries are all out of memory: ints < 0
            for key, v in dict.items(chains):
                if type(v) is int and v < 0:
                    packed -= 1
                    _recount_chain(store, mem, db.ident, key, chains.spill.entries(-v), 0, pin)
        if packed:
            mem.add(db.ident, packed * PACKED_BYTES, packed)
            if type(db.ident) is int:
                mem.main_packed += packed
        for key, chain in itertools.compress(dict.items(chains), lists):
            ref = cold.get(key) if cold else None
            if ref is None:
                _recount_chain(store, mem, db.ident, key, chain, len(chain), pin)
            else:
                old = chains.spill.entries(ref)
                _recount_chain(store, mem, db.ident, key, old + chain, len(chain), pin)
    return mem


def _recount_chain(
    store: Any, mem: HistoryMemory, ident: Any, key: bytes, chain: list[Any], hot: int, pin: int
) -> None:
    """Count one key's `chain`, of which the last `hot` entries are in memory."""
    mem.add(ident, chain_bytes(chain), len(chain))
    if hot < len(chain):
        cold = chain[: len(chain) - hot]
        mem.cold_bytes += chain_bytes(cold)
        mem.cold_versions += len(cold)
    cut = store._retention_cut(key, chain)
    if not cut:
        return
    pinned = bisect_right(chain, pin, 0, cut, key=_entry_lsn)
    if pinned < cut:
        table = store.table_of(key) if store.tables else None
        mem.mark_pinned(ident, key, chain, pinned, cut, table)
