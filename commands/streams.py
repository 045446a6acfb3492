"""Stream commands.

XADD key [NOMKSTREAM] [MAXLEN|MINID [=|~] threshold [LIMIT count]] *|id field value ...
XRANGE key start end [COUNT count] · XREVRANGE key end start [COUNT count]
XLEN key · XDEL key id [id ...]
XTRIM key MAXLEN|MINID [=|~] threshold [LIMIT count]
XREAD [COUNT count] [BLOCK milliseconds] STREAMS key [key ...] id [id ...]

IDs are `ms-seq`, `ms` (the sequence defaults per command), `-` and `+` where a
range allows them, `(id` for an exclusive range end, `ms-*` and `*` in XADD,
`$` in XREAD (the stream's last ID when the command runs).
"""

from __future__ import annotations

from commands.errors import (
    SYNTAX,
    WRONG_ARITY,
    XADD_ID_SMALL,
    XADD_ID_ZERO,
    CommandError,
)
from commands.parsing import get_int
from commands.registry import Flag, command
from commands.replies import NULL_ARRAY, Blocked, Reply
from commands.session import Session
from commands.stream_args import (
    XREAD_BLOCKED_DEFAULT_COUNT,
    _parse_id,
    get_stream,
    parse_end,
    parse_id,
    parse_read_args,
    parse_start,
    streams_reply,
)
from store import now_ms
from store.stream import (
    LISTPACK_MAX_SIZE,
    MAX_ID,
    MIN_ID,
    NODE_MAX_BYTES,
    NODE_MAX_ENTRIES,
    U64,
    XADD,
    XDEL,
    XTRIM,
    Entry,
    Stream,
    StreamID,
    format_id,
    incr_id,
)
from store.values import LIMITS

MAXLEN_MINID_BOTH = "ERR syntax error, MAXLEN and MINID options at the same time are not compatible"
MAXLEN_NEGATIVE = "ERR The MAXLEN argument must be >= 0."
LIMIT_NEGATIVE = "ERR The LIMIT argument must be >= 0."
LIMIT_WITHOUT_STRATEGY = (
    "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy"
)
XTRIM_WITHOUT_STRATEGY = "ERR syntax error, XTRIM must be called with a trimming strategy"
LIMIT_WITHOUT_APPROX = "ERR syntax error, LIMIT cannot be used without the special ~ option"
STREAM_EXHAUSTED = "ERR The stream has exhausted the last possible ID, unable to add more items"
ELEMENTS_TOO_LARGE = "ERR Elements are too large to be stored"
XREAD_GT = (
    "ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> "
    "<consumer> option."
)

# Session.extra key: each stream's (last ID, entries added) when XREAD blocked. Redis
# wakes a blocked reader only on XADD (or a new stream), not on XDEL or XTRIM.
_BLOCK_STATE = "xread"


class TrimArgs:
    """What XADD and XTRIM were asked: trimming, and for XADD the ID and NOMKSTREAM."""

    __slots__ = (
        "approx",
        "id",
        "id_given",
        "idpos",
        "limit",
        "maxlen",
        "minid",
        "nomkstream",
        "seq_given",
        "strategy",
    )

    def __init__(self) -> None:
        self.strategy = 0  # 0 none, 1 MAXLEN, 2 MINID
        self.approx = False
        self.limit = 0
        self.maxlen = 0
        self.minid: StreamID = MIN_ID
        self.id: StreamID = MIN_ID
        self.id_given = False
        self.seq_given = True
        self.nomkstream = False
        self.idpos = 0

    def plan(self, st: Stream) -> tuple[int, int, int]:
        if self.strategy == 1:
            return st.plan_trim(self.maxlen, MIN_ID, self.approx, self.limit)
        return st.plan_trim(None, self.minid, self.approx, self.limit)


def _parse_trim_args(argv: list[bytes], xadd: bool) -> TrimArgs:
    """streamParseAddOrTrimArgsOrReply: options in any order; for XADD they end
    at the ID."""
    a = TrimArgs()
    n = len(argv)
    limit_given = False
    i = 2
    while i < n:
        more = n - 1 - i
        opt = argv[i]
        low = opt.lower()
        if xadd and opt == b"*":
            break
        if (low == b"maxlen" or low == b"minid") and more:
            if a.strategy:
                raise CommandError(MAXLEN_MINID_BOTH)
            a.approx = False
            nxt = argv[i + 1]
            if more >= 2 and nxt == b"~":
                a.approx = True
                i += 1
            elif more >= 2 and nxt == b"=":
                i += 1
            if low == b"maxlen":
                a.maxlen = get_int(argv[i + 1])
                if a.maxlen < 0:
                    raise CommandError(MAXLEN_NEGATIVE)
                a.strategy = 1
            else:
                a.minid = parse_id(argv[i + 1])
                a.strategy = 2
            i += 1
        elif low == b"limit" and more:
            a.limit = get_int(argv[i + 1])
            if a.limit < 0:
                raise CommandError(LIMIT_NEGATIVE)
            limit_given = True
            i += 1
        elif xadd and low == b"nomkstream":
            a.nomkstream = True
        elif xadd:
            a.id, a.seq_given = _parse_id(opt, 0, True, True)
            a.id_given = True
            break
        else:
            raise CommandError(SYNTAX)
        i += 1
    a.idpos = i
    if a.limit and not a.strategy:
        raise CommandError(LIMIT_WITHOUT_STRATEGY)
    if not xadd and not a.strategy:
        raise CommandError(XTRIM_WITHOUT_STRATEGY)
    if limit_given:
        if not a.approx:
            raise CommandError(LIMIT_WITHOUT_APPROX)
    elif a.approx:
        # At most 100 nodes' worth, capped both ways as Redis does.
        limit = 100 * LIMITS.stream_node_entries
        a.limit = 10000 if limit <= 0 else min(limit, 1000000)
    else:
        a.limit = 0
    return a


def _trim(s: Session, key: bytes, st: Stream, a: TrimArgs) -> int:
    dropped, marked, deleted = a.plan(st)
    if dropped or marked:
        s.store.apply(s.db, key, (XTRIM, dropped, marked))
    return deleted


@command("xadd", -5, Flag.WRITE | Flag.DENYOOM | Flag.FAST, 1, 1, 1)
def cmd_xadd(s: Session, argv: list[bytes]) -> Reply:
    a = _parse_trim_args(argv, True)
    fpos = a.idpos + 1
    nargs = len(argv) - fpos
    if nargs < 2 or nargs & 1:
        raise CommandError(WRONG_ARITY.format("xadd"))
    if a.id_given and a.seq_given and a.id == MIN_ID:
        raise CommandError(XADD_ID_ZERO)
    key = argv[1]
    st = get_stream(s, key)
    if st is None and a.nomkstream:
        return None
    last = st.last_id if st is not None else MIN_ID
    if last == MAX_ID:
        raise CommandError(STREAM_EXHAUSTED)
    if not a.id_given:
        t = now_ms()
        nid = (t, 0) if t > last[0] else incr_id(last)
        assert nid is not None
    elif a.seq_given:
        nid = a.id
    elif last[0] == a.id[0]:
        if last[1] == U64:
            raise CommandError(ELEMENTS_TOO_LARGE)
        nid = (last[0], last[1] + 1)
    else:
        nid = a.id
    if nid <= last:
        raise CommandError(XADD_ID_SMALL)
    fv = tuple(argv[fpos:])
    if sum(map(len, fv)) > LISTPACK_MAX_SIZE:
        raise CommandError(ELEMENTS_TOO_LARGE)
    max_entries, max_bytes = LIMITS.stream_node_entries, LIMITS.stream_node_bytes
    if max_entries == NODE_MAX_ENTRIES and max_bytes == NODE_MAX_BYTES:
        s.store.apply(s.db, key, (XADD, nid, fv))
    else:
        s.store.apply(s.db, key, (XADD, nid, fv, max_entries, max_bytes))
    if a.strategy:
        st = s.db.data[key]
        assert type(st) is Stream
        _trim(s, key, st, a)
    return format_id(nid)


def _range(s: Session, argv: list[bytes], rev: bool) -> Reply:
    start_arg, end_arg = (argv[3], argv[2]) if rev else (argv[2], argv[3])
    start = parse_start(start_arg)
    end = parse_end(end_arg)
    count = -1
    j = 4
    n = len(argv)
    while j < n:
        if argv[j].lower() == b"count" and j + 1 < n:
            count = max(get_int(argv[j + 1]), 0)
            j += 2
        else:
            raise CommandError(SYNTAX)
    st = get_stream(s, argv[1])
    if st is None:
        return []
    if count == 0:
        return NULL_ARRAY
    return st.range(start, end, max(count, 0), rev)


@command("xrange", -4, Flag.READONLY, 1, 1, 1)
def cmd_xrange(s: Session, argv: list[bytes]) -> Reply:
    return _range(s, argv, False)


@command("xrevrange", -4, Flag.READONLY, 1, 1, 1)
def cmd_xrevrange(s: Session, argv: list[bytes]) -> Reply:
    return _range(s, argv, True)


@command("xlen", 2, Flag.READONLY | Flag.FAST, 1, 1, 1)
def cmd_xlen(s: Session, argv: list[bytes]) -> Reply:
    st = get_stream(s, argv[1])
    return 0 if st is None else len(st)


@command("xdel", -3, Flag.WRITE | Flag.FAST, 1, 1, 1)
def cmd_xdel(s: Session, argv: list[bytes]) -> Reply:
    key = argv[1]
    st = get_stream(s, key)
    if st is None:
        return 0
    ids = [parse_id(a) for a in argv[2:]]
    entries = st.entries
    found: dict[StreamID, None] = {}
    for sid in ids:
        if sid in entries:
            found[sid] = None
    if found:
        s.store.apply(s.db, key, (XDEL, tuple(found)))
    return len(found)


@command("xtrim", -4, Flag.WRITE, 1, 1, 1)
def cmd_xtrim(s: Session, argv: list[bytes]) -> Reply:
    a = _parse_trim_args(argv, False)
    key = argv[1]
    st = get_stream(s, key)
    if st is None:
        return 0
    return _trim(s, key, st, a)


@command("xread", -4, Flag.READONLY | Flag.BLOCKING)
def cmd_xread(s: Session, argv: list[bytes]) -> Reply:
    a = parse_read_args(s, argv, False)
    count = a.count
    first = a.first
    timeout = a.timeout
    n = len(argv)
    nkeys = (n - first) >> 1
    keys = argv[first : first + nkeys]
    if s.blocked:
        return _xread_woken(s, argv, keys, count)
    gts: list[StreamID] = []
    streams: list[Stream | None] = []
    for key, arg in zip(keys, argv[first + nkeys :], strict=True):
        st = get_stream(s, key)
        streams.append(st)
        if arg == b"$":
            gts.append(st.last_id if st is not None else MIN_ID)
        elif arg == b">":
            raise CommandError(XREAD_GT)
        else:
            gts.append(parse_id(arg))
    pairs: list[tuple[bytes, list[Entry]]] = []
    for key, st, gt in zip(keys, streams, gts, strict=True):
        if st is not None and st.entries and st.last_valid_id() > gt:
            start = incr_id(gt) or MIN_ID
            pairs.append((key, st.range(start, MAX_ID, count)))
    if pairs:
        return streams_reply(s, pairs)
    if timeout < 0 or s.in_exec:
        return NULL_ARRAY
    retry = argv[: first + nkeys] + [format_id(gt) for gt in gts]
    seen: dict[bytes, tuple[StreamID, int] | None] = {}
    for key, st in zip(keys, streams, strict=True):
        seen[key] = (st.last_id, st.entries_added) if st is not None else None
    s.extra[_BLOCK_STATE] = seen
    dbi = s.dbi
    return Blocked(
        keys=[(dbi, k) for k in keys],
        timeout=timeout / 1000,
        on_timeout=NULL_ARRAY,
        retry_argv=retry,
    )


def _xread_woken(s: Session, argv: list[bytes], keys: list[bytes], count: int) -> Reply:
    """A blocked XREAD, run again after a write to one of its keys. As Redis serves
    a blocked reader: the first stream that got new entries (its last ID passed
    ours), with that stream alone in the reply; otherwise keep waiting."""
    seen: dict[bytes, tuple[StreamID, int] | None] = s.extra.get(_BLOCK_STATE, {})
    nkeys = len(keys)
    ids = argv[len(argv) - nkeys :]
    for key, arg in zip(keys, ids, strict=True):
        st = s.db.get(key)
        if type(st) is not Stream:
            continue
        gt = parse_id(arg)
        if st.last_id <= gt or seen.get(key) == (st.last_id, st.entries_added):
            continue
        start = incr_id(gt) or MIN_ID
        entries = st.range(start, MAX_ID, count or XREAD_BLOCKED_DEFAULT_COUNT)
        s.extra.pop(_BLOCK_STATE, None)
        return streams_reply(s, [(key, entries)])
    return Blocked(keys=[(s.dbi, k) for k in keys], timeout=0, on_timeout=NULL_ARRAY)
