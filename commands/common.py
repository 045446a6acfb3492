"""Helpers every family uses: typed key lookups (WRONGTYPE before any change), SCAN
cursors and options, and HELP replies. Glob matching is `commands.glob`."""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterable
from typing import Any, cast

from commands.errors import INVALID_CURSOR, SYNTAX, WRONGTYPE, CommandError
from commands.glob import Matcher, match_filter
from commands.parsing import SPACE, get_int
from commands.replies import Simple
from commands.session import Session
from store.ops import DEL, SET
from store.values import HashSet, HashTable, ZSet

HASH_TYPES = (dict, HashTable)
SET_TYPES = (set, HashSet)


def wrongtype() -> CommandError:
    return CommandError(WRONGTYPE)


def get_string(s: Session, key: bytes) -> bytes | None:
    v = s.db.get(key)
    if v is None:
        return None
    t = type(v)
    if t is bytes:
        return cast(bytes, v)
    if t is bytearray:
        return bytes(v)
    raise wrongtype()


def get_hash(s: Session, key: bytes) -> dict[bytes, bytes] | None:
    v = s.db.get(key)
    if v is None or type(v) is dict or type(v) is HashTable:  # HASH_TYPES, without its lookup
        return v
    raise wrongtype()


def get_list(s: Session, key: bytes) -> deque[bytes] | None:
    v = s.db.get(key)
    if v is None or type(v) is deque:
        return v
    raise wrongtype()


def get_set(s: Session, key: bytes) -> set[bytes] | None:
    v = s.db.get(key)
    if v is None or type(v) in SET_TYPES:
        return v  # type: ignore[no-any-return]
    raise wrongtype()


def get_zset(s: Session, key: bytes) -> ZSet | None:
    v = s.db.get(key)
    if v is None or type(v) is ZSet:
        return v
    raise wrongtype()


def store_result(s: Session, dst: bytes, value: set[bytes] | ZSet | deque[bytes] | None) -> int:
    """A *STORE command's write (`value` already in its encoding): the new value, or
    the destination deleted when the result is empty."""
    if value:
        s.store.apply(s.db, dst, (SET, value, None))
        return len(value)
    if s.db.get(dst) is not None:
        s.store.apply(s.db, dst, (DEL,))
    return 0


def get_typed(s: Session, key: bytes, types: type | tuple[type, ...]) -> Any:
    v = s.db.get(key)
    if v is None or isinstance(v, types):
        return v
    raise wrongtype()


def help_reply(argv0: bytes, lines: Iterable[str]) -> list[Simple]:
    """Redis' addReplyHelp: a header naming the command, the lines, and HELP."""
    out = [Simple(b"%s <subcommand> [<arg> [value] [opt] ...]. Subcommands are:" % argv0.upper())]
    out += [Simple(line.encode()) for line in lines]
    out += [Simple(b"HELP"), Simple(b"    Prints this help.")]
    return out


def lower(b: bytes) -> bytes:
    return b.lower()


ULONG_MAX = 2**64 - 1
_CURSOR = re.compile(rb"[+-]?([0-9]+)")


def parse_scan_cursor(b: bytes) -> int:
    """Redis' parseScanCursorOrReply: strtoul(base 10) on the C string, no leading
    space, nothing after the digits, no overflow; a '-' wraps as strtoul does."""
    if b and b[0] in SPACE:
        raise CommandError(INVALID_CURSOR)
    nul = b.find(b"\0")
    if nul >= 0:
        b = b[:nul]
    if not b:
        return 0
    m = _CURSOR.fullmatch(b)
    if m is None:
        raise CommandError(INVALID_CURSOR)
    digits = m.group(1).lstrip(b"0")
    if len(digits) > 20:
        raise CommandError(INVALID_CURSOR)
    n = int(digits or b"0")
    if n > ULONG_MAX:
        raise CommandError(INVALID_CURSOR)
    return (-n) & ULONG_MAX if b[0] == 45 else n  # 45 = '-'


def parse_scan_options(argv: list[bytes], start: int) -> tuple[int, Matcher | None]:
    """COUNT and MATCH as scanGenericCommand reads them: (count, the MATCH pattern's
    test, None where every element is taken)."""
    count = 10
    match: Matcher | None = None
    i = start
    n = len(argv)
    while i < n:
        opt = argv[i].lower()
        if opt == b"count" and n - i >= 2:
            count = get_int(argv[i + 1])
            if count < 1:
                raise CommandError(SYNTAX)
        elif opt == b"match" and n - i >= 2:
            match = match_filter(argv[i + 1])
        else:
            raise CommandError(SYNTAX)
        i += 2
    return count, match


def string_range(s: Session, argv: list[bytes]) -> bytes:
    """GETRANGE key start end (and SUBSTR, its old name): the substring, ends inclusive,
    negative offsets from the end."""
    start = get_int(argv[2])
    end = get_int(argv[3])
    v = get_string(s, argv[1])
    if v is None:
        return b""
    n = len(v)
    if start < 0 and end < 0 and start > end:
        return b""
    if start < 0:
        start = n + start
    if end < 0:
        end = n + end
    start = max(start, 0)
    end = max(end, 0)
    if end >= n:
        end = n - 1
    if start > end or n == 0:
        return b""
    return v[start : end + 1]


def history_keys(s: Session, pattern: bytes | None) -> list[bytes]:
    """Every key of the selected database with a value or a history."""
    db = s.store.dbs[s.dbi]
    keys = dict.fromkeys(db.data)
    keys.update(dict.fromkeys(db.chains))
    match = match_filter(pattern)
    return list(keys) if match is None else [k for k in keys if match(k)]
