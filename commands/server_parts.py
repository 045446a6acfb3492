"""The parts of the server's and the sessions' state that name neither a `Session` nor
the server: the settings the server was started with (`Config`), what commands see of
the durable stream and of cluster-wide snapshots (`Durability`, `ClusterSnapshots`,
Protocols the proxy implements), the fault store's knobs, SAVE's and DEBUG's state, INFO's
rates, and a client's tracking mode (`ClientTracking`). `commands.session_state`
declares the fields holding them (`ServerCore`, `Session`), `commands.session`
re-exports them; a Python module (Config and the others stay dataclasses)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from store.settings import DEFAULTS


@dataclass
class Config:
    """Settings the server was started with; CONFIG GET/SET reads and changes them."""

    host: str = DEFAULTS.host
    port: int = DEFAULTS.port
    storage: str = DEFAULTS.storage
    s3_endpoint_url: str | None = None
    replicaof: tuple[str, int] | None = None  # --replicaof: (host, port) of the primary
    group: str | None = None  # --group: the Sentinel protocol's master name
    etcd_endpoints: str | None = None  # --etcd-endpoints: failover and raft tables
    # --cluster-enabled yes: a node of a Redis Cluster whose slot map is in etcd at
    # these endpoints, under /<cluster_name>/cluster/ (flusher.slotmap); None: not.
    cluster_etcd: str | None = None
    cluster_name: str = "temporalstore"
    announce_host: str = "127.0.0.1"
    announce_port: int = 0  # 0: the port listened on
    flush_interval_ms: int = DEFAULTS.flush_interval_ms
    requirepass: str | None = None
    databases: int = DEFAULTS.databases
    log_level: str = DEFAULTS.log_level
    history: str = DEFAULTS.history
    durability: str = DEFAULTS.durability
    segment_max_bytes: int = DEFAULTS.segment_max_bytes
    max_unflushed_bytes: int = DEFAULTS.max_unflushed_bytes
    checkpoint_every_records: int = DEFAULTS.checkpoint_every_records
    checkpoint_every_seconds: int = DEFAULTS.checkpoint_every_seconds
    checkpoint_every_bytes: int = DEFAULTS.checkpoint_every_bytes
    keep_checkpoints: int = DEFAULTS.keep_checkpoints
    write_wait_ms: int = DEFAULTS.write_wait_ms
    fault_injection: bool = False
    aclfile: str | None = None  # ACL users loaded at start (ACL LOAD / ACL SAVE)
    http_port: int | None = None  # --http-port: /metrics and the explorer (None: off)
    http_bind: str = "127.0.0.1"  # --http-bind
    history_spill_dir: str | None = None  # --history-spill-dir (None: the temporary directory)
    s3_put_cost: float = 0.0  # --s3-put-cost: dollars per 1,000 PUTs (INFO, /metrics)
    checkpoint_cpus: frozenset[int] = frozenset()  # --checkpoint-cpulist (empty: inherited)
    # Redis parameters clients commonly read; settable where meaningful.
    params: dict[str, str] = field(
        default_factory=lambda: {
            "maxmemory": "0",
            "maxmemory-policy": "noeviction",
            "timeout": str(DEFAULTS.timeout),
            "maxclients": str(DEFAULTS.maxclients),
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
            "protected-mode": DEFAULTS.protected_mode,
        }
    )


class Durability(Protocol):
    """What commands see of the durable stream (implemented in `flusher.durable`)."""

    @property
    def durable_lsn(self) -> int: ...

    @property
    def fenced(self) -> str | None: ...

    @property
    def sync(self) -> bool: ...

    async def wait_durable(self, lsn: int, timeout: float | None = None) -> bool: ...

    def on_durable(self, lsn: int, callback: Callable[[Exception | None], None]) -> None:
        """`callback(None)` once `lsn` is durable (at once if it is), `callback(exc)`
        if it cannot become durable (fenced)."""

    @property
    def raft_lsn(self) -> int: ...

    async def wait_raft(self, lsn: int) -> None: ...

    def over_capacity(self) -> bool: ...

    async def wait_capacity(self, timeout: float) -> bool: ...

    async def drain(self, timeout: float) -> bool: ...

    def last_error(self) -> str: ...

    def info(self) -> dict[str, Any]: ...

    async def read_as_of(self, dbi: int, key: bytes, lsn: int) -> tuple[Any, int | None]: ...

    async def checkpoint(self) -> int: ...

    def checkpoint_soon(self) -> None: ...

    async def reload(self, save: bool, dropping: Callable[[], None]) -> None: ...


class ClusterSnapshots(Protocol):
    """Cluster-wide snapshots in cluster mode (implemented in `proxy.cluster_time`):
    what TS.SEAL, TS.UNSEAL and TS.SNAPSHOTS ask of the other shards and of etcd."""

    async def seal(self, name: bytes, args: list[bytes], lsn: int) -> None:
        """This shard sealed `name` at `lsn` (with TS.SEAL's `args` after the name):
        seal every other shard under it and record the cluster snapshot; an
        exception (its text the error) if that cannot be done, nothing recorded."""

    async def unseal(self, name: bytes) -> None:
        """Drop `name` on every other shard and its record (this shard dropped it)."""

    def recorded(self, name: bytes) -> dict[str, int] | None:
        """The shards (shard id -> LSN) of the cluster snapshot `name` as this node
        last read the records, or None if it is not a cluster snapshot."""

    def slot_times(self, name: bytes) -> Sequence[int] | None:
        """For each hash slot, the commit time of the seal of cluster snapshot `name`
        on the shard that served the slot then; None if it is not a cluster snapshot
        or was recorded without them."""


class Faults(Protocol):
    """The fault-injecting object store's knobs (`flusher.objectstore.FaultyObjectStore`)."""

    outage: bool
    latency: float
    jitter: float
    error_rate: float
    fail_after_put: int


@dataclass
class SaveStats:
    """What LASTSAVE and INFO persistence report of SAVE and BGSAVE."""

    lastsave: int = field(default_factory=lambda: int(time.time()))
    lsn_at_save: int = 0
    saves: int = 0
    # BGREWRITEAOF (commands.server): its checkpoint under way since (monotonic; 0:
    # none), scheduled (asked inside MULTI/EXEC), and the outcome of the last ones.
    aof_rewrite_since: float = 0.0
    aof_rewrite_scheduled: bool = False
    aof_rewrites: int = 0
    aof_last_status: str = "ok"
    aof_last_time_s: int = -1
    aof_failures: int = 0
    aof_task: Any = None


@dataclass
class DebugSettings:
    """What DEBUG switches (commands.debug), read where each takes effect."""

    active_expire: bool = True  # SET-ACTIVE-EXPIRE: the cron's expiry cycle runs
    pause_cron: bool = False  # PAUSE-CRON: the server cron does nothing
    allow_deny_scripts: bool = False  # SET-DISABLE-DENY-SCRIPTS: noscript commands in scripts
    skip_checksum_validation: bool = False  # SET-SKIP-CHECKSUM-VALIDATION (RESTORE payloads)
    quicklist_packed_threshold: int = 1 << 30  # list elements this big get a node each
    reply_buffer_peak_reset_ms: int = 5000  # REPLYBUFFER PEAK-RESET-TIME (-1: never)
    reply_buffer_resizing: bool = True  # REPLYBUFFER RESIZING
    # DEBUG OBJECT's at: of values INCR changed in place, as Redis does (the address
    # stays): (db, key) -> (id of the value now, the address it keeps).
    addresses: dict[tuple[Any, bytes], tuple[int, int]] = field(default_factory=dict)


@dataclass
class Rates:
    """INFO stats' instantaneous rates and the counters they were last measured from."""

    sample_time: float = field(default_factory=time.monotonic)
    sample_cmds: int = 0
    sample_in: int = 0
    sample_out: int = 0
    ops_per_sec: int = 0
    in_kbps: float = 0.0
    out_kbps: float = 0.0


class ClientTracking:
    """One client's tracking mode (Redis' CLIENT_TRACKING_* flags)."""

    __slots__ = ("bcast", "broken", "caching", "noloop", "optin", "optout", "prefixes", "redirect")

    def __init__(self) -> None:
        self.redirect = 0
        self.bcast = False
        self.optin = False
        self.optout = False
        self.noloop = False
        self.caching = False  # CLIENT CACHING given for the next command
        self.broken = False  # the redirect client was gone when a message was due
        self.prefixes: set[bytes] = set()
