"""Generic key commands: existence, type, iteration, renaming, copying, expiry, OBJECT.

DEL key [key ...] · UNLINK key [key ...] · EXISTS key [key ...] · TYPE key · TOUCH key [key ...]
KEYS pattern · SCAN cursor [MATCH pattern] [COUNT count] [TYPE type] · RANDOMKEY
RENAME key newkey · RENAMENX key newkey · COPY source destination [DB db] [REPLACE]
MOVE key db
EXPIRE key seconds [NX|XX|GT|LT] · PEXPIRE key milliseconds [NX|XX|GT|LT]
EXPIREAT key unix-time-seconds [NX|XX|GT|LT] · PEXPIREAT key unix-time-ms [NX|XX|GT|LT]
TTL key · PTTL key · EXPIRETIME key · PEXPIRETIME key · PERSIST key
OBJECT ENCODING key · OBJECT FREQ key · OBJECT IDLETIME key · OBJECT REFCOUNT key · OBJECT HELP

SCAN cursors are positions in the order of the keys' hashes (not Redis' reverse-binary
bucket order): a cursor c resumes at the first key whose hash rank is >= c. The sorted
key list is a snapshot, retaken when an iteration starts (cursor 0) after any write and
dropped when an iteration ends. Any later snapshot also holds every key that existed for
a whole iteration, so a cursor stays valid whatever other iterations or writes happen;
keys deleted since the snapshot are filtered out as they are met, and no key is returned
twice by one iteration.
"""

from __future__ import annotations

import random
from bisect import bisect_left
from itertools import islice

from commands.access import frequency, idle_seconds
from commands.common import parse_scan_cursor
from commands.encodings import object_encoding, refcount
from commands.errors import (
    DB_INDEX_OUT_OF_RANGE,
    INVALID_EXPIRE,
    NO_SUCH_KEY,
    SAME_OBJECT,
    SYNTAX,
    CommandError,
)
from commands.glob import Matcher, glob_matcher, match_filter
from commands.hotwrites import writer_of
from commands.notify import GENERIC, notify
from commands.parsing import LLONG_MAX, LLONG_MIN, get_int
from commands.registry import Flag, command, container
from commands.replies import OK, Reply, Simple
from commands.session import Session
from commands.session_state import ScanSnapshot
from store import now_ms
from store.ops import DEL, EXPIRE, SET
from store.values import type_name

INT_RANGE = "ERR value is out of range, value must between -2147483648 and 2147483647"
UNSUPPORTED_OPTION = "ERR Unsupported option {}"
EXPIRE_NX_CONFLICT = "ERR NX and XX, GT or LT options at the same time are not compatible"
EXPIRE_GT_LT_CONFLICT = "ERR GT and LT options at the same time are not compatible"
_LFU_NOTE = (
    "Please note that when switching between policies at runtime LRU and LFU data "
    "will take some time to adjust."
)
FREQ_NOT_LFU = (
    "ERR An LFU maxmemory policy is not selected, access frequency not tracked. " + _LFU_NOTE
)
IDLETIME_LFU = "ERR An LFU maxmemory policy is selected, idle time not tracked. " + _LFU_NOTE

R = Flag.READONLY | Flag.FAST
W = Flag.WRITE | Flag.FAST

ULONG_MAX = 2**64 - 1
_SECONDS_MIN = -(-LLONG_MIN // 1000)  # C's LLONG_MIN / 1000 (truncated toward zero)
_SECONDS_MAX = LLONG_MAX // 1000
_HALF = 1 << 63

_NX, _XX, _GT, _LT = 1, 2, 4, 8
_EXPIRE_FLAGS = {b"nx": _NX, b"xx": _XX, b"gt": _GT, b"lt": _LT}


OBJECT_HELP = (
    "ENCODING <key>",
    "    Return the kind of internal representation used in order to store the value",
    "    associated with a <key>.",
    "FREQ <key>",
    "    Return the access frequency index of the <key>. The returned integer is",
    "    proportional to the logarithm of the recent access frequency of the key.",
    "IDLETIME <key>",
    "    Return the idle time of the <key>, that is the approximated number of",
    "    seconds elapsed since the last access to the key.",
    "REFCOUNT <key>",
    "    Return the number of references of the value associated with the specified",
    "    <key>.",
    "HELP",
    "    Prints this help.",
)
_OBJECT_HELP_LINES = [Simple(line.encode()) for line in OBJECT_HELP]


# -- helpers --------------------------------------------------------------------------


def _cstr(b: bytes) -> bytes:
    """An argument as Redis' C-string functions (strcasecmp, %s) see it: up to a NUL."""
    nul = b.find(b"\0")
    return b if nul < 0 else b[:nul]


def _option(b: bytes) -> bytes:
    """An option word for a case-insensitive comparison."""
    return _cstr(b).lower()


def _error_text(text: str, arg: bytes) -> bytes:
    """An error naming an argument, newlines blanked as Redis' error formatting does."""
    out = text.encode().replace(b"{}", _cstr(arg))
    return out.replace(b"\r", b" ").replace(b"\n", b" ")


def _db_index(s: Session, arg: bytes) -> int:
    """A database number as MOVE/COPY parse it (int range, then the configured count)."""
    n = get_int(arg)
    if n < -(2**31) or n > 2**31 - 1:
        raise CommandError(INT_RANGE)
    if n < 0 or n >= len(s.store.dbs):
        raise CommandError(DB_INDEX_OUT_OF_RANGE)
    return n


def _lfu(s: Session) -> bool:
    return s.server.config.params.get("maxmemory-policy", "").endswith("-lfu")


# -- existence and type ---------------------------------------------------------------


def _delete(s: Session, argv: list[bytes]) -> int:
    db = s.db
    apply = s.store.apply
    n = 0
    for key in argv[1:]:
        if db.get(key) is not None:
            apply(db, key, (DEL,))
            n += 1
    return n


@command("del", -2, Flag.WRITE, 1, -1, 1)
def cmd_del(s: Session, argv: list[bytes]) -> Reply:
    return _delete(s, argv)


@command("unlink", -2, W, 1, -1, 1)
def cmd_unlink(s: Session, argv: list[bytes]) -> Reply:
    return _delete(s, argv)


@command("exists", -2, R, 1, -1, 1)
def cmd_exists(s: Session, argv: list[bytes]) -> Reply:
    peek = s.db.peek  # not an access (Redis' LOOKUP_NOTOUCH)
    return sum(1 for key in argv[1:] if peek(key) is not None)


@command("touch", -2, R, 1, -1, 1)
def cmd_touch(s: Session, argv: list[bytes]) -> Reply:
    get = s.db.get  # an access: the keys' idle times restart
    return sum(1 for key in argv[1:] if get(key) is not None)


@command("type", 2, R, 1, 1, 1)
def cmd_type(s: Session, argv: list[bytes]) -> Reply:
    v = s.db.peek(argv[1])
    return Simple(b"none" if v is None else type_name(v))


# -- iteration ------------------------------------------------------------------------


@command("keys", 2, Flag.READONLY)
def cmd_keys(s: Session, argv: list[bytes]) -> Reply:
    pattern = argv[1]
    live = s.db.keys()
    if pattern == b"*":
        return list(live)
    match = glob_matcher(pattern, False)
    return [k for k in live if match(k)]


def _rank(key: bytes) -> int:
    """A key's position in the cursor space [0, 2**63): its hash, made unsigned."""
    return (hash(key) + _HALF) >> 1


def _scan_snapshot(s: Session, starting: bool) -> ScanSnapshot:
    db = s.db
    snapshots = s.server.scan_snapshots
    snap = snapshots.get(db)
    mark = (s.store.lsn, len(s.store.pending))
    if snap is None or snap.data is not db.data or (starting and snap.mark != mark):
        snap = snapshots[db] = ScanSnapshot(db, mark)
    return snap


@command("scan", -2, Flag.READONLY)
def cmd_scan(s: Session, argv: list[bytes]) -> Reply:
    cursor = parse_scan_cursor(argv[1])
    count = 10
    match: Matcher | None = None
    want_type: bytes | None = None
    i = 2
    n = len(argv)
    while i < n:
        opt = _option(argv[i])
        if i + 1 >= n:
            raise CommandError(SYNTAX)
        if opt == b"count":
            count = get_int(argv[i + 1])
            if count < 1:
                raise CommandError(SYNTAX)
        elif opt == b"match":
            match = match_filter(argv[i + 1])
        elif opt == b"type":
            want_type = _option(argv[i + 1])
        else:
            raise CommandError(SYNTAX)
        i += 2

    db = s.db
    data = db.data
    if cursor == 0 and count >= len(data):
        batch: list[bytes] = list(data)
        next_cursor = 0
    else:
        snap = _scan_snapshot(s, cursor == 0)
        keys = snap.keys
        total = len(keys)
        start = bisect_left(keys, cursor, key=_rank)
        end = min(start + count, total)
        if end < total:
            last = _rank(keys[end - 1])
            while end < total and _rank(keys[end]) == last:
                end += 1
        batch = keys[start:end]
        if end < total:
            next_cursor = _rank(keys[end - 1]) + 1
        else:
            next_cursor = 0
            s.server.scan_snapshots.pop(db, None)

    out: list[bytes] = []
    get = db.get
    for key in batch:
        if key not in data or (match is not None and not match(key)):
            continue
        v = get(key)
        if want_type is not None:
            if (b"none" if v is None else type_name(v)) != want_type:
                continue
            if v is None:
                # Redis 7.0 reports a key it just expired when asked for TYPE none.
                out.append(key)
                continue
        if v is not None:
            out.append(key)
    return [b"%d" % next_cursor, out]


@command("randomkey", 1, Flag.READONLY)
def cmd_randomkey(s: Session, argv: list[bytes]) -> Reply:
    db = s.db
    data = db.data
    while data:
        key = next(islice(data, random.randrange(len(data)), None))
        if db.get(key) is not None:
            return key
    return None


# -- renaming, moving, copying --------------------------------------------------------


def _rename(s: Session, argv: list[bytes], nx: bool) -> Reply:
    src, dst = argv[1], argv[2]
    db = s.db
    v = db.get(src)
    if v is None:
        raise CommandError(NO_SUCH_KEY)
    if src == dst:
        return 0 if nx else OK
    if db.get(dst) is not None and nx:
        return 0
    ttl = db.expires.get(src)
    s.store.apply(db, src, (DEL,))
    s.store.apply(db, dst, (SET, v, ttl))
    return 1 if nx else OK


@command("rename", 3, Flag.WRITE, 1, 2, 1)
def cmd_rename(s: Session, argv: list[bytes]) -> Reply:
    return _rename(s, argv, False)


@command("renamenx", 3, W, 1, 2, 1)
def cmd_renamenx(s: Session, argv: list[bytes]) -> Reply:
    return _rename(s, argv, True)


@command("move", 3, W, 1, 1, 1)
def cmd_move(s: Session, argv: list[bytes]) -> Reply:
    key = argv[1]
    dbi = _db_index(s, argv[2])
    if dbi == s.dbi:
        raise CommandError(SAME_OBJECT)
    src = s.db
    v = src.get(key)
    if v is None:
        return 0
    dst = s.store.dbs[dbi]
    if dst.get(key) is not None:
        return 0
    s.store.apply(dst, key, (SET, v, src.expires.get(key)))
    s.store.apply(src, key, (DEL,))
    return 1


@command("copy", -3, Flag.WRITE | Flag.DENYOOM, 1, 2, 1)
def cmd_copy(s: Session, argv: list[bytes]) -> Reply:
    src_key, dst_key = argv[1], argv[2]
    dbi = s.dbi
    replace = False
    j = 3
    n = len(argv)
    while j < n:
        opt = _option(argv[j])
        if opt == b"replace":
            replace = True
        elif opt == b"db" and j + 1 < n:
            dbi = _db_index(s, argv[j + 1])
            j += 1
        else:
            raise CommandError(SYNTAX)
        j += 1
    if dbi == s.dbi and src_key == dst_key:
        raise CommandError(SAME_OBJECT)
    src = s.db
    v = src.get(src_key)
    if v is None:
        return 0
    dst = s.store.dbs[dbi]
    if dst.get(dst_key) is not None and not replace:
        return 0
    s.store.apply(dst, dst_key, (SET, v, src.expires.get(src_key)))
    return 1


# -- expiry ---------------------------------------------------------------------------


def _expire(s: Session, argv: list[bytes], name: str, relative: bool, seconds: bool) -> Reply:
    flags = 0
    for arg in argv[3:]:
        flag = _EXPIRE_FLAGS.get(_option(arg))
        if flag is None:
            raise CommandError(_error_text(UNSUPPORTED_OPTION, arg))
        flags |= flag
    if flags & _NX and flags & (_XX | _GT | _LT):
        raise CommandError(EXPIRE_NX_CONFLICT)
    if flags & _GT and flags & _LT:
        raise CommandError(EXPIRE_GT_LT_CONFLICT)
    when = get_int(argv[2])
    if seconds:
        if when > _SECONDS_MAX or when < _SECONDS_MIN:
            raise CommandError(INVALID_EXPIRE.format(name))
        when *= 1000
    if relative:
        base = now_ms()
        if when > LLONG_MAX - base:
            raise CommandError(INVALID_EXPIRE.format(name))
        when += base
    key = argv[1]
    db = s.db
    if db.get(key) is None:
        return 0
    if flags:
        current = db.expires.get(key)
        if (
            (flags & _NX and current is not None)
            or (flags & _XX and current is None)
            or (flags & _GT and (current is None or when <= current))
            or (flags & _LT and current is not None and when >= current)
        ):
            return 0
    if when <= now_ms():
        s.store.apply(db, key, (DEL,))
    elif db.expires.get(key) != when:
        s.store.apply(db, key, (EXPIRE, when))
    elif s.server.notify_flags:
        notify(s.server, GENERIC, b"expire", key, db.ident)  # no change, still an event
    return 1


@command("expire", -3, W, 1, 1, 1)
def cmd_expire(s: Session, argv: list[bytes]) -> Reply:
    return _expire(s, argv, "expire", True, True)


@command("pexpire", -3, W, 1, 1, 1)
def cmd_pexpire(s: Session, argv: list[bytes]) -> Reply:
    return _expire(s, argv, "pexpire", True, False)


@command("expireat", -3, W, 1, 1, 1)
def cmd_expireat(s: Session, argv: list[bytes]) -> Reply:
    return _expire(s, argv, "expireat", False, True)


@command("pexpireat", -3, W, 1, 1, 1)
def cmd_pexpireat(s: Session, argv: list[bytes]) -> Reply:
    return _expire(s, argv, "pexpireat", False, False)


def _ttl(s: Session, key: bytes, ms: bool, absolute: bool) -> int:
    """TTL, PTTL, EXPIRETIME, PEXPIRETIME: -2 missing, -1 no expiry."""
    db = s.db
    if db.peek(key) is None:
        return -2
    at = db.expires.get(key)
    if at is None:
        return -1
    t = at if absolute else max(at - now_ms(), 0)
    return t if ms else (t + 500) // 1000


@command("ttl", 2, R, 1, 1, 1)
def cmd_ttl(s: Session, argv: list[bytes]) -> Reply:
    return _ttl(s, argv[1], False, False)


@command("pttl", 2, R, 1, 1, 1)
def cmd_pttl(s: Session, argv: list[bytes]) -> Reply:
    return _ttl(s, argv[1], True, False)


@command("expiretime", 2, R, 1, 1, 1)
def cmd_expiretime(s: Session, argv: list[bytes]) -> Reply:
    return _ttl(s, argv[1], False, True)


@command("pexpiretime", 2, R, 1, 1, 1)
def cmd_pexpiretime(s: Session, argv: list[bytes]) -> Reply:
    return _ttl(s, argv[1], True, True)


@command("persist", 2, W, 1, 1, 1)
def cmd_persist(s: Session, argv: list[bytes]) -> Reply:
    key = argv[1]
    db = s.db
    if db.get(key) is None or db.expires.get(key) is None:
        return 0
    s.store.apply(db, key, (EXPIRE, None))
    return 1


# -- OBJECT ---------------------------------------------------------------------------

container("object", -2)


@command("object|encoding", 3, Flag.READONLY, 2, 2, 1)
def cmd_object_encoding(s: Session, argv: list[bytes]) -> Reply:
    v = s.db.peek(argv[2])
    return None if v is None else object_encoding(v, writer_of(s, argv[2]))


@command("object|freq", 3, Flag.READONLY, 2, 2, 1)
def cmd_object_freq(s: Session, argv: list[bytes]) -> Reply:
    if s.db.peek(argv[2]) is None:
        return None
    if not _lfu(s):
        raise CommandError(FREQ_NOT_LFU)
    return frequency(s.db, argv[2])


@command("object|idletime", 3, Flag.READONLY, 2, 2, 1)
def cmd_object_idletime(s: Session, argv: list[bytes]) -> Reply:
    if s.db.peek(argv[2]) is None:
        return None
    if _lfu(s):
        raise CommandError(IDLETIME_LFU)
    return idle_seconds(s.db, argv[2])


@command("object|refcount", 3, Flag.READONLY, 2, 2, 1)
def cmd_object_refcount(s: Session, argv: list[bytes]) -> Reply:
    v = s.db.peek(argv[2])
    return None if v is None else refcount(s, v)


@command("object|help", 2, Flag.LOADING | Flag.STALE)
def cmd_object_help(s: Session, argv: list[bytes]) -> Reply:
    head = b"%s <subcommand> [<arg> [value] [opt] ...]. Subcommands are:" % _cstr(argv[0]).upper()
    return [Simple(head), *_OBJECT_HELP_LINES]
