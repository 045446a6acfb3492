"""One numbered database: values, absolute expiry times (lazy and active expiry)
and the version chains of its keys."""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable, Iterator, MutableMapping
from typing import Any, Final

from mypy_extensions import mypyc_attr

from store.chains import Chains
from store.opnames import lookup

_time = time.time


class LruClock:
    """Redis' LRU clock: whole seconds (`now`), advanced by the server cron
    (`tick_lru_clock`, ten times a second). A read of a key stores it as the key's last
    access time (one dict store on the read path); OBJECT IDLETIME is the clock minus
    the newest of that and the key's last write (the time of its newest version).
    One object, `Final`: the compiled read path takes `now` from a field of a C static
    (not the module's dict) and stores that one int object (typed Any: kept boxed)."""

    def __init__(self) -> None:
        self.now: Any = int(_time())


LRU_CLOCK: Final = LruClock()


def tick_lru_clock() -> int:
    t = int(_time())
    LRU_CLOCK.now = t
    return t


def now_ms() -> int:
    return int(_time() * 1000)


# Redis 7.0's frozen clock for key expiry (db.c keyIsExpired): while a script or an
# EXEC runs, keys expire as of the time it started, so a key alive at its start stays
# alive (and one expired then reads as expired) for all of it. 0: the clock runs.
FIXED_MS = 0


def fix_time(ms: int) -> int:
    """Expire keys as of `ms` (0: now, each time) from here on; returns the time fixed
    before, to restore when the script or transaction ends."""
    global FIXED_MS
    before = FIXED_MS
    FIXED_MS = ms
    return before


# What a database holds besides its number (Store.reset saves and restores it; read by
# name because a compiled class has no __slots__ to read).
DB_STATE = (
    "atime",
    "chains",
    "data",
    "expires",
    "floor_mark",
    "floors",
    "frozen_ms",
    "heap",
    "ident",
    "idle_set",
    "on_expire",
    "overlay",
    "sizes",
    "trim_next",
    "used",
)


# A view (store.views.ViewDatabase) is a Python subclass, also in the compiled build:
# sessions share views through weak references, which compiled classes do not take.
@mypyc_attr(allow_interpreted_subclasses=True)
class Database:
    """One numbered database: values, absolute expiry times and version chains."""

    __slots__ = ("index", *DB_STATE)

    def __init__(
        self, index: int, on_expire: Callable[[Database, bytes], None] | None = None
    ) -> None:
        self.index = index
        # How records name this database: its number, or (branch, number) on a branch.
        self.ident: Any = index
        self.overlay = False  # a branch database: copy a key in before changing it
        self.on_expire = on_expire
        # Typed as the abstract mappings they are read through: a branch database holds
        # overlays here and a view database read-only look-alikes, so the compiled build
        # (tools/compiled.py) must neither check that they are dicts nor call dict's own
        # methods on them. The same holds for `chains` (`Chains.get` unpacks packed
        # versions, which dict.get, as the compiled code would call it, does not).
        self.data: MutableMapping[bytes, Any] = {}
        self.expires: MutableMapping[bytes, int] = {}
        # key -> LRU clock at its last read (commands.access: may hold deleted keys
        # until pruned; under an LFU maxmemory-policy, the LFU counters instead).
        self.atime: dict[bytes, int] = {}
        # key -> (LRU clock when RESTORE ... IDLETIME set it, the access time it set):
        # the key's last access until it is written again (commands.access).
        self.idle_set: dict[bytes, tuple[int, int]] = {}
        self.chains: Any = Chains()
        self.heap: list[tuple[int, bytes]] = []  # (expire_ms, key) for active expiry
        # key -> LSN of the newest version retention dropped: older states are gone.
        self.floors: dict[bytes, int] = {}
        self.floor_mark = 0  # the newest of the floors: views before it are refused
        # key -> chain length at which to try trimming again: a chain that a pin
        # stopped trimming is looked at again only every TRIM_STEP versions.
        self.trim_next: dict[bytes, int] = {}
        # A historical view reads with the clock stopped at its point in time.
        self.frozen_ms: int | None = None
        # The live keys' estimated bytes, and a collection's (element cost, length
        # sampled at, value) (store.dataset, kept by counted_apply).
        self.used = 0
        self.sizes: dict[bytes, tuple[int, int, Any]] = {}

    def get(self, key: bytes) -> Any:
        """The live value, or None; an expired key is removed on the way (lazy expiry).
        A read: the key's last access time becomes now."""
        v = lookup(self.data, key)
        if v is not None:
            self.atime[key] = LRU_CLOCK.now
            if self.expires:
                return self.unexpired(key, v, self.expires.get(key))
        return v

    def get_written(self, key: bytes) -> Any:
        """`get` for a command that writes `key` whatever it finds there (INCR, a push,
        HSET): under LRU (`atime` a plain dict) the read's access time is not stored,
        as the write's version, newer, is the key's last access
        (commands.access.last_access); a command that ends without writing calls
        `touched`. Under LFU (`LfuCounters`) the read counts, as Redis' write lookup
        does. A subclass (a branch's or a view's database) reads through its `get`."""
        if type(self) is not Database:
            return self.get(key)
        v = lookup(self.data, key)
        if v is not None:
            atime = self.atime
            if type(atime) is not dict:
                atime[key] = LRU_CLOCK.now
            if self.expires:
                return self.unexpired(key, v, self.expires.get(key))
        return v

    def touched(self, key: bytes) -> None:
        """The access `get_written` left out, for a write command that found `key` but
        ends without writing it (an error: WRONGTYPE, not an integer, overflow)."""
        atime = self.atime
        if type(atime) is dict and key in self.data:
            atime[key] = LRU_CLOCK.now

    def peek(self, key: bytes) -> Any:
        """`get` without counting as an access (TTL, TYPE, EXISTS, OBJECT: Redis'
        LOOKUP_NOTOUCH)."""
        v = lookup(self.data, key)
        if v is not None and self.expires:
            return self.unexpired(key, v, self.expires.get(key))
        return v

    def prune_atime(self) -> None:
        """Forget the access times of keys that no longer exist, once they are as many
        as the live keys (amortized O(1) per deletion)."""
        atime, data = self.atime, self.data
        if len(atime) > 2 * len(data) + 1024:
            kept = type(atime)((k, t) for k, t in atime.items() if k in data)
            self.atime = kept

    def unexpired(self, key: bytes, v: Any, at: int | None) -> Any:
        """`v`, or None if its expiry time `at` has come (removing the key)."""
        if at is not None and at <= (self.frozen_ms or FIXED_MS or now_ms()):
            if self.frozen_ms is None:
                self.expire_now(key)
            return None
        return v

    def __contains__(self, key: bytes) -> bool:
        return self.get(key) is not None

    def __len__(self) -> int:
        return len(self.data)

    def keys(self) -> Iterator[bytes]:
        """Live keys (expired ones are skipped, not removed)."""
        if not self.expires:
            return iter(list(self.data))
        t = self.frozen_ms or FIXED_MS or now_ms()
        exp = self.expires
        return iter([k for k in self.data if exp.get(k, t + 1) > t])

    def ttl_ms(self, key: bytes) -> int | None:
        return self.expires.get(key)

    def own(self, key: bytes) -> None:
        """Make `key` this database's own before it changes (branches copy on write)."""

    def expire_now(self, key: bytes) -> None:
        """Remove a key whose time has come. Inside a store this is a versioned
        deletion (as Redis propagates a DEL), so history shows when it expired."""
        if self.on_expire is not None:
            self.on_expire(self, key)
        else:
            self.data.pop(key, None)
            self.expires.pop(key, None)

    def schedule_expiry(self, key: bytes, at: int) -> None:
        heapq.heappush(self.heap, (at, key))

    def active_expire(self, budget: int = 200) -> int:
        """Remove up to `budget` keys whose time has come; return how many."""
        heap = self.heap
        t = now_ms()
        n = 0
        while heap and heap[0][0] <= t and n < budget:
            at, key = heapq.heappop(heap)
            if self.expires.get(key) == at:
                self.expire_now(key)
                n += 1
        if len(heap) > 4 * len(self.expires) + 1024:
            self.heap = [(at, k) for k, at in self.expires.items()]
            heapq.heapify(self.heap)
        return n
