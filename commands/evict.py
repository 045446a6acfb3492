"""maxmemory: the used memory, and keys evicted past it as Redis 7.0's evict.c does.

The used memory (INFO used_memory, what maxmemory is compared with) is this
process' resident set at start, plus Redis' per-client figure for each connection,
plus the live dataset's estimate (`store.dataset`: every database's `used`, kept as
keys are written and deleted), plus history that retention would have dropped but a
sealed snapshot or a branch holds (`HistoryMemory.pinned_bytes`) and the branches'
own versions. Retained history within the history policy is bounded by that policy,
not by maxmemory: an evicted key's last value stays in its delete version's undo
until retention drops it, so counting it would make eviction free nothing.

`perform_evictions` is Redis' performEvictions: called before a command while
maxmemory is set and the used memory is past it (the dispatcher asks the compiled
`maxmemory.memory_pressed` first), and in a loop on the event loop after CONFIG SET
maxmemory and whenever one call ran out of time (evictionTimeProc). Past maxmemory
it evicts keys under `maxmemory-policy` until enough is freed: the LRU, LFU and
volatile-ttl policies through a pool of the `EVPOOL_SIZE` best candidates refilled
with `maxmemory-samples` keys sampled from every database (the LRU clock and LFU
counters of `commands.access`, the expiry time), the random policies a random key
of the next database in turn. Every `16` keys it looks at the time: past the
limit `maxmemory-eviction-tenacity` gives, it stops and goes on from the event loop.

An evicted key is deleted as its own commit named `evicted` (as an expired key's
is `expired`), so TS.HISTORY shows it, the flusher persists it and replicas apply it;
it fires the `evicted` keyspace event (class e), invalidates client-side caching and
counts in INFO stats evicted_keys. A replica does not evict (its primary's deletions
arrive as records: Redis' replica-ignore-maxmemory), nor does a paused server or one
loading. lazyfree-lazy-eviction changes nothing here (a deletion frees its value at
once either way). CLIENT NO-EVICT concerns client eviction (maxmemory-clients), not
keys.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
import weakref
from typing import Any

from commands.access import frequency, idle_seconds
from commands.maxmemory import used_memory
from commands.notify import EVICTED, notify
from commands.session import ServerCore
from store import Database
from store.ops import DEL

log = logging.getLogger("temporalstore")

EVPOOL_SIZE = 16
OK, RUNNING, FAIL = 0, 1, 2


def dataset_bytes(server: ServerCore) -> int:
    """The live dataset's estimate, every database's."""
    return sum(db.used for db in server.store.dbs)


def held_history_bytes(server: ServerCore) -> int:
    """History held past retention (by seals and branch forks) and branches' versions."""
    mem = server.store.mem
    return mem.pinned_bytes + sum(b for b, _ in mem.branches.values())


def time_limit_us(tenacity: int) -> float:
    """evictionTimeLimitUs: 0..500 µs linearly up to tenacity 10, then 15 % more per
    step, no limit at 100."""
    if tenacity <= 10:
        return 50.0 * tenacity
    if tenacity < 100:
        return 500.0 * 1.15 ** (tenacity - 10)
    return float("inf")


class KeySample:
    """Random keys of one dict (a database's values or expiries) without walking it:
    a list of its keys, taken again once as many picks as it holds were made, or its
    size has halved or doubled since, or the dict was replaced (SWAPDB, a reload).
    Keys deleted since are skipped; keys added since wait for the next list."""

    __slots__ = ("keys", "of", "picks")

    def __init__(self, d: Any) -> None:
        self.of = d
        self.keys = list(d)
        self.picks = 0

    def stale(self, d: Any) -> bool:
        n, have = len(d), len(self.keys)
        return self.of is not d or self.picks > have or have > 2 * n + 16 or n > 2 * have + 16


class Eviction:
    """The state evict.c keeps in statics: the pool, the next database of the random
    policies, whether the time proc runs; and the key samples."""

    def __init__(self) -> None:
        self.pool: list[tuple[int, int, bytes]] = []  # (idle, db, key), best last
        self.next_db = 0
        self.running = False
        self.samples: dict[tuple[int, bool], KeySample] = {}

    def sample(self, dbi: int, d: Any, volatile: bool, count: int) -> list[bytes]:
        """Up to `count` distinct live keys of `d`, at random."""
        for _ in range(2):
            ks = self.samples.get((dbi, volatile))
            if ks is None or ks.stale(d):
                ks = self.samples[(dbi, volatile)] = KeySample(d)
            keys = ks.keys
            ks.picks += count
            picked = random.sample(keys, min(count, len(keys)))
            live = [k for k in picked if k in d]
            if live:
                return live
            ks.picks = len(keys) + 1  # only deleted keys: take the list again
        return []


_STATE: weakref.WeakKeyDictionary[ServerCore, Eviction] = weakref.WeakKeyDictionary()


def state_of(server: ServerCore) -> Eviction:
    ev = _STATE.get(server)
    if ev is None:
        ev = _STATE[server] = Eviction()
    return ev


def _param(server: ServerCore, name: str, default: str) -> str:
    return server.config.params.get(name) or default


def _score(policy: str, db: Database, key: bytes) -> int:
    """The pool's `idle`: the higher, the better to evict."""
    if policy.endswith("-lru"):
        return idle_seconds(db, key)
    if policy.endswith("-lfu"):
        return 255 - frequency(db, key)
    return -db.expires.get(key, 0)  # volatile-ttl: the soonest to expire first


def _populate(ev: Eviction, policy: str, dbi: int, db: Database, keys: list[bytes]) -> None:
    """evictionPoolPopulate: each sampled key enters the pool, kept sorted by idle
    (ascending), if the pool has room or it beats the pool's worst."""
    pool = ev.pool
    for key in keys:
        idle = _score(policy, db, key)
        k = 0
        while k < len(pool) and pool[k][0] < idle:
            k += 1
        if k == 0 and len(pool) == EVPOOL_SIZE:
            continue  # worse than every candidate, and no room
        if len(pool) < EVPOOL_SIZE:
            pool.insert(k, (idle, dbi, key))
        else:
            del pool[0]  # no room on the right: drop the worst, shift left
            pool.insert(k - 1, (idle, dbi, key))


def _pick(server: ServerCore, ev: Eviction, policy: str) -> tuple[Database, bytes] | None:
    """The key to evict next, or None when the policy leaves none."""
    dbs = server.store.dbs
    volatile = policy.startswith("volatile-")
    if policy.endswith("-random"):
        for _ in range(len(dbs)):
            ev.next_db = j = (ev.next_db + 1) % len(dbs)
            db = dbs[j]
            d = db.expires if volatile else db.data
            if d:
                keys = ev.sample(j, d, volatile, 1)
                if keys:
                    return db, keys[0]
        return None
    samples = max(int(_param(server, "maxmemory-samples", "5")), 1)
    while True:
        total = 0
        for i, db in enumerate(dbs):
            d = db.expires if volatile else db.data
            if d:
                _populate(ev, policy, i, db, ev.sample(i, d, volatile, samples))
                total += len(d)
        if not total:
            return None
        pool = ev.pool
        while pool:
            _idle, dbi, key = pool.pop()
            db = dbs[dbi]
            if key in (db.expires if volatile else db.data):
                return db, key
            # A ghost (deleted since it was sampled): try the next one.


def evict_key(server: ServerCore, db: Database, key: bytes) -> int:
    """Delete `key` as an eviction, committed on its own; return the bytes freed."""
    store = server.store
    cmd, writer = store.cmd, store.writer
    before = db.used
    store.begin("evicted")
    store.apply(db, key, (DEL,))
    store.commit()
    store.cmd, store.writer = cmd, writer
    server.stats.evicted_keys += 1
    if server.notify_flags:
        notify(server, EVICTED, b"evicted", key, db.ident)
    if server.tracking is not None:
        server.tracking.removed(key)
    stream = server.repl_stream
    if stream is not None:  # Redis replicas (commands.redis_repl): DEL, or UNLINK
        stream.expired(server, db.ident, key, "lazyfree-lazy-eviction")
    return before - db.used


def _safe(server: ServerCore) -> bool:
    """isPerformEvictions: not on a replica, while paused or loading, while a script
    runs past its time, or inside an open transaction."""
    store = server.store
    return (
        not (server.loading or store.follower or store.expiry_held or server.busy_script)
        and not store.pending
    )


def _exceeded(server: ServerCore, result: int) -> None:
    """INFO's total/current_eviction_exceeded_time."""
    st = server.stats
    if result != OK:
        if not st.eviction_exceeded_since:
            st.eviction_exceeded_since = time.monotonic()
    elif st.eviction_exceeded_since:
        st.eviction_exceeded_ms += int((time.monotonic() - st.eviction_exceeded_since) * 1000)
        st.eviction_exceeded_since = 0.0


def perform_evictions(server: ServerCore) -> int:
    """performEvictions: OK (under maxmemory, or evicting is not possible now),
    RUNNING (over, and evicting goes on from the event loop) or FAIL (over, and the
    policy leaves nothing to evict)."""
    if not _safe(server):
        return OK
    limit = server.limits.maxmemory
    used = used_memory(server)
    if not limit or used <= limit:
        _exceeded(server, OK)
        return OK
    policy = _param(server, "maxmemory-policy", "noeviction")
    if policy == "noeviction":
        _exceeded(server, FAIL)
        return FAIL
    ev = state_of(server)
    tofree = used - limit
    tenacity = int(_param(server, "maxmemory-eviction-tenacity", "10"))
    budget_ns = time_limit_us(tenacity) * 1000
    began = time.perf_counter_ns()
    freed = 0
    keys = 0
    result = OK
    while freed < tofree:
        found = _pick(server, ev, policy)
        if found is None:
            result = FAIL
            break
        freed += evict_key(server, found[0], found[1])
        keys += 1
        if keys % 16 == 0 and time.perf_counter_ns() - began > budget_ns:
            start_eviction_proc(server)
            break
    if result == OK and ev.running:
        result = RUNNING
    ms = (time.perf_counter_ns() - began) // 1_000_000
    server.ops.add_latency("eviction-cycle", ms)
    _exceeded(server, result)
    return result


def start_eviction_proc(server: ServerCore) -> None:
    """startEvictionTimeProc: evict from the event loop until under maxmemory or
    nothing is left to evict."""
    ev = state_of(server)
    if ev.running:
        return
    ev.running = True
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # no loop (a test driving the dispatcher directly): now
        while perform_evictions(server) == RUNNING:
            pass
        ev.running = False
        return

    def proc() -> None:
        if perform_evictions(server) == RUNNING:
            loop.call_soon(proc)
        else:
            ev.running = False

    loop.call_soon(proc)


def memory_check(server: ServerCore) -> bool:
    """The dispatcher's step before a command while maxmemory is set and
    `maxmemory.memory_pressed`: evict as needed; True when still out of memory (denyoom
    commands are refused)."""
    over = perform_evictions(server) == FAIL
    server.over_maxmemory = over
    return over


def maxmemory_changed(server: ServerCore) -> None:
    """CONFIG SET maxmemory (Redis' updateMaxmemory): warn when already past it, and
    start evicting from the event loop."""
    limit = server.limits.maxmemory
    server.over_maxmemory = False
    if not limit:
        return
    used = used_memory(server)
    if limit < used:
        log.warning(
            "WARNING: the new maxmemory value set via CONFIG SET (%d) is smaller than the "
            "current memory usage (%d). This will result in key eviction and/or the "
            "inability to accept new write commands depending on the maxmemory-policy.",
            limit,
            used,
        )
    start_eviction_proc(server)
