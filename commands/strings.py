"""String commands: GET, SET and its variants, counters, ranges.

SET key value [NX|XX] [GET] [EX s|PX ms|EXAT s|PXAT ms|KEEPTTL]
GET key · GETEX key [EX|PX|EXAT|PXAT t|PERSIST] · GETDEL key · GETSET key value
SETNX · SETEX · PSETEX · MGET · MSET · MSETNX · APPEND · STRLEN · GETRANGE · SETRANGE
INCR · DECR · INCRBY · DECRBY · INCRBYFLOAT
"""

from __future__ import annotations

from commands.common import get_string, string_range, wrongtype
from commands.errors import (
    INVALID_EXPIRE,
    OFFSET_OUT_OF_RANGE,
    STRING_TOO_LONG,
    SYNTAX,
    WRONG_ARITY,
    CommandError,
)
from commands.hotwrites import incr_by
from commands.parsing import LLONG_MAX, LLONG_MIN, get_int, incr_float_text
from commands.registry import DIRECT_DECR, DIRECT_GET, DIRECT_INCR, DIRECT_SET, Flag, command
from commands.replies import OK, Reply
from commands.session import Session
from store import now_ms
from store.commitpath import set_string
from store.ops import DEL, EXPIRE, KEEP_TTL, SET
from store.values import STRING_TYPES

W = Flag.WRITE | Flag.DENYOOM
R = Flag.READONLY | Flag.FAST
MAX_STRING = 512 * 1024 * 1024

NX, XX, GET, KEEPTTL, PERSIST, EX, PX, EXAT, PXAT = (1 << i for i in range(9))
_TTL_FLAGS = EX | PX | EXAT | PXAT


def parse_set_options(argv: list[bytes], start: int, for_set: bool) -> tuple[int, bytes | None]:
    """Redis' parseExtendedStringArgumentsOrReply: flags and the expire argument."""
    flags = 0
    expire: bytes | None = None
    j = start
    n = len(argv)
    while j < n:
        opt = argv[j].upper()
        has_next = j < n - 1
        if opt == b"NX" and not flags & XX and for_set:
            flags |= NX
        elif opt == b"XX" and not flags & NX and for_set:
            flags |= XX
        elif opt == b"GET" and for_set:
            flags |= GET
        elif opt == b"KEEPTTL" and not flags & (PERSIST | _TTL_FLAGS) and for_set:
            flags |= KEEPTTL
        elif opt == b"PERSIST" and not for_set and not flags & (_TTL_FLAGS | KEEPTTL):
            flags |= PERSIST
        elif opt == b"EX" and not flags & (KEEPTTL | PERSIST | EXAT | PX | PXAT) and has_next:
            flags |= EX
            expire = argv[j + 1]
            j += 1
        elif opt == b"PX" and not flags & (KEEPTTL | PERSIST | EX | EXAT | PXAT) and has_next:
            flags |= PX
            expire = argv[j + 1]
            j += 1
        elif opt == b"EXAT" and not flags & (KEEPTTL | PERSIST | EX | PX | PXAT) and has_next:
            flags |= EXAT
            expire = argv[j + 1]
            j += 1
        elif opt == b"PXAT" and not flags & (KEEPTTL | PERSIST | EX | EXAT | PX) and has_next:
            flags |= PXAT
            expire = argv[j + 1]
            j += 1
        else:
            raise CommandError(SYNTAX)
        j += 1
    return flags, expire


def expire_ms(cmd: str, expire: bytes, flags: int) -> int:
    """Redis' getExpireMillisecondsOrReply: the absolute expiry time in ms."""
    ms = get_int(expire)
    seconds = bool(flags & (EX | EXAT))
    if ms <= 0 or (seconds and ms > LLONG_MAX // 1000):
        raise CommandError(INVALID_EXPIRE.format(cmd))
    if seconds:
        ms *= 1000
    if flags & (EX | PX):
        ms += now_ms()
        if ms > LLONG_MAX:
            raise CommandError(INVALID_EXPIRE.format(cmd))
    return ms


def set_generic(
    s: Session,
    cmd: str,
    key: bytes,
    value: bytes,
    flags: int,
    expire: bytes | None,
    ok: Reply = OK,
    abort: Reply = None,
) -> Reply:
    at = expire_ms(cmd, expire, flags) if expire is not None else None
    old: Reply = None
    if flags & GET:
        old = get_string(s, key)
    if flags & (NX | XX):
        found = s.db.get(key) is not None
        if (flags & NX and found) or (flags & XX and not found):
            return old if flags & GET else abort
    if len(value) > MAX_STRING:
        raise CommandError(STRING_TOO_LONG)
    s.store.apply(s.db, key, (SET, value, KEEP_TTL if flags & KEEPTTL else at))
    return old if flags & GET else ok


@command("set", -3, W, 1, 1, 1, direct=DIRECT_SET)
def cmd_set(s: Session, argv: list[bytes]) -> Reply:
    if len(argv) == 3:  # the dispatcher's direct call does the same (DIRECT_SET)
        set_string(s.store, s.db, argv[1], argv[2])  # apply(db, key, (SET, value, None))
        return OK
    flags, expire = parse_set_options(argv, 3, True)
    return set_generic(s, "set", argv[1], argv[2], flags, expire)


@command("setnx", 3, W | Flag.FAST, 1, 1, 1)
def cmd_setnx(s: Session, argv: list[bytes]) -> Reply:
    return set_generic(s, "setnx", argv[1], argv[2], NX, None, 1, 0)


@command("setex", 4, W, 1, 1, 1)
def cmd_setex(s: Session, argv: list[bytes]) -> Reply:
    return set_generic(s, "setex", argv[1], argv[3], EX, argv[2])


@command("psetex", 4, W, 1, 1, 1)
def cmd_psetex(s: Session, argv: list[bytes]) -> Reply:
    return set_generic(s, "psetex", argv[1], argv[3], PX, argv[2])


@command("get", 2, R, 1, 1, 1, direct=DIRECT_GET)
def cmd_get(s: Session, argv: list[bytes]) -> Reply:
    return get_string(s, argv[1])


@command("getex", -2, Flag.WRITE | Flag.FAST, 1, 1, 1)
def cmd_getex(s: Session, argv: list[bytes]) -> Reply:
    flags, expire = parse_set_options(argv, 2, False)
    key = argv[1]
    v = get_string(s, key)
    if v is None:
        return None
    if expire is not None:
        at = expire_ms("getex", expire, flags)
        if flags & (EXAT | PXAT) and at <= now_ms():
            s.store.apply(s.db, key, (DEL,))
        else:
            s.store.apply(s.db, key, (EXPIRE, at))
    elif flags & PERSIST and s.db.ttl_ms(key) is not None:
        s.store.apply(s.db, key, (EXPIRE, None))
    return v


@command("getdel", 2, Flag.WRITE | Flag.FAST, 1, 1, 1)
def cmd_getdel(s: Session, argv: list[bytes]) -> Reply:
    v = get_string(s, argv[1])
    if v is not None:
        s.store.apply(s.db, argv[1], (DEL,))
    return v


@command("getset", 3, W | Flag.FAST, 1, 1, 1)
def cmd_getset(s: Session, argv: list[bytes]) -> Reply:
    old = get_string(s, argv[1])
    s.store.apply(s.db, argv[1], (SET, argv[2], None))
    return old


@command("mget", -2, R, 1, -1, 1)
def cmd_mget(s: Session, argv: list[bytes]) -> Reply:
    get = s.db.get
    out: list[Reply] = []
    for k in argv[1:]:
        v = get(k)
        t = type(v)
        out.append(v if t is bytes else bytes(v) if t is bytearray else None)
    return out


def _mset(s: Session, argv: list[bytes], nx: bool) -> Reply:
    if len(argv) % 2 == 0:
        raise CommandError(WRONG_ARITY.format("msetnx" if nx else "mset"))
    if nx and any(s.db.get(argv[j]) is not None for j in range(1, len(argv), 2)):
        return 0
    db = s.db
    apply = s.store.apply
    for j in range(1, len(argv), 2):
        apply(db, argv[j], (SET, argv[j + 1], None))
    return 1 if nx else OK


@command("mset", -3, W, 1, -1, 2)
def cmd_mset(s: Session, argv: list[bytes]) -> Reply:
    return _mset(s, argv, False)


@command("msetnx", -3, W, 1, -1, 2)
def cmd_msetnx(s: Session, argv: list[bytes]) -> Reply:
    return _mset(s, argv, True)


@command("incr", 2, W | Flag.FAST, 1, 1, 1, direct=DIRECT_INCR)
def cmd_incr(s: Session, argv: list[bytes]) -> Reply:
    return incr_by(s, argv[1], 1)


@command("decr", 2, W | Flag.FAST, 1, 1, 1, direct=DIRECT_DECR)
def cmd_decr(s: Session, argv: list[bytes]) -> Reply:
    return incr_by(s, argv[1], -1)


@command("incrby", 3, W | Flag.FAST, 1, 1, 1)
def cmd_incrby(s: Session, argv: list[bytes]) -> Reply:
    return incr_by(s, argv[1], get_int(argv[2]))


@command("decrby", 3, W | Flag.FAST, 1, 1, 1)
def cmd_decrby(s: Session, argv: list[bytes]) -> Reply:
    n = get_int(argv[2])
    if n == LLONG_MIN:
        raise CommandError("ERR decrement would overflow")
    return incr_by(s, argv[1], -n)


@command("incrbyfloat", 3, W | Flag.FAST, 1, 1, 1)
def cmd_incrbyfloat(s: Session, argv: list[bytes]) -> Reply:
    cur = get_string(s, argv[1])
    text = incr_float_text(cur, argv[2])
    s.store.apply(s.db, argv[1], (SET, text, KEEP_TTL))
    return text


@command("append", 3, W | Flag.FAST, 1, 1, 1)
def cmd_append(s: Session, argv: list[bytes]) -> Reply:
    key = argv[1]
    cur = get_string(s, key)
    if cur is None:
        s.store.apply(s.db, key, (SET, argv[2], None))
        return len(argv[2])
    total = len(cur) + len(argv[2])
    if total > MAX_STRING:
        raise CommandError(STRING_TOO_LONG)
    s.store.apply(s.db, key, (SET, bytearray(cur + argv[2]), KEEP_TTL))
    return total


@command("strlen", 2, R, 1, 1, 1)
def cmd_strlen(s: Session, argv: list[bytes]) -> Reply:
    v = s.db.get(argv[1])
    if v is None:
        return 0
    if type(v) in STRING_TYPES:  # not copied: a bitmap can be 512 MB
        return len(v)
    raise wrongtype()


@command("getrange", 4, Flag.READONLY, 1, 1, 1)
def cmd_getrange(s: Session, argv: list[bytes]) -> Reply:
    return string_range(s, argv)


@command("setrange", 4, W, 1, 1, 1)
def cmd_setrange(s: Session, argv: list[bytes]) -> Reply:
    key = argv[1]
    value = argv[3]
    offset = get_int(argv[2])
    if offset < 0:
        raise CommandError(OFFSET_OUT_OF_RANGE)
    cur = get_string(s, key)
    if cur is None:
        if not value:
            return 0
        cur = b""
    elif not value:
        return len(cur)
    if offset + len(value) > MAX_STRING:
        raise CommandError(STRING_TOO_LONG)
    buf = bytearray(cur)
    if len(buf) < offset:
        buf.extend(b"\x00" * (offset - len(buf)))
    buf[offset : offset + len(value)] = value
    s.store.apply(s.db, key, (SET, buf, KEEP_TTL))
    return len(buf)
