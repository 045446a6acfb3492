"""Hash commands.

HSET key field value [field value ...] · HMSET key field value [field value ...]
HSETNX key field value · HGET key field · HMGET key field [field ...]
HGETALL key · HKEYS key · HVALS key · HLEN key · HEXISTS key field · HSTRLEN key field
HDEL key field [field ...]
HINCRBY key field increment · HINCRBYFLOAT key field increment
HSCAN key cursor [MATCH pattern] [COUNT count]
HRANDFIELD key [count [WITHVALUES]]

A hash is a `dict` while Redis would keep it as a listpack (insertion order, which
a dict keeps too) and a `HashTable` once past the listpack limits; the HSET op
converts. HSCAN returns a listpack hash whole with cursor 0, as Redis does, and
pages through a HashTable with Redis' reverse-binary cursor over a virtual
power-of-two bucket table, so fields present for the whole scan are returned even
when the hash grows or shrinks between calls.
"""

from __future__ import annotations

import random
from itertools import islice

from commands import longdouble
from commands.common import (
    HASH_TYPES,
    get_hash,
    parse_scan_cursor,
    parse_scan_options,
    wrongtype,
)
from commands.errors import (
    HASH_VALUE_NOT_FLOAT,
    HASH_VALUE_NOT_INTEGER,
    NOT_FLOAT,
    OVERFLOW,
    SYNTAX,
    WRONG_ARITY,
    CommandError,
)
from commands.hotwrites import hset_one
from commands.parsing import LLONG_MAX, LLONG_MIN, get_int, incr_float_text, string2ll
from commands.registry import DIRECT_HSET, Flag, command
from commands.replies import OK, Reply
from commands.resp import encode_reply
from commands.sampling import fragments, sample_reply
from commands.session import Session
from store.commitpath import apply_on
from store.ops import HDEL, HSET

VALUE_NAN_OR_INF = "ERR value is NaN or Infinity"
VALUE_OUT_OF_RANGE = "ERR value is out of range"
COUNT_OUT_OF_RANGE = f"ERR value is out of range, value must between {-LLONG_MAX} and {LLONG_MAX}"

W = Flag.WRITE | Flag.DENYOOM | Flag.FAST
R = Flag.READONLY | Flag.FAST

ULONG_MAX = 2**64 - 1
_SPACE = b" \t\n\v\f\r"


# -- writing ------------------------------------------------------------------


def _hset(s: Session, argv: list[bytes], name: str) -> int:
    """Set every pair; return how many fields were new."""
    n = len(argv)
    if n % 2:
        raise CommandError(WRONG_ARITY.format(name))
    key = argv[1]
    if n == 4:
        return hset_one(s, key, argv[2], argv[3])
    h = get_hash(s, key)
    fields = argv[2::2]
    distinct = set(fields)
    created = len(distinct) if h is None else sum(1 for f in distinct if f not in h)
    apply_on(s.store, s.db, key, (HSET, tuple(zip(fields, argv[3::2], strict=True))), h)
    return created


@command("hset", -4, W, 1, 1, 1, direct=DIRECT_HSET)
def cmd_hset(s: Session, argv: list[bytes]) -> Reply:
    return _hset(s, argv, "hset")


@command("hmset", -4, W, 1, 1, 1)
def cmd_hmset(s: Session, argv: list[bytes]) -> Reply:
    _hset(s, argv, "hmset")
    return OK


@command("hsetnx", 4, W, 1, 1, 1)
def cmd_hsetnx(s: Session, argv: list[bytes]) -> Reply:
    key, f = argv[1], argv[2]
    h = get_hash(s, key)
    if h is not None and f in h:
        return 0
    s.store.apply(s.db, key, (HSET, ((f, argv[3]),)))
    return 1


@command("hdel", -3, Flag.WRITE | Flag.FAST, 1, 1, 1)
def cmd_hdel(s: Session, argv: list[bytes]) -> Reply:
    key = argv[1]
    h = get_hash(s, key)
    if h is None:
        return 0
    present = tuple(f for f in dict.fromkeys(argv[2:]) if f in h)
    if present:
        s.store.apply(s.db, key, (HDEL, present))
    return len(present)


@command("hincrby", 4, W, 1, 1, 1)
def cmd_hincrby(s: Session, argv: list[bytes]) -> Reply:
    incr = get_int(argv[3])
    key, f = argv[1], argv[2]
    h = get_hash(s, key)
    cur = h.get(f) if h is not None else None
    if cur is None:
        value = 0
    else:
        parsed = string2ll(cur)
        if parsed is None:
            raise CommandError(HASH_VALUE_NOT_INTEGER)
        value = parsed
    if (incr < 0 and value < 0 and incr < LLONG_MIN - value) or (
        incr > 0 and value > 0 and incr > LLONG_MAX - value
    ):
        raise CommandError(OVERFLOW)
    value += incr
    s.store.apply(s.db, key, (HSET, ((f, b"%d" % value),)))
    return value


@command("hincrbyfloat", 4, W, 1, 1, 1)
def cmd_hincrbyfloat(s: Session, argv: list[bytes]) -> Reply:
    by = longdouble.parse(argv[3])
    if by is None:
        raise CommandError(NOT_FLOAT)
    if isinstance(by, str):
        raise CommandError(VALUE_NAN_OR_INF)
    key, f = argv[1], argv[2]
    h = get_hash(s, key)
    text = incr_float_text(h.get(f) if h is not None else None, argv[3], HASH_VALUE_NOT_FLOAT)
    s.store.apply(s.db, key, (HSET, ((f, text),)))
    return text


# -- reading ------------------------------------------------------------------


@command("hget", 3, R, 1, 1, 1)
def cmd_hget(s: Session, argv: list[bytes]) -> Reply:
    v = s.db.get(argv[1])
    if v is None:
        return None
    if type(v) in HASH_TYPES:
        return v.get(argv[2])
    raise wrongtype()


@command("hmget", -3, R, 1, 1, 1)
def cmd_hmget(s: Session, argv: list[bytes]) -> Reply:
    h = get_hash(s, argv[1])
    if h is None:
        return [None] * (len(argv) - 2)
    get = h.get
    return [get(f) for f in argv[2:]]


@command("hgetall", 2, Flag.READONLY, 1, 1, 1)
def cmd_hgetall(s: Session, argv: list[bytes]) -> Reply:
    h = get_hash(s, argv[1])
    return {} if h is None else dict(h)


@command("hkeys", 2, Flag.READONLY, 1, 1, 1)
def cmd_hkeys(s: Session, argv: list[bytes]) -> Reply:
    h = get_hash(s, argv[1])
    return [] if h is None else list(h)


@command("hvals", 2, Flag.READONLY, 1, 1, 1)
def cmd_hvals(s: Session, argv: list[bytes]) -> Reply:
    h = get_hash(s, argv[1])
    return [] if h is None else list(h.values())


@command("hlen", 2, R, 1, 1, 1)
def cmd_hlen(s: Session, argv: list[bytes]) -> Reply:
    h = get_hash(s, argv[1])
    return 0 if h is None else len(h)


@command("hexists", 3, R, 1, 1, 1)
def cmd_hexists(s: Session, argv: list[bytes]) -> Reply:
    h = get_hash(s, argv[1])
    return 1 if h is not None and argv[2] in h else 0


@command("hstrlen", 3, R, 1, 1, 1)
def cmd_hstrlen(s: Session, argv: list[bytes]) -> Reply:
    h = get_hash(s, argv[1])
    if h is None:
        return 0
    v = h.get(argv[2])
    return 0 if v is None else len(v)


# -- HSCAN --------------------------------------------------------------------


def _reverse(v: int, bits: int) -> int:
    return int(format(v, f"0{bits}b")[::-1], 2)


def scan_buckets(items: dict[bytes, bytes], cursor: int, count: int) -> tuple[int, list[bytes]]:
    """One HSCAN step over a HashTable: whole buckets of a virtual table sized as
    Redis sizes its dict (a power of two >= len, at least 4), visited in
    reverse-binary order from `cursor` until about `count` fields were taken;
    return the next cursor (0 at the end) and the flat field/value list."""
    bits = max(2, (len(items) - 1).bit_length())
    size = 1 << bits
    mask = size - 1
    buckets: dict[int, list[bytes]] = {}
    for f in items:
        b = hash(f) & mask
        chain = buckets.get(b)
        if chain is None:
            buckets[b] = [f]
        else:
            chain.append(f)
    want = count * 2
    budget = want * 10
    out: list[bytes] = []
    v = cursor & mask
    while True:
        chain = buckets.get(v)
        if chain is not None:
            for f in chain:
                out.append(f)
                out.append(items[f])
        r = _reverse(v, bits) + 1
        if r == size:
            return 0, out
        v = _reverse(r, bits)
        if budget <= 0 or len(out) >= want:
            return v, out
        budget -= 1


@command("hscan", -3, Flag.READONLY, 1, 1, 1)
def cmd_hscan(s: Session, argv: list[bytes]) -> Reply:
    cursor = parse_scan_cursor(argv[2])
    h = get_hash(s, argv[1])
    if h is None:
        return [b"0", []]
    count, match = parse_scan_options(argv, 3)
    if type(h) is dict:
        cursor = 0
        flat = [x for pair in h.items() for x in pair]
    else:
        cursor, flat = scan_buckets(h, cursor, count)
    if match is not None:
        flat = [x for j in range(0, len(flat), 2) if match(flat[j]) for x in (flat[j], flat[j + 1])]
    return [b"%d" % cursor, flat]


# -- HRANDFIELD ---------------------------------------------------------------


def _shape(s: Session, pairs: list[tuple[bytes, bytes]], withvalues: bool) -> list[Reply]:
    """HRANDFIELD's reply: fields, or field/value flat (RESP2) or as pairs (RESP3)."""
    if not withvalues:
        return [f for f, _ in pairs]
    if s.resp == 2:
        return [x for pair in pairs for x in pair]
    return [list(pair) for pair in pairs]


@command("hrandfield", -2, Flag.READONLY, 1, 1, 1)
def cmd_hrandfield(s: Session, argv: list[bytes]) -> Reply:
    n = len(argv)
    if n == 2:
        h = get_hash(s, argv[1])
        if h is None:
            return None
        return next(islice(h, random.randrange(len(h)), None))
    count = get_int(argv[2])
    if count < -LLONG_MAX:
        raise CommandError(COUNT_OUT_OF_RANGE)
    withvalues = False
    if n > 4 or (n == 4 and argv[3].lower() != b"withvalues"):
        raise CommandError(SYNTAX)
    if n == 4:
        withvalues = True
        if count < -(LLONG_MAX // 2) or count > LLONG_MAX // 2:
            raise CommandError(VALUE_OUT_OF_RANGE)
    h = get_hash(s, argv[1])
    if h is None or count == 0:
        return []
    size = len(h)
    if count < -size:  # many picks: each entry encoded once (commands.sampling)
        if not withvalues:
            return sample_reply(s, fragments(s, list(h)), -count)
        if s.resp == 2:
            frags = [encode_reply(f, 2) + encode_reply(v, 2) for f, v in h.items()]
            return sample_reply(s, frags, -count, 2)
        return sample_reply(s, fragments(s, [list(p) for p in h.items()]), -count)
    if count < 0 or count == 1:
        items = list(h.items())
        return _shape(s, random.choices(items, k=-count if count < 0 else 1), withvalues)
    if count >= size:
        return _shape(s, list(h.items()), withvalues)
    items = list(h.items())
    return _shape(s, [items[i] for i in sorted(random.sample(range(size), count))], withvalues)
