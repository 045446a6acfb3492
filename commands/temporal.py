"""The TS.* verbs: versions, history, time travel, snapshots.

Wherever <at> appears it is one of
    VERSION <lsn>      the state just after that LSN
    TIME <unix-ms>     the state at that wall-clock time
    SNAPSHOT <name>    a sealed snapshot
    BACK <n>           (key-scoped verbs only) n versions before the key's latest

TS.VERSION                         the current LSN
TS.ASOF key <at>                   the key's value then, in its type's read shape
TS.HISTORY key [FROM <at>] [TO <at>] [COUNT n] [REV] [AUTHOR name] [WITHVALUES]
TS.META AUTHOR name [MESSAGE text] | TS.META RESET
TS.SEAL name [TRIGGER text]        seal a snapshot (O(1)); replies its LSN
TS.SNAPSHOTS                       name, version, time, trigger of each snapshot
TS.UNSEAL name                     drop a snapshot (1, or 0 if there was none)
TS.CHECKOUT AT <at> | HEAD         this connection's reads answer as of <at>
TS.DIFF <at> <at> [MATCH pattern] [COUNT n]
TS.REVERT key <at>                 write the key's old value as a new version
TS.RESTORE <at> [MATCH pattern]    TS.REVERT every matching key; replies the count
"""

from __future__ import annotations

from collections import deque
from typing import Any

from commands.common import glob_match
from commands.errors import SYNTAX, CommandError
from commands.parsing import get_int
from commands.registry import Flag, command
from commands.replies import OK, Reply
from commands.session import Session
from store import PrunedError, WriteMeta, now_ms
from store.ops import RESTORE
from store.stream import Stream
from store.values import ZSet

NO_SNAPSHOT = "ERR no such snapshot '{}'"
SNAPSHOT_EXISTS = "ERR snapshot '{}' already exists"
FUTURE_VERSION = "ERR version {} is in the future (current version is {})"
BACK_NEEDS_KEY = "ERR BACK is only valid for a single key"
NEGATIVE = "ERR value is out of range, must be positive"

RO = Flag.READONLY
W = Flag.WRITE | Flag.DENYOOM


def pruned(e: PrunedError) -> CommandError:
    return CommandError(str(e))


def parse_at(s: Session, argv: list[bytes], i: int, key: bytes | None = None) -> tuple[int, int]:
    """Parse a point in time at argv[i]; return (lsn, index after it)."""
    if i + 1 >= len(argv):
        raise CommandError(SYNTAX)
    kind = argv[i].lower()
    arg = argv[i + 1]
    store = s.store
    if kind == b"version":
        lsn = get_int(arg)
        if lsn < 0:
            raise CommandError(NEGATIVE)
        if lsn > store.lsn:
            raise CommandError(FUTURE_VERSION.format(lsn, store.lsn))
    elif kind == b"time":
        t = get_int(arg)
        lsn = store.lsn if t >= now_ms() else store.lsn_at_time(t)
    elif kind == b"snapshot":
        snap = store.snapshots.get(arg)
        if snap is None:
            raise CommandError(NO_SNAPSHOT.format(arg.decode("utf-8", "replace")))
        lsn = snap.lsn
    elif kind == b"back":
        if key is None:
            raise CommandError(BACK_NEEDS_KEY)
        n = get_int(arg)
        if n < 0:
            raise CommandError(NEGATIVE)
        chain = s.db.chains.get(key, [])
        if n == 0:
            lsn = store.lsn
        elif n < len(chain):
            lsn = chain[len(chain) - 1 - n].lsn
        elif n == len(chain) and chain and chain[0].created:
            lsn = chain[0].lsn - 1
        else:
            floor = s.db.floors.get(key, chain[0].lsn if chain else 0)
            raise CommandError(
                f"ERR PRUNED version {floor} of {key.decode('utf-8', 'replace')} "
                "is no longer retained"
            )
    else:
        raise CommandError(SYNTAX)
    return lsn, i + 2


def value_as_of(s: Session, key: bytes, lsn: int) -> Any:
    """The key's value just after `lsn` (None if it did not exist, or had expired)."""
    try:
        value, expire = s.store.value_as_of(s.dbi, key, lsn)
    except PrunedError as e:
        raise pruned(e) from None
    if value is not None and expire is not None and expire <= s.store.time_of(lsn):
        return None
    return value


def read_shape(s: Session, value: Any) -> Reply:
    """A value as its type's natural read command answers: GET, HGETALL,
    LRANGE 0 -1, SMEMBERS, ZRANGE 0 -1 WITHSCORES, XRANGE - +."""
    if value is None:
        return None
    t = type(value)
    if t is bytes:
        return value
    if t is bytearray:
        return bytes(value)
    if isinstance(value, dict):
        return dict(value)
    if t is deque:
        return list(value)
    if isinstance(value, set):
        return set(value)
    if t is ZSet:
        if s.resp == 3:
            return [[m, sc] for sc, m in value.order]
        out: list[Reply] = []
        for sc, m in value.order:
            out.append(m)
            out.append(sc)
        return out
    if t is Stream:
        return [list(e) for e in value.entries.values()]
    raise CommandError("ERR unsupported value type")


@command("ts.version", 1, RO | Flag.FAST | Flag.LOADING)
def cmd_ts_version(s: Session, argv: list[bytes]) -> Reply:
    return s.store.lsn


@command("ts.asof", 4, RO, 1, 1, 1)
def cmd_ts_asof(s: Session, argv: list[bytes]) -> Reply:
    key = argv[1]
    lsn, end = parse_at(s, argv, 2, key)
    if end != len(argv):
        raise CommandError(SYNTAX)
    return read_shape(s, value_as_of(s, key, lsn))


@command("ts.history", -2, RO, 1, 1, 1)
def cmd_ts_history(s: Session, argv: list[bytes]) -> Reply:
    key = argv[1]
    lo, hi = 0, s.store.lsn
    count: int | None = None
    rev = False
    author: bytes | None = None
    withvalues = False
    i = 2
    while i < len(argv):
        opt = argv[i].lower()
        if opt == b"from":
            lo, i = parse_at(s, argv, i + 1, key)
        elif opt == b"to":
            hi, i = parse_at(s, argv, i + 1, key)
        elif opt == b"count" and i + 1 < len(argv):
            count = get_int(argv[i + 1])
            if count < 0:
                raise CommandError(NEGATIVE)
            i += 2
        elif opt == b"author" and i + 1 < len(argv):
            author = argv[i + 1]
            i += 2
        elif opt == b"rev":
            rev = True
            i += 1
        elif opt == b"withvalues":
            withvalues = True
            i += 1
        else:
            raise CommandError(SYNTAX)
    chain = s.db.chains.get(key, [])
    entries = [e for e in chain if lo <= e.lsn <= hi]
    if author is not None:
        entries = [e for e in entries if e.meta is not None and e.meta.author == author]
    if rev:
        entries.reverse()
    if count is not None:
        entries = entries[:count]
    out: list[Reply] = []
    for e in entries:
        item: dict[bytes, Reply] = {
            b"version": e.lsn,
            b"time": e.time_ms,
            b"command": e.cmd.encode(),
            b"author": e.meta.author if e.meta is not None else None,
            b"message": e.meta.message if e.meta is not None else None,
        }
        if withvalues:
            item[b"value"] = read_shape(s, value_as_of(s, key, e.lsn))
        out.append(item)
    return out


@command("ts.meta", -2, Flag.FAST | Flag.LOADING)
def cmd_ts_meta(s: Session, argv: list[bytes]) -> Reply:
    opt = argv[1].lower()
    if opt == b"reset" and len(argv) == 2:
        s.meta = None
        return OK
    if opt != b"author" or len(argv) not in (3, 5):
        raise CommandError(SYNTAX)
    message = None
    if len(argv) == 5:
        if argv[3].lower() != b"message":
            raise CommandError(SYNTAX)
        message = argv[4]
    s.meta = WriteMeta(s.id, argv[2], message)
    return OK


@command("ts.seal", -2, Flag.WRITE)
def cmd_ts_seal(s: Session, argv: list[bytes]) -> Reply:
    name = argv[1]
    trigger = b""
    if len(argv) == 4 and argv[2].lower() == b"trigger":
        trigger = argv[3]
    elif len(argv) != 2:
        raise CommandError(SYNTAX)
    if name in s.store.snapshots:
        raise CommandError(SNAPSHOT_EXISTS.format(name.decode("utf-8", "replace")))
    return s.store.db_op(s.dbi, ("seal", name, trigger))


@command("ts.unseal", 2, Flag.WRITE | Flag.ADMIN)
def cmd_ts_unseal(s: Session, argv: list[bytes]) -> Reply:
    if argv[1] not in s.store.snapshots:
        return 0
    s.store.db_op(s.dbi, ("unseal", argv[1]))
    return 1


@command("ts.snapshots", 1, RO)
def cmd_ts_snapshots(s: Session, argv: list[bytes]) -> Reply:
    return [
        {b"name": snap.name, b"version": snap.lsn, b"time": snap.time_ms, b"trigger": snap.trigger}
        for snap in sorted(s.store.snapshots.values(), key=lambda x: x.lsn)
    ]


@command("ts.checkout", -2, Flag.LOADING)
def cmd_ts_checkout(s: Session, argv: list[bytes]) -> Reply:
    opt = argv[1].lower()
    if opt == b"head" and len(argv) == 2:
        s.view_lsn = None
        s.select(s.dbi)
        return OK
    if opt == b"at":
        lsn, end = parse_at(s, argv, 2)
        if end != len(argv):
            raise CommandError(SYNTAX)
        try:
            s.store.view(s.dbi, lsn)
        except PrunedError as e:
            raise pruned(e) from None
        s.view_lsn = lsn
        s.select(s.dbi)
        return OK
    raise CommandError(SYNTAX)


def _view_data(s: Session, lsn: int) -> dict[bytes, Any]:
    try:
        return s.store.view(s.dbi, lsn).data
    except PrunedError as e:
        raise pruned(e) from None


@command("ts.diff", -5, RO)
def cmd_ts_diff(s: Session, argv: list[bytes]) -> Reply:
    a, i = parse_at(s, argv, 1)
    b, i = parse_at(s, argv, i)
    pattern: bytes | None = None
    count: int | None = None
    while i < len(argv):
        opt = argv[i].lower()
        if opt == b"match" and i + 1 < len(argv):
            pattern = argv[i + 1]
        elif opt == b"count" and i + 1 < len(argv):
            count = get_int(argv[i + 1])
            if count < 0:
                raise CommandError(NEGATIVE)
        else:
            raise CommandError(SYNTAX)
        i += 2
    old, new = _view_data(s, a), _view_data(s, b)
    out: list[Reply] = []
    for key in sorted(old.keys() | new.keys()):
        if pattern is not None and not glob_match(pattern, key):
            continue
        if key not in old:
            change = b"added"
        elif key not in new:
            change = b"removed"
        elif old[key] != new[key] or type(old[key]) is not type(new[key]):
            change = b"changed"
        else:
            continue
        out.append([key, change])
        if count is not None and len(out) >= count:
            break
    return out


def _revert(s: Session, key: bytes, lsn: int) -> bool:
    try:
        value, expire = s.store.value_as_of(s.dbi, key, lsn)
    except PrunedError as e:
        raise pruned(e) from None
    if value is not None and expire is not None and expire <= now_ms():
        value, expire = None, None
    current = s.db.get(key)
    if current == value and (value is None or s.db.expires.get(key) == expire):
        if value is None or type(current) is type(value):
            return False
    s.store.apply(s.db, key, (RESTORE, value, expire))
    return True


@command("ts.revert", 4, W, 1, 1, 1)
def cmd_ts_revert(s: Session, argv: list[bytes]) -> Reply:
    key = argv[1]
    lsn, end = parse_at(s, argv, 2, key)
    if end != len(argv):
        raise CommandError(SYNTAX)
    return int(_revert(s, key, lsn))


@command("ts.restore", -3, W)
def cmd_ts_restore(s: Session, argv: list[bytes]) -> Reply:
    lsn, i = parse_at(s, argv, 1)
    pattern: bytes | None = None
    if i < len(argv):
        if argv[i].lower() != b"match" or i + 2 != len(argv):
            raise CommandError(SYNTAX)
        pattern = argv[i + 1]
    then = _view_data(s, lsn)
    keys = sorted(then.keys() | set(s.db.keys()))
    keys = [k for k in keys if pattern is None or glob_match(pattern, k)]
    return sum(_revert(s, k, lsn) for k in keys)
