"""Per-connection command state (`Session`) and server-wide state (`ServerState`).

The proxy creates one `Session` per connection and gives it the callbacks it
needs to reach the wire (push a message, close); handlers get the session and
reach the store, the server state and the clock through it.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from commands.limits import Limits
from commands.registry import CommandStats
from commands.users import Users
from store import Database, Store, WriteMeta

if TYPE_CHECKING:
    from commands.replies import Reply


@dataclass
class Config:
    """Settings the server was started with; CONFIG GET/SET reads and changes them."""

    host: str = "127.0.0.1"
    port: int = 6379
    storage: str = "file://./data"
    s3_endpoint_url: str | None = None
    flush_interval_ms: int = 100
    requirepass: str | None = None
    databases: int = 16
    log_level: str = "info"
    history: str = "versions:64"
    durability: str = "async"
    segment_max_bytes: int = 8 * 1024 * 1024
    max_unflushed_bytes: int = 256 * 1024 * 1024
    checkpoint_every_records: int = 1_000_000
    checkpoint_every_seconds: int = 300
    keep_checkpoints: int = 2
    write_wait_ms: int = 5000
    fault_injection: bool = False
    aclfile: str | None = None  # ACL users loaded at start (ACL LOAD / ACL SAVE)
    # Redis parameters clients commonly read; settable where meaningful.
    params: dict[str, str] = field(
        default_factory=lambda: {
            "maxmemory": "0",
            "maxmemory-policy": "noeviction",
            "timeout": "0",
            "maxclients": "10000",
            "appendonly": "no",
            "save": "",
            "hash-max-listpack-entries": "512",
            "hash-max-listpack-value": "64",
            "hash-max-ziplist-entries": "512",
            "hash-max-ziplist-value": "64",
            "set-max-intset-entries": "512",
            "zset-max-listpack-entries": "128",
            "zset-max-listpack-value": "64",
            "zset-max-ziplist-entries": "128",
            "zset-max-ziplist-value": "64",
            "list-max-listpack-size": "-2",
            "list-max-ziplist-size": "-2",
            "proto-max-bulk-len": "536870912",
            "client-query-buffer-limit": "1073741824",
            "notify-keyspace-events": "",
            "slowlog-log-slower-than": "10000",
            "slowlog-max-len": "128",
            "lua-time-limit": "5000",
            "busy-reply-threshold": "5000",
            "tcp-keepalive": "300",
            "loglevel": "notice",
            "protected-mode": "yes",
        }
    )


class Durability(Protocol):
    """What commands see of the durable stream (implemented in `replay.startup`)."""

    @property
    def durable_lsn(self) -> int: ...

    @property
    def fenced(self) -> str | None: ...

    @property
    def sync(self) -> bool: ...

    async def wait_durable(self, lsn: int, timeout: float | None = None) -> bool: ...

    def over_capacity(self) -> bool: ...

    async def wait_capacity(self, timeout: float) -> bool: ...

    def last_error(self) -> str: ...

    def info(self) -> dict[str, Any]: ...

    async def read_as_of(self, dbi: int, key: bytes, lsn: int) -> tuple[Any, int | None]: ...

    async def checkpoint(self) -> int: ...

    def checkpoint_soon(self) -> None: ...


class Faults(Protocol):
    """The fault-injecting object store's knobs (`flusher.objectstore.FaultyObjectStore`)."""

    outage: bool
    latency: float
    error_rate: float
    fail_after_put: int


@dataclass
class Stats:
    connections_received: int = 0
    commands_processed: int = 0
    rejected_connections: int = 0
    keyspace_hits: int = 0
    keyspace_misses: int = 0
    expired_keys: int = 0
    net_input_bytes: int = 0
    net_output_bytes: int = 0
    error_replies: int = 0
    pubsub_messages: int = 0


class ServerState:
    """Everything shared by all connections except the keyspace itself."""

    def __init__(self, store: Store, config: Config | None = None) -> None:
        self.store = store
        self.config = config or Config()
        self.started = time.time()
        self.stats = Stats()
        self.clients: dict[int, Session] = {}
        self.next_client_id = itertools.count(1)
        self.channels: dict[bytes, dict[int, Session]] = {}
        self.patterns: dict[bytes, dict[int, Session]] = {}
        self.shutdown_requested: Callable[[], None] = lambda: None
        self.loading = False
        self.loading_progress: dict[str, Any] = {}
        self.durability: Durability | None = None
        self.faults: Faults | None = None  # set when started with --fault-injection yes
        # How long a write waits for the flush backlog to drain before TRYAGAIN.
        self.write_wait_s = 5.0
        # Limits in force (from `config.params`, kept current by CONFIG SET), and whether
        # the used memory was past maxmemory when the cron last looked.
        self.limits = Limits.from_params(self.config.params)
        self.over_maxmemory = False
        # ACL users (`commands.users`): requirepass is the default user's password; the
        # aclfile's users are loaded (AclFileError names what is wrong in it).
        self.users = Users(self.config.params, self.config.requirepass, self.config.aclfile)
        # INFO commandstats/latencystats (full command name -> counters) and errorstats
        # (error replies by their first word), kept by the dispatcher.
        self.command_stats: dict[str, CommandStats] = {}
        self.error_stats: dict[str, int] = {}
        self.run_id = "".join(f"{b:02x}" for b in __import__("os").urandom(20))

    def uptime(self) -> int:
        return int(time.time() - self.started)


class Session:
    """One client connection's view: selected database, protocol, name, MULTI
    queue, subscriptions, and the metadata attached to its writes."""

    def __init__(
        self,
        server: ServerState,
        addr: str = "",
        laddr: str = "",
        push: Callable[[Reply], None] | None = None,
        close: Callable[[], None] | None = None,
    ) -> None:
        self.server = server
        self.store = server.store
        self.id = next(server.next_client_id)
        self.addr = addr
        self.laddr = laddr
        self.push: Callable[[Reply], None] = push or (lambda r: None)
        self.close: Callable[[], None] = close or (lambda: None)
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
        self.meta: WriteMeta | None = None
        self.last_write_lsn = 0  # the LSN of this connection's latest write
        self.last_sync_lsn = 0  # ... and of its latest write to sync-durability data
        self.view_lsn: int | None = None  # TS.CHECKOUT AT: reads answer as of this LSN
        self.branch: bytes | None = None  # TS.CHECKOUT <branch>: reads and writes go there
        self.created = time.time()
        self.last_interaction = self.created
        self.last_cmd = b"NULL"
        self.last_cmd_name = "NULL"  # full name ("client|list") of the last command run
        self.blocked = False
        self.killed = False
        self.extra: dict[str, Any] = {}

    def select(self, dbi: int) -> None:
        """Switch database (under a checkout, to its view: that raises PrunedError,
        changing nothing, where the database's history there is no longer retained)."""
        if self.branch is not None:
            db: Database = self.store.branches[self.branch].dbs[dbi]
        elif self.view_lsn is None:
            db = self.store.dbs[dbi]
        else:
            db = self.store.view(dbi, self.view_lsn)
        self.dbi = dbi
        self.db = db

    @property
    def subscriptions(self) -> int:
        return len(self.channels) + len(self.patterns)
