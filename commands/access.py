"""Key access times and frequencies: OBJECT IDLETIME and FREQ, DEBUG OBJECT's lru.

Every read through `Database.get` stores the LRU clock (whole seconds, advanced by the
server cron) as the key's last access (`Database.atime`); TTL, TYPE, EXISTS and
OBJECT read with `Database.peek`, which does not (Redis' LOOKUP_NOTOUCH). A key's
last access is the newest of that and its last write (the time of its newest version),
so writes cost nothing more.

Under an LFU maxmemory-policy the databases' `atime` maps become `LfuCounters`: the
same store on each read then updates Redis' LFU word instead (16 bits of minutes, 8 of
a logarithmic counter: lfu-log-factor slows its growth, and it loses one for every
lfu-decay-time minutes without a read), and OBJECT FREQ reads it. Switching policy
starts the other map empty: as Redis says, "LRU and LFU data will take some time to adjust".
"""

from __future__ import annotations

import random
import time
from typing import Any

from store import V_TIME, database
from store.database import Database

LRU_CLOCK_MAX = (1 << 24) - 1  # Redis keeps 24 bits of it per object
LFU_INIT_VAL = 5  # a new key's counter


class LfuSettings:
    log_factor = 10  # lfu-log-factor
    decay_time = 1  # lfu-decay-time, minutes per decrement


LFU = LfuSettings()


def _minutes() -> int:
    return (int(time.time()) // 60) & 65535


def _decayed(word: int | None, now_min: int) -> int:
    """Redis' LFUDecrAndReturn: the counter after the periods elapsed since its time."""
    if word is None:
        return LFU_INIT_VAL
    ldt, counter = word >> 8, word & 255
    elapsed = now_min - ldt if now_min >= ldt else 65535 - ldt + now_min
    periods = elapsed // LFU.decay_time if LFU.decay_time else 0
    return max(counter - periods, 0)


def _log_incr(counter: int) -> int:
    """Redis' LFULogIncr: +1 with probability 1 / ((counter - 5) * lfu-log-factor + 1)."""
    if counter == 255:
        return 255
    base = max(counter - LFU_INIT_VAL, 0)
    return counter + 1 if random.random() < 1.0 / (base * LFU.log_factor + 1) else counter


class LfuCounters(dict[bytes, int]):
    """key -> Redis' LFU word; a read (`counters[key] = clock`) updates it."""

    __slots__ = ()

    def __setitem__(self, key: bytes, _clock: int) -> None:
        now = _minutes()
        counter = _log_incr(_decayed(self.get(key), now))
        dict.__setitem__(self, key, (now << 8) | counter)

    def freq(self, key: bytes) -> int:
        return _decayed(self.get(key), _minutes())


def use_lfu(dbs: list[Database], lfu: bool) -> None:
    """Track frequencies (LFU) or access times (LRU) from now on."""
    for db in dbs:
        if isinstance(db.atime, LfuCounters) != lfu:
            db.atime = LfuCounters() if lfu else {}


def policy_changed(dbs: list[Database], params: dict[str, str]) -> None:
    """After maxmemory-policy, lfu-log-factor or lfu-decay-time changed (or at start)."""
    LFU.log_factor = int(params.get("lfu-log-factor", "10"))
    LFU.decay_time = int(params.get("lfu-decay-time", "1"))
    use_lfu(dbs, params.get("maxmemory-policy", "noeviction").endswith("-lfu"))


def last_access(db: Database, key: bytes) -> int:
    """The LRU clock (seconds) at the key's last read or write (or, until its next
    write, the access time RESTORE ... IDLETIME gave it)."""
    atime = db.atime
    read = 0 if isinstance(atime, LfuCounters) else atime.get(key, 0)
    chain: Any = db.chains.get(key)
    written = chain[-1][V_TIME] // 1000 if chain else 0
    given = db.idle_set.get(key) if db.idle_set else None
    if given is not None:
        if written <= given[0]:
            # Reads within the RESTORE's own second (its notifications and tracking
            # read the key) do not count.
            return read if read > given[0] else given[1]
        del db.idle_set[key]  # written since: the write is its last access
    return max(read, written)


def restored(db: Database, key: bytes, idle: int, freq: int) -> None:
    """RESTORE ... IDLETIME / FREQ (Redis' objectSetLRUOrLFU): the key's idle time
    under an LRU policy, or its LFU counter under an LFU one; -1 when not given."""
    atime = db.atime
    if isinstance(atime, LfuCounters):
        if freq >= 0:
            dict.__setitem__(atime, key, (_minutes() << 8) | freq)
    elif idle >= 0:
        atime.pop(key, None)
        # Marked with the wall-clock second (the cron's LRU clock may lag it by up to a
        # tick), the second of the RESTORE's own version.
        db.idle_set[key] = (int(time.time()), max(database.LRU_CLOCK.now - idle, 0))


def idle_seconds(db: Database, key: bytes) -> int:
    """OBJECT IDLETIME: seconds since the key's last access."""
    clock: int = database.LRU_CLOCK.now
    return max(clock - last_access(db, key), 0)


def frequency(db: Database, key: bytes) -> int:
    """OBJECT FREQ: the key's decayed LFU counter; a key not read since the policy
    took effect has a new key's counter, decayed from its last write."""
    atime = db.atime
    if isinstance(atime, LfuCounters) and key in atime:
        return atime.freq(key)
    written = ((last_access(db, key) // 60) & 65535) << 8 | LFU_INIT_VAL
    return _decayed(written, _minutes())
