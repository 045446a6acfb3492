"""SORT and SORT_RO, Redis 7.0 exact.

SORT key [BY pattern] [LIMIT offset count] [GET pattern [GET pattern ...]]
    [ASC|DESC] [ALPHA] [STORE destination]
SORT_RO key [BY pattern] [LIMIT offset count] [GET pattern ...] [ASC|DESC] [ALPHA]

Sorts a list, set or sorted set: numerically (ties broken by the bytes of the
elements), or with ALPHA by bytes (as strcoll in the C locale, which stops at a NUL,
except when storing, which compares whole values). A BY pattern without `*` skips the
sort (lists and sorted sets keep their order, DESC reverses it; sets are listed as
stored, but sorted ALPHA when storing or inside a script, whose session has
`extra["script"]` set). Patterns substitute the element for the first `*`;
`key->field` reads a hash field; GET `#` is the element itself. STORE writes the
result as a list.
"""

from __future__ import annotations

from collections import deque
from typing import Any

from commands.common import HASH_TYPES, SET_TYPES, store_result, wrongtype
from commands.errors import SYNTAX, CommandError
from commands.parsing import get_int, strtod
from commands.permissions import full_key_access
from commands.pqsort import pqsort
from commands.registry import Flag, command, lookup_for_call
from commands.replies import Reply
from commands.session import Session
from store.values import ZSet

NOT_DOUBLE = "ERR One or more scores can't be converted into double"
BY_DENIED = "ERR BY option of SORT denied due to insufficient ACL permissions."
GET_DENIED = "ERR GET option of SORT denied due to insufficient ACL permissions."


def _cstr(b: bytes) -> bytes:
    """The bytes C string functions see (up to the first NUL)."""
    nul = b.find(b"\0")
    return b if nul < 0 else b[:nul]


def lookup_by_pattern(s: Session, pattern: bytes, subst: bytes) -> bytes | None:
    """lookupKeyByPattern: `#` is the element; else the first `*` becomes the element
    and the key's string value (or, with `->field`, its hash field) is read."""
    if _cstr(pattern) == b"#":
        return subst
    c = _cstr(pattern)
    star = c.find(b"*")
    if star < 0:
        return None
    arrow = c.find(b"->", star + 1)
    field: bytes | None = None
    end = len(pattern)
    if arrow >= 0 and arrow + 2 < len(c):
        field = pattern[arrow + 2 :]
        end = arrow
    key = pattern[:star] + subst + pattern[star + 1 : end]
    v = s.db.get(key)
    if v is None:
        return None
    if field is not None:
        if type(v) not in HASH_TYPES:
            return None
        found: bytes | None = v.get(field)
        return found
    t = type(v)
    if t is bytes:
        return v  # type: ignore[no-any-return]
    if t is bytearray:
        return bytes(v)
    return None


def _score(b: bytes) -> float | None:
    """strtod over the C string: the whole of it, no ERANGE, no NaN."""
    c = _cstr(b)
    v, end, erange = strtod(c)
    if end != len(c) or erange or v != v:
        return None
    return v


def _elements(v: Any) -> list[bytes]:
    """The elements in the order Redis loads them."""
    if v is None:
        return []
    if type(v) is deque:
        return list(v)
    if type(v) is ZSet:
        return [m for _, m in v.order]
    if type(v) is set:  # an intset: ascending numeric order
        return sorted(v, key=int)
    return list(v)


def _sort(s: Session, argv: list[bytes], readonly: bool) -> Reply:
    """sortCommandGeneric."""
    desc = alpha = dontsort = False
    offset, count = 0, -1
    sortby: bytes | None = None
    store: bytes | None = None
    gets: list[bytes] = []
    full_access: bool | None = None
    n = len(argv)
    j = 2
    while j < n:
        opt = argv[j].lower()
        left = n - j - 1
        if opt == b"asc":
            desc = False
        elif opt == b"desc":
            desc = True
        elif opt == b"alpha":
            alpha = True
        elif opt == b"limit" and left >= 2:
            offset = get_int(argv[j + 1])
            count = get_int(argv[j + 2])
            j += 2
        elif not readonly and opt == b"store" and left >= 1:
            store = argv[j + 1]
            j += 1
        elif opt == b"by" and left >= 1:
            sortby = argv[j + 1]
            if b"*" not in _cstr(sortby):
                dontsort = True
            else:
                if full_access is None:
                    full_access = _full_access(s, argv)
                if not full_access:
                    raise CommandError(BY_DENIED)
            j += 1
        elif opt == b"get" and left >= 1:
            if full_access is None:
                full_access = _full_access(s, argv)
            if not full_access:
                raise CommandError(GET_DENIED)
            gets.append(argv[j + 1])
            j += 1
        else:
            raise CommandError(SYNTAX)
        j += 1
    v = s.db.get(argv[1])
    if v is not None and not isinstance(v, (deque, ZSet, *SET_TYPES)):
        raise wrongtype()
    is_set = v is not None and isinstance(v, SET_TYPES)
    if dontsort and is_set and (store is not None or s.extra.get("script")):
        dontsort = False  # a set's order must not leak into stored results or scripts
        alpha = True
        sortby = None
    if type(v) is ZSet and not v.big:
        # sortCommandGeneric converts a sorted set to a skiplist for good: OBJECT
        # ENCODING and DUMP show it. Not a version: a restart from the log undoes it
        # (as Redis' RDB load does), one from a checkpoint taken since keeps it.
        v.big = True
    elements = _elements(v)
    size = len(elements)
    start = min(max(offset, 0), size)
    count = min(max(count, -1), size)
    end = size - 1 if count < 0 else start + count - 1
    if start >= size:
        start, end = size - 1, size - 2
    end = min(end, size - 1)
    if dontsort:
        if not is_set and desc:
            elements.reverse()
    else:
        keyed = _sort_keys(s, elements, sortby, alpha, store is not None)
        sign = -1 if desc else 1
        if sortby is not None and (start != 0 or end != size - 1):
            pqsort(keyed, lambda x, y: sign * ((x[0] > y[0]) - (x[0] < y[0])), start, end)
        else:
            keyed.sort(key=lambda p: p[0], reverse=desc)
        elements = [e for _, e in keyed]
    chosen = elements[start : end + 1] if end >= start else []
    out: list[bytes | None] = []
    for e in chosen:
        if not gets:
            out.append(e)
        for pattern in gets:
            out.append(lookup_by_pattern(s, pattern, e))
    if store is None:
        return out
    stored = deque(b"" if x is None else x for x in out)
    return store_result(s, store, stored)


def _sort_keys(
    s: Session, elements: list[bytes], sortby: bytes | None, alpha: bool, store: bool
) -> list[tuple[Any, bytes]]:
    """(what to compare, element) for each element, as sortCompare compares them."""
    if alpha:
        if sortby is None:
            return [((e if store else _cstr(e),), e) for e in elements]
        keyed: list[tuple[Any, bytes]] = []
        for e in elements:
            by = lookup_by_pattern(s, sortby, e)
            keyed.append(((0, b"") if by is None else (1, by if store else _cstr(by)), e))
        return keyed
    scored: list[tuple[Any, bytes]] = []
    bad = False
    for e in elements:
        by = e if sortby is None else lookup_by_pattern(s, sortby, e)
        score = 0.0
        if by is not None:
            sc = _score(by)
            if sc is None:
                bad = True
            else:
                score = sc
        scored.append(((score, e), e))
    if bad:
        raise CommandError(NOT_DOUBLE)
    return scored


def _full_access(s: Session, argv: list[bytes]) -> bool:
    cmd = lookup_for_call(argv)
    return cmd is None or full_key_access(s, cmd, argv)


@command("sort", -2, Flag.WRITE | Flag.DENYOOM, 1, 1, 1)
def cmd_sort(s: Session, argv: list[bytes]) -> Reply:
    return _sort(s, argv, False)


@command("sort_ro", -2, Flag.READONLY, 1, 1, 1)
def cmd_sort_ro(s: Session, argv: list[bytes]) -> Reply:
    return _sort(s, argv, True)
