"""The effects that change the keyspace, and their inverses.

A command handler decides what to change and expresses it as ops: small tuples
whose first element names the effect. `apply_op` is the only code that mutates a
database; it returns the ops that undo what it did, which the version chain keeps
so that any retained version can be rebuilt from the latest value. Update records
carry the same ops, so replay applies exactly what the live server applied.

Every op is deterministic: times are absolute, random choices are already made,
and values that enter the keyspace are copied so a record never aliases a live
object.

What an op is (`Op`, `Undo`, the op names, the shared undos) is `store.opnames`'s, the
bottom of the store, and importable from here.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

from store.opnames import CREATED as CREATED
from store.opnames import DEL as DEL
from store.opnames import EXPIRE as EXPIRE
from store.opnames import HDEL as HDEL
from store.opnames import HSET as HSET
from store.opnames import HSETF as HSETF
from store.opnames import KEEP_TTL as KEEP_TTL
from store.opnames import LPOP as LPOP
from store.opnames import LPUSH as LPUSH
from store.opnames import LSET as LSET
from store.opnames import POP_ONE_LEFT as POP_ONE_LEFT
from store.opnames import POP_ONE_RIGHT as POP_ONE_RIGHT
from store.opnames import RESTORE as RESTORE
from store.opnames import RPOP as RPOP
from store.opnames import RPUSH as RPUSH
from store.opnames import SADD as SADD
from store.opnames import SET as SET
from store.opnames import SETRANGE as SETRANGE
from store.opnames import SREM as SREM
from store.opnames import ZADD as ZADD
from store.opnames import ZREM as ZREM
from store.opnames import Op as Op
from store.opnames import Undo as Undo
from store.opnames import lookup as lookup
from store.values import (
    LIMITS,
    HashSet,
    HashTable,
    ZSet,
    copy_value,
    is_int_member,
)

if TYPE_CHECKING:
    from store.database import Database


# deque's methods as plain callables: the compiled build calls them directly, where a
# method call on an untyped value looks its name up on the type each time.
_appendleft: Final = deque.appendleft
_append: Final = deque.append

ApplyFn = Callable[["Database", bytes, Op], Undo]
# Every op but the common writes `apply_op_on` calls directly (SET, HSET, LPUSH, RPUSH,
# ZADD), by name. Final: a C static in the compiled build.
APPLY: Final[dict[str, ApplyFn]] = {}


def register(name: str) -> Callable[[ApplyFn], ApplyFn]:
    """Add an op to the table (value families outside this module use it too)."""

    def deco(fn: ApplyFn) -> ApplyFn:
        APPLY[name] = fn
        return fn

    return deco


def apply_op(db: Database, key: bytes, op: Op) -> Undo:
    """Apply `op` to `key`, returning its undo."""
    return apply_op_on(db, key, op, lookup(db.data, key))


def apply_op_on(db: Database, key: bytes, op: Op, old: Any) -> Undo:
    """`apply_op` where `old` is the key's value now (`lookup(db.data, key)`, which the
    caller has read): the common writes are direct calls (C calls in the compiled
    build) that take it instead of looking it up again, the rest go through the
    `APPLY` table."""
    name: str = op[0]
    if name == HSET:
        return _hset_on(db, key, op, old)
    if name == SET:
        return _apply_set(db, key, op)
    if name == LPUSH:
        return _push(db, key, op, True, old)
    if name == RPUSH:
        return _push(db, key, op, False, old)
    if name == ZADD:
        return _apply_zadd(db, key, op)
    return APPLY[name](db, key, op)


def _prior(db: Database, key: bytes) -> Op:
    return (RESTORE, db.data.get(key), db.expires.get(key))


def _set_expiry(db: Database, key: bytes, at: int | None) -> None:
    if at is None:
        db.expires.pop(key, None)
    else:
        db.expires[key] = at
        db.schedule_expiry(key, at)


def _drop(db: Database, key: bytes) -> None:
    del db.data[key]
    if db.overlay or db.expires:  # a branch's overlay is asked nothing it must count
        db.expires.pop(key, None)


def _apply_set(db: Database, key: bytes, op: Op) -> Undo:
    data = db.data
    expires = db.expires
    old = lookup(data, key)
    oldexp = expires.get(key) if db.overlay or expires else None
    value = op[1]
    data[key] = value if type(value) is bytes else copy_value(value)
    ttl = op[2]
    if ttl is None:
        if oldexp is not None:
            del expires[key]
    elif ttl != KEEP_TTL:
        expires[key] = ttl
        db.schedule_expiry(key, ttl)
    if old is None and oldexp is None:
        return CREATED
    return ((RESTORE, old, oldexp),)


@register(RESTORE)
def _apply_restore(db: Database, key: bytes, op: Op) -> Undo:
    undo = (_prior(db, key),)
    value = op[1]
    if value is None:
        if key in db.data:
            _drop(db, key)
    else:
        db.data[key] = copy_value(value)
        _set_expiry(db, key, op[2])
    return undo


@register(DEL)
def _apply_del(db: Database, key: bytes, op: Op) -> Undo:
    undo = (_prior(db, key),)
    if key in db.data:
        _drop(db, key)
    return undo


@register(EXPIRE)
def _apply_expire(db: Database, key: bytes, op: Op) -> Undo:
    undo: Undo = ((EXPIRE, db.expires.get(key)),)
    _set_expiry(db, key, op[1])
    return undo


def _emptied(db: Database, key: bytes, oldexp: int | None, undo: list[Op]) -> Undo:
    """A collection became empty: Redis deletes the key; the undo re-arms its TTL."""
    _drop(db, key)
    if oldexp is not None:
        undo.append((EXPIRE, oldexp))
    return tuple(undo)


@register(SETRANGE)
def _apply_setrange(db: Database, key: bytes, op: Op) -> Undo:
    _, offset, data, length = op
    buf = db.data.get(key)
    if type(buf) is bytearray:
        undo: Undo = ((SETRANGE, offset, bytes(buf[offset : offset + len(data)]), len(buf)),)
    else:  # a new key, or an immutable string: the undo restores it as it was
        undo = (_prior(db, key),)
        buf = bytearray(buf) if buf is not None else bytearray()
        db.data[key] = buf
    n = len(buf)
    if length > n:
        buf += bytes(length - n)
    elif length < n:
        del buf[length:]
    buf[offset : offset + len(data)] = data
    return undo


def _hset_on(db: Database, key: bytes, op: Op, old: Any) -> Undo:
    pairs = op[1]
    h: dict[bytes, bytes] | None = old  # typed: C dict calls when compiled
    if h is None:
        h = {}
        db.data[key] = h
        undo: Undo = CREATED
    elif len(pairs) == 1:  # HSET key field value: the undo and the loop below, directly
        # Typed tuples, as in _push: the compiled build reads their items without a
        # generic call.
        one: tuple[Any, ...] = pairs if isinstance(pairs, tuple) else tuple(pairs)
        pair: tuple[Any, ...] = one[0] if isinstance(one[0], tuple) else tuple(one[0])
        f: bytes = pair[0]
        v: bytes = pair[1]
        was = h.get(f)
        h[f] = v
        most = LIMITS.hash_value
        _fit_hash(db, key, h, len(f) > most or len(v) > most)
        return ((HDEL, (f,)),) if was is None else ((HSETF, f, was),)
    else:
        olds = tuple((f, h[f]) for f, _ in pairs if f in h)
        news = tuple(f for f, _ in pairs if f not in h)
        u: list[Op] = []
        if news:
            u.append((HDEL, news))
        if olds:
            u.append((HSET, olds))
        undo = tuple(u)
    most = LIMITS.hash_value
    longer = False  # a field or value past hash-max-listpack-value
    for f, v in pairs:
        h[f] = v
        if len(f) > most or len(v) > most:
            longer = True
    _fit_hash(db, key, h, longer)
    return undo


@register(HSETF)
def _apply_hsetf(db: Database, key: bytes, op: Op) -> Undo:
    return _hset_on(db, key, (HSET, ((op[1], op[2]),)), lookup(db.data, key))


class _Conversions:
    """How many compact hashes `_fit_hash` has replaced at their keys: while the count
    stays, an HSET left the hash it changed at its key (`dataset.counted_apply_on`
    needs no lookup to find out)."""

    def __init__(self) -> None:
        self.n = 0


CONVERSIONS: Final = _Conversions()


def _fit_hash(db: Database, key: bytes, h: dict[bytes, bytes], longer: bool) -> None:
    """A compact hash (a dict) with a field or value past hash-max-listpack-value
    (`longer`) or more fields than hash-max-listpack-entries becomes a HashTable."""
    if type(h) is dict and (longer or len(h) > LIMITS.hash_entries):
        db.data[key] = HashTable(h)
        CONVERSIONS.n += 1


@register(HDEL)
def _apply_hdel(db: Database, key: bytes, op: Op) -> Undo:
    h = db.data[key]
    removed = tuple((f, h.pop(f)) for f in op[1] if f in h)
    undo: list[Op] = [(HSET, removed)] if removed else []
    if not h:
        # Re-create with the same encoding it had.
        undo = [(RESTORE, type(h)(removed), db.expires.get(key))]
        _drop(db, key)
    return tuple(undo)


def _push(db: Database, key: bytes, op: Op, left: bool, old: Any) -> Undo:
    lst = old
    # A tuple (what every maker of the op builds; anything else is made one): typed,
    # the compiled build reads its items without a generic call.
    items: tuple[Any, ...] = op[1] if isinstance(op[1], tuple) else tuple(op[1])
    n = len(items)
    if lst is None:
        lst = deque()
        db.data[key] = lst
        undo: Undo = CREATED
    elif n == 1:
        undo = POP_ONE_LEFT if left else POP_ONE_RIGHT
    else:
        undo = ((LPOP if left else RPOP, n),)
    if n == 1:
        if left:
            _appendleft(lst, items[0])
        else:
            _append(lst, items[0])
    elif left:
        lst.extendleft(items)
    else:
        lst.extend(items)
    return undo


def _pop(db: Database, key: bytes, op: Op, left: bool) -> Undo:
    lst: deque[bytes] = db.data[key]
    n = min(op[1], len(lst))
    pop = lst.popleft if left else lst.pop
    popped = [pop() for _ in range(n)]
    popped.reverse()
    undo: list[Op] = [(LPUSH if left else RPUSH, tuple(popped))]
    if not lst:
        return _emptied(db, key, db.expires.get(key), undo)
    return tuple(undo)


@register(LPOP)
def _apply_lpop(db: Database, key: bytes, op: Op) -> Undo:
    return _pop(db, key, op, True)


@register(RPOP)
def _apply_rpop(db: Database, key: bytes, op: Op) -> Undo:
    return _pop(db, key, op, False)


@register(LSET)
def _apply_lset(db: Database, key: bytes, op: Op) -> Undo:
    lst = db.data[key]
    i = op[1]
    old = lst[i]
    lst[i] = op[2]
    return ((LSET, i, old),)


@register(SADD)
def _apply_sadd(db: Database, key: bytes, op: Op) -> Undo:
    s = db.data.get(key)
    members = op[1]
    if s is None:
        s = set()
        db.data[key] = s
        undo: Undo = CREATED
    else:
        added = tuple(m for m in members if m not in s)
        undo = ((SREM, added),) if added else ()
    s.update(members)
    if type(s) is set and (
        len(s) > LIMITS.set_entries or not all(is_int_member(m) for m in members)
    ):
        db.data[key] = HashSet(s)
    return undo


@register(SREM)
def _apply_srem(db: Database, key: bytes, op: Op) -> Undo:
    s = db.data[key]
    removed = tuple(m for m in op[1] if m in s)
    s.difference_update(removed)
    if not s:
        undo = [(RESTORE, type(s)(removed), db.expires.get(key))]
        _drop(db, key)
        return tuple(undo)
    return ((SADD, removed),) if removed else ()


def _apply_zadd(db: Database, key: bytes, op: Op) -> Undo:
    z = lookup(db.data, key)
    if z is None:
        z = ZSet()
        db.data[key] = z
        for m, sc in op[1]:
            z.add(m, sc)
        return CREATED
    olds: list[tuple[bytes, float]] = []
    news: list[bytes] = []
    seen: set[bytes] = set()
    for m, sc in op[1]:
        old = z.add(m, sc)
        if m in seen:
            continue  # the first occurrence already knows the prior state
        seen.add(m)
        if old is None:
            news.append(m)
        else:
            olds.append((m, old))
    u: list[Op] = []
    if news:
        u.append((ZREM, tuple(news)))
    if olds:
        u.append((ZADD, tuple(olds)))
    return tuple(u)


@register(ZREM)
def _apply_zrem(db: Database, key: bytes, op: Op) -> Undo:
    z: ZSet = db.data[key]
    removed = []
    for m in op[1]:
        old = z.remove(m)
        if old is not None:
            removed.append((m, old))
    if not z:
        prior = ZSet()
        for m, sc in removed:
            prior.add(m, sc)
        prior.big = z.big
        undo = ((RESTORE, prior, db.expires.get(key)),)
        _drop(db, key)
        return undo
    return ((ZADD, tuple(removed)),) if removed else ()
