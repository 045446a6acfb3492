"""The live dataset's size, kept as it changes: what INFO's used_memory and maxmemory
count (commands.evict).

Each database keeps `used`, the sum of an estimate per live key: the key (its bytes
and its slot in the database's dict) plus its value. A string's estimate is exact to
the object (its length and the bytes object's header); a collection's is a base plus
its length times a per-element cost sampled from `SAMPLES` of its elements
(`Database.sizes` keeps that cost and the length it was sampled at, and samples again
when the length has doubled or halved, or the value is a new object). Every change to
a key goes through `counted_apply` (or `counted_apply_on`, given the value the caller
has read), which weighs the key before and after its op: a string write costs two
lengths more; a collection changed in place adds its length change times the cost it
was counted at (one lookup of that cost) unless that cost is `_stale`. Replay and
loading count through the same function or `recount` the database afterwards.

Retained history (the versions the history policy keeps) is not part of this figure:
it is reported apart (INFO temporalstore history_*) and bounded by retention.
"""

from __future__ import annotations

import sys
from collections import deque
from itertools import islice
from typing import TYPE_CHECKING, Any, Final

from store.ops import CONVERSIONS, HSET, LPUSH, RPUSH, Op, Undo, apply_op_on, lookup
from store.stream import Stream
from store.values import ZSet

if TYPE_CHECKING:
    from store.database import Database

# A key: its bytes object's header and its slot in the database's dict.
KEY_BYTES: Final = 33 + 32
STRING_BYTES: Final = 33  # a bytes value's header (sys.getsizeof(b"") == 33)
BUFFER_BYTES: Final = 57  # a bytearray's header (strings written in place, bitmaps, HLLs)
COLLECTION_BYTES: Final = 232  # an empty collection object and its first table
SLOT_BYTES: Final = 32  # one element's slot in a hash table, deque block or sorted index
ZSET_ITEM_BYTES: Final = 24 + 56 + 8  # a score float, its (score, member) tuple, its index slot
STRING_KEY_BYTES: Final = KEY_BYTES + STRING_BYTES  # a key holding a bytes value, but the lengths
SAMPLES: Final = 5
_size = sys.getsizeof


def _avg(items: Any, each: Any) -> int:
    taken = list(islice(items, SAMPLES))
    return sum(map(each, taken)) // len(taken) if taken else 0


def _pair(kv: tuple[Any, Any]) -> int:
    return _size(kv[0]) + _size(kv[1])


def _entry(e: Any) -> int:
    return _size(e[0]) + _size(e[1]) + sum(map(_size, e[1]))


def per_element(v: Any) -> int:
    """One element's estimated bytes, from the first `SAMPLES` elements."""
    if isinstance(v, dict):
        return SLOT_BYTES + _avg(v.items(), _pair)
    if isinstance(v, (set, deque)):
        return SLOT_BYTES + _avg(v, _size)
    if isinstance(v, ZSet):
        return SLOT_BYTES + ZSET_ITEM_BYTES + _avg(v.scores, _size)
    if isinstance(v, Stream):
        return SLOT_BYTES + _avg(v.entries.values(), _entry)
    return SLOT_BYTES


# A `Database.sizes` entry (per-element cost, length, value) is read here as a
# tuple[Any, ...]: typed tuple[int, int, Any], the compiled build would unpack it
# (type checks, ints unboxed) at each use.
Sizes = tuple[Any, ...]


def _stale(c: Sizes, v: Any, n: int) -> bool:
    """The element cost `c` (a `Database.sizes` entry) is to be sampled again for
    collection `v` of length `n`: its length doubled or halved since, or `v` is new."""
    at: int = c[1]
    return c[2] is not v or n > 2 * at + 8 or 2 * n + 8 < at


def _weigh_new(db: Database, key: bytes, v: Any) -> int:
    """The estimate of `key` now holding collection `v`, sampling its element cost
    when it has none yet or it is `_stale`."""
    n = len(v)
    c: Sizes | None = db.sizes.get(key)
    if c is None or _stale(c, v, n):
        per = per_element(v)
        db.sizes[key] = (per, n, v)
    else:
        per = c[0]
    return KEY_BYTES + len(key) + COLLECTION_BYTES + n * per


def weigh(db: Database, key: bytes, v: Any) -> int:
    """The estimate of live key `key` with value `v` (for a collection, sampling as
    `_weigh_new`)."""
    t = type(v)
    if t is bytes or t is bytearray:
        return _weight(db, key, v)
    return _weigh_new(db, key, v)


def _weight(db: Database, key: bytes, v: Any) -> int:
    """The estimate `key` holding `v` was counted at (a collection's from the cost
    `Database.sizes` keeps, with its length now: measured before an op changes it in
    place)."""
    t = type(v)
    if t is bytes:
        return STRING_KEY_BYTES + len(key) + len(v)
    if t is bytearray:
        return KEY_BYTES + BUFFER_BYTES + len(key) + len(v)
    return _counted(key, len(v), db.sizes.get(key))


def _counted(key: bytes, n: int, c: Any) -> int:
    """A collection of length `n` at `key` at the element cost `c` (its
    `Database.sizes` entry, None when it has none: not counted)."""
    return 0 if c is None else KEY_BYTES + COLLECTION_BYTES + len(key) + n * c[0]


def counted_apply(db: Database, key: bytes, op: Op) -> Undo:
    """`store.ops.apply_op`, keeping `db.used` (see the module docstring)."""
    return counted_apply_on(db, key, op, lookup(db.data, key))


def counted_apply_on(db: Database, key: bytes, op: Op, old: Any) -> Undo:
    """`counted_apply` where `old` is the key's value now (`lookup(db.data, key)`)."""
    data = db.data
    # A string value is immutable: it can be weighed after the op.
    before = -1
    if old is not None and type(old) is not bytes and type(old) is not bytearray:
        n = len(old)
        converted = CONVERSIONS.n
        undo = apply_op_on(db, key, op, old)
        name: str = op[0]
        # A push leaves the list it extends at the key, an HSET the hash it changes
        # unless it made it a HashTable (`CONVERSIONS`): no lookup to find out.
        if name in (LPUSH, RPUSH) or (name == HSET and CONVERSIONS.n == converted):
            new = old
        else:
            new = lookup(data, key)
        m = len(new) if new is old else -1
        if m == n:
            # Changed in place, its length unchanged (a field's or a member's new
            # value): counted as it was (ops leave `sizes` alone; its element cost is
            # sampled again at a change of length).
            return undo
        c: Sizes | None = db.sizes.get(key)
        if m >= 0 and c is not None:
            # A collection changed in place: its length change at the cost it was
            # counted at, unless that is to be sampled again.
            if not _stale(c, new, m):
                per: int = c[0]
                db.used += (m - n) * per
                return undo
        before = _counted(key, n, c)
    else:
        if old is not None and type(old) is bytearray:
            before = _weight(db, key, old)
        undo = apply_op_on(db, key, op, old)
        new = lookup(data, key)
    if before < 0 and type(new) is bytes:  # a string written over a string or nothing
        if old is None:
            db.used += STRING_KEY_BYTES + len(key) + len(new)
        else:
            db.used += len(new) - len(old)
        return undo
    if before < 0:
        before = 0 if old is None else STRING_KEY_BYTES + len(key) + len(old)
    if new is None:
        after = 0
    else:
        t = type(new)
        if t is bytes or t is bytearray:
            after = _weight(db, key, new)
        else:
            after = _weigh_new(db, key, new)
    if db.sizes and (new is None or type(new) is bytes or type(new) is bytearray):
        db.sizes.pop(key, None)  # no collection there any more
    db.used += after - before
    return undo


def recount(db: Database) -> None:
    """Count the database again from its values (after loading, or a change made
    without `counted_apply`). O(keys)."""
    db.sizes = {}
    db.used = sum(weigh(db, k, v) for k, v in db.data.items())
