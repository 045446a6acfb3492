"""INFO [section [section ...]], as Redis 7.0.15 answers it.

Redis' sections in Redis' order and layout (`# Name` headers, `field:value` lines, CRLF,
one blank line between sections); `default`, `all`, `everything`, names are
case-insensitive. Our own `# TemporalStore` section (lsn, history policy, storage) and
`# History` section (memory held by versions, seals, branches and views) come last,
and only for `INFO temporalstore` / `INFO history` or `INFO everything`, the way
Redis shows module sections: `INFO`, `INFO default` and `INFO all` keep Redis'
structure. What we cannot measure is reported as a default Redis server would.
"""

from __future__ import annotations

import os
import platform
import resource
import sys
import time
from collections.abc import Callable
from functools import cache
from typing import Any

from commands.config_table import config_get_value
from commands.evict import dataset_bytes, held_history_bytes
from commands.limits import CLIENT_MEMORY, STARTUP_RSS, rss_bytes
from commands.lua_state import memory as scripting_memory
from commands.maxmemory import used_memory
from commands.migrate_cache import cached_sockets
from commands.ops_state import format_percentile, hist_percentile
from commands.redis_table import REDIS_VERSION
from commands.registry import LOADING_STALE, Flag, command
from commands.replies import Reply, Verbatim
from commands.session import ServerCore, Session
from store import native
from store.coldhistory import hot_bytes
from store.secrets import redact  # credentials in a URL are never shown

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
tracking_clients:{tracking_clients}
clients_in_timeout_table:{blocked}
""")
_MEMORY = _template("""
used_memory:{used}
used_memory_human:{used_h}
used_memory_rss:{rss}
used_memory_rss_human:{rss_h}
used_memory_peak:{peak}
used_memory_peak_human:{peak_h}
used_memory_peak_perc:{peak_perc:.2f}%
used_memory_overhead:{overhead}
used_memory_startup:{startup}
used_memory_dataset:{dataset}
used_memory_dataset_perc:{dataset_perc:.2f}%
allocator_allocated:{used}
allocator_active:{used}
allocator_resident:{rss}
total_system_memory:{system}
total_system_memory_human:{system_h}
used_memory_lua:{lua}
used_memory_vm_eval:{lua}
used_memory_lua_human:{lua_h}
used_memory_scripts_eval:{scripts_eval}
number_of_cached_scripts:{cached_scripts}
number_of_functions:{functions}
number_of_libraries:{libraries}
used_memory_vm_functions:{vm_functions}
used_memory_vm_total:{vm_total}
used_memory_vm_total_human:{vm_total_h}
used_memory_functions:{functions_mem}
used_memory_scripts:{scripts_mem}
used_memory_scripts_human:{scripts_mem_h}
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
aof_rewrite_in_progress:{aof_in_progress}
aof_rewrite_scheduled:{aof_scheduled}
aof_last_rewrite_time_sec:{aof_last_time}
aof_current_rewrite_time_sec:{aof_current_time}
aof_last_bgrewrite_status:{aof_status}
aof_rewrites:{aof_rewrites}
aof_rewrites_consecutive_failures:{aof_failures}
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
sync_full:{sync_full}
sync_partial_ok:0
sync_partial_err:{sync_partial_err}
expired_keys:{st.expired_keys}
expired_stale_perc:0.00
expired_time_cap_reached_count:0
expire_cycle_cpu_milliseconds:0
evicted_keys:{st.evicted_keys}
evicted_clients:0
total_eviction_exceeded_time:{evict_total}
current_eviction_exceeded_time:{evict_current}
keyspace_hits:{st.keyspace_hits}
keyspace_misses:{st.keyspace_misses}
pubsub_channels:{channels}
pubsub_patterns:{patterns}
pubsubshard_channels:0
latest_fork_usec:0
total_forks:0
migrate_cached_sockets:{migrate_sockets}
slave_expires_tracked_keys:0
active_defrag_hits:0
active_defrag_misses:0
active_defrag_key_hits:0
active_defrag_key_misses:0
total_active_defrag_time:0
current_active_defrag_time:0
tracking_total_keys:{tracking_keys}
tracking_total_items:{tracking_items}
tracking_total_prefixes:{tracking_prefixes}
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
# After the role's fields (commands.replstate): offsets are LSNs.
_REPLICATION = _template("""
master_failover_state:no-failover
master_replid:{replid}
master_replid2:0000000000000000000000000000000000000000
master_repl_offset:{lsn}
second_repl_offset:-1
repl_backlog_active:{backlog}
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
role:{role}
applied_lsn:{store.lsn}
replica_lag_ms:{lag}
compiled:{compiled[0]}/{compiled[1]}
compiled_build:{build}
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
        # As Redis: replicas of the Redis protocol are not counted (INFO replication is).
        clients=sum(1 for c in clients.values() if not c.redis_replica),
        maxclients=config_get_value(s.server, "maxclients"),
        blocked=sum(1 for c in clients.values() if c.blocked),
        tracking_clients=0 if s.server.tracking is None else s.server.tracking.clients,
    )


def _info_memory(s: Session) -> str:
    """used_memory is commands.evict's figure (what maxmemory is compared with);
    used_memory_rss the process' resident set."""
    server = s.server
    used = used_memory(server)
    rss = rss_bytes()
    server.peak_memory = peak = max(server.peak_memory, used)
    startup = STARTUP_RSS
    clients_mem = len(s.server.clients) * CLIENT_MEMORY
    overhead = startup + clients_mem + held_history_bytes(server)
    dataset = dataset_bytes(server)
    maxmemory = int(config_get_value(s.server, "maxmemory"))
    system = _system_memory()
    lua = scripting_memory(server)
    return _MEMORY.format(
        lua=lua.vm_eval,
        lua_h=bytes_to_human(lua.vm_eval),
        scripts_eval=lua.scripts_eval,
        cached_scripts=lua.cached_scripts,
        functions=lua.functions,
        libraries=lua.libraries,
        vm_functions=lua.vm_functions,
        vm_total=lua.vm_eval + lua.vm_functions,
        vm_total_h=bytes_to_human(lua.vm_eval + lua.vm_functions),
        functions_mem=lua.functions_mem,
        scripts_mem=lua.scripts_eval + lua.functions_mem,
        scripts_mem_h=bytes_to_human(lua.scripts_eval + lua.functions_mem),
        used=used,
        used_h=bytes_to_human(used),
        rss=rss,
        rss_h=bytes_to_human(rss),
        peak=peak,
        peak_h=bytes_to_human(peak),
        peak_perc=used * 100 / peak,
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
    saved = s.server.save_stats
    text = _PERSISTENCE.format(
        loading=int(s.server.loading),
        changes=max(s.store.lsn - saved.lsn_at_save, 0),
        lastsave=saved.lastsave,
        saves=saved.saves,
        aof_in_progress=int(bool(saved.aof_rewrite_since)),
        aof_scheduled=int(saved.aof_rewrite_scheduled),
        aof_last_time=saved.aof_last_time_s,
        aof_current_time=(
            int(time.monotonic() - saved.aof_rewrite_since) if saved.aof_rewrite_since else -1
        ),
        aof_status=saved.aof_last_status,
        aof_rewrites=saved.aof_rewrites,
        aof_failures=saved.aof_failures,
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
    x = s.server.rates
    st = s.server.stats
    sync_expired(s.server)
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
    tr = s.server.tracking
    since = st.eviction_exceeded_since
    current = int((time.monotonic() - since) * 1000) if since else 0
    return _STATS.format(
        st=st,
        evict_total=st.eviction_exceeded_ms + current,
        evict_current=current,
        ops=x.ops_per_sec,
        in_kbps=x.in_kbps,
        out_kbps=x.out_kbps,
        channels=len(s.server.channels),
        patterns=len(s.server.patterns),
        tracking_keys=0 if tr is None else len(tr.table),
        tracking_items=0 if tr is None else tr.items,
        tracking_prefixes=0 if tr is None else len(tr.prefixes),
        migrate_sockets=cached_sockets(s.server),
        sync_full=s.server.sync_full,
        sync_partial_err=s.server.sync_partial_err,
    )


def _info_replication(s: Session) -> str:
    """Offsets are LSNs (our replicas' offsets) until a replica of the Redis protocol
    has attached; from then on the byte offset of that stream (commands.redis_repl)."""
    server = s.server
    stream = server.repl_stream
    clients = server.clients
    redis_replicas = [
        (r.ip, r.port, r.acked, r.last_ack)
        for cid, r in (stream.replicas.items() if stream is not None else ())
        if cid in clients
    ]
    offset = server.redis_repl.offset
    return server.replication.info(s.store.lsn, redis_replicas) + _REPLICATION.format(
        replid=server.replid,
        lsn=offset if offset else s.store.lsn,
        backlog=int(bool(server.replication.links) or stream is not None),
    )


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
    store = s.store
    versioned = sum(len(db.chains) for db in store.dbs)
    return _TEMPORALSTORE.format(
        store=store,
        cfg=s.server.config,
        versioned=versioned,
        storage=redact(s.server.config.storage),
        role=s.server.replication.role,
        lag=s.server.replication.lag_ms(),
        compiled=native.loaded(),
        build=native.STATE,
    )


def _info_history(s: Session) -> str:
    """What history holds in memory (estimates kept as it changes: store.accounting),
    in O(snapshots + views + keys that branches changed)."""
    store = s.store
    store.settle_trims()
    mem = store.mem
    spill = store.spill
    branch_bytes = sum(c[0] for c in mem.branches.values()) + store.branch_data_bytes()
    branch_versions = sum(c[1] for c in mem.branches.values())
    views, views_bytes = store.views_memory()
    cap = int(config_get_value(s.server, "max-pinned-history"))
    fields = [
        ("history_versions", mem.main_versions),
        ("history_bytes", mem.main_bytes),
        ("history_pinned_versions", mem.pinned_versions),
        ("history_pinned_bytes", mem.pinned_bytes),
        ("snapshots", len(store.snapshots)),
        ("branches", len(store.branches)),
        ("history_branches_versions", branch_versions),
        ("history_branches_bytes", branch_bytes),
        ("views", views),
        ("history_views_bytes", views_bytes),
        ("history_total_bytes", mem.main_bytes + branch_bytes + views_bytes),
        ("max_pinned_history", cap),
        # Out of memory, in the spill file (store.coldhistory): included above.
        ("history_memory", int(config_get_value(s.server, "history-memory"))),
        # What of history_bytes counts against it: all but the cold entries and the
        # packed creations (one int each, nothing to move).
        ("history_hot_bytes", hot_bytes(store)),
        ("history_cold_versions", mem.cold_versions),
        ("history_cold_bytes", mem.cold_bytes),
        ("history_hot_memory", int(config_get_value(s.server, "history-hot-memory"))),
        # Where the cold entries are: compressed runs in memory (frozen, with
        # history-memory 0) or in the spill file.
        (
            "history_frozen_bytes",
            spill.held() if spill is not None and spill.kind == "memory" else 0,
        ),
        (
            "history_spill_file_bytes",
            spill.held() if spill is not None and spill.kind == "file" else 0,
        ),
    ]
    out = []
    for name, value in fields:
        out.append(f"{name}:{value}\r\n")
        if name.endswith("_bytes") or name in (
            "max_pinned_history",
            "history_memory",
            "history_hot_memory",
        ):
            out.append(f"{name}_human:{bytes_to_human(value)}\r\n")
    return "".join(out)


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
    """Percentiles (latency-tracking-info-percentiles) of each command's latency
    histogram (kept by the dispatcher while latency-tracking is yes), in µs; nothing
    while latency-tracking is no, as Redis."""
    if not s.server.latency_tracking:
        return ""
    stats: dict[str, Any] = getattr(s.server, "command_stats", None) or {}
    wanted = s.server.ops.percentiles
    out = []
    for name in sorted(stats):
        hist = stats[name].hist
        if any(hist):
            parts = ",".join(
                f"p{format_percentile(p)}={hist_percentile(hist, p) / 1000:.3f}" for p in wanted
            )
            out.append(f"latency_percentiles_usec_{_safe(name)}:{parts}\r\n")
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
    ("Cluster", ("cluster",), lambda s: f"cluster_enabled:{int(s.server.cluster is not None)}\r\n"),
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
    if everything or "history" in wanted:
        parts.append(f"# History\r\n{_info_history(s)}")
    return "\r\n".join(parts)


@command("info", -1, LOADING_STALE | Flag.SENTINEL)
def cmd_info(s: Session, argv: list[bytes]) -> Reply:
    return Verbatim(info_text(s, argv[1:]).encode())


def sync_expired(server: ServerCore) -> None:
    """INFO expired_keys: every key the store deleted by expiry (lazily or by the cron;
    none while a CLIENT PAUSE holds expiry), counted since the last CONFIG RESETSTAT."""
    n = server.store.expired_keys
    server.stats.expired_keys += n - server.expired_seen
    server.expired_seen = n
