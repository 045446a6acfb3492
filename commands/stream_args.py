"""What the stream commands share, the core's: stream IDs as Redis parses them
(`parse_id`, `parse_start`, `parse_end`), the stream at a key (`get_stream`), XREAD's
and XREADGROUP's options (`parse_read_args`) and reply (`streams_reply`), and the
consumer-group errors and tombstone test XGROUP, XREADGROUP and XINFO share. The
commands are the families `commands.streams`, `commands.stream_groups` and
`commands.stream_info`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from commands.common import get_typed
from commands.errors import (
    NOT_INTEGER,
    STREAM_ID_INVALID,
    SUBCOMMAND_SYNTAX,
    SYNTAX,
    TIMEOUT_NEGATIVE,
    TIMEOUT_NOT_INTEGER,
    CommandError,
)
from commands.parsing import get_int, string2ll
from commands.replies import Reply
from store.stream import MAX_ID, MIN_ID, U64, Entry, Stream, StreamID, decr_id, incr_id

if TYPE_CHECKING:
    from commands.session import Session


INVALID_START = "ERR invalid start ID for the interval"


INVALID_END = "ERR invalid end ID for the interval"


XREAD_UNBALANCED = (
    "ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified."
)


XREAD_GROUP = "ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead."


XREAD_NOACK = "ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead."


XREAD_BLOCKED_DEFAULT_COUNT = 1000


_C_SPACE = b" \t\n\v\f\r"


def _string2ull(b: bytes) -> int | None:
    """Redis' string2ull: string2ll when it fits, else what strtoull(.., 10) accepts
    (leading spaces, a sign, leading zeros; a minus negates modulo 2^64)."""
    n = string2ll(b)
    if n is not None:
        return n if n >= 0 else None
    t = b.lstrip(_C_SPACE)
    neg = t[:1] == b"-"
    if t[:1] in (b"-", b"+"):
        t = t[1:]
    if not t.isdigit():
        return None
    v = int(t)
    if v > U64:
        return None
    return (-v) & U64 if neg else v


def parse_id(arg: bytes, missing_seq: int = 0, strict: bool = True) -> StreamID:
    """streamGenericParseIDOrReply without the `ms-*` form: `-`/`+` only when not strict."""
    sid, _ = _parse_id(arg, missing_seq, strict, False)
    return sid


def _parse_id(arg: bytes, missing_seq: int, strict: bool, star: bool) -> tuple[StreamID, bool]:
    """The ID and whether its sequence was given (False for `ms-*` when `star`)."""
    if len(arg) > 127:
        raise CommandError(STREAM_ID_INVALID)
    if b"\0" in arg:
        arg = arg[: arg.index(b"\0")]  # Redis reads it as a C string
    if arg == b"-" or arg == b"+":
        if strict:
            raise CommandError(STREAM_ID_INVALID)
        return (MIN_ID if arg == b"-" else MAX_ID), True
    ms_part, dash, seq_part = arg.partition(b"-")
    ms = _string2ull(ms_part)
    if ms is None:
        raise CommandError(STREAM_ID_INVALID)
    if not dash:
        return (ms, missing_seq), True
    if star and seq_part == b"*":
        return (ms, 0), False
    seq = _string2ull(seq_part)
    if seq is None:
        raise CommandError(STREAM_ID_INVALID)
    return (ms, seq), True


def parse_interval(arg: bytes, missing_seq: int) -> tuple[StreamID, bool]:
    """A range bound: `(id` is exclusive (and strict)."""
    if len(arg) > 1 and arg[0] == 0x28:  # "("
        return parse_id(arg[1:], missing_seq, True), True
    return parse_id(arg, missing_seq, False), False


def parse_start(arg: bytes) -> StreamID:
    """An interval's start: `(id` is the next ID (exclusive)."""
    start, ex = parse_interval(arg, 0)
    if not ex:
        return start
    nxt = incr_id(start)
    if nxt is None:
        raise CommandError(INVALID_START)
    return nxt


def parse_end(arg: bytes) -> StreamID:
    """An interval's end: `(id` is the previous ID (exclusive)."""
    end, ex = parse_interval(arg, U64)
    if not ex:
        return end
    prv = decr_id(end)
    if prv is None:
        raise CommandError(INVALID_END)
    return prv


def get_stream(s: Session, key: bytes) -> Stream | None:
    v: Stream | None = get_typed(s, key, Stream)
    return v


class _Pairs(dict[bytes, Any]):
    """A RESP3 map reply that may repeat a key (XREAD STREAMS k k ...)."""

    __slots__ = ("pairs",)

    def __init__(self, pairs: list[tuple[bytes, Any]]) -> None:
        super().__init__()
        self.pairs = pairs

    def __len__(self) -> int:
        return len(self.pairs)

    def items(self) -> Any:
        return self.pairs


def streams_reply(s: Session, pairs: list[tuple[bytes, list[Entry]]]) -> Reply:
    if s.resp == 2:
        return pairs
    if len({k for k, _ in pairs}) == len(pairs):
        return dict(pairs)
    return _Pairs(list(pairs))


class ReadArgs:
    """XREAD's and XREADGROUP's options: where STREAMS' keys start, and the rest."""

    __slots__ = ("consumer", "count", "first", "group", "noack", "timeout")

    def __init__(self) -> None:
        self.timeout = -1
        self.count = 0
        self.first = 0
        self.group: bytes | None = None
        self.consumer = b""
        self.noack = False


def parse_read_args(s: Session, argv: list[bytes], xreadgroup: bool) -> ReadArgs:
    """xreadCommand's option loop, errors in Redis' order."""
    a = ReadArgs()
    n = len(argv)
    i = 1
    while i < n:
        more = n - 1 - i
        low = argv[i].lower()
        if low == b"block" and more:
            if s.extra.get("script"):
                raise CommandError(
                    b"ERR %s command is not allowed with BLOCK option from scripts" % argv[0]
                )
            i += 1
            a.timeout = get_int(argv[i], TIMEOUT_NOT_INTEGER)
            if a.timeout < 0:
                raise CommandError(TIMEOUT_NEGATIVE)
        elif low == b"count" and more:
            i += 1
            a.count = max(get_int(argv[i], NOT_INTEGER), 0)
        elif low == b"streams" and more:
            a.first = i + 1
            if (n - a.first) & 1:
                raise CommandError(XREAD_UNBALANCED)
            break
        elif low == b"group" and more >= 2:
            if not xreadgroup:
                raise CommandError(XREAD_GROUP)
            a.group = argv[i + 1]
            a.consumer = argv[i + 2]
            i += 2
        elif low == b"noack":
            if not xreadgroup:
                raise CommandError(XREAD_NOACK)
            a.noack = True
        else:
            raise CommandError(SYNTAX)
        i += 1
    if not a.first:
        raise CommandError(SYNTAX)
    return a


def _nogroup(group: bytes, key: bytes) -> CommandError:
    return CommandError(b"NOGROUP No such consumer group '%s' for key name '%s'" % (group, key))


def _nogroup_key(key: bytes, group: bytes, suffix: bytes = b"") -> CommandError:
    return CommandError(b"NOGROUP No such key '%s' or consumer group '%s'%s" % (key, group, suffix))


def _subcommand_syntax(argv: list[bytes]) -> CommandError:
    return CommandError(SUBCOMMAND_SYNTAX % (argv[1][:128], argv[0].upper()))


def _has_tombstones(st: Stream, start: StreamID) -> bool:
    """streamRangeHasTombstones(s, start, NULL)."""
    mdel = st.max_deleted_id
    if not st.entries or mdel == MIN_ID:
        return False
    if st.first_id > mdel:
        return False
    return start <= mdel
