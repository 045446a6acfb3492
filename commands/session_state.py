"""The state every command is handed: `Session` (one client connection's state),
`ServerCore` (the server-wide state: every field of it, the ones the dispatcher and
the connection's loop test on every command first), `Stats` and SCAN's
`ScanSnapshot` (kept per database by the server). A compiled module
(tools/compiled.py): compiled callers read these attributes directly instead of
looking them up in an instance dict.

The bottom of the commands core's state: the modules these fields' types come from
(the limits, the replication state, the ACL users, SLOWLOG's and LATENCY's state, the
parts in `commands.server_parts`) name neither class, and those that do (the
notifications, the tracking table, ...) are above it. `Session.server` is a
`ServerCore`; `commands.session.ServerState` derives from it and fills its fields from
the store and the config (it stays a Python class: it keys weak references), and
re-exports `Session`, `ServerCore` and `Stats`.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from mypy_extensions import mypyc_attr

from commands.querybuf import QueryBuffer
from commands.registry import CommandStats
from store import Database, Store, Writer
from store.slots import ClusterView
from store.views import KeyTimes

if TYPE_CHECKING:
    from commands.limits import Limits
    from commands.ops_state import OpsState
    from commands.registry import Command
    from commands.replies import Reply
    from commands.replstate import ReplicationState, ReplStream
    from commands.server_parts import (
        ClientTracking,
        ClusterSnapshots,
        Config,
        DebugSettings,
        Durability,
        Faults,
        Rates,
        SaveStats,
    )
    from commands.users import Users


@dataclass
class Stats:
    connections_received: int = 0
    commands_processed: int = 0
    rejected_connections: int = 0
    keyspace_hits: int = 0
    keyspace_misses: int = 0
    expired_keys: int = 0
    evicted_keys: int = 0
    # INFO total/current_eviction_exceeded_time: ms past maxmemory before the current
    # spell, and when (monotonic) the current one began (0.0: under it).
    eviction_exceeded_ms: int = 0
    eviction_exceeded_since: float = 0.0
    net_input_bytes: int = 0
    net_output_bytes: int = 0
    error_replies: int = 0
    pubsub_messages: int = 0


class TrackingTable(Protocol):
    """What the core calls of client-side caching's table (`commands.invalidation.
    Tracking`, a Python class above this module: it holds sessions and calls the
    notifications), and INFO reads of it."""

    @property
    def table(self) -> Mapping[bytes, Mapping[int, None]]: ...

    @property
    def prefixes(self) -> Mapping[bytes, object]: ...

    @property
    def items(self) -> int: ...

    @property
    def clients(self) -> int: ...

    def after_call(
        self, s: Session, cmd: Command, argv: list[bytes], savepoint: int, reply: Reply
    ) -> Reply: ...

    def disable(self, s: Session) -> None: ...

    def flushed(self, current: Session | None) -> None: ...

    def sliced_writes(self, s: Session, applied: list[Any]) -> None: ...

    def replayed(self, entries: list[Any]) -> None: ...

    def expired(self, key: bytes) -> None: ...

    def removed(self, key: bytes) -> None: ...


@mypyc_attr(allow_interpreted_subclasses=True)
class ServerCore:
    """The server-wide state (see the module doc): the fields set here are the ones the
    dispatcher reads per command; `commands.session.ServerState` sets the others, and
    says what each holds."""

    store: Store
    config: Config
    started: float
    clients: dict[int, Session]
    next_client_id: itertools.count[int]
    channels: dict[bytes, dict[int, Session]]
    patterns: dict[bytes, dict[int, Session]]
    shutdown_requested: Callable[[], None]
    listen_port: Callable[[int], None] | None
    loading_progress: dict[str, Any]
    faults: Faults | None
    cluster_snapshots: ClusterSnapshots | None
    # The limits in force (commands.limits) and the replication state
    # (commands.replstate), both read by the dispatcher per command.
    limits: Limits
    replication: ReplicationState
    redis_repl: ReplStream
    sync_full: int
    sync_partial_err: int
    write_wait_s: float
    users: Users
    run_id: str
    replid: str
    save_stats: SaveStats
    debug: DebugSettings
    rates: Rates
    peak_memory: int
    config_defaults_loaded: bool
    scan_snapshots: dict[Database, ScanSnapshot]
    set_scan_orders: dict[int, tuple[set[bytes], int, list[int], list[bytes]]]
    ops: OpsState
    expired_seen: int

    def __init__(self) -> None:
        self.stats = Stats()
        self.loading = False
        self.durability: Durability | None = None
        # Why writes are refused now (a replica's READONLY), or "" when they are not.
        self.read_only = ""
        # A group's leader refuses writes from this time.monotonic() on (0: no limit).
        self.write_deadline = 0.0
        # Why this writer is fenced (another took over its storage; the durability
        # object's `fenced`, kept here by proxy.replication when it is set), else "":
        # the dispatcher's test before each write, without an attribute lookup on the
        # Python durability object.
        self.fenced = ""
        # min-replicas-to-write as CONFIG SET left it in `replication` (copied by
        # commands.config_table): 0, the dispatcher asks nothing more of a write.
        self.min_replicas = 0
        # The -BUSY error while a script runs past busy-reply-threshold (commands.scripting),
        # else empty: the dispatcher refuses all but allow-busy commands meanwhile.
        self.busy_script = b""
        # Whether the used memory was past maxmemory with nothing left to evict before
        # the last command (commands.evict; Redis' pre_command_oom_state, which scripts read).
        self.over_maxmemory = False
        # The replication stream to Redis replicas while one is attached, else None (the
        # dispatcher's one test per command; ServerState.redis_repl keeps the offset).
        self.repl_stream: ReplStream | None = None
        # INFO commandstats/latencystats (full command name -> counters) and errorstats
        # (error replies by their first word), kept by the dispatcher.
        self.command_stats: dict[str, CommandStats] = {}
        self.error_stats: dict[str, int] = {}
        # The last command the dispatcher counted and its counters (an entry of
        # `command_stats`, which never drops one: CONFIG RESETSTAT zeroes them in place):
        # a pipeline of one command finds them without a dict lookup.
        self.stats_cmd: Any = None
        self.stats_of_cmd: Any = None
        # Keyspace notification classes in force (commands.notify); 0: none, and the
        # dispatcher's one test per command skips the rest.
        self.notify_flags = 0
        # Client-side caching (commands.tracking): None until a client turns tracking
        # on, and again once nothing is tracked; the dispatcher tests it per command.
        self.tracking: TrackingTable | None = None
        # SLOWLOG, LATENCY, MONITOR and CLIENT PAUSE (commands.ops_state), as the
        # dispatcher reads them per command: the end of the command before
        # (perf_counter_ns), the shortest duration anything records (ServerState sets it
        # from the config), whether latency histograms are kept, the MONITOR clients, and
        # the check a pause or a monitor adds (None: none).
        self.clock_mark = time.perf_counter_ns()
        self.slow_ns = 0
        self.latency_tracking = True
        self.monitors: dict[int, Session] = {}
        self.gate: Callable[[Session, Any, list[bytes]], Any] | None = None
        # Cluster mode's slot map and this node in it (store.slots.ClusterView, which
        # proxy.cluster_node keeps current), else None: the dispatcher's one test per
        # command (commands.cluster_mode routes by it).
        self.cluster: ClusterView | None = None

    def uptime(self) -> int:
        return int(time.time() - self.started)


class Session(Writer):
    """One client connection's view: selected database, protocol, name, MULTI
    queue, subscriptions, and the metadata attached to its writes (`Writer`'s fields)."""

    def __init__(
        self,
        server: ServerCore,
        addr: str = "",
        laddr: str = "",
        push: Callable[[Reply], None] | None = None,
        close: Callable[[], None] | None = None,
    ) -> None:
        super().__init__()
        self.server = server
        self.store = server.store
        self.id = next(server.next_client_id)
        self.addr = addr
        self.laddr = laddr
        self.push: Callable[[Reply], None] = push or (lambda r: None)
        self.close: Callable[[], None] = close or (lambda: None)
        # Bytes written to this connection and not yet taken by the socket.
        self.output_size: Callable[[], int] = lambda: 0
        self.repl_port = 0  # REPLCONF listening-port (a replica's link)
        self.repl_ip = ""  # REPLCONF ip-address
        self.redis_replica = False  # SYNC/PSYNC made it a Redis replica (commands.redis_repl)
        # The replies of this read's earlier commands, not yet written (the connection's
        # batch loop sets it once per batch): SYNC and PSYNC refuse to run behind them.
        self.batch_out: list[bytes] = []
        self.repl_woff = 0  # the Redis replication offset after its last propagated write
        self.resp = 2
        self.dbi = 0
        self.db: Database = self.store.dbs[0]
        self.name: bytes | None = None
        self.lib_name: bytes | None = None
        self.lib_ver: bytes | None = None
        self.authenticated = server.users.default.login_free
        self.user = b"default"
        # The user may run anything: the dispatcher's ACL check is skipped (commands.acl).
        self.acl_all = server.users.default.unrestricted
        self.multi: list[tuple[Any, list[bytes]]] | None = None
        self.multi_error = False
        self.in_exec = False
        self.watched: dict[tuple[int, bytes], Callable[[int, bytes], None]] = {}
        self.watch_dirty = False
        self.channels: set[bytes] = set()
        self.patterns: set[bytes] = set()
        self.tracking: ClientTracking | None = None  # CLIENT TRACKING ON (commands.tracking)
        self.cluster_readonly = False  # READONLY: a replica in cluster mode serves reads
        self.view_lsn: int | None = None  # TS.CHECKOUT AT: reads answer as of this LSN
        # ... and in cluster mode each key as of its time (store.views.KeyTimes)
        self.view_times: KeyTimes | None = None
        self.branch: bytes | None = None  # TS.CHECKOUT <branch>: reads and writes go there
        self.created = time.time()
        self.last_interaction = self.created
        self.qbuf = QueryBuffer()  # CLIENT LIST's qbuf, qbuf-free (commands.querybuf)
        self.last_cmd = b"NULL"
        self.last_cmd_name = "NULL"  # full name ("client|list") of the last command run
        self.blocked = False
        self.killed = False
        self.extra: dict[str, Any] = {}
        self.monitor = False  # MONITOR: every command's line is pushed to it
        self.reply_mode = 0  # CLIENT REPLY: 0 ON, else commands.ops_state.REPLY_*
        # CLIENT UNBLOCK: end this client's blocking command (True: it was blocked),
        # with an error (True) or its timeout reply (False). Set by the connection.
        self.unblock: Callable[[bool], bool] = lambda error: False

    def select(self, dbi: int) -> None:
        """Switch database (under a checkout, to its view: that raises PrunedError,
        changing nothing, where the database's history there is no longer retained)."""
        if self.branch is not None:
            db: Database = self.store.branches[self.branch].dbs[dbi]
        elif self.view_lsn is None:
            db = self.store.dbs[dbi]
        else:
            db = self.store.view(dbi, self.view_lsn, self.view_times)
        self.dbi = dbi
        self.db = db

    @property
    def subscriptions(self) -> int:
        return len(self.channels) + len(self.patterns)


class ScanSnapshot:
    """A database's keys sorted by hash, as of a write mark (LSN, pending ops)."""

    __slots__ = ("data", "keys", "mark")

    def __init__(self, db: Database, mark: tuple[int, int]) -> None:
        self.data = db.data
        self.mark = mark
        self.keys = sorted(db.data, key=hash)
