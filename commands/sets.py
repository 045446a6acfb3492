"""Set commands.

SADD key member [member ...] · SREM key member [member ...]
SMEMBERS key · SISMEMBER key member · SMISMEMBER key member [member ...] · SCARD key
SPOP key [count] · SRANDMEMBER key [count] · SMOVE source destination member
SINTER key [key ...] · SUNION key [key ...] · SDIFF key [key ...]
SINTERSTORE destination key [key ...] · SUNIONSTORE destination key [key ...]
SDIFFSTORE destination key [key ...] · SINTERCARD numkeys key [key ...] [LIMIT limit]
SSCAN key cursor [MATCH pattern] [COUNT count]

Redis 7.0 keeps a small all-integer set as an intset (a plain `set` here) and lists
it in ascending numeric order; a `HashSet` is listed in hash order, which no client
may rely on. Replies built from members follow the same rule, so an intset-shaped
result goes out sorted exactly as Redis writes it.
"""

from __future__ import annotations

import random
import re
from bisect import bisect_left
from collections.abc import Sequence
from itertools import islice

from commands.common import get_set, parse_scan_cursor, parse_scan_options, store_result
from commands.errors import NOT_POSITIVE, SYNTAX, CommandError
from commands.parsing import LLONG_MAX, get_int, string2ll
from commands.registry import Flag, command
from commands.replies import IntSetReply, Reply
from commands.sampling import fragments, sample_reply
from commands.session import Session
from store import V_LSN
from store.ops import DEL, KEEP_TTL, SADD, SET, SREM
from store.values import LIMITS, HashSet, is_int_member, new_set

NUMKEYS_NOT_POSITIVE = "ERR numkeys should be greater than 0"
NUMKEYS_TOO_MANY = "ERR Number of keys can't be greater than number of args"
LIMIT_NEGATIVE = "ERR LIMIT can't be negative"
COUNT_RANGE = f"ERR value is out of range, value must between {-LLONG_MAX} and {LLONG_MAX}"

W = Flag.WRITE | Flag.DENYOOM
RO = Flag.READONLY

# SPOP replaces the set by its survivors once they are few (Redis' "move strategy").
SPOP_MOVE_STRATEGY_MUL = 5
ULONG_MAX = 2**64 - 1


def fits_intset(members: set[bytes]) -> bool:
    """Whether Redis would build this result as an intset."""
    return len(members) <= LIMITS.set_entries and all(map(is_int_member, members))


def stored_reply(v: set[bytes]) -> Reply:
    """A stored set's members, copied (the reply may be written after later commands)."""
    return IntSetReply(v) if type(v) is set else set(v)


def result_reply(members: set[bytes]) -> Reply:
    """A freshly computed set of members, ordered as Redis would write it."""
    return IntSetReply(members) if fits_intset(members) else members


def load_sets(s: Session, keys: Sequence[bytes]) -> list[set[bytes] | None]:
    """Every key's set (None when missing); WRONGTYPE before anything else happens."""
    return [get_set(s, k) for k in keys]


def random_member(v: set[bytes]) -> bytes:
    return next(islice(v, random.randrange(len(v)), None))


# -- single-key commands -----------------------------------------------------------


@command("sadd", -3, W | Flag.FAST, 1, 1, 1)
def cmd_sadd(s: Session, argv: list[bytes]) -> Reply:
    key = argv[1]
    v = get_set(s, key)
    if len(argv) == 3:
        m = argv[2]
        if v is not None and m in v:
            return 0
        s.store.apply(s.db, key, (SADD, (m,)))
        return 1
    unique = dict.fromkeys(argv[2:])
    added = tuple(unique) if v is None else tuple(m for m in unique if m not in v)
    if added:
        s.store.apply(s.db, key, (SADD, added))
    return len(added)


@command("srem", -3, Flag.WRITE | Flag.FAST, 1, 1, 1)
def cmd_srem(s: Session, argv: list[bytes]) -> Reply:
    key = argv[1]
    v = get_set(s, key)
    if v is None:
        return 0
    removed = tuple(m for m in dict.fromkeys(argv[2:]) if m in v)
    if removed:
        s.store.apply(s.db, key, (SREM, removed))
    return len(removed)


@command("smembers", 2, RO, 1, 1, 1)
def cmd_smembers(s: Session, argv: list[bytes]) -> Reply:
    v = get_set(s, argv[1])
    return set() if v is None else stored_reply(v)


@command("sismember", 3, RO | Flag.FAST, 1, 1, 1)
def cmd_sismember(s: Session, argv: list[bytes]) -> Reply:
    v = get_set(s, argv[1])
    return 1 if v is not None and argv[2] in v else 0


@command("smismember", -3, RO | Flag.FAST, 1, 1, 1)
def cmd_smismember(s: Session, argv: list[bytes]) -> Reply:
    v = get_set(s, argv[1])
    if v is None:
        return [0] * (len(argv) - 2)
    return [1 if m in v else 0 for m in argv[2:]]


@command("scard", 2, RO | Flag.FAST, 1, 1, 1)
def cmd_scard(s: Session, argv: list[bytes]) -> Reply:
    v = get_set(s, argv[1])
    return 0 if v is None else len(v)


@command("spop", -2, Flag.WRITE | Flag.FAST, 1, 1, 1)
def cmd_spop(s: Session, argv: list[bytes]) -> Reply:
    if len(argv) == 3:
        return spop_count(s, argv[1], argv[2])
    if len(argv) > 3:
        raise CommandError(SYNTAX)
    key = argv[1]
    v = get_set(s, key)
    if v is None:
        return None
    m = random_member(v)
    s.store.apply(s.db, key, (SREM, (m,)))
    return m


def spop_count(s: Session, key: bytes, arg: bytes) -> Reply:
    count = string2ll(arg)
    if count is None or count < 0:
        raise CommandError(NOT_POSITIVE)
    v = get_set(s, key)
    if v is None or count == 0:
        return set()
    size = len(v)
    intset = type(v) is set
    if count >= size:
        reply = stored_reply(v) if intset else result_reply(set(v))
        s.store.apply(s.db, key, (DEL,))
        return reply
    remaining = size - count
    if remaining * SPOP_MOVE_STRATEGY_MUL > count:
        popped = random.sample(tuple(v), count)
        s.store.apply(s.db, key, (SREM, tuple(popped)))
        return set(popped)
    # Few survivors: Redis builds a new set of them, an intset again if they fit.
    kept = set(random.sample(tuple(v), remaining))
    gone = v - kept
    if not intset and fits_intset(kept):
        s.store.apply(s.db, key, (SET, kept, KEEP_TTL))
    else:
        s.store.apply(s.db, key, (SREM, tuple(gone)))
    return IntSetReply(gone) if intset else gone


@command("srandmember", -2, RO, 1, 1, 1)
def cmd_srandmember(s: Session, argv: list[bytes]) -> Reply:
    if len(argv) == 3:
        return srandmember_count(s, argv[1], argv[2])
    if len(argv) > 3:
        raise CommandError(SYNTAX)
    v = get_set(s, argv[1])
    return None if v is None else random_member(v)


def srandmember_count(s: Session, key: bytes, arg: bytes) -> Reply:
    n = get_int(arg)
    if n < -LLONG_MAX:
        raise CommandError(COUNT_RANGE)
    v = get_set(s, key)
    if v is None or n == 0:
        return []
    if n < -len(v):  # many picks: each member encoded once (commands.sampling)
        return sample_reply(s, fragments(s, tuple(v)), -n)
    if n < 0 or n == 1:
        return random.choices(tuple(v), k=-n if n < 0 else 1)
    if n >= len(v):
        return sorted(v, key=int) if type(v) is set else list(v)
    return random.sample(tuple(v), n)


@command("smove", 4, Flag.WRITE | Flag.FAST, 1, 2, 1)
def cmd_smove(s: Session, argv: list[bytes]) -> Reply:
    src_key, dst_key, m = argv[1], argv[2], argv[3]
    if s.db.get(src_key) is None:
        return 0
    src = get_set(s, src_key)
    dst = get_set(s, dst_key)
    assert src is not None
    if src_key == dst_key:
        return 1 if m in src else 0
    if m not in src:
        return 0
    s.store.apply(s.db, src_key, (SREM, (m,)))
    if dst is None or m not in dst:
        s.store.apply(s.db, dst_key, (SADD, (m,)))
    return 1


# -- multi-key algebra -------------------------------------------------------------


def intersection(sets: list[set[bytes] | None]) -> set[bytes]:
    if any(x is None for x in sets):
        return set()
    present = sorted((x for x in sets if x is not None), key=len)
    return present[0].intersection(*present[1:])


def union(sets: list[set[bytes] | None]) -> set[bytes]:
    return set().union(*(x for x in sets if x is not None))


def difference(sets: list[set[bytes] | None]) -> set[bytes]:
    first = sets[0]
    if first is None:
        return set()
    return first.difference(*(x for x in sets[1:] if x is not None))


def diff_value(sets: list[set[bytes] | None], result: set[bytes]) -> set[bytes]:
    """SDIFFSTORE's stored value. When Redis picks its add-then-remove algorithm it
    first copies the whole first set, so the result keeps the first set's encoding
    even once it has shrunk back into intset range."""
    first = sets[0]
    if first is None or not result:
        return result
    present = [x for x in sets if x is not None]
    add_then_remove = len(first) * len(present) // 2 > sum(map(len, present))
    if add_then_remove and not fits_intset(first):
        return HashSet(result)
    return new_set(result)


@command("sinter", -2, RO, 1, -1, 1)
def cmd_sinter(s: Session, argv: list[bytes]) -> Reply:
    return result_reply(intersection(load_sets(s, argv[1:])))


@command("sunion", -2, RO, 1, -1, 1)
def cmd_sunion(s: Session, argv: list[bytes]) -> Reply:
    return result_reply(union(load_sets(s, argv[1:])))


@command("sdiff", -2, RO, 1, -1, 1)
def cmd_sdiff(s: Session, argv: list[bytes]) -> Reply:
    return result_reply(difference(load_sets(s, argv[1:])))


@command("sinterstore", -3, W, 1, -1, 1)
def cmd_sinterstore(s: Session, argv: list[bytes]) -> Reply:
    return store_result(s, argv[1], new_set(intersection(load_sets(s, argv[2:]))))


@command("sunionstore", -3, W, 1, -1, 1)
def cmd_sunionstore(s: Session, argv: list[bytes]) -> Reply:
    return store_result(s, argv[1], new_set(union(load_sets(s, argv[2:]))))


@command("sdiffstore", -3, W, 1, -1, 1)
def cmd_sdiffstore(s: Session, argv: list[bytes]) -> Reply:
    sets = load_sets(s, argv[2:])
    return store_result(s, argv[1], diff_value(sets, difference(sets)))


@command("sintercard", -3, RO)
def cmd_sintercard(s: Session, argv: list[bytes]) -> Reply:
    numkeys = string2ll(argv[1])
    if numkeys is None or numkeys < 1:
        raise CommandError(NUMKEYS_NOT_POSITIVE)
    n = len(argv)
    if numkeys > n - 2:
        raise CommandError(NUMKEYS_TOO_MANY)
    limit = 0
    j = 2 + numkeys
    while j < n:
        if argv[j].lower() == b"limit" and j < n - 1:
            j += 1
            lim = string2ll(argv[j])
            if lim is None or lim < 0:
                raise CommandError(LIMIT_NEGATIVE)
            limit = lim
        else:
            raise CommandError(SYNTAX)
        j += 1
    sets = load_sets(s, argv[2 : 2 + numkeys])
    if any(x is None for x in sets):
        return 0
    present = sorted((x for x in sets if x is not None), key=len)
    first, rest = present[0], present[1:]
    if not limit:
        return len(first.intersection(*rest))
    found = 0
    for m in first:
        if all(m in x for x in rest):
            found += 1
            if found >= limit:
                break
    return found


# -- SSCAN -------------------------------------------------------------------------

_CURSOR_RE = re.compile(rb"([+-]?)([0-9]+)")
EMPTY_SCAN: Reply = (b"0", ())


# A hash-table set is scanned in the order of its members' hashes: the cursor is the
# next hash to visit, so members present for the whole scan are returned exactly once
# however the set changes between calls. The order of a large set is kept while the
# set is unchanged (same object, same committed version, no write in flight).
_SCAN_CACHE_MIN = 256
_SCAN_CACHE_SIZE = 8


def _build_hash_order(v: set[bytes]) -> tuple[list[int], list[bytes]]:
    pairs = sorted((hash(m) & ULONG_MAX, m) for m in v)
    return [h for h, _ in pairs], [m for _, m in pairs]


def hash_order(s: Session, key: bytes, v: set[bytes]) -> tuple[list[int], list[bytes]]:
    if len(v) < _SCAN_CACHE_MIN:
        return _build_hash_order(v)
    dbi = s.db.index
    if any(p[0] == dbi and p[1] == key for p in s.store.pending):
        return _build_hash_order(v)
    chain = s.db.chains.get(key)
    version = chain[-1][V_LSN] if chain else 0
    orders = s.server.set_scan_orders  # by id(v): a set is not hashable
    cached = orders.get(id(v))
    if cached is not None and cached[0] is v and cached[1] == version:
        return cached[2], cached[3]
    hashes, members = _build_hash_order(v)
    if len(orders) >= _SCAN_CACHE_SIZE:
        del orders[next(iter(orders))]
    orders[id(v)] = (v, version, hashes, members)
    return hashes, members


@command("sscan", -3, RO, 1, 1, 1)
def cmd_sscan(s: Session, argv: list[bytes]) -> Reply:
    key = argv[1]
    cursor = parse_scan_cursor(argv[2])
    v = get_set(s, key)
    if v is None:
        return EMPTY_SCAN
    count, match = parse_scan_options(argv, 3)
    if type(v) is set:
        # An intset is returned whole, in order, whatever the cursor.
        batch: list[bytes] = sorted(v, key=int)
        cursor = 0
    else:
        hashes, members = hash_order(s, key, v)
        i = bisect_left(hashes, cursor)
        j = min(i + count, len(hashes))
        while 0 < j < len(hashes) and hashes[j] == hashes[j - 1]:
            j += 1
        batch = members[i:j]
        cursor = hashes[j - 1] + 1 if j < len(hashes) else 0
    if match is not None:
        batch = [m for m in batch if match(m)]
    return [b"%d" % cursor, batch]
