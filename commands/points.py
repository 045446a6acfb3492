"""Points in time, as the TS.* verbs and TS.BRANCH CREATE ... FROM take them.

    VERSION <lsn>      the state just after that LSN
    TIME <unix-ms>     the state at that wall-clock time
    SNAPSHOT <name>    a sealed snapshot
    BACK <n>           (key-scoped verbs only) n versions before the key's latest

A point is an LSN plus the clock at which expiry is judged (see `commands.temporal`).
Reading a key's state at a point is here too, since BACK needs the key's chain.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Mapping
from typing import Any, NamedTuple

from commands.errors import SYNTAX, CommandError
from commands.parsing import get_int
from commands.session import Session
from store import V_LSN, PrunedError, VersionEntry, entry_created, lsn_by_time, now_ms
from store.slots import key_slot

NO_SNAPSHOT = "ERR no such snapshot '{}'"
FUTURE_VERSION = "ERR version {} is in the future (current version is {})"
BACK_NEEDS_KEY = "ERR BACK is only valid for a single key"
NEGATIVE = "ERR value is out of range, must be positive"


class Point(NamedTuple):
    """A resolved point in time: the state just after `lsn`, with expiry judged at
    `at_ms` (keys whose expiry time is at or before it do not exist)."""

    lsn: int
    at_ms: int


def pruned(e: PrunedError) -> CommandError:
    """The reply for a read past retained history: `-PRUNED version <lsn> of <key> ...`."""
    return CommandError(str(e))


def entry_lsn(e: VersionEntry) -> int:
    return e[V_LSN]


def base_lsn(s: Session) -> int:
    """The LSN this connection reads at: its checked-out point, or the head."""
    return s.view_lsn if s.view_lsn is not None else s.store.lsn


def clock_of(s: Session, lsn: int) -> int:
    """The clock for a point given as an LSN: its commit time, or now for the newest
    LSN (the same clock `Store.view` uses, so TS.ASOF and TS.CHECKOUT AT agree)."""
    store = s.store
    return store.time_of(lsn) if lsn < store.lsn else now_ms()


def chains_and_floors(s: Session) -> tuple[Mapping[bytes, list[VersionEntry]], dict[bytes, int]]:
    """The selected database's version chains and floors, as this connection sees
    them (a view's chains end at its point; its floors are the main line's)."""
    floors = s.store.dbs[s.dbi].floors if s.view_lsn is not None else s.db.floors
    return s.db.chains, floors


def back_lsn(s: Session, key: bytes, n: int) -> int:
    """The LSN of the state `n` versions before the key's latest (as of this
    connection's point). Before the key's first version it did not exist: that state
    is readable when the key's whole history is retained, else PRUNED."""
    base = base_lsn(s)
    if n == 0:
        return base
    chains, floors = chains_and_floors(s)
    chain = chains.get(key, ())
    end = bisect_right(chain, base, key=entry_lsn)  # versions at or before base
    seen = 0
    last = -1
    oldest = end  # index of the first entry of the oldest version seen
    for k in range(end - 1, -1, -1):
        lsn = chain[k][V_LSN]
        if lsn != last:
            if seen == n:
                return lsn
            seen += 1
            last = lsn
        oldest = k
    floor = floors.get(key)
    if end == 0:
        if floor is None:
            return 0  # the key had no version at all by then: it never existed
        raise pruned(PrunedError(floor, key))
    first = chain[oldest]
    if seen == n or (floor is None and entry_created(first)):
        return first[V_LSN] - 1  # the state before the oldest retained version
    raise pruned(PrunedError(floor if floor is not None else first[V_LSN] - 1, key))


def key_lsn_at_time(s: Session, key: bytes, lsn: int, t: int) -> int:
    """The LSN to read `key` at for the time `t`, where `lsn` is the store's LSN then
    (`store.lsn_by_time`: a chain with versions moved in from another shard decides)."""
    chains, _ = chains_and_floors(s)
    return lsn_by_time(chains.get(key) or [], lsn, t)


def parse_point(
    s: Session, argv: list[bytes], i: int, key: bytes | None = None
) -> tuple[Point, int]:
    """Parse a point in time at argv[i]; return (point, index after it)."""
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
        point = Point(lsn, clock_of(s, lsn))
    elif kind == b"time":
        t = get_int(arg)
        if t < 0:
            raise CommandError(NEGATIVE)
        now = now_ms()
        if t >= now:
            point = Point(store.lsn, now)
        else:
            lsn = store.lsn_at_time(t)
            point = Point(lsn if key is None else key_lsn_at_time(s, key, lsn, t), t)
    elif kind == b"snapshot":
        snap = store.snapshots.get(arg)
        if snap is None:
            raise CommandError(NO_SNAPSHOT.format(arg.decode("utf-8", "replace")))
        lsn = snap.lsn
        seals = s.server.cluster_snapshots
        per_slot = None if key is None or seals is None else seals.slot_times(arg)
        if key is not None and per_slot is not None:
            # Cluster mode: the key as of its shard's seal then, if its slot moved here
            # since (commands.temporal's checkout reads every key so).
            lsn = key_lsn_at_time(s, key, lsn, per_slot[key_slot(key)])
        point = Point(lsn, clock_of(s, snap.lsn))
    elif kind == b"back":
        if key is None:
            raise CommandError(BACK_NEEDS_KEY)
        n = get_int(arg)
        if n < 0:
            raise CommandError(NEGATIVE)
        lsn = back_lsn(s, key, n)
        point = Point(lsn, clock_of(s, lsn))
    else:
        raise CommandError(SYNTAX)
    return point, i + 2


def parse_at(s: Session, argv: list[bytes], i: int, key: bytes | None = None) -> tuple[int, int]:
    """Parse a point in time at argv[i]; return (lsn, index after it)."""
    point, end = parse_point(s, argv, i, key)
    return point.lsn, end


def state_as_of(s: Session, key: bytes, point: Point) -> tuple[Any, int | None]:
    """The key's (value, expire_ms) at `point`; (None, None) if it did not exist then
    (or had expired by the point's clock). Raises the PRUNED error past retention."""
    try:
        value, expire = s.store.value_as_of(s.db.ident, key, point.lsn)
    except PrunedError as e:
        raise pruned(e) from None
    if value is None or (expire is not None and expire <= point.at_ms):
        return None, None
    return value, expire


def value_as_of(s: Session, key: bytes, lsn: int) -> Any:
    """The key's value just after `lsn` (None if it did not exist, or had expired)."""
    return state_as_of(s, key, Point(lsn, clock_of(s, lsn)))[0]
