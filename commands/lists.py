"""List commands (a list is a `collections.deque`; Redis 7.0 calls it "quicklist").

LPUSH key element [element ...] · RPUSH key element [element ...]
LPUSHX key element [element ...] · RPUSHX key element [element ...]
LPOP key [count] · RPOP key [count]
LLEN key · LINDEX key index · LRANGE key start stop
LSET key index element · LREM key count element · LTRIM key start stop
LINSERT key BEFORE|AFTER pivot element
LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len]
LMOVE source destination LEFT|RIGHT LEFT|RIGHT · RPOPLPUSH source destination
LMPOP numkeys key [key ...] LEFT|RIGHT [COUNT count]
BLPOP key [key ...] timeout · BRPOP key [key ...] timeout
BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout · BRPOPLPUSH source destination timeout
BLMPOP timeout numkeys key [key ...] LEFT|RIGHT [COUNT count]

Changes are expressed with the list ops (LPUSH/RPUSH/LPOP/RPOP/LSET, DEL; SET with
KEEP_TTL only when an edit spans the whole list): LTRIM pops both ends, and an edit
in the middle (LREM, LINSERT) pops the shorter side up to the edited region and
pushes it back changed, so a record carries what moved, not the whole list.
A blocking command that finds nothing returns `Blocked`; when a write wakes it, it
runs again and, while still blocked, treats a key of another type as empty (Redis
only serves a blocked client from a list).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from itertools import islice

from commands.common import get_list
from commands.errors import (
    COUNT_POSITIVE,
    INDEX_OUT_OF_RANGE,
    NO_SUCH_KEY,
    NOT_POSITIVE,
    NUMKEYS_POSITIVE,
    SYNTAX,
    WRONG_ARITY,
    CommandError,
)
from commands.hotwrites import push
from commands.parsing import (
    LLONG_MAX,
    LLONG_MIN,
    get_int,
    get_range_long,
    parse_timeout,
)
from commands.registry import DIRECT_LPUSH, DIRECT_RPUSH, Flag, command
from commands.replies import NULL_ARRAY, OK, Blocked, Reply
from commands.session import Session
from store.ops import DEL, KEEP_TTL, LPOP, LPUSH, LSET, RPOP, RPUSH, SET

RANK_ZERO = (
    "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... "
    "or use negative to start from the end of the list"
)
COUNT_NEGATIVE = "ERR COUNT can't be negative"
MAXLEN_NEGATIVE = "ERR MAXLEN can't be negative"

PUSH = Flag.WRITE | Flag.DENYOOM | Flag.FAST
BLOCK = Flag.WRITE | Flag.NOSCRIPT | Flag.BLOCKING
RO = Flag.READONLY


# -- helpers ---------------------------------------------------------------------------


def _side(b: bytes) -> bool:
    """LEFT (True) or RIGHT (False), any case."""
    low = b.lower()
    if low == b"left":
        return True
    if low == b"right":
        return False
    raise CommandError(SYNTAX)


def _take(lst: deque[bytes], start: int, stop: int) -> list[bytes]:
    """lst[start:stop] (0 <= start <= stop <= len), walked from the nearer end."""
    n = len(lst)
    if start == 0 and stop == n:
        return list(lst)
    if start <= n - stop:
        return list(islice(lst, start, stop))
    out = list(islice(reversed(lst), n - stop, n - start))
    out.reverse()
    return out


def _bounds(start: int, end: int, n: int) -> tuple[int, int]:
    """Redis' inclusive range with negative indexes, as a [lo, hi) slice (maybe empty)."""
    if start < 0:
        start += n
    if end < 0:
        end += n
    if start < 0:
        start = 0
    if start > end or start >= n:
        return 0, 0
    return start, min(end + 1, n)


def _matches(lst: deque[bytes], ele: bytes, forward: bool, scan: int) -> Iterator[int]:
    """Indexes of `ele` among the first `scan` elements seen from the head (forward)
    or the tail, in the order they are met."""
    if forward:
        try:
            i = lst.index(ele, 0, scan)  # skip to the first match at C speed
        except ValueError:
            return
        yield i
        for j, item in enumerate(islice(lst, i + 1, scan), i + 1):
            if item == ele:
                yield j
    else:
        last = len(lst) - 1
        for k, item in enumerate(islice(reversed(lst), scan)):
            if item == ele:
                yield last - k


def _pop(s: Session, key: bytes, lst: deque[bytes], count: int, left: bool) -> list[bytes]:
    """Pop up to `count` elements from one end; return them in popping order."""
    n = len(lst)
    k = count if count < n else n
    if left:
        items = _take(lst, 0, k)
    else:
        items = _take(lst, n - k, n)
        items.reverse()
    s.store.apply(s.db, key, (LPOP if left else RPOP, k))
    return items


def _splice(s: Session, key: bytes, lst: deque[bytes], lo: int, hi: int, repl: list[bytes]) -> None:
    """Replace lst[lo:hi] with `repl`: pop the shorter side through the region and push
    back what stays, never emptying the key on the way (so its TTL is kept). A region
    spanning the whole list is replaced with SET (KEEP_TTL), or DEL when nothing stays."""
    n = len(lst)
    db = s.db
    apply = s.store.apply
    if lo == 0 and hi == n:
        apply(db, key, (SET, deque(repl), KEEP_TTL) if repl else (DEL,))
        return
    if hi <= n - lo:
        head = _take(lst, 0, lo) if lo else []
        if hi:
            apply(db, key, (LPOP, hi))
        back = head + repl
        if back:
            back.reverse()
            apply(db, key, (LPUSH, tuple(back)))
    else:
        tail = _take(lst, hi, n) if hi < n else []
        if lo < n:
            apply(db, key, (RPOP, n - lo))
        back = repl + tail
        if back:
            apply(db, key, (RPUSH, tuple(back)))


def _waiting_list(s: Session, key: bytes) -> deque[bytes] | None:
    """The list at `key`; while blocked, another type counts as no list."""
    if s.blocked:
        v = s.db.get(key)
        return v if type(v) is deque else None
    return get_list(s, key)


def _block(s: Session, keys: Iterable[bytes], timeout: float, in_exec: Reply) -> Reply:
    """Nothing to serve: wait on `keys`, or inside EXEC reply as Redis does."""
    if s.in_exec:
        return in_exec
    dbi = s.dbi
    return Blocked(keys=[(dbi, k) for k in dict.fromkeys(keys)], timeout=timeout)


# -- pushes ----------------------------------------------------------------------------


def _push(s: Session, argv: list[bytes], left: bool, xx: bool) -> int:
    # One value (the common push) as a tuple display: no list slice and copy.
    return push(s, argv[1], (argv[2],) if len(argv) == 3 else tuple(argv[2:]), left, xx)


@command("lpush", -3, PUSH, 1, 1, 1, direct=DIRECT_LPUSH)
def cmd_lpush(s: Session, argv: list[bytes]) -> Reply:
    return _push(s, argv, True, False)


@command("rpush", -3, PUSH, 1, 1, 1, direct=DIRECT_RPUSH)
def cmd_rpush(s: Session, argv: list[bytes]) -> Reply:
    return _push(s, argv, False, False)


@command("lpushx", -3, PUSH, 1, 1, 1)
def cmd_lpushx(s: Session, argv: list[bytes]) -> Reply:
    return _push(s, argv, True, True)


@command("rpushx", -3, PUSH, 1, 1, 1)
def cmd_rpushx(s: Session, argv: list[bytes]) -> Reply:
    return _push(s, argv, False, True)


# -- pops ------------------------------------------------------------------------------


def _pop_command(s: Session, argv: list[bytes], left: bool) -> Reply:
    argc = len(argv)
    if argc > 3:
        raise CommandError(WRONG_ARITY.format("lpop" if left else "rpop"))
    count = -1
    if argc == 3:
        count = get_range_long(argv[2], 0, LLONG_MAX, NOT_POSITIVE)
    key = argv[1]
    lst = get_list(s, key)
    if lst is None:
        return None if count < 0 else NULL_ARRAY
    if count < 0:
        v = lst[0] if left else lst[-1]
        s.store.apply(s.db, key, (LPOP if left else RPOP, 1))
        return v
    if count == 0:
        return []
    return _pop(s, key, lst, count, left)


@command("lpop", -2, Flag.WRITE | Flag.FAST, 1, 1, 1)
def cmd_lpop(s: Session, argv: list[bytes]) -> Reply:
    return _pop_command(s, argv, True)


@command("rpop", -2, Flag.WRITE | Flag.FAST, 1, 1, 1)
def cmd_rpop(s: Session, argv: list[bytes]) -> Reply:
    return _pop_command(s, argv, False)


def _mpop_args(argv: list[bytes], ki: int) -> tuple[list[bytes], bool, int]:
    """numkeys at argv[ki], then the keys, LEFT|RIGHT and [COUNT count]."""
    numkeys = get_range_long(argv[ki], 1, LLONG_MAX, NUMKEYS_POSITIVE)
    where = ki + numkeys + 1
    argc = len(argv)
    if where >= argc:
        raise CommandError(SYNTAX)
    left = _side(argv[where])
    count = -1
    j = where + 1
    while j < argc:
        if count == -1 and j < argc - 1 and argv[j].lower() == b"count":
            count = get_range_long(argv[j + 1], 1, LLONG_MAX, COUNT_POSITIVE)
            j += 2
        else:
            raise CommandError(SYNTAX)
    return argv[ki + 1 : where], left, 1 if count == -1 else count


@command("lmpop", -4, Flag.WRITE)
def cmd_lmpop(s: Session, argv: list[bytes]) -> Reply:
    keys, left, count = _mpop_args(argv, 1)
    for key in keys:
        lst = get_list(s, key)
        if lst is not None:
            return [key, _pop(s, key, lst, count, left)]
    return NULL_ARRAY


# -- reads -----------------------------------------------------------------------------


@command("llen", 2, RO | Flag.FAST, 1, 1, 1)
def cmd_llen(s: Session, argv: list[bytes]) -> Reply:
    lst = get_list(s, argv[1])
    return 0 if lst is None else len(lst)


@command("lindex", 3, RO, 1, 1, 1)
def cmd_lindex(s: Session, argv: list[bytes]) -> Reply:
    lst = get_list(s, argv[1])
    if lst is None:
        return None
    i = get_int(argv[2])
    n = len(lst)
    if i < -n or i >= n:
        return None
    return lst[i]


@command("lrange", 4, RO, 1, 1, 1)
def cmd_lrange(s: Session, argv: list[bytes]) -> Reply:
    start = get_int(argv[2])
    end = get_int(argv[3])
    lst = get_list(s, argv[1])
    if lst is None:
        return []
    lo, hi = _bounds(start, end, len(lst))
    return _take(lst, lo, hi) if hi else []


@command("lpos", -3, RO, 1, 1, 1)
def cmd_lpos(s: Session, argv: list[bytes]) -> Reply:
    rank = 1
    count = -1  # not given
    maxlen = 0
    argc = len(argv)
    j = 3
    while j < argc:
        opt = argv[j].lower()
        if j == argc - 1:
            raise CommandError(SYNTAX)
        if opt == b"rank":
            rank = get_int(argv[j + 1])
            if rank == 0:
                raise CommandError(RANK_ZERO)
        elif opt == b"count":
            count = get_range_long(argv[j + 1], 0, LLONG_MAX, COUNT_NEGATIVE)
        elif opt == b"maxlen":
            maxlen = get_range_long(argv[j + 1], 0, LLONG_MAX, MAXLEN_NEGATIVE)
        else:
            raise CommandError(SYNTAX)
        j += 2
    lst = get_list(s, argv[1])
    if lst is None:
        return [] if count != -1 else None
    ele = argv[2]
    limit = count
    forward = rank > 0
    if rank == LLONG_MIN:
        # Redis negates the rank in a C long: it stays negative, so every match counts
        # and COUNT never ends the scan.
        rank, limit = 1, 0
    elif not forward:
        rank = -rank
    n = len(lst)
    out: list[int] = []
    for matches, i in enumerate(_matches(lst, ele, forward, maxlen or n), 1):
        if matches >= rank:
            if count == -1:
                return i
            out.append(i)
            if limit and matches - rank + 1 >= limit:
                break
    return out if count != -1 else None


# -- edits -----------------------------------------------------------------------------


@command("lset", 4, Flag.WRITE | Flag.DENYOOM, 1, 1, 1)
def cmd_lset(s: Session, argv: list[bytes]) -> Reply:
    key = argv[1]
    lst = get_list(s, key)
    if lst is None:
        raise CommandError(NO_SUCH_KEY)
    i = get_int(argv[2])
    n = len(lst)
    if i < -n or i >= n:
        raise CommandError(INDEX_OUT_OF_RANGE)
    s.store.apply(s.db, key, (LSET, i + n if i < 0 else i, argv[3]))
    return OK


@command("lrem", 4, Flag.WRITE, 1, 1, 1)
def cmd_lrem(s: Session, argv: list[bytes]) -> Reply:
    count = get_int(argv[2])
    key = argv[1]
    lst = get_list(s, key)
    if lst is None:
        return 0
    ele = argv[3]
    forward = count >= 0
    n = len(lst)
    want = min(count if forward else -count, n)
    found = list(islice(_matches(lst, ele, forward, n), want or None))
    if not found:
        return 0
    lo, hi = (found[0], found[-1] + 1) if forward else (found[-1], found[0] + 1)
    gone = set(found)
    kept = [v for i, v in enumerate(_take(lst, lo, hi), lo) if i not in gone]
    _splice(s, key, lst, lo, hi, kept)
    return len(found)


@command("ltrim", 4, Flag.WRITE, 1, 1, 1)
def cmd_ltrim(s: Session, argv: list[bytes]) -> Reply:
    start = get_int(argv[2])
    end = get_int(argv[3])
    key = argv[1]
    lst = get_list(s, key)
    if lst is None:
        return OK
    n = len(lst)
    lo, hi = _bounds(start, end, n)
    if hi == 0:
        s.store.apply(s.db, key, (DEL,))
        return OK
    if lo:
        s.store.apply(s.db, key, (LPOP, lo))
    if hi < n:
        s.store.apply(s.db, key, (RPOP, n - hi))
    return OK


@command("linsert", 5, Flag.WRITE | Flag.DENYOOM, 1, 1, 1)
def cmd_linsert(s: Session, argv: list[bytes]) -> Reply:
    where = argv[2].lower()
    if where == b"after":
        after = True
    elif where == b"before":
        after = False
    else:
        raise CommandError(SYNTAX)
    key = argv[1]
    lst = get_list(s, key)
    if lst is None:
        return 0
    try:
        i = lst.index(argv[3])
    except ValueError:
        return -1
    if after:
        i += 1
    n = len(lst)
    _splice(s, key, lst, i, i, [argv[4]])
    return n + 1


# -- moves -----------------------------------------------------------------------------


def _move(
    s: Session, src: bytes, dst: bytes, lst: deque[bytes], from_left: bool, to_left: bool
) -> bytes:
    """Pop from the non-empty `src` list and push onto `dst` (WRONGTYPE first)."""
    v = lst[0] if from_left else lst[-1]
    if src == dst:
        if from_left == to_left or len(lst) == 1:
            return v  # the list is unchanged: nothing to apply
    else:
        get_list(s, dst)
    s.store.apply(s.db, src, (LPOP if from_left else RPOP, 1))
    s.store.apply(s.db, dst, (LPUSH if to_left else RPUSH, (v,)))
    return v


@command("lmove", 5, Flag.WRITE | Flag.DENYOOM, 1, 2, 1)
def cmd_lmove(s: Session, argv: list[bytes]) -> Reply:
    from_left = _side(argv[3])
    to_left = _side(argv[4])
    lst = get_list(s, argv[1])
    if lst is None:
        return None
    return _move(s, argv[1], argv[2], lst, from_left, to_left)


@command("rpoplpush", 3, Flag.WRITE | Flag.DENYOOM, 1, 2, 1)
def cmd_rpoplpush(s: Session, argv: list[bytes]) -> Reply:
    lst = get_list(s, argv[1])
    if lst is None:
        return None
    return _move(s, argv[1], argv[2], lst, False, True)


# -- blocking --------------------------------------------------------------------------


def _blocking_pop(s: Session, argv: list[bytes], left: bool) -> Reply:
    timeout = parse_timeout(argv[-1])
    keys = argv[1:-1]
    for key in keys:
        lst = _waiting_list(s, key)
        if lst is not None:
            v = lst[0] if left else lst[-1]
            s.store.apply(s.db, key, (LPOP if left else RPOP, 1))
            return [key, v]
    return _block(s, keys, timeout, NULL_ARRAY)


@command("blpop", -3, BLOCK, 1, -2, 1)
def cmd_blpop(s: Session, argv: list[bytes]) -> Reply:
    return _blocking_pop(s, argv, True)


@command("brpop", -3, BLOCK, 1, -2, 1)
def cmd_brpop(s: Session, argv: list[bytes]) -> Reply:
    return _blocking_pop(s, argv, False)


def _blocking_move(
    s: Session, argv: list[bytes], from_left: bool, to_left: bool, timeout: float
) -> Reply:
    src = argv[1]
    lst = _waiting_list(s, src)
    if lst is None:
        return _block(s, (src,), timeout, None)
    return _move(s, src, argv[2], lst, from_left, to_left)


@command("blmove", 6, BLOCK | Flag.DENYOOM, 1, 2, 1)
def cmd_blmove(s: Session, argv: list[bytes]) -> Reply:
    from_left = _side(argv[3])
    to_left = _side(argv[4])
    return _blocking_move(s, argv, from_left, to_left, parse_timeout(argv[5]))


@command("brpoplpush", 4, BLOCK | Flag.DENYOOM, 1, 2, 1)
def cmd_brpoplpush(s: Session, argv: list[bytes]) -> Reply:
    return _blocking_move(s, argv, False, True, parse_timeout(argv[3]))


@command("blmpop", -5, Flag.WRITE | Flag.BLOCKING)
def cmd_blmpop(s: Session, argv: list[bytes]) -> Reply:
    keys, left, count = _mpop_args(argv, 2)
    timeout = parse_timeout(argv[1])
    for key in keys:
        lst = _waiting_list(s, key)
        if lst is not None:
            return [key, _pop(s, key, lst, count, left)]
    return _block(s, keys, timeout, NULL_ARRAY)
