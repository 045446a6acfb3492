"""The cores of the commonest writes, which `commands.dispatch` calls directly (C
calls in the compiled build, not the handler's Python wrapper and argument parsing):
INCR/DECR/INCRBY/DECRBY, a push (LPUSH, RPUSH and their X forms), HSET of one field.
The command modules' handlers call the same functions, so both ways answer alike.
Kept apart from those modules because `commands.dispatch` imports this one early:
importing a command module there would register its commands first, and COMMAND lists
them in the order they were registered.

Each reads its key with `Database.get_written`: the write's version is the key's last
access, so under LRU the read's access time is stored only when the command ends
without writing (an error).

INCR's value keeps Redis' object identity for DEBUG OBJECT (`object_address`): an
integer INCR changes in place keeps its address, a shared integer has one.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Final

from commands.common import wrongtype
from commands.errors import NOT_INTEGER, OVERFLOW, CommandError
from commands.parsing import LLONG_MAX, LLONG_MIN, string2ll
from commands.replies import Reply
from commands.session import Session
from store import V_CMD
from store.commitpath import apply_on, set_string
from store.ops import HDEL, HSET, KEEP_TTL, LPUSH, RPUSH
from store.values import HashTable

_DEQUE: Final = deque  # compiled, a C static (a name from `collections`: a dict lookup)

_SHORT: Final = (1 << 62) - 1  # the largest int mypyc holds unboxed (tagged)


def incr_by(s: Session, key: bytes, incr: int) -> Reply:
    """INCR, DECR, INCRBY and DECRBY: the new value, stored as its decimal digits."""
    db = s.db
    v = db.get_written(key)
    last = LAST_INTEGER
    if v is None:
        value = 0
    elif v is last.digits:  # the value the last INCR stored (a counter's next INCR)
        value = last.value
    elif type(v) is bytes or type(v) is bytearray:
        n = string2ll(v if type(v) is bytes else bytes(v))
        if n is None:
            db.touched(key)
            raise CommandError(NOT_INTEGER)
        value = n
    else:
        db.touched(key)
        raise wrongtype()
    # Two operands within a tagged int (|x| <= 2**62 - 1) cannot overflow an int64:
    # the bounds (boxed ints in the compiled build) are reached for the others only.
    if (incr > _SHORT or incr < -_SHORT or value > _SHORT or value < -_SHORT) and (
        (incr < 0 and value < 0 and incr < LLONG_MIN - value)
        or (incr > 0 and value > 0 and incr > LLONG_MAX - value)
    ):
        db.touched(key)
        raise CommandError(OVERFLOW)
    value += incr
    # The value's digits, formatted once: stored, and sent as the reply's (the
    # pipeline writes a colon, `digits` and CRLF when the reply is `number`).
    new = b"%d" % value
    if type(v) is bytes and len(v) <= 20 and (value < 0 or value >= SHARED_INTEGERS):
        _in_place(s, key, v, new)
    set_string(s.store, db, key, new, KEEP_TTL, v)  # apply(db, key, (SET, new, KEEP_TTL))
    reply: Any = value  # boxed once: the reply and LAST_INTEGER hold the same object
    last.number = reply
    last.digits = new
    last.value = value
    return reply


class LastInteger:
    """The last integer INCR returned and the digits it stored: the pipeline sends
    them (after a colon, before CRLF: the same in RESP2 and RESP3) when the reply it
    encodes is this very object (proxy.pipeline), without formatting the number
    again, and the next INCR of that key finds them there (the very object, held
    here: its value is known without parsing it)."""

    def __init__(self) -> None:
        self.number: object = None
        self.digits: object = None
        self.value = 0


LAST_INTEGER: Final = LastInteger()


SHARED_INTEGERS: Final = 10000  # OBJ_SHARED_INTEGERS
_SHARED: dict[int, bytes] = {}  # one object per shared integer, for its address


def shares_integers(s: Session) -> bool:
    """Redis shares small integer values unless an LRU/LFU maxmemory policy is in force."""
    params = s.server.config.params
    if params.get("maxmemory", "0") in ("0", ""):
        return True
    policy = params.get("maxmemory-policy", "")
    return not (policy.endswith("-lru") or policy.endswith("-lfu"))


def shared_integer(s: Session, v: object) -> int | None:
    """The value, if Redis holds it as one of its shared integer objects."""
    if type(v) is bytes and len(v) <= 4 and shares_integers(s):
        n = string2ll(v)
        if n is not None and 0 <= n < SHARED_INTEGERS:
            return n
    return None


def object_address(s: Session, key: bytes, v: object) -> int:
    """DEBUG OBJECT's at: the value's identity, which a shared integer has in common
    with every key holding it, and which INCR keeps when it changes a value in place."""
    n = shared_integer(s, v)
    if n is not None:
        return id(_SHARED.setdefault(n, b"%d" % n))
    _store_kept()
    kept = s.server.debug.addresses.get((s.dbi, key))
    return kept[1] if kept is not None and kept[0] == id(v) else id(v)


class _Kept:
    """The entry of `ServerState.debug.addresses` the last in-place INCR made, held
    here until another key's INCR, or a reader, needs the dict (`_store_kept`): the
    common INCR of one counter past 10,000 updates it with a few field tests, without
    hashing a (db, key) tuple twice and two attribute lookups on Python objects."""

    def __init__(self) -> None:
        self.server: object = None  # the ServerState whose entry this is
        self.dbi = 0
        self.key: bytes | None = None  # None: nothing held
        self.ident = 0  # the id of the value now
        self.addr = 0  # the address it keeps


_KEPT: Final = _Kept()


def _store_kept() -> None:
    """Put the entry held in `_KEPT` into its server's dict."""
    k = _KEPT
    if k.key is not None:
        server: Any = k.server
        server.debug.addresses[(k.dbi, k.key)] = (k.ident, k.addr)
        k.key = None
        k.server = None


def _in_place(s: Session, key: bytes, old: bytes, new: bytes) -> None:
    """Redis' INCR changes an integer-encoded, unshared value in place (when the result
    is not a shared integer either): the new value keeps the old one's address."""
    k = _KEPT
    if k.server is s.server and k.dbi == s.dbi and k.ident == id(old) and k.key == key:
        # The same counter as the last in-place INCR, still holding the value it wrote.
        k.ident = id(new)
        return
    _store_kept()
    addresses = s.server.debug.addresses
    at = (s.dbi, key)
    kept = addresses.get(at)
    if kept is not None and kept[0] == id(old):
        # `old` is the value an INCR changed in place before (an unshared integer that
        # INCRBYFLOAT did not write; the identity trusted as `object_address` trusts it):
        # the checks below would pass and return the address kept. The common INCR of
        # a counter past 10,000, without walking the key's version chain.
        address = kept[1]
    elif shared_integer(s, old) is not None or writer_of(s, key) == "incrbyfloat":
        return
    else:
        address = object_address(s, key, old)
        if len(addresses) > 1024 + 2 * len(s.db):  # forget replaced values now and then
            dbs = s.store.dbs
            for (dbi, k2), (ident, _) in list(addresses.items()):
                db = dbs[dbi] if type(dbi) is int and 0 <= dbi < len(dbs) else None
                if db is None or id(db.data.get(k2)) != ident:
                    del addresses[(dbi, k2)]
    k.server = s.server
    k.dbi = s.dbi
    k.key = key
    k.ident = id(new)
    k.addr = address


# Commands that change only a key's expiry, not the value's encoding.
_TTL_ONLY = frozenset({"expire", "pexpire", "expireat", "pexpireat", "persist", "getex"})


def writer_of(s: Session, key: bytes) -> str:
    """The command that last wrote the key's value (from its version chain)."""
    for entry in reversed(s.db.chains.get(key, ())):
        if entry[V_CMD] not in _TTL_ONLY:
            return str(entry[V_CMD])
    return ""


def push(s: Session, key: bytes, items: tuple[bytes, ...], left: bool, xx: bool) -> int:
    """LPUSH/RPUSH (`xx`: LPUSHX/RPUSHX) of `items`: the list's length after."""
    db = s.db
    lst = db.get_written(key)
    if lst is None:
        if xx:
            return 0
        n = 0
    elif type(lst) is not _DEQUE:
        db.touched(key)
        raise wrongtype()
    else:
        n = len(lst)
    apply_on(s.store, db, key, (LPUSH if left else RPUSH, items), lst)
    return n + len(items)


def hset_one(s: Session, key: bytes, field: bytes, value: bytes) -> int:
    """HSET of one field: 1 if the field is new, else 0."""
    db = s.db
    h = db.get_written(key)
    if h is not None and type(h) is not dict and type(h) is not HashTable:
        db.touched(key)
        raise wrongtype()
    undo = apply_on(s.store, db, key, (HSET, ((field, value),)), h)
    # The field was new if its undo deletes it (or the key: CREATED), no lookup.
    first: str = undo[0][0]  # typed: a str comparison, not a generic one
    return 1 if h is None or first == HDEL else 0
