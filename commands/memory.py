"""MEMORY, as Redis 7.0.15 answers it, with this process' figures.

MEMORY USAGE key [SAMPLES count]
    Bytes of the key in this process: the key and its slot in the database's dict, the
    value (the container and its elements, `sys.getsizeof` deep; collections are
    estimated from `count` sampled elements, default 5, 0: all, as Redis samples), its
    expiry entry if any, and its newest version entry (`store.accounting`). A missing
    key is nil; the value is read as stored (a logically expired key still counts, as
    in Redis).
MEMORY STATS
    Redis' fields in Redis' order. total.allocated is INFO's used_memory (what
    maxmemory is checked against: commands.evict), peak.allocated its peak,
    startup.allocated the resident set at start; clients.normal the per-client
    estimate INFO uses; aof.buffer the writes not yet flushed to object storage (our
    append-only log); lua.caches and functions.caches the script and library sizes;
    db.N the overhead of each non-empty database's dicts (keys and expiries). Python's
    allocator is not jemalloc: the allocator.* figures are total.allocated, so their
    ratios are 1.
MEMORY DOCTOR
    Redis' report, from those figures.
MEMORY MALLOC-STATS
    Redis' reply for an allocator without statistics (this process has no jemalloc).
MEMORY PURGE
    Runs a full garbage collection and returns freed heap to the system (malloc_trim).
MEMORY HELP
"""

from __future__ import annotations

import gc
import sys
from collections import deque
from collections.abc import Iterable
from itertools import islice
from typing import Any

from commands import allocator
from commands.common import help_reply
from commands.errors import SYNTAX, CommandError
from commands.limits import CLIENT_MEMORY, STARTUP_RSS
from commands.lua_state import memory as scripting_memory
from commands.maxmemory import used_memory
from commands.parsing import get_int
from commands.registry import LOADING_STALE, Flag, command, container
from commands.replies import OK, Reply, Verbatim
from commands.session import ServerCore, Session
from store.accounting import PACKED_BYTES, entry_bytes
from store.stream import Stream
from store.values import ZSet

container("memory", -2)

MEMORY_HELP = (
    "DOCTOR",
    "    Return memory problems reports.",
    "MALLOC-STATS",
    "    Return internal statistics report from the memory allocator.",
    "PURGE",
    "    Attempt to purge dirty pages for reclamation by the allocator.",
    "STATS",
    "    Return information about the memory usage of the server.",
    "USAGE <key> [SAMPLES <count>]",
    "    Return memory in bytes used by <key> and its value. Nested values are",
    "    sampled up to <count> times (default: 5, 0 means sample all).",
)
DEFAULT_SAMPLES = 5
DICT_SLOT = 8 + 24  # a dict's index slot and its (hash, key, value) entry
_size = sys.getsizeof


def _sampled(items: Iterable[Any], n: int, samples: int, each: Any) -> int:
    """Redis' objectComputeSize sampling: the first `samples` elements' average size
    times the count."""
    if n == 0:
        return 0
    taken = list(islice(items, samples))
    return int(sum(map(each, taken)) / len(taken) * n) if taken else 0


def value_bytes(v: Any, samples: int) -> int:
    """A deep size estimate of one value in this process."""
    if isinstance(v, bytes | bytearray):
        return _size(v)
    n = len(v)
    if isinstance(v, deque):
        return _size(v) + _sampled(v, n, samples, _size)
    if isinstance(v, dict):
        return _size(v) + _sampled(v.items(), n, samples, lambda kv: _size(kv[0]) + _size(kv[1]))
    if isinstance(v, set):
        return _size(v) + _sampled(v, n, samples, _size)
    if isinstance(v, ZSet):
        # the member -> score dict, and the sorted (score, member) tuples
        per = 24 + 56 + 8 + DICT_SLOT  # the float, the tuple, the sorted list's slot
        return _size(v) + _size(v.scores) + _sampled(v.scores, n, samples, lambda m: _size(m) + per)
    if isinstance(v, Stream):
        entries = v.entries
        total = _size(entries) + _sampled(
            entries.values(),
            n,
            samples,
            lambda e: _size(e[0]) + _size(e[1]) + sum(map(_size, e[1])),
        )
        total += sum(_size(node.ids) + 8 * len(node.ids) for node in v.nodes)
        for group in v.groups.values():
            total += _size(group) + _size(group.pel) + len(group.pel) * (DICT_SLOT + 72)
        return total
    return _size(v)


def key_bytes(s: Session, key: bytes, samples: int) -> int | None:
    """MEMORY USAGE's figure for a key, or None if it does not exist."""
    db = s.db
    v = db.data.get(key)
    if v is None:
        return None
    n = _size(key) + DICT_SLOT + value_bytes(v, samples)
    if key in db.expires:
        n += DICT_SLOT + 32  # the expiry entry and its int
    chain = db.chains.get(key)
    if chain:
        n += entry_bytes(chain[-1]) if db.chains.born(key) is None else PACKED_BYTES
    return n


@command("memory|usage", -3, Flag.READONLY, 2, 2, 1)
def cmd_memory_usage(s: Session, argv: list[bytes]) -> Reply:
    samples = DEFAULT_SAMPLES
    j = 3
    while j < len(argv):
        if argv[j].lower() == b"samples" and j + 1 < len(argv):
            samples = get_int(argv[j + 1])
            if samples < 0:
                raise CommandError(SYNTAX)
            if samples == 0:
                samples = sys.maxsize
            j += 2
        else:
            raise CommandError(SYNTAX)
    return key_bytes(s, argv[2], samples)


class Overhead:
    """Redis' getMemoryOverheadData, with this process' figures."""

    def __init__(self, server: ServerCore) -> None:
        self.total = used_memory(server)
        server.peak_memory = self.peak = max(server.peak_memory, self.total)
        self.startup = min(STARTUP_RSS, self.total)
        self.clients = len(server.clients) * CLIENT_MEMORY
        dur = server.durability
        self.aof = int(dur.info().get("unflushed_bytes", 0)) if dur is not None else 0
        lua = scripting_memory(server)
        self.lua = lua.scripts_eval
        self.functions = lua.functions_mem
        self.cached_scripts = lua.cached_scripts
        self.dbs = [
            (i, _size(db.data), _size(db.expires))
            for i, db in enumerate(server.store.dbs)
            if db.data
        ]
        self.overhead = (
            self.startup
            + self.clients
            + self.aof
            + self.lua
            + self.functions
            + sum(m + e for _, m, e in self.dbs)
        )
        self.keys = sum(len(db.data) for db in server.store.dbs)
        net = self.total - self.startup
        self.bytes_per_key = net // self.keys if self.keys else 0
        self.dataset = max(self.total - self.overhead, 0)
        self.dataset_perc = self.dataset * 100 / net if net > 0 else 0.0
        self.peak_perc = self.total * 100 / self.peak if self.peak else 0.0


@command("memory|stats", 2)
def cmd_memory_stats(s: Session, argv: list[bytes]) -> Reply:
    m = Overhead(s.server)
    out: dict[bytes, Any] = {
        b"peak.allocated": m.peak,
        b"total.allocated": m.total,
        b"startup.allocated": m.startup,
        b"replication.backlog": 0,
        b"clients.slaves": 0,
        b"clients.normal": m.clients,
        b"cluster.links": 0,
        b"aof.buffer": m.aof,
        b"lua.caches": m.lua,
        b"functions.caches": m.functions,
    }
    for i, main, expires in m.dbs:
        out[b"db.%d" % i] = {
            b"overhead.hashtable.main": main,
            b"overhead.hashtable.expires": expires,
            b"overhead.hashtable.slot-to-keys": 0,
        }
    out.update(
        {
            b"overhead.total": m.overhead,
            b"keys.count": m.keys,
            b"keys.bytes-per-key": m.bytes_per_key,
            b"dataset.bytes": m.dataset,
            b"dataset.percentage": float(m.dataset_perc),
            b"peak.percentage": float(m.peak_perc),
            b"allocator.allocated": m.total,
            b"allocator.active": m.total,
            b"allocator.resident": m.total,
            b"allocator-fragmentation.ratio": 1.0,
            b"allocator-fragmentation.bytes": 0,
            b"allocator-rss.ratio": 1.0,
            b"allocator-rss.bytes": 0,
            b"rss-overhead.ratio": 1.0,
            b"rss-overhead.bytes": 0,
            b"fragmentation": 1.0,
            b"fragmentation.bytes": 0,
        }
    )
    return out


_EMPTY = (
    "Hi Sam, this instance is empty or is using very little memory, my issues detector "
    "can't be used in these conditions. Please, leave for your mission on Earth and fill "
    "it with some data. The new Sam and I will be back to our programming as soon as I "
    "finished rebooting.\n"
)
_FINE = (
    "Hi Sam, I can't find any memory issue in your instance. "
    "I can only account for what occurs on this base.\n"
)
_PEAK = (
    " * Peak memory: In the past this instance used more than 150% the memory that is "
    "currently using. The allocator is normally not able to release memory after a peak, "
    "so you can expect to see a big fragmentation ratio, however this is actually harmless "
    "and is only due to the memory peak, and if the Redis instance Resident Set Size (RSS) "
    "is currently bigger than expected, the memory will be used as soon as you fill the "
    "Redis instance with more data. If the memory peak was only occasional and you want to "
    "try to reclaim memory, please try the MEMORY PURGE command, otherwise the only other "
    "option is to shutdown and restart the instance.\n\n"
)
_SCRIPTS = (
    " * Many scripts: There seem to be many cached scripts in this instance (more than "
    "1000). This may be because scripts are generated and `EVAL`ed, instead of being "
    "parameterized (with KEYS and ARGV), `SCRIPT LOAD`ed and `EVALSHA`ed. Unless `SCRIPT "
    "FLUSH` is called periodically, the scripts' caches may end up consuming most of your "
    "memory.\n\n"
)


def doctor_report(server: ServerCore) -> str:
    """Redis' getMemoryDoctorReport. Our allocator figures have ratio 1 and no replicas
    read from us, so the fragmentation, RSS and replica-buffer findings cannot arise."""
    m = Overhead(server)
    if m.total < 5 * 1024 * 1024:
        return _EMPTY
    found = []
    if m.peak / m.total > 1.5:
        found.append(_PEAK)
    if m.cached_scripts > 1000:
        found.append(_SCRIPTS)
    if not found:
        return _FINE
    return (
        "Sam, I detected a few issues in this Redis instance memory implants:\n\n"
        + "".join(found)
        + "I'm here to keep you safe, Sam. I want to help you.\n"
    )


@command("memory|doctor", 2)
def cmd_memory_doctor(s: Session, argv: list[bytes]) -> Reply:
    return Verbatim(doctor_report(s.server).encode())


@command("memory|malloc-stats", 2)
def cmd_memory_malloc_stats(s: Session, argv: list[bytes]) -> Reply:
    return b"Stats not supported for the current allocator"


@command("memory|purge", 2)
def cmd_memory_purge(s: Session, argv: list[bytes]) -> Reply:
    gc.collect()
    allocator.trim()
    return OK


@command("memory|help", 2, LOADING_STALE)
def cmd_memory_help(s: Session, argv: list[bytes]) -> Reply:
    return help_reply(argv[0], MEMORY_HELP)
