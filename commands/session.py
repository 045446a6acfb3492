"""Per-connection command state (`Session`) and server-wide state (`ServerState`).

The proxy creates one `Session` per connection and gives it the callbacks it
needs to reach the wire (push a message, close); handlers get the session and
reach the store, the server state and the clock through it. `Session`, `Stats` and
`ServerState`'s base `ServerCore` (which declares every field of the server state:
`Session.server` is a `ServerCore`) are defined in `commands.session_state` (compiled
with the dispatcher), the parts of the state that name neither (`Config`,
`Durability`, ...) in `commands.server_parts`; all are importable from here.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import time

from commands.access import policy_changed
from commands.limits import STARTUP_RSS, Limits
from commands.ops_state import OpsState
from commands.replstate import ReplicationState, ReplStream
from commands.server_parts import ClusterSnapshots as ClusterSnapshots
from commands.server_parts import Config as Config
from commands.server_parts import DebugSettings as DebugSettings
from commands.server_parts import Durability as Durability
from commands.server_parts import Faults as Faults
from commands.server_parts import Rates as Rates
from commands.server_parts import SaveStats as SaveStats
from commands.session_state import ServerCore as ServerCore
from commands.session_state import Session as Session
from commands.session_state import Stats as Stats
from commands.users import Users
from store import Store


class ServerState(ServerCore):
    """Everything shared by all connections except the keyspace itself: its fields are
    declared by `ServerCore` (compiled) and set here, from the store and the config (a
    Python class: it keys weak references, as commands.scripting's engines)."""

    def __init__(self, store: Store, config: Config | None = None) -> None:
        super().__init__()
        self.store = store
        self.config = config or Config()
        self.started = time.time()
        self.clients = {}
        self.next_client_id = itertools.count(1)
        self.channels = {}
        self.patterns = {}
        self.shutdown_requested = lambda: None
        # CONFIG SET port: listen on this port instead (0: not at all), keeping the
        # connections; OSError if it cannot be bound. Set by the server that listens.
        self.listen_port = None
        self.loading_progress = {}
        self.faults = None  # set when started with --fault-injection yes
        # Cluster mode's cluster-wide seals (set by proxy.cluster_node), else None.
        self.cluster_snapshots = None
        self.replication = ReplicationState()  # role, primary, replica links
        for name in ("min-replicas-to-write", "min-replicas-max-lag"):  # given as flags
            if name in self.config.params:
                self.replication.configure(name, self.config.params[name])
        self.min_replicas = self.replication.min_replicas  # the dispatcher's copy
        # The replication stream to Redis replicas (SYNC/PSYNC, commands.redis_repl):
        # kept for its offset; `repl_stream` is it while a Redis replica is attached and
        # None otherwise (the dispatcher's one test per command).
        self.redis_repl = ReplStream()
        self.sync_full = 0  # INFO stats' sync_full and sync_partial_err
        self.sync_partial_err = 0
        # How long a write waits for the flush backlog to drain before TRYAGAIN.
        self.write_wait_s = 5.0
        # Limits in force (from `config.params`, kept current by CONFIG SET), and whether
        # the used memory was past maxmemory (ServerCore.over_maxmemory).
        self.limits = Limits.from_params(self.config.params)
        # ACL users (`commands.users`): requirepass is the default user's password; the
        # aclfile's users are loaded (AclFileError names what is wrong in it).
        self.users = Users(self.config.params, self.config.requirepass, self.config.aclfile)
        self.run_id = "".join(f"{b:02x}" for b in os.urandom(20))
        self.replid = hashlib.sha1(self.run_id.encode()).hexdigest()  # INFO replication
        self.save_stats = SaveStats()
        self.debug = DebugSettings()
        policy_changed(store.dbs, self.config.params)  # LRU or LFU (commands.access)
        self.rates = Rates()
        self.peak_memory = STARTUP_RSS  # INFO memory raises it as it samples
        # Whether `config.params` has been filled with Redis' defaults (commands.config).
        self.config_defaults_loaded = False
        # SCAN's hash-ordered keys per database, kept while a scan is under way, and
        # SSCAN's member order of a few large sets (commands.keys, commands.sets).
        self.scan_snapshots = {}
        self.set_scan_orders = {}
        # SLOWLOG, LATENCY, MONITOR and CLIENT PAUSE (commands.ops_state). What the
        # dispatcher reads per command: the end of the command before (perf_counter_ns),
        # the shortest duration anything records, whether latency histograms are kept,
        # the MONITOR clients, and the check a pause or a monitor adds (None: none).
        self.ops = OpsState(self.config.params)
        self.slow_ns = self.ops.slow_ns()
        self.latency_tracking = self.config.params.get("latency-tracking", "yes") == "yes"
        self.expired_seen = store.expired_keys  # INFO expired_keys (info.sync_expired)
