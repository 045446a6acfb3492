"""Server commands, as Redis 7.0.15 answers them.

INFO [section [section ...]]
    Redis' sections in Redis' order and layout (`# Name` headers, `field:value` lines,
    CRLF, one blank line between sections); `default`, `all`, `everything`, names are
    case-insensitive. Our own `# TemporalStore` section (lsn, history policy, storage)
    comes last and only for `INFO temporalstore` or `INFO everything`, the way Redis
    shows module sections: `INFO`, `INFO default` and `INFO all` keep Redis' structure.
DBSIZE · FLUSHDB [ASYNC|SYNC] · FLUSHALL [ASYNC|SYNC] · SWAPDB index1 index2 · TIME
LASTSAVE · SAVE · BGSAVE [SCHEDULE]
    Persistence is continuous (every commit goes to the object store), so SAVE and BGSAVE
    only record the time LASTSAVE reports.
SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]
CONFIG GET parameter [parameter ...] · CONFIG SET parameter value [parameter value ...]
CONFIG RESETSTAT · CONFIG REWRITE · CONFIG HELP
    Every parameter of Redis 7.0 with its default, type, bounds and flags (from
    `redis_commands.json`); values live in `Config.params`.
COMMAND · COMMAND COUNT · COMMAND LIST [FILTERBY MODULE name|ACLCAT category|PATTERN glob]
COMMAND INFO [command-name ...] · COMMAND DOCS [command-name ...] · COMMAND HELP
COMMAND GETKEYS command [arg ...] · COMMAND GETKEYSANDFLAGS command [arg ...]
    Answered from `redis_commands.json` (generated from redis-server 7.0.15 by
    `tools/gen_command_docs.py`), restricted to the commands in our command table;
    a command or subcommand Redis 7.0 does not have is described from our table.
DEBUG subcommand [arg ...]
    Refused exactly as a default Redis 7.0 server refuses it (enable-debug-command no).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import platform
import re
import resource
import sys
import time
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from commands.common import glob_match
from commands.durability import deferred
from commands.errors import LOADING, SYNTAX, CommandError
from commands.limits import config_changed, memtoull, merge_output_limits, rss_bytes
from commands.parsing import string2ll
from commands.registry import COMMANDS, Command, Flag, command, container
from commands.replies import OK, CloseAfterReply, ErrorReply, Frames, Reply, Simple, Verbatim
from commands.session import Config, ServerState, Session, Stats
from commands.ts_docs import docs_for
from commands.users import own_categories
from store.ops import DEL

log = logging.getLogger("temporalstore")

REDIS_VERSION = "7.0.15"
INVALID_FIRST_DB = "ERR invalid first DB index"
INVALID_SECOND_DB = "ERR invalid second DB index"
DB_OUT_OF_RANGE = "ERR DB index is out of range"
NO_SHUTDOWN = "ERR No shutdown in progress."
NO_CONFIG_FILE = "ERR The server is running without a config file"
CONFIG_UNKNOWN = "ERR Unknown option or number of arguments for CONFIG SET - '{}'"
CONFIG_FAILED = "ERR CONFIG SET failed (possibly related to argument '{}') - {}"
INVALID_COMMAND = "ERR Invalid command specified"
NO_KEY_ARGS = "ERR The command has no key arguments"
INVALID_NARGS = "ERR Invalid number of arguments specified for command"
INVALID_ARGS = "ERR Invalid arguments specified for command"
DEBUG_REFUSED = (
    "ERR DEBUG command not allowed. If the enable-debug-command option is set to "
    '"local", you can run it from a local connection, otherwise you need to set this '
    "option in the configuration file, and then restart the server."
)

ADMIN = Flag.ADMIN | Flag.NOSCRIPT | Flag.LOADING | Flag.STALE
LOADING_STALE = Flag.LOADING | Flag.STALE
CLIENT_MEMORY = 22298  # what Redis reports as an idle client's tot-mem
_STARTUP_RSS = rss_bytes()  # the server imports this module as it starts


def help_reply(argv0: bytes, lines: Iterable[str]) -> list[Simple]:
    """Redis' addReplyHelp: a header naming the command, the lines, and HELP."""
    out = [Simple(b"%s <subcommand> [<arg> [value] [opt] ...]. Subcommands are:" % argv0.upper())]
    out += [Simple(line.encode()) for line in lines]
    out += [Simple(b"HELP"), Simple(b"    Prints this help.")]
    return out


# -- server-wide state this module keeps --------------------------------------------------


@dataclass
class _Extras:
    """What INFO, LASTSAVE and CONFIG need beyond `ServerState`."""

    lastsave: int = field(default_factory=lambda: int(time.time()))
    lsn_at_save: int = 0
    peak_memory: int = 0
    startup_memory: int = 0
    replid: str = ""
    sample_time: float = field(default_factory=time.monotonic)
    sample_cmds: int = 0
    sample_in: int = 0
    sample_out: int = 0
    ops_per_sec: int = 0
    in_kbps: float = 0.0
    out_kbps: float = 0.0
    saves: int = 0
    config_ready: bool = False


_EXTRAS: weakref.WeakKeyDictionary[ServerState, _Extras] = weakref.WeakKeyDictionary()


def extras(server: ServerState) -> _Extras:
    x = _EXTRAS.get(server)
    if x is None:
        x = _Extras(replid=hashlib.sha1(server.run_id.encode()).hexdigest())
        x.startup_memory = _STARTUP_RSS
        x.peak_memory = max(_STARTUP_RSS, rss_bytes())
        _EXTRAS[server] = x
    return x


# -- keyspace ------------------------------------------------------------------------------


def flush_db(s: Session, dbi: int) -> None:
    db = s.store.dbs[dbi]
    for key in list(db.data):
        s.store.apply(db, key, (DEL,))


def _flush_mode(argv: list[bytes]) -> None:
    if len(argv) > 2 or (len(argv) == 2 and argv[1].lower() not in (b"sync", b"async")):
        raise CommandError(SYNTAX)


@command("flushdb", -1, Flag.WRITE)
def cmd_flushdb(s: Session, argv: list[bytes]) -> Reply:
    _flush_mode(argv)
    flush_db(s, s.dbi)
    return OK


@command("flushall", -1, Flag.WRITE)
def cmd_flushall(s: Session, argv: list[bytes]) -> Reply:
    _flush_mode(argv)
    for i in range(len(s.store.dbs)):
        flush_db(s, i)
    return OK


@command("dbsize", 1, Flag.READONLY | Flag.FAST)
def cmd_dbsize(s: Session, argv: list[bytes]) -> Reply:
    return len(s.db)


def _db_index(arg: bytes, error: str) -> int:
    n = string2ll(arg)
    if n is None or not -(2**31) <= n < 2**31:
        raise CommandError(error)
    return n


@command("swapdb", 3, Flag.WRITE | Flag.FAST)
def cmd_swapdb(s: Session, argv: list[bytes]) -> Reply:
    a = _db_index(argv[1], INVALID_FIRST_DB)
    b = _db_index(argv[2], INVALID_SECOND_DB)
    n = len(s.store.dbs)
    if not (0 <= a < n and 0 <= b < n):
        raise CommandError(DB_OUT_OF_RANGE)
    if a != b:
        s.store.swap_dbs(a, b)
    return OK


# -- time, persistence, shutdown ---------------------------------------------------------------


@command("time", 1, LOADING_STALE | Flag.FAST)
def cmd_time(s: Session, argv: list[bytes]) -> Reply:
    ns = time.time_ns()
    return [b"%d" % (ns // 1_000_000_000), b"%d" % (ns // 1000 % 1_000_000)]


@command("lastsave", 1, LOADING_STALE | Flag.FAST)
def cmd_lastsave(s: Session, argv: list[bytes]) -> Reply:
    return extras(s.server).lastsave


def _saved(s: Session) -> None:
    x = extras(s.server)
    x.lastsave = int(time.time())
    x.lsn_at_save = s.store.lsn
    x.saves += 1


@command("save", 1, Flag.ADMIN | Flag.NOSCRIPT | Flag.NO_ASYNC_LOADING | Flag.NO_MULTI)
def cmd_save(s: Session, argv: list[bytes]) -> Reply:
    """Write a checkpoint now (and compact); reply once it is stored."""
    dur = s.server.durability
    if dur is None:
        _saved(s)
        return OK

    async def save() -> Reply:
        assert dur is not None
        try:
            await dur.checkpoint()
        except Exception as e:  # storage down or fenced: Redis answers an error too
            return ErrorReply(f"ERR checkpoint failed: {e}".encode())
        _saved(s)
        return OK

    return deferred(save)


@command("bgsave", -1, Flag.ADMIN | Flag.NOSCRIPT | Flag.NO_ASYNC_LOADING)
def cmd_bgsave(s: Session, argv: list[bytes]) -> Reply:
    if len(argv) > 2 or (len(argv) == 2 and argv[1].lower() != b"schedule"):
        raise CommandError(SYNTAX)
    dur = s.server.durability
    if dur is not None:
        dur.checkpoint_soon()
    _saved(s)
    return Simple(b"Background saving started")


@command("shutdown", -1, ADMIN | Flag.NO_MULTI | Flag.ALLOW_BUSY)
def cmd_shutdown(s: Session, argv: list[bytes]) -> Reply:
    save = nosave = abort = other = False
    for a in argv[1:]:
        opt = a.lower()
        if opt == b"nosave":
            nosave = True
        elif opt == b"save":
            save = True
        elif opt in (b"now", b"force"):
            other = True
        elif opt == b"abort":
            abort = True
        else:
            raise CommandError(SYNTAX)
    if (abort and (save or nosave or other)) or (save and nosave):
        raise CommandError(SYNTAX)
    if abort:
        raise CommandError(NO_SHUTDOWN)
    s.server.shutdown_requested()
    return CloseAfterReply(Frames())  # Redis exits without replying


@command("debug", -2, ADMIN)
def cmd_debug(s: Session, argv: list[bytes]) -> Reply:
    raise CommandError(DEBUG_REFUSED)


# -- INFO -------------------------------------------------------------------------------------

DEFAULT_SECTIONS = frozenset(
    [
        "server",
        "clients",
        "memory",
        "persistence",
        "stats",
        "replication",
        "cpu",
        "module_list",
        "errorstats",
        "cluster",
        "keyspace",
    ]
)


def _template(text: str) -> str:
    return text.strip().replace("\n", "\r\n") + "\r\n"


# Redis' field lists; what we cannot measure is reported as a default server would.
_SERVER = _template("""
redis_version:{version}
redis_git_sha1:00000000
redis_git_dirty:0
redis_build_id:0000000000000000
redis_mode:standalone
os:{os}
arch_bits:{arch_bits}
monotonic_clock:POSIX clock_gettime
multiplexing_api:{mux}
atomicvar_api:c11-builtin
gcc_version:0.0.0
process_id:{pid}
process_supervised:no
run_id:{run_id}
tcp_port:{port}
server_time_usec:{usec}
uptime_in_seconds:{uptime}
uptime_in_days:{days}
hz:10
configured_hz:10
lru_clock:{lru}
executable:{exe}
config_file:
io_threads_active:0
""")
_CLIENTS = _template("""
connected_clients:{clients}
cluster_connections:0
maxclients:{maxclients}
client_recent_max_input_buffer:0
client_recent_max_output_buffer:0
blocked_clients:{blocked}
tracking_clients:0
clients_in_timeout_table:{blocked}
""")
_MEMORY = _template("""
used_memory:{used}
used_memory_human:{used_h}
used_memory_rss:{used}
used_memory_rss_human:{used_h}
used_memory_peak:{peak}
used_memory_peak_human:{peak_h}
used_memory_peak_perc:{peak_perc:.2f}%
used_memory_overhead:{overhead}
used_memory_startup:{startup}
used_memory_dataset:{dataset}
used_memory_dataset_perc:{dataset_perc:.2f}%
allocator_allocated:{used}
allocator_active:{used}
allocator_resident:{used}
total_system_memory:{system}
total_system_memory_human:{system_h}
used_memory_lua:0
used_memory_vm_eval:0
used_memory_lua_human:0B
used_memory_scripts_eval:0
number_of_cached_scripts:0
number_of_functions:0
number_of_libraries:0
used_memory_vm_functions:0
used_memory_vm_total:0
used_memory_vm_total_human:0B
used_memory_functions:0
used_memory_scripts:0
used_memory_scripts_human:0B
maxmemory:{maxmemory}
maxmemory_human:{maxmemory_h}
maxmemory_policy:{policy}
allocator_frag_ratio:1.00
allocator_frag_bytes:0
allocator_rss_ratio:1.00
allocator_rss_bytes:0
rss_overhead_ratio:1.00
rss_overhead_bytes:0
mem_fragmentation_ratio:1.00
mem_fragmentation_bytes:0
mem_not_counted_for_evict:0
mem_replication_backlog:0
mem_total_replication_buffers:0
mem_clients_slaves:0
mem_clients_normal:{clients_mem}
mem_cluster_links:0
mem_aof_buffer:0
mem_allocator:libc
active_defrag_running:0
lazyfree_pending_objects:0
lazyfreed_objects:0
""")
_PERSISTENCE = _template("""
loading:{loading}
async_loading:0
current_cow_peak:0
current_cow_size:0
current_cow_size_age:0
current_fork_perc:0.00
current_save_keys_processed:0
current_save_keys_total:0
rdb_changes_since_last_save:{changes}
rdb_bgsave_in_progress:0
rdb_last_save_time:{lastsave}
rdb_last_bgsave_status:ok
rdb_last_bgsave_time_sec:-1
rdb_current_bgsave_time_sec:-1
rdb_saves:{saves}
rdb_last_cow_size:0
rdb_last_load_keys_expired:0
rdb_last_load_keys_loaded:0
aof_enabled:0
aof_rewrite_in_progress:0
aof_rewrite_scheduled:0
aof_last_rewrite_time_sec:-1
aof_current_rewrite_time_sec:-1
aof_last_bgrewrite_status:ok
aof_rewrites:0
aof_rewrites_consecutive_failures:0
aof_last_write_status:ok
aof_last_cow_size:0
module_fork_in_progress:0
module_fork_last_cow_size:0
""")
_STATS = _template("""
total_connections_received:{st.connections_received}
total_commands_processed:{st.commands_processed}
instantaneous_ops_per_sec:{ops}
total_net_input_bytes:{st.net_input_bytes}
total_net_output_bytes:{st.net_output_bytes}
total_net_repl_input_bytes:0
total_net_repl_output_bytes:0
instantaneous_input_kbps:{in_kbps:.2f}
instantaneous_output_kbps:{out_kbps:.2f}
instantaneous_input_repl_kbps:0.00
instantaneous_output_repl_kbps:0.00
rejected_connections:{st.rejected_connections}
sync_full:0
sync_partial_ok:0
sync_partial_err:0
expired_keys:{st.expired_keys}
expired_stale_perc:0.00
expired_time_cap_reached_count:0
expire_cycle_cpu_milliseconds:0
evicted_keys:0
evicted_clients:0
total_eviction_exceeded_time:0
current_eviction_exceeded_time:0
keyspace_hits:{st.keyspace_hits}
keyspace_misses:{st.keyspace_misses}
pubsub_channels:{channels}
pubsub_patterns:{patterns}
pubsubshard_channels:0
latest_fork_usec:0
total_forks:0
migrate_cached_sockets:0
slave_expires_tracked_keys:0
active_defrag_hits:0
active_defrag_misses:0
active_defrag_key_hits:0
active_defrag_key_misses:0
total_active_defrag_time:0
current_active_defrag_time:0
tracking_total_keys:0
tracking_total_items:0
tracking_total_prefixes:0
unexpected_error_replies:0
total_error_replies:{st.error_replies}
dump_payload_sanitizations:0
total_reads_processed:{st.commands_processed}
total_writes_processed:{st.commands_processed}
io_threaded_reads_processed:0
io_threaded_writes_processed:0
reply_buffer_shrinks:0
reply_buffer_expands:0
""")
_REPLICATION = _template("""
role:master
connected_slaves:0
master_failover_state:no-failover
master_replid:{replid}
master_replid2:0000000000000000000000000000000000000000
master_repl_offset:0
second_repl_offset:-1
repl_backlog_active:0
repl_backlog_size:1048576
repl_backlog_first_byte_offset:0
repl_backlog_histlen:0
""")
_CPU = _template("""
used_cpu_sys:{me.ru_stime:.6f}
used_cpu_user:{me.ru_utime:.6f}
used_cpu_sys_children:{kids.ru_stime:.6f}
used_cpu_user_children:{kids.ru_utime:.6f}
""")
_CPU_THREAD = _template("""
used_cpu_sys_main_thread:{main.ru_stime:.6f}
used_cpu_user_main_thread:{main.ru_utime:.6f}
""")
_TEMPORALSTORE = _template("""
lsn:{store.lsn}
last_commit_time_ms:{store.last_time_ms}
history_policy:{store.history}
versioned_keys:{versioned}
storage:{storage}
flush_interval_ms:{cfg.flush_interval_ms}
""")


@cache
def _system_memory() -> int:
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 0


def bytes_to_human(n: int) -> str:
    """Redis' bytesToHuman: 100B, 4.00K, 2.50M, ..."""
    if n < 1024:
        return f"{n}B"
    for unit, shift in (("K", 10), ("M", 20), ("G", 30), ("T", 40), ("P", 50)):
        if n < 1 << (shift + 10):
            return f"{n / (1 << shift):.2f}{unit}"
    return f"{n}B"


def _info_server(s: Session) -> str:
    u = platform.uname()
    now = time.time()
    uptime = int(now - s.server.started)
    return _SERVER.format(
        version=REDIS_VERSION,
        os=f"{u.system} {u.release} {u.machine}",
        arch_bits=64 if sys.maxsize > 2**32 else 32,
        mux="epoll" if sys.platform == "linux" else "kqueue",
        pid=os.getpid(),
        run_id=s.server.run_id,
        port=s.server.config.port,
        usec=time.time_ns() // 1000,
        uptime=uptime,
        days=uptime // 86400,
        lru=int(now) & ((1 << 24) - 1),
        exe=os.path.abspath(sys.executable),
    )


def _info_clients(s: Session) -> str:
    clients = s.server.clients
    return _CLIENTS.format(
        clients=len(clients),
        maxclients=config_get_value(s.server, "maxclients"),
        blocked=sum(1 for c in clients.values() if c.blocked),
    )


def _info_memory(s: Session) -> str:
    x = extras(s.server)
    used = rss_bytes()
    x.peak_memory = max(x.peak_memory, used)
    startup = min(x.startup_memory, used)
    clients_mem = len(s.server.clients) * CLIENT_MEMORY
    overhead = startup + clients_mem
    dataset = max(used - overhead, 0)
    maxmemory = int(config_get_value(s.server, "maxmemory"))
    system = _system_memory()
    return _MEMORY.format(
        used=used,
        used_h=bytes_to_human(used),
        peak=x.peak_memory,
        peak_h=bytes_to_human(x.peak_memory),
        peak_perc=used * 100 / x.peak_memory,
        overhead=overhead,
        startup=startup,
        dataset=dataset,
        dataset_perc=dataset * 100 / (used - startup) if used > startup else 0,
        system=system,
        system_h=bytes_to_human(system),
        maxmemory=maxmemory,
        maxmemory_h=bytes_to_human(maxmemory),
        policy=config_get_value(s.server, "maxmemory-policy"),
        clients_mem=clients_mem,
    )


def _info_persistence(s: Session) -> str:
    """Redis' fields, then the durable stream's (`DURABILITY_FIELDS` names them)."""
    x = extras(s.server)
    text = _PERSISTENCE.format(
        loading=int(s.server.loading),
        changes=max(s.store.lsn - x.lsn_at_save, 0),
        lastsave=x.lastsave,
        saves=x.saves,
    )
    fields: dict[str, Any] = {}
    if s.server.loading:
        fields.update(s.server.loading_progress)
    dur = s.server.durability
    if dur is not None:
        fields.update(dur.info())
    return text + "".join(f"{k}:{v}\r\n" for k, v in fields.items())


def _info_stats(s: Session) -> str:
    """Instantaneous rates are measured between INFO calls at least 100ms apart."""
    x = extras(s.server)
    st = s.server.stats
    now = time.monotonic()
    dt = now - x.sample_time
    if dt >= 0.1:
        x.ops_per_sec = max(int((st.commands_processed - x.sample_cmds) / dt), 0)
        x.in_kbps = max((st.net_input_bytes - x.sample_in) / dt / 1024, 0.0)
        x.out_kbps = max((st.net_output_bytes - x.sample_out) / dt / 1024, 0.0)
        x.sample_time = now
        x.sample_cmds = st.commands_processed
        x.sample_in = st.net_input_bytes
        x.sample_out = st.net_output_bytes
    return _STATS.format(
        st=st,
        ops=x.ops_per_sec,
        in_kbps=x.in_kbps,
        out_kbps=x.out_kbps,
        channels=len(s.server.channels),
        patterns=len(s.server.patterns),
    )


def _info_replication(s: Session) -> str:
    return _REPLICATION.format(replid=extras(s.server).replid)


def _info_cpu(s: Session) -> str:
    text = _CPU.format(
        me=resource.getrusage(resource.RUSAGE_SELF),
        kids=resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    thread = getattr(resource, "RUSAGE_THREAD", None)
    if thread is not None:
        text += _CPU_THREAD.format(main=resource.getrusage(thread))
    return text


def _info_keyspace(s: Session) -> str:
    return "".join(
        f"db{db.index}:keys={len(db.data)},expires={len(db.expires)},avg_ttl=0\r\n"
        for db in s.store.dbs
        if db.data or db.expires
    )


def _info_temporalstore(s: Session) -> str:
    from store.secrets import redact  # credentials in a URL are never shown

    store = s.store
    versioned = sum(len(db.chains) for db in store.dbs)
    return _TEMPORALSTORE.format(
        store=store,
        cfg=s.server.config,
        versioned=versioned,
        storage=redact(s.server.config.storage),
    )


def _empty(s: Session) -> str:
    return ""


def _safe(name: str) -> str:
    """Redis' getSafeInfoString: no characters that would break the INFO format."""
    return name.translate(_UNSAFE_INFO)


_UNSAFE_INFO = str.maketrans("#:\n\r", "____")


def _info_commandstats(s: Session) -> str:
    """Per-command counters, where the dispatcher keeps them (`ServerState.command_stats`:
    full command name -> registry.CommandStats)."""
    stats: dict[str, Any] = getattr(s.server, "command_stats", None) or {}
    out = []
    for name in sorted(stats):
        st = stats[name]
        if st.calls or st.failed or st.rejected:
            per_call = st.usec / st.calls if st.calls else 0
            out.append(
                f"cmdstat_{_safe(name)}:calls={st.calls},usec={st.usec},"
                f"usec_per_call={per_call:.2f},rejected_calls={st.rejected},"
                f"failed_calls={st.failed}\r\n"
            )
    return "".join(out)


def _info_latencystats(s: Session) -> str:
    """Redis keeps a latency histogram per command; from the dispatcher's counters we can
    only give each command's mean as every percentile."""
    stats: dict[str, Any] = getattr(s.server, "command_stats", None) or {}
    out = []
    for name in sorted(stats):
        st = stats[name]
        if st.calls:
            mean = st.usec / st.calls
            out.append(
                f"latency_percentiles_usec_{_safe(name)}:"
                f"p50={mean:.3f},p99={mean:.3f},p99.9={mean:.3f}\r\n"
            )
    return "".join(out)


def _info_errorstats(s: Session) -> str:
    """Error replies by their first word (`ServerState.error_stats`, where kept)."""
    counts: dict[str, int] = getattr(s.server, "error_stats", None) or {}
    return "".join(f"errorstat_{_safe(k)}:count={counts[k]}\r\n" for k in sorted(counts))


# (header, names that select it, generator), in Redis' order.
_SECTIONS: list[tuple[str, tuple[str, ...], Callable[[Session], str]]] = [
    ("Server", ("server",), _info_server),
    ("Clients", ("clients",), _info_clients),
    ("Memory", ("memory",), _info_memory),
    ("Persistence", ("persistence",), _info_persistence),
    ("Stats", ("stats",), _info_stats),
    ("Replication", ("replication",), _info_replication),
    ("CPU", ("cpu",), _info_cpu),
    ("Modules", ("module_list", "modules"), _empty),
    ("Commandstats", ("commandstats",), _info_commandstats),
    ("Errorstats", ("errorstats",), _info_errorstats),
    ("Latencystats", ("latencystats",), _info_latencystats),
    ("Cluster", ("cluster",), lambda s: "cluster_enabled:0\r\n"),
    ("Keyspace", ("keyspace",), _info_keyspace),
]


def info_text(s: Session, args: list[bytes]) -> str:
    """The INFO report for the sections `args` names (none: the default ones)."""
    every = everything = False
    wanted: set[str] = set() if args else set(DEFAULT_SECTIONS)
    for a in args:
        name = a.decode("utf-8", "replace").lower()
        if name == "default":
            wanted |= DEFAULT_SECTIONS
        elif name == "all":
            every = True
        elif name == "everything":
            every = everything = True
        else:
            wanted.add(name)
    parts = [
        f"# {header}\r\n{gen(s)}"
        for header, names, gen in _SECTIONS
        if every or any(n in wanted for n in names)
    ]
    if everything or "temporalstore" in wanted:
        parts.append(f"# TemporalStore\r\n{_info_temporalstore(s)}")
    return "\r\n".join(parts)


@command("info", -1, LOADING_STALE | Flag.SENTINEL)
def cmd_info(s: Session, argv: list[bytes]) -> Reply:
    return Verbatim(info_text(s, argv[1:]).encode())


# -- CONFIG -------------------------------------------------------------------------------------

container("config", -2)

CONFIG_HELP = [
    "GET <pattern>",
    "    Return parameters matching the glob-like <pattern> and their values.",
    "SET <directive> <value>",
    "    Set the configuration <directive> to <value>.",
    "RESETSTAT",
    "    Reset statistics reported by the INFO command.",
    "REWRITE",
    "    Rewrite the configuration file.",
]
_UNSIGNED = frozenset({"ulonglong", "uint", "size_t"})
_NOTIFY_CLASSES = "g$lshzxetdn"  # in keyspaceEventsFlagsToString order; A = g$lshzxetd
_NOTIFY_ALL = set("g$lshzxetd")


@dataclass(frozen=True)
class ConfigParam:
    name: str  # as the table spells it (an alias entry carries the alias)
    canonical: str  # where the value is kept
    spec: dict[str, Any]

    @property
    def flags(self) -> list[str]:
        return self.spec.get("flags", [])  # type: ignore[no-any-return]


@cache
def _config_table() -> dict[str, ConfigParam]:
    """Every name CONFIG knows (lower case; aliases included) -> its parameter."""
    data = command_data()
    specs: dict[str, dict[str, Any]] = data.get("configs") or {
        name: {"type": "string", "flags": []} for name in data["config_defaults"]
    }
    table: dict[str, ConfigParam] = {}
    for name, spec in specs.items():
        table[name] = ConfigParam(name, name, spec)
        if spec.get("alias"):
            table[spec["alias"]] = ConfigParam(spec["alias"], name, spec)
    return dict(sorted(table.items()))


def _config_values(server: ServerState) -> dict[str, str]:
    """The live values: `Config.params`, filled once with Redis' defaults."""
    params = server.config.params
    x = extras(server)
    if not x.config_ready:
        for name, value in command_data()["config_defaults"].items():
            params.setdefault(name, value)
        x.config_ready = True
    return params


def config_get_value(server: ServerState, name: str) -> str:
    """The current value of a parameter by its canonical name."""
    cfg = server.config
    if name == "port":
        return str(cfg.port)
    if name == "bind":
        return cfg.host
    if name == "databases":
        return str(cfg.databases)
    if name == "requirepass":
        return cfg.requirepass or ""
    if name == "aclfile":
        return cfg.aclfile or ""
    if name == "dir":
        return os.getcwd()
    return _config_values(server).get(name, "")


# A deliberate difference from Redis 7.0, which answers CONFIG GET requirepass with the
# password itself: secrets are never shown (a set one reads as REDACTED, an unset one "").
REDACTED = "<redacted>"
SECRET_PARAMS = frozenset(
    {"requirepass", "masterauth", "tls-key-file-pass", "tls-client-key-file-pass"}
)
# TLS is set up when the server starts: CONFIG SET may not change these (Redis' texts for
# a TLS setting or port it cannot apply).
_SET_AT_START = {
    "tls-port": "Unable to listen on this port. Check server logs.",
    "tls-cert-file": "Unable to update TLS configuration. Check server logs.",
    "tls-key-file": "Unable to update TLS configuration. Check server logs.",
    "tls-ca-cert-file": "Unable to update TLS configuration. Check server logs.",
    "tls-auth-clients": "Unable to update TLS configuration. Check server logs.",
}


def shown_config_value(server: ServerState, name: str) -> str:
    """What CONFIG GET shows: the value, unless it is a secret."""
    value = config_get_value(server, name)
    return REDACTED if value and name in SECRET_PARAMS else value


@command("config|get", -3, ADMIN)
def cmd_config_get(s: Session, argv: list[bytes]) -> Reply:
    table = _config_table()
    out: dict[bytes, bytes] = {}
    seen: set[bytes] = set()  # Redis matches names case-insensitively
    for arg in argv[2:]:
        if not any(c in arg for c in b"[*?"):
            p = table.get(arg.decode("utf-8", "replace").lower())
            if p is not None and arg.lower() not in seen:
                seen.add(arg.lower())
                out[arg] = shown_config_value(s.server, p.canonical).encode()
            continue
        for name, p in table.items():
            key = name.encode()
            if "hidden" not in p.flags and key not in seen and glob_match(arg, key, nocase=True):
                seen.add(key)
                out[key] = shown_config_value(s.server, p.canonical).encode()
    return out


def _numeric(p: ConfigParam, value: str) -> str:
    """Parse and check a numeric parameter as numericConfigSet does; the value CONFIG GET
    will show, or raise ValueError with Redis' message."""
    spec = p.spec
    ll: int | None = None
    if spec.get("memory"):
        u = memtoull(value)
        if u is not None:
            ll = u - 2**64 if u >= 2**63 else u
    if ll is None and spec.get("percent") and len(value) > 1 and value.endswith("%"):
        n = string2ll(value[:-1].encode())
        if n is not None and n >= 0:
            ll = -n
    if ll is None and spec.get("octal"):
        if re.fullmatch(r"\s*[+-]?[0-7]+", value):
            ll = int(value, 8)
    if ll is None and not (spec.get("memory") or spec.get("percent") or spec.get("octal")):
        ll = string2ll(value.encode())
    if ll is None:
        if spec.get("memory") and spec.get("percent"):
            raise ValueError("argument must be a memory or percent value")
        if spec.get("memory"):
            raise ValueError("argument must be a memory value")
        if spec.get("octal"):
            raise ValueError("argument couldn't be parsed as an octal number")
        raise ValueError("argument couldn't be parsed into an integer")
    lo, hi = spec["min"], spec["max"]
    if spec["type"] in _UNSIGNED:
        u = ll % 2**64
        if u > hi % 2**64 or u < lo % 2**64:
            if spec.get("octal"):
                raise ValueError(f"argument must be between {lo:o} and {hi:o} inclusive")
            raise ValueError(f"argument must be between {lo % 2**64} and {hi % 2**64} inclusive")
    elif spec.get("percent") and ll < 0:
        if ll < lo:
            raise ValueError(f"percentage argument must be less or equal to {-lo}")
    elif ll > hi or ll < lo:
        raise ValueError(f"argument must be between {lo} and {hi} inclusive")
    if spec.get("percent") and ll < 0:
        return f"{-ll}%"
    if spec.get("memory"):
        return str(ll % 2**64)
    if spec.get("octal"):
        return f"{ll % 2**64:o}"
    return str(ll)


def _enum(p: ConfigParam, value: str) -> str:
    names: list[str] = p.spec["values"]
    multi = "multi_arg" in p.flags
    words = value.split(" ") if multi else [value]
    chosen = []
    for w in words:
        match = [n for n in names if n.lower() == w.lower()]
        if not match:
            raise ValueError("argument(s) must be one of the following: " + ", ".join(names))
        chosen.append(match[0])
    if not multi:
        return chosen[0]
    picked = {c for c in chosen if c != names[0]}  # the first name is the empty set
    if "save" in picked and "nosave" in picked:
        raise ValueError("shutdown options SAVE and NOSAVE can't be used simultaneously")
    return " ".join(n for n in names if n in picked) or names[0]


def _special(p: ConfigParam, value: str, server: ServerState) -> str:
    name = p.canonical
    if name == "save":
        args = [] if value == "" else value.split(" ")
        if len(args) % 2:
            raise ValueError("Invalid save parameters")
        nums = []
        for j, a in enumerate(args):
            m = re.fullmatch(r"\s*([+-]?\d*)", a)
            n = int(m.group(1)) if m and m.group(1) not in ("", "+", "-") else 0
            if m is None or (j % 2 == 0 and n < 1) or (j % 2 == 1 and n < 0):
                raise ValueError("Invalid save parameters")
            nums.append(str(n))
        return " ".join(nums)
    if name == "notify-keyspace-events":
        classes = set()
        for ch in value:
            if ch == "A":
                classes |= _NOTIFY_ALL
            elif ch in _NOTIFY_CLASSES or ch in "KEm":
                classes.add(ch)
            else:
                raise ValueError("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.")
        text = (
            "A" if classes >= _NOTIFY_ALL else "".join(c for c in _NOTIFY_CLASSES if c in classes)
        )
        return text + "".join(c for c in "KEm" if c in classes)
    if name == "client-output-buffer-limit":
        return merge_output_limits(
            config_get_value(server, name), value.split(" ") if value else []
        )
    if name in ("port", "bind") and value != config_get_value(server, name):
        if name == "port":
            raise ValueError("Unable to listen on this port. Check server logs.")
        raise ValueError("Failed to bind to specified addresses.")
    return value


def config_normalize(server: ServerState, p: ConfigParam, value: str) -> str:
    """The value as CONFIG GET will show it, or ValueError with Redis' reason."""
    shown = _normalize(server, p, value)
    if p.canonical in _SET_AT_START and shown != config_get_value(server, p.canonical):
        log.warning("CONFIG SET %s: TLS settings are fixed when the server starts", p.name)
        raise ValueError(_SET_AT_START[p.canonical])
    return shown


def _normalize(server: ServerState, p: ConfigParam, value: str) -> str:
    kind = p.spec.get("type", "string")
    if kind == "bool":
        if value.lower() not in ("yes", "no"):
            raise ValueError("argument must be 'yes' or 'no'")
        return value.lower()
    if kind == "enum":
        return _enum(p, value)
    if kind == "string":
        return value
    if kind == "special":
        return _special(p, value, server)
    return _numeric(p, value)


def set_at_start(config: Config, name: str, value: str) -> None:
    """A parameter given as a start-up flag, checked and stored as CONFIG SET would
    (ValueError with Redis' reason). Multi-word values split on any whitespace."""
    p = _config_table()[name]
    kind = p.spec.get("type")
    if kind == "special":
        current = config.params.get(name) or command_data()["config_defaults"][name]
        config.params[name] = merge_output_limits(current, value.split())
    else:
        config.params[name] = _enum(p, value) if kind == "enum" else _numeric(p, value)


def _config_store(server: ServerState, name: str, value: str) -> None:
    cfg = server.config
    if name == "requirepass":
        cfg.requirepass = value or None
        server.users.set_default_password(cfg.requirepass)  # as Redis: the default user's
    elif name not in ("port", "bind", "databases", "dir"):
        _config_values(server)[name] = value
    config_changed(server, name, value)


@command("config|set", -4, ADMIN)
def cmd_config_set(s: Session, argv: list[bytes]) -> Reply:
    if len(argv) % 2:
        raise CommandError(SYNTAX)
    table = _config_table()
    chosen: list[tuple[ConfigParam, str]] = []
    seen: set[str] = set()
    error: str | None = None
    for i in range(2, len(argv), 2):
        typed = argv[i].decode("utf-8", "replace")
        p = table.get(typed.lower())
        if p is None:
            error = error or CONFIG_UNKNOWN.format(typed)
            continue
        if error:
            continue
        if "immutable" in p.flags or "protected" in p.flags:
            why = "immutable" if "immutable" in p.flags else "protected"
            error = CONFIG_FAILED.format(typed, f"can't set {why} config")
        elif s.server.loading and "deny_loading" in p.flags:
            error = LOADING
        elif p.name in seen:
            error = CONFIG_FAILED.format(typed, "duplicate parameter")
        seen.add(p.name)
        chosen.append((p, argv[i + 1].decode("utf-8", "surrogateescape")))
    if error:
        raise CommandError(error)
    values = []
    for p, raw in chosen:
        try:
            values.append((p.canonical, config_normalize(s.server, p, raw)))
        except ValueError as e:
            raise CommandError(CONFIG_FAILED.format(p.name, e)) from None
    for name, value in values:
        _config_store(s.server, name, value)
    return OK


@command("config|resetstat", 2, ADMIN)
def cmd_config_resetstat(s: Session, argv: list[bytes]) -> Reply:
    stats = s.server.stats
    for f in dataclasses.fields(Stats):
        setattr(stats, f.name, f.default)
    return OK


@command("config|rewrite", 2, ADMIN)
def cmd_config_rewrite(s: Session, argv: list[bytes]) -> Reply:
    raise CommandError(NO_CONFIG_FILE)


@command("config|help", 2, LOADING_STALE)
def cmd_config_help(s: Session, argv: list[bytes]) -> Reply:
    return help_reply(argv[0], CONFIG_HELP)


# -- COMMAND ------------------------------------------------------------------------------------

DATA_PATH = Path(__file__).with_name("redis_commands.json")

COMMAND_HELP = [
    "(no subcommand)",
    "    Return details about all Redis commands.",
    "COUNT",
    "    Return the total number of commands in this Redis server.",
    "LIST",
    "    Return a list of all commands in this Redis server.",
    "INFO [<command-name> ...]",
    "    Return details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "DOCS [<command-name> ...]",
    "    Return documentation details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "GETKEYS <full-command>",
    "    Return the keys from a full Redis command.",
    "GETKEYSANDFLAGS <full-command>",
    "    Return the keys and the access flags from a full Redis command.",
]

# Our flags as COMMAND INFO names them, in Redis' order (for commands Redis lacks).
_FLAG_NAMES = [
    (Flag.WRITE, "write"),
    (Flag.READONLY, "readonly"),
    (Flag.DENYOOM, "denyoom"),
    (Flag.MODULE, "module"),
    (Flag.ADMIN, "admin"),
    (Flag.PUBSUB, "pubsub"),
    (Flag.NOSCRIPT, "noscript"),
    (Flag.BLOCKING, "blocking"),
    (Flag.LOADING, "loading"),
    (Flag.STALE, "stale"),
    (Flag.SKIP_MONITOR, "skip_monitor"),
    (Flag.SKIP_SLOWLOG, "skip_slowlog"),
    (Flag.FAST, "fast"),
    (Flag.NO_AUTH, "no_auth"),
    (Flag.NO_MANDATORY_KEYS, "no_mandatory_keys"),
    (Flag.NO_ASYNC_LOADING, "no_async_loading"),
    (Flag.NO_MULTI, "no_multi"),
    (Flag.ALLOW_BUSY, "allow_busy"),
]


class OrderedSet(frozenset[Any]):
    """A RESP3 set reply whose members (maps included: they need not be hashable) go on
    the wire in the order given. Only `len` and iteration are meaningful."""

    __slots__ = ("order",)
    order: tuple[Any, ...]

    def __new__(cls, items: Iterable[Any] = ()) -> OrderedSet:
        obj = super().__new__(cls)
        obj.order = tuple(items)
        return obj

    def __len__(self) -> int:
        return len(self.order)

    def __iter__(self) -> Any:
        return iter(self.order)


@cache
def command_data() -> dict[str, Any]:
    """`redis_commands.json`: COMMAND INFO/DOCS of every Redis 7.0 command, configs."""
    with DATA_PATH.open(encoding="utf-8") as f:
        data: dict[str, Any] = json.load(f)
    return data


def to_reply(v: Any) -> Reply:
    """A typed JSON tree (see tools/gen_command_docs.py) as handler reply values."""
    if isinstance(v, str):
        return v.encode()
    if isinstance(v, int) or v is None:
        return v
    if isinstance(v, list):
        return [to_reply(x) for x in v]
    if "+" in v:
        return Simple(v["+"].encode())
    if "~" in v:
        return OrderedSet(to_reply(x) for x in v["~"])
    return {to_reply(k): to_reply(x) for k, x in v["%"]}


def _names(typed_set: Any) -> list[str]:
    return [x["+"] if isinstance(x, dict) else x for x in typed_set["~"]]


def _redis_entry(name: str) -> tuple[list[Any], dict[str, Any]] | None:
    """Redis' typed (info, docs) for a command or `container|sub`, if Redis has it."""
    top, _, sub = name.partition("|")
    entry = command_data()["commands"].get(top)
    if entry is None:
        return None
    if not sub:
        return entry["info"], entry["docs"]
    infos = entry["info"][9]
    docs = dict(entry["docs"]["%"]).get("subcommands")
    info = next((i for i in infos if i[0] == name), None) if isinstance(infos, list) else None
    doc = dict(docs["%"]).get(name) if docs else None
    if info is None or doc is None:
        return None
    return info, doc


def _range_spec(first: int, last: int, step: int) -> dict[str, Any]:
    """A key spec for a command Redis lacks, from our first/last/step (plain form)."""
    lastkey = last - first if last >= 0 else last
    return {
        "flags": [],
        "begin_search": {"type": "index", "spec": {"index": first}},
        "find_keys": {"type": "range", "spec": {"lastkey": lastkey, "keystep": step, "limit": 0}},
    }


def _typed(v: Any) -> Any:
    """The plain form of a key spec as a typed tree (dicts are maps, lists are sets)."""
    if isinstance(v, dict):
        return {"%": [[k, _typed(x)] for k, x in v.items()]}
    if isinstance(v, list):
        return {"~": [{"+": x} for x in v]}
    return v


def _synth_info(cmd: Command) -> list[Any]:
    flags = [{"+": n} for f, n in _FLAG_NAMES if cmd.flags & f]
    cats = [{"+": n} for n in own_categories(cmd)]  # what ACL CAT lists it under
    first, last, step = cmd.first_key, cmd.last_key, cmd.step
    specs = [_typed(_range_spec(first, last, step))] if first else []
    return [cmd.name, cmd.arity, {"~": flags}, first, last, step, {"~": cats}, {"~": []},
            {"~": specs}, {"~": []}]  # fmt: skip


def _synth_docs(cmd: Command) -> dict[str, Any]:
    documented = docs_for(cmd.name)
    if documented is not None:
        return documented
    doc = (cmd.handler.__doc__ or "").strip().splitlines() if cmd.handler else []
    pairs: list[list[Any]] = [["summary", doc[0]]] if doc else []
    group = "generic"
    top = command_data()["commands"].get(cmd.name.partition("|")[0])
    if top is not None:
        group = dict(top["docs"]["%"])["group"]
    pairs.append(["group", group])
    return {"%": pairs}


def typed_entry(cmd: Command) -> tuple[list[Any], dict[str, Any]]:
    """(info, docs) typed trees for one of our commands, subcommands restricted to ours."""
    found = _redis_entry(cmd.name)
    info, docs = found if found is not None else (_synth_info(cmd), _synth_docs(cmd))
    if cmd.subcommands is None:
        return info, docs
    subs = sorted({c.name: c for c in cmd.subcommands.values()}.values(), key=lambda c: c.name)
    entries = [typed_entry(c) for c in subs]
    info = [*info[:9], [e[0] for e in entries] if entries else {"~": []}]
    pairs = [p for p in docs["%"] if p[0] != "subcommands"]
    pairs.append(
        ["subcommands", {"%": [[c.name, e[1]] for c, e in zip(subs, entries, strict=True)]}]
    )
    return info, {"%": pairs}


_REPLY_CACHE: dict[tuple[str, str], Reply] = {}
_CACHE_KEY: list[int] = [-1]


def _table_size() -> int:
    return sum(1 + len(c.subcommands or ()) for c in COMMANDS.values())


def command_reply(cmd: Command, part: str) -> Reply:
    """COMMAND INFO (`part` "info") or DOCS ("docs") of one command, as reply values."""
    size = _table_size()
    if _CACHE_KEY[0] != size:
        _REPLY_CACHE.clear()
        _CACHE_KEY[0] = size
    key = (cmd.name, part)
    r = _REPLY_CACHE.get(key)
    if r is None:
        info, docs = typed_entry(cmd)
        r = _REPLY_CACHE[key] = to_reply(info if part == "info" else docs)
    return r


def top_commands() -> list[Command]:
    seen: dict[str, Command] = {}
    for c in COMMANDS.values():
        seen.setdefault(c.name, c)
    return list(seen.values())


def lookup_by_name(name: bytes) -> Command | None:
    """Redis' lookupCommandBySds: `name` or `container|sub`, any case."""
    parts = name.lower().split(b"|")
    if len(parts) > 2:
        return None
    base = COMMANDS.get(parts[0])
    if base is None or len(parts) == 1:
        return base
    if base.subcommands is None:
        return None
    return base.subcommands.get(parts[1])


def lookup_for_call(argv: list[bytes]) -> Command | None:
    """Redis' lookupCommand: the command a request would run (subcommand included)."""
    base = COMMANDS.get(argv[0].lower())
    if base is None or len(argv) == 1 or base.subcommands is None:
        return base
    return base.subcommands.get(argv[1].lower())


container("command", -1, LOADING_STALE | Flag.SENTINEL)


def cmd_command(s: Session, argv: list[bytes]) -> Reply:
    return [command_reply(c, "info") for c in top_commands()]


COMMANDS[b"command"].handler = cmd_command


@command("command|count", 2, LOADING_STALE | Flag.SENTINEL)
def cmd_command_count(s: Session, argv: list[bytes]) -> Reply:
    return len(top_commands())


@command("command|info", -2, LOADING_STALE | Flag.SENTINEL)
def cmd_command_info(s: Session, argv: list[bytes]) -> Reply:
    if len(argv) == 2:
        return cmd_command(s, argv)
    out = []
    for name in argv[2:]:
        c = lookup_by_name(name)
        out.append(command_reply(c, "info") if c is not None else None)
    return out


@command("command|docs", -2, LOADING_STALE | Flag.SENTINEL)
def cmd_command_docs(s: Session, argv: list[bytes]) -> Reply:
    cmds = top_commands() if len(argv) == 2 else [lookup_by_name(n) for n in argv[2:]]
    pairs = [(c.name.encode(), command_reply(c, "docs")) for c in cmds if c is not None]
    if len({name for name, _ in pairs}) == len(pairs):
        return dict(pairs)
    return PairsMap(pairs)


class PairsMap(dict[bytes, Any]):
    """A map reply that may repeat a key (COMMAND DOCS get get repeats the entry, as
    Redis does); the encoder sees `len` and `items` of the pairs."""

    def __init__(self, pairs: list[tuple[bytes, Any]]) -> None:
        super().__init__(pairs)
        self.pairs = pairs

    def __len__(self) -> int:
        return len(self.pairs)

    def items(self) -> Any:
        return iter(self.pairs)


def _all_commands() -> list[Command]:
    """Every command and subcommand, as COMMAND LIST names them."""
    out = []
    for c in top_commands():
        out.append(c)
        if c.subcommands is not None:
            out.extend({x.name: x for x in c.subcommands.values()}.values())
    return out


@command("command|list", -2, LOADING_STALE | Flag.SENTINEL)
def cmd_command_list(s: Session, argv: list[bytes]) -> Reply:
    kind = arg = b""
    i = 2
    while i < len(argv):
        if argv[i].lower() != b"filterby" or len(argv) - 1 - i != 2:
            raise CommandError(SYNTAX)
        kind, arg = argv[i + 1].lower(), argv[i + 2]
        if kind not in (b"module", b"aclcat", b"pattern"):
            raise CommandError(SYNTAX)
        i += 3
    names = _all_commands()
    if kind == b"module":
        return []  # no modules are loaded
    if kind == b"aclcat":
        cat = "@" + arg.decode("utf-8", "replace").lower()
        return [c.name.encode() for c in names if cat in _names(typed_entry(c)[0][6])]
    if kind == b"pattern":
        return [c.name.encode() for c in names if glob_match(arg, c.name.encode(), nocase=True)]
    return [c.name.encode() for c in names]


@command("command|help", 2, LOADING_STALE | Flag.SENTINEL)
def cmd_command_help(s: Session, argv: list[bytes]) -> Reply:
    return help_reply(argv[0], COMMAND_HELP)


# COMMAND GETKEYS: key specs first, then the command's own key finder (Redis' getkeys_proc).

KeyRef = tuple[int, tuple[str, ...]]  # (argument index, key flags)
_RO_ACCESS = ("RO", "access")
NO_FLAGS: tuple[str, ...] = ()


def _atoi(b: bytes) -> int:
    m = re.match(rb"\s*([+-]?\d+)", b)
    if m is None:
        return 0
    return max(-(2**31), min(int(m.group(1)), 2**31 - 1))


def _generic_keys(store: int, count: int, first: int) -> Callable[[list[bytes]], list[KeyRef]]:
    def keys(argv: list[bytes]) -> list[KeyRef]:
        num = _atoi(argv[count]) if count < len(argv) else 0
        if num < 1 or num > len(argv) - first:
            return []
        out: list[KeyRef] = [(first + i, NO_FLAGS) for i in range(num)]
        if store:
            out.append((store, NO_FLAGS))
        return out

    return keys


def _sort_keys(argv: list[bytes]) -> list[KeyRef]:
    out: list[KeyRef] = [(1, _RO_ACCESS)]
    store = None
    skips = {b"limit": 2, b"get": 1, b"by": 1}
    i = 2
    while i < len(argv):
        arg = argv[i].lower()
        if arg in skips:
            i += skips[arg]
        elif arg == b"store" and i + 1 < len(argv):
            store = i + 1
        i += 1
    if store is not None:
        out.append((store, ("OW", "update")))
    return out


def _migrate_keys(argv: list[bytes]) -> list[KeyRef]:
    first, num = 3, 1
    if len(argv) > 6:
        skips = {b"copy": 0, b"replace": 0, b"auth": 1, b"auth2": 2}
        i = 6
        while i < len(argv):
            arg = argv[i].lower()
            if arg == b"keys":
                if argv[3]:
                    num = 0
                else:
                    first, num = i + 1, len(argv) - i - 1
                break
            i += skips.get(arg, 0) + 1
    return [(first + i, ("RW", "access", "delete")) for i in range(num)]


def _set_keys(argv: list[bytes]) -> list[KeyRef]:
    if any(a.lower() == b"get" for a in argv[3:]):
        return [(1, ("RW", "access", "update"))]
    return [(1, ("OW", "update"))]


def _bitfield_keys(argv: list[bytes]) -> list[KeyRef]:
    readonly = True
    i = 2
    while i < len(argv):
        rem = len(argv) - i - 1
        arg = argv[i].lower()
        if arg == b"get" and rem >= 2:
            i += 3
        elif arg in (b"set", b"incrby") and rem >= 3:
            readonly = False
            break
        elif arg == b"overflow" and rem >= 1:
            i += 2
        else:
            readonly = False
            break
    return [(1, _RO_ACCESS if readonly else ("RW", "access", "update"))]


def _georadius_keys(argv: list[bytes]) -> list[KeyRef]:
    stored = None
    i = 5
    while i < len(argv):
        if argv[i].lower() in (b"store", b"storedist") and i + 1 < len(argv):
            stored = i + 1
            i += 1
        i += 1
    return [(1, NO_FLAGS)] + ([(stored, NO_FLAGS)] if stored is not None else [])


def _xread_keys(argv: list[bytes]) -> list[KeyRef]:
    pos = -1
    i = 1
    while i < len(argv):
        arg = argv[i].lower()
        if arg in (b"block", b"count"):
            i += 1
        elif arg == b"group":
            i += 2
        elif arg == b"streams":
            pos = i
            break
        elif arg != b"noack":
            break
        i += 1
    num = len(argv) - pos - 1 if pos != -1 else 0
    if pos == -1 or num == 0 or num % 2:
        return []
    return [(j, NO_FLAGS) for j in range(pos + 1, len(argv) - num // 2)]


GETKEYS_PROCS: dict[str, Callable[[list[bytes]], list[KeyRef]]] = {
    "sort": _sort_keys,
    "sort_ro": lambda argv: [(1, _RO_ACCESS)],
    "migrate": _migrate_keys,
    "set": _set_keys,
    "bitfield": _bitfield_keys,
    "georadius": _georadius_keys,
    "georadiusbymember": _georadius_keys,
    "xread": _xread_keys,
    "xreadgroup": _xread_keys,
    "sintercard": _generic_keys(0, 1, 2),
    "zunion": _generic_keys(0, 1, 2),
    "zinter": _generic_keys(0, 1, 2),
    "zdiff": _generic_keys(0, 1, 2),
    "zintercard": _generic_keys(0, 1, 2),
    "zunionstore": _generic_keys(1, 2, 3),
    "zinterstore": _generic_keys(1, 2, 3),
    "zdiffstore": _generic_keys(1, 2, 3),
    "eval": _generic_keys(0, 2, 3),
    "eval_ro": _generic_keys(0, 2, 3),
    "evalsha": _generic_keys(0, 2, 3),
    "evalsha_ro": _generic_keys(0, 2, 3),
    "fcall": _generic_keys(0, 2, 3),
    "fcall_ro": _generic_keys(0, 2, 3),
    "lmpop": _generic_keys(0, 1, 2),
    "zmpop": _generic_keys(0, 1, 2),
    "blmpop": _generic_keys(0, 2, 3),
    "bzmpop": _generic_keys(0, 2, 3),
}


def _spec_keys(specs: list[dict[str, Any]], argv: list[bytes]) -> list[KeyRef] | None:
    """Redis' getKeysUsingKeySpecs; None where a spec cannot say (fall back to the proc)."""
    argc = len(argv)
    out: list[KeyRef] = []
    for spec in specs:
        flags = tuple(spec["flags"])
        if "not_key" in flags:
            continue
        bs, fk = spec["begin_search"], spec["find_keys"]
        first = 0
        if bs["type"] == "index":
            first = bs["spec"]["index"]
        elif bs["type"] == "keyword":
            word, start = bs["spec"]["keyword"].lower().encode(), bs["spec"]["startfrom"]
            i = start if start > 0 else argc + start
            end = argc - 1 if start > 0 else 1
            step = 1 if i <= end else -1
            while i != end and 1 <= i < argc:
                if argv[i].lower() == word:
                    first = i + 1
                    break
                i += step
            if not first:
                continue
        else:
            return None
        if fk["type"] == "range":
            step = fk["spec"]["keystep"]
            lastkey, limit = fk["spec"]["lastkey"], fk["spec"]["limit"]
            if lastkey >= 0:
                last = first + lastkey
            elif not limit:
                last = argc + lastkey
            else:
                last = first + ((argc - first) // limit + lastkey)
        elif fk["type"] == "keynum":
            step = fk["spec"]["keystep"]
            idx = fk["spec"]["keynumidx"]
            if idx >= argc or first + idx >= argc:
                return None
            numkeys = string2ll(argv[first + idx])
            if numkeys is None or numkeys < 0:
                return None
            first += fk["spec"]["firstkey"]
            last = first + numkeys - 1
        else:
            return None
        if last >= argc or last < first or first >= argc:
            return None
        out.extend((i, flags) for i in range(first, last + 1, step))
        if "incomplete" in flags:
            return None
    return out


def _plain(v: Any) -> Any:
    """A typed tree as plain JSON-ish values (sets as lists, maps as dicts)."""
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        if "+" in v:
            return v["+"]
        if "~" in v:
            return [_plain(x) for x in v["~"]]
        return {k: _plain(x) for k, x in v["%"]}
    return v


@cache
def _key_specs(name: str, arity: int, first: int, last: int, step: int) -> list[dict[str, Any]]:
    found = _redis_entry(name)
    if found is not None:
        return _plain(found[0][8])  # type: ignore[no-any-return]
    return [_range_spec(first, last, step)] if first else []


def get_keys(argv: list[bytes]) -> list[KeyRef]:
    """The keys of a full command line, with their flags, or CommandError as Redis words it."""
    cmd = lookup_for_call(argv)
    if cmd is None:
        raise CommandError(INVALID_COMMAND)
    specs = _key_specs(cmd.name, cmd.arity, cmd.first_key, cmd.last_key, cmd.step)
    proc = GETKEYS_PROCS.get(cmd.name)
    has_keyspec = any("not_key" not in sp["flags"] for sp in specs)
    if proc is None and not has_keyspec:
        raise CommandError(NO_KEY_ARGS)
    n = len(argv)
    if (cmd.arity > 0 and cmd.arity != n) or n < -cmd.arity:
        raise CommandError(INVALID_NARGS)
    keys: list[KeyRef] | None = None
    if has_keyspec and not any("variable_flags" in sp["flags"] for sp in specs):
        keys = _spec_keys(specs, argv)
    if keys is None:
        keys = proc(argv) if proc is not None else []
    if not keys:
        found = _redis_entry(cmd.name)
        flags = _names(found[0][2]) if found else []
        if "no_mandatory_keys" in flags or cmd.flags & Flag.NO_MANDATORY_KEYS:
            return []
        raise CommandError(INVALID_ARGS)
    return keys


_KEY_FLAG_ORDER = ["RO", "RW", "OW", "RM", "access", "update", "insert", "delete", "not_key",
                   "incomplete", "variable_flags"]  # fmt: skip


@command("command|getkeys", -4, LOADING_STALE | Flag.SENTINEL)
def cmd_command_getkeys(s: Session, argv: list[bytes]) -> Reply:
    return [argv[2 + i] for i, _ in get_keys(argv[2:])]


@command("command|getkeysandflags", -4, LOADING_STALE | Flag.SENTINEL)
def cmd_command_getkeysandflags(s: Session, argv: list[bytes]) -> Reply:
    out = []
    for i, flags in get_keys(argv[2:]):
        names = [f for f in _KEY_FLAG_ORDER if f in flags]
        out.append([argv[2 + i], OrderedSet(Simple(f.encode()) for f in names)])
    return out
