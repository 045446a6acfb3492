"""Stream consumer groups: XGROUP, XREADGROUP, XACK, XPENDING, as Redis 7.0.

Group state lives in the stream value (`store.stream.Group`) and changes only
through the `xgset`/`xgupd` ops, so every change is a version with its undo, is
written to storage and replays exactly. Delivery and seen times are the wall
clock in ms when the command runs, recorded in the ops.
"""

from __future__ import annotations

from typing import Any

from commands.common import help_reply
from commands.errors import CommandError
from commands.parsing import get_int
from commands.registry import Flag, command, container
from commands.replies import NULL_ARRAY, OK, Blocked, Reply
from commands.session import Session
from commands.stream_args import (
    XREAD_BLOCKED_DEFAULT_COUNT,
    _has_tombstones,
    _nogroup,
    _nogroup_key,
    _subcommand_syntax,
    get_stream,
    parse_end,
    parse_id,
    parse_read_args,
    parse_start,
    streams_reply,
)
from store import now_ms
from store.ops import RESTORE
from store.stream import (
    INVALID_ENTRIES_READ,
    MAX_ID,
    MIN_ID,
    XGSET,
    XGUPD,
    Entry,
    Group,
    Stream,
    StreamID,
    estimate_entries_read,
    format_id,
    incr_id,
)

XGROUP_NO_KEY = (
    "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may "
    "want to use the MKSTREAM option to create an empty stream automatically."
)
BUSYGROUP = "BUSYGROUP Consumer Group name already exists"
ENTRIESREAD_NEGATIVE = "ERR value for ENTRIESREAD must be positive or -1"
XREADGROUP_NO_GROUP = "ERR Missing GROUP option for XREADGROUP"
XREADGROUP_DOLLAR = (
    "ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the "
    "history of this consumer by specifying a proper ID, or use the > ID to get new "
    "messages. The $ ID would just return an empty result set."
)
KEY_GONE = "UNBLOCKED the stream key no longer exists"
_BLOCK_STATE = "xreadgroup"  # Session.extra key
GROUP_GONE = "NOGROUP the consumer group this client was blocked on no longer exists"

XGROUP_HELP = [
    "CREATE <key> <groupname> <id|$> [option]",
    "    Create a new consumer group. Options are:",
    "    * MKSTREAM",
    "      Create the empty stream if it does not exist.",
    "    * ENTRIESREAD entries_read",
    "      Set the group's entries_read counter (internal use).",
    "CREATECONSUMER <key> <groupname> <consumer>",
    "    Create a new consumer in the specified group.",
    "DELCONSUMER <key> <groupname> <consumer>",
    "    Remove the specified consumer.",
    "DESTROY <key> <groupname>",
    "    Remove the specified group.",
    "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
    "    Set the current group ID and entries_read counter.",
]


# -- XGROUP ---------------------------------------------------------------------------

container("xgroup", -2)


def _xgroup_target(
    s: Session, argv: list[bytes], mkstream: bool, need_group: bool
) -> tuple[Stream | None, Group | None]:
    st = get_stream(s, argv[2])
    if st is None and not mkstream:
        raise CommandError(XGROUP_NO_KEY)
    g = st.groups.get(argv[3]) if st is not None else None
    if need_group and g is None:
        raise _nogroup(argv[3], argv[2])
    return st, g


def _parse_entries_read(argv: list[bytes], create: bool) -> tuple[bool, int]:
    mkstream = False
    entries_read = INVALID_ENTRIES_READ
    i = 5
    n = len(argv)
    while i < n:
        low = argv[i].lower()
        if create and low == b"mkstream":
            mkstream = True
            i += 1
        elif low == b"entriesread" and i + 1 < n:
            entries_read = get_int(argv[i + 1])
            if entries_read < 0 and entries_read != INVALID_ENTRIES_READ:
                raise CommandError(ENTRIESREAD_NEGATIVE)
            i += 2
        else:
            raise _subcommand_syntax(argv)
    return mkstream, entries_read


@command("xgroup|create", -5, Flag.WRITE | Flag.DENYOOM, 2, 2, 1)
def cmd_xgroup_create(s: Session, argv: list[bytes]) -> Reply:
    mkstream, entries_read = _parse_entries_read(argv, True)
    st, g = _xgroup_target(s, argv, mkstream, False)
    if len(argv) > 8:
        raise _subcommand_syntax(argv)
    if argv[4] == b"$":
        sid = st.last_id if st is not None else MIN_ID
    else:
        sid = parse_id(argv[4])
    key = argv[2]
    if g is not None:
        raise CommandError(BUSYGROUP)
    if st is None:
        st = Stream()
        st.groups[argv[3]] = Group(sid, entries_read)
        s.store.apply(s.db, key, (RESTORE, st, None))
    else:
        s.store.apply(s.db, key, (XGSET, argv[3], (sid, entries_read, (), ())))
    return OK


@command("xgroup|setid", -5, Flag.WRITE, 2, 2, 1)
def cmd_xgroup_setid(s: Session, argv: list[bytes]) -> Reply:
    _, entries_read = _parse_entries_read(argv, False)
    st, _ = _xgroup_target(s, argv, False, True)
    assert st is not None
    if len(argv) not in (5, 7):
        raise _subcommand_syntax(argv)
    sid = st.last_id if argv[4] == b"$" else parse_id(argv[4], 0, False)
    s.store.apply(s.db, argv[2], (XGUPD, argv[3], (sid, entries_read), (), (), ()))
    return OK


@command("xgroup|destroy", 4, Flag.WRITE, 2, 2, 1)
def cmd_xgroup_destroy(s: Session, argv: list[bytes]) -> Reply:
    _, g = _xgroup_target(s, argv, False, False)
    if g is None:
        return 0
    s.store.apply(s.db, argv[2], (XGSET, argv[3], None))
    return 1


@command("xgroup|createconsumer", 5, Flag.WRITE | Flag.DENYOOM, 2, 2, 1)
def cmd_xgroup_createconsumer(s: Session, argv: list[bytes]) -> Reply:
    _, g = _xgroup_target(s, argv, False, True)
    assert g is not None
    if argv[4] in g.consumers:
        return 0
    s.store.apply(s.db, argv[2], (XGUPD, argv[3], None, ((argv[4], now_ms()),), (), ()))
    return 1


@command("xgroup|delconsumer", 5, Flag.WRITE, 2, 2, 1)
def cmd_xgroup_delconsumer(s: Session, argv: list[bytes]) -> Reply:
    _, g = _xgroup_target(s, argv, False, True)
    assert g is not None
    name = argv[4]
    if name not in g.consumers:
        return 0
    ids = tuple(sid for sid, n in g.pel.items() if n[2] == name)
    s.store.apply(s.db, argv[2], (XGUPD, argv[3], None, ((name, None),), (), ids))
    return len(ids)


@command("xgroup|help", 2, Flag.LOADING | Flag.STALE)
def cmd_xgroup_help(s: Session, argv: list[bytes]) -> Reply:
    return help_reply(argv[0], XGROUP_HELP)


# -- XREADGROUP -----------------------------------------------------------------------


def _serve_new(
    s: Session, key: bytes, st: Stream, gname: bytes, consumer: bytes, count: int, noack: bool
) -> list[Entry]:
    """New entries past the group's last ID: advance it, add them to the PEL."""
    g = st.groups[gname]
    now = now_ms()
    start = incr_id(g.last_id) or MIN_ID
    entries = st.range(start, MAX_ID, count)
    last_id, read = g.last_id, g.entries_read
    pel_set = []
    for e in entries:
        sid = _decode(e[0])
        if sid > last_id:
            if read != INVALID_ENTRIES_READ and not _has_tombstones(st, sid):
                read += 1
            elif st.entries_added:
                read = estimate_entries_read(st, sid)
            last_id = sid
        if not noack:
            pel_set.append((sid, now, 1, consumer))
    meta = (last_id, read) if entries else None
    op = (XGUPD, gname, meta, ((consumer, now),), tuple(pel_set), ())
    s.store.apply(s.db, key, op)
    return entries


def _decode(b: bytes) -> StreamID:
    ms, _, seq = b.partition(b"-")
    return int(ms), int(seq)


def _serve_history(
    s: Session, key: bytes, st: Stream, gname: bytes, consumer: bytes, start: StreamID, count: int
) -> list[Any]:
    """The consumer's own pending entries from `start`; deleted ones as (id, nil)."""
    g = st.groups[gname]
    now = now_ms()
    out: list[Any] = []
    pel_set = []
    for sid in g.sorted_pel():
        if count and len(out) >= count:
            break
        if sid < start:
            continue
        nack = g.pel[sid]
        if nack[2] != consumer:
            continue
        e = st.entries.get(sid)
        if e is None:
            out.append([format_id(sid), NULL_ARRAY])
        else:
            out.append(e)
            pel_set.append((sid, now, nack[1] + 1, consumer))
    s.store.apply(s.db, key, (XGUPD, gname, None, ((consumer, now),), tuple(pel_set), ()))
    return out


@command("xreadgroup", -7, Flag.WRITE | Flag.BLOCKING)
def cmd_xreadgroup(s: Session, argv: list[bytes]) -> Reply:
    a = parse_read_args(s, argv, True)
    if a.group is None:
        raise CommandError(XREADGROUP_NO_GROUP)
    gname = a.group
    first = a.first
    nkeys = (len(argv) - first) >> 1
    keys = argv[first : first + nkeys]
    ids: list[StreamID | None] = []  # None: ">"
    for key, arg in zip(keys, argv[first + nkeys :], strict=True):
        if s.blocked:
            v = s.db.get(key)
            if type(v) is not Stream:
                raise CommandError(KEY_GONE)
            if gname not in v.groups:
                raise CommandError(GROUP_GONE)
        st = get_stream(s, key)
        if st is None or gname not in st.groups:
            raise _nogroup_key(key, gname, b" in XREADGROUP with GROUP option")
        if arg == b"$":
            raise CommandError(XREADGROUP_DOLLAR)
        sid = MAX_ID if arg == b">" else parse_id(arg)
        ids.append(None if sid == MAX_ID else sid)  # Redis marks ">" as the max ID
    pairs: list[tuple[bytes, list[Any]]] = []
    # Redis wakes a blocked reader on XADD (or the key or group gone), not on other
    # writes such as XGROUP SETID: each stream's entries-added counter when it blocked.
    added: dict[bytes, int] = s.extra.pop(_BLOCK_STATE, {}) if s.blocked else {}
    for key, gt in zip(keys, ids, strict=True):
        st = get_stream(s, key)
        if st is None or added.get(key) == st.entries_added:
            continue
        g = st.groups[gname]
        if gt is not None:
            start = incr_id(gt) or MAX_ID
            pairs.append((key, _serve_history(s, key, st, gname, a.consumer, start, a.count)))
        elif st.entries and st.last_valid_id() > g.last_id:
            count = a.count
            if s.blocked and not count:
                count = XREAD_BLOCKED_DEFAULT_COUNT
            pairs.append((key, _serve_new(s, key, st, gname, a.consumer, count, a.noack)))
    if pairs:
        return streams_reply(s, pairs)
    if a.timeout < 0 or s.in_exec:
        return NULL_ARRAY
    state: dict[bytes, int] = {}
    for key in keys:
        st = get_stream(s, key)
        if st is not None:
            state[key] = st.entries_added
    s.extra[_BLOCK_STATE] = state
    return Blocked(
        keys=[(s.dbi, k) for k in keys],
        timeout=0 if s.blocked else a.timeout / 1000,
        on_timeout=NULL_ARRAY,
    )


# -- XACK, XPENDING -------------------------------------------------------------------


@command("xack", -4, Flag.WRITE | Flag.FAST, 1, 1, 1)
def cmd_xack(s: Session, argv: list[bytes]) -> Reply:
    key = argv[1]
    st = get_stream(s, key)
    g = st.groups.get(argv[2]) if st is not None else None
    if g is None:
        return 0
    ids = [parse_id(x) for x in argv[3:]]
    found: dict[StreamID, None] = {}
    for sid in ids:
        if sid in g.pel:
            found[sid] = None
    if found:
        s.store.apply(s.db, key, (XGUPD, argv[2], None, (), (), tuple(found)))
    return len(found)


@command("xpending", -3, Flag.READONLY, 1, 1, 1)
def cmd_xpending(s: Session, argv: list[bytes]) -> Reply:
    n = len(argv)
    if n != 3 and not 6 <= n <= 9:
        raise CommandError("ERR syntax error")
    minidle = 0
    consumer: bytes | None = None
    start, end = MIN_ID, MAX_ID
    count = 0
    if n >= 6:
        i = 3
        if argv[3].lower() == b"idle":
            minidle = get_int(argv[4])
            if n < 8:
                raise CommandError("ERR syntax error")
            i = 5
        count = max(get_int(argv[i + 2]), 0)
        start = parse_start(argv[i])
        end = parse_end(argv[i + 1])
        if i + 3 < n:
            consumer = argv[i + 3]
    key, gname = argv[1], argv[2]
    st = get_stream(s, key)
    g = st.groups.get(gname) if st is not None else None
    if g is None:
        raise _nogroup_key(key, gname)
    pel = g.sorted_pel()
    if n == 3:
        if not pel:
            return [0, None, None, NULL_ARRAY]
        counts: dict[bytes, int] = {}
        for nack in g.pel.values():
            counts[nack[2]] = counts.get(nack[2], 0) + 1
        cons = [[c, b"%d" % counts[c]] for c in sorted(counts)]
        return [len(pel), format_id(pel[0]), format_id(pel[-1]), cons]
    if consumer is not None and consumer not in g.consumers:
        return []
    now = now_ms()
    out: list[Any] = []
    for sid in pel:
        if not count:
            break
        if sid < start:
            continue
        if sid > end:
            break
        t, deliveries, owner = g.pel[sid]
        if consumer is not None and owner != consumer:
            continue
        if minidle and now - t < minidle:
            continue
        count -= 1
        out.append([format_id(sid), owner, max(now - t, 0), deliveries])
    return out


# -- XCLAIM, XAUTOCLAIM ---------------------------------------------------------------

XCLAIM_MINIDLE = "ERR Invalid min-idle-time argument for XCLAIM"
XAUTOCLAIM_MINIDLE = "ERR Invalid min-idle-time argument for XAUTOCLAIM"
XAUTOCLAIM_COUNT = "ERR COUNT must be > 0"
XAUTOCLAIM_MAX_COUNT = ((1 << 63) - 1) // 16  # LONG_MAX / sizeof(streamID)
XAUTOCLAIM_ATTEMPTS_FACTOR = 10


def _group_or_nogroup(s: Session, key: bytes, gname: bytes) -> tuple[Stream, Group]:
    st = get_stream(s, key)
    g = st.groups.get(gname) if st is not None else None
    if st is None or g is None:
        raise _nogroup_key(key, gname)
    return st, g


def _strict_id_or_none(arg: bytes) -> StreamID | None:
    try:
        return parse_id(arg)
    except CommandError:
        return None


class _Claim:
    """The PEL changes of one XCLAIM/XAUTOCLAIM, applied as one xgupd op."""

    __slots__ = ("consumer", "g", "gname", "now", "pel_del", "pel_set", "seen")

    def __init__(self, g: Group, gname: bytes, consumer: bytes, now: int) -> None:
        self.g = g
        self.gname = gname
        self.consumer = consumer
        self.now = now
        self.seen = False
        self.pel_set: dict[StreamID, tuple[StreamID, int, int, bytes]] = {}
        self.pel_del: list[StreamID] = []

    def claim(self, sid: StreamID, count: int, when: int) -> None:
        self.seen = True
        self.pel_set[sid] = (sid, when, count, self.consumer)

    def apply(self, s: Session, key: bytes, meta: tuple[StreamID, int] | None) -> None:
        if not (self.seen or self.pel_del or meta):
            return
        cons = ((self.consumer, self.now),) if self.seen else ()
        op = (XGUPD, self.gname, meta, cons, tuple(self.pel_set.values()), tuple(self.pel_del))
        s.store.apply(s.db, key, op)


@command("xclaim", -6, Flag.WRITE | Flag.FAST, 1, 1, 1)
def cmd_xclaim(s: Session, argv: list[bytes]) -> Reply:
    key, gname = argv[1], argv[2]
    st, g = _group_or_nogroup(s, key, gname)
    minidle = max(get_int(argv[4], XCLAIM_MINIDLE), 0)
    ids: list[StreamID] = []
    j = 5
    n = len(argv)
    while j < n:
        sid = _strict_id_or_none(argv[j])
        if sid is None:
            break
        ids.append(sid)
        j += 1
    now = now_ms()
    force = justid = False
    retrycount = -1
    delivery = -1
    last_id = MIN_ID
    while j < n:
        more = n - 1 - j
        opt = argv[j]
        low = opt.lower()
        if low == b"force":
            force = True
        elif low == b"justid":
            justid = True
        elif low == b"idle" and more:
            j += 1
            delivery = now - get_int(argv[j], "ERR Invalid IDLE option argument for XCLAIM")
        elif low == b"time" and more:
            j += 1
            delivery = get_int(argv[j], "ERR Invalid TIME option argument for XCLAIM")
        elif low == b"retrycount" and more:
            j += 1
            retrycount = get_int(argv[j], "ERR Invalid RETRYCOUNT option argument for XCLAIM")
        elif low == b"lastid" and more:
            j += 1
            last_id = parse_id(argv[j])
        else:
            raise CommandError(b"ERR Unrecognized XCLAIM option '%s'" % opt)
        j += 1
    meta = (last_id, g.entries_read) if last_id > g.last_id else None
    if delivery < 0 or delivery > now:
        delivery = now
    c = _Claim(g, gname, argv[3], now)
    out: list[Any] = []
    done: dict[StreamID, Any] = {}  # an ID named twice sees its first claim
    for sid in ids:
        nack: Any = done.get(sid, g.pel.get(sid))
        if sid not in st.entries:
            if nack is not None and sid not in c.pel_del:
                c.pel_del.append(sid)
                c.pel_set.pop(sid, None)
                done[sid] = None
            continue
        fresh = False
        if nack is None:
            if not force:
                continue
            nack, fresh = (now, 1, b""), True
        if not fresh and minidle and now - nack[0] < minidle:
            continue
        count = nack[1]
        if retrycount >= 0:
            count = retrycount
        elif not justid:
            count += 1
        c.claim(sid, count, delivery)
        done[sid] = (delivery, count, argv[3])
        out.append(format_id(sid) if justid else st.entries[sid])
    c.apply(s, key, meta)
    return out


@command("xautoclaim", -6, Flag.WRITE | Flag.FAST, 1, 1, 1)
def cmd_xautoclaim(s: Session, argv: list[bytes]) -> Reply:
    minidle = max(get_int(argv[4], XAUTOCLAIM_MINIDLE), 0)
    start = parse_start(argv[5])
    count = 100
    justid = False
    j = 6
    n = len(argv)
    while j < n:
        low = argv[j].lower()
        if low == b"count" and n - 1 - j:
            count = get_int(argv[j + 1], XAUTOCLAIM_COUNT)
            if not 1 <= count <= XAUTOCLAIM_MAX_COUNT:
                raise CommandError(XAUTOCLAIM_COUNT)
            j += 1
        elif low == b"justid":
            justid = True
        else:
            raise CommandError("ERR syntax error")
        j += 1
    key, gname = argv[1], argv[2]
    st, g = _group_or_nogroup(s, key, gname)
    attempts = count * XAUTOCLAIM_ATTEMPTS_FACTOR
    now = now_ms()
    c = _Claim(g, gname, argv[3], now)
    claimed: list[Any] = []
    pel = [sid for sid in g.sorted_pel() if sid >= start]
    i = 0
    while attempts and count and i < len(pel):
        attempts -= 1
        sid = pel[i]
        i += 1
        if sid not in st.entries:
            c.pel_del.append(sid)
            count -= 1
            continue
        t, deliveries, _ = g.pel[sid]
        if minidle and now - t < minidle:
            continue
        c.claim(sid, deliveries if justid else deliveries + 1, now)
        claimed.append(format_id(sid) if justid else st.entries[sid])
        count -= 1
    cursor = format_id(pel[i]) if i < len(pel) else b"0-0"
    c.apply(s, key, None)
    return [cursor, claimed, [format_id(x) for x in c.pel_del]]
