"""Helpers every family uses: typed key lookups (WRONGTYPE before any change),
option scanning, glob matching as Redis' stringmatchlen does it."""

from __future__ import annotations

import re
from collections import deque
from functools import lru_cache
from typing import Any, cast

from commands.errors import WRONGTYPE, CommandError
from commands.session import Session
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
    if v is None or type(v) in HASH_TYPES:
        return v  # type: ignore[no-any-return]
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


def get_typed(s: Session, key: bytes, types: type | tuple[type, ...]) -> Any:
    v = s.db.get(key)
    if v is None or isinstance(v, types):
        return v
    raise wrongtype()


@lru_cache(maxsize=1024)
def _glob_regex(pattern: bytes, nocase: bool) -> re.Pattern[bytes]:
    """Translate a Redis glob (*, ?, [...], [^...], ranges, backslash escapes)."""
    out = bytearray()
    i = 0
    n = len(pattern)
    while i < n:
        c = pattern[i : i + 1]
        if c == b"*":
            out += b".*"
        elif c == b"?":
            out += b"."
        elif c == b"[":
            i += 1
            neg = i < n and pattern[i : i + 1] == b"^"
            if neg:
                i += 1
            items = bytearray()
            while i < n and pattern[i : i + 1] != b"]":
                if pattern[i : i + 1] == b"\\" and i + 1 < n:
                    i += 1
                    items += re.escape(pattern[i : i + 1])
                elif i + 2 < n and pattern[i + 1 : i + 2] == b"-":
                    a, b = pattern[i], pattern[i + 2]
                    if a > b:
                        a, b = b, a
                    items += re.escape(bytes([a])) + b"-" + re.escape(bytes([b]))
                    i += 2
                else:
                    items += re.escape(pattern[i : i + 1])
                i += 1
            if not items:
                out += b"(?!)" if not neg else b"."
            else:
                out += b"[" + (b"^" if neg else b"") + bytes(items) + b"]"
        elif c == b"\\" and i + 1 < n:
            i += 1
            out += re.escape(pattern[i : i + 1])
        else:
            out += re.escape(c)
        i += 1
    flags = re.DOTALL | (re.IGNORECASE if nocase else 0)
    return re.compile(bytes(out), flags)


def glob_match(pattern: bytes, text: bytes, nocase: bool = False) -> bool:
    if pattern == b"*":
        return True
    return _glob_regex(pattern, nocase).fullmatch(text) is not None


def lower(b: bytes) -> bytes:
    return b.lower()
