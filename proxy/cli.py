"""`temporalstore serve`, `export`, `import` and `inspect`: the
process entry points.

Every flag can also be given as an environment variable TEMPORALSTORE_<FLAG>
(upper case, dashes as underscores)."""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import ssl
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import commands.families  # noqa: F401  (registers every command)
from commands import allocator
from commands.config_table import set_at_start
from commands.limits import memtoull
from commands.rdb_file import RdbContents
from commands.session import Config, ServerCore, ServerState
from commands.users import AclFileError, Users
from flusher.checkpoint import cpulist
from flusher.durable import DurabilityConfig
from flusher.metered import MeteredObjectStore
from flusher.objectstore import (
    FaultyObjectStore,
    ObjectStore,
    ObjectStoreError,
    open_object_store,
)
from proxy.rdbimport import RdbImportError, import_rdb, read_rdb
from proxy.replication import Node, replica_of
from proxy.server import Server
from proxy.tls import TLSConfigError, server_context
from replay.replay import ReplayError
from store import HistoryPolicy, Store, native
from store.coldhistory import attach as attach_spill
from store.secrets import redact
from store.settings import DEFAULTS
from temporalstore.flags import add_export_flags, add_import_flags

if TYPE_CHECKING:
    from proxy.web import HttpServer

log = logging.getLogger("temporalstore")

SERVE_FLAGS: list[tuple[str, str | None, str]] = [
    ("host", DEFAULTS.host, "address to listen on"),
    (
        "port",
        str(DEFAULTS.port),
        "port to listen on (0 picks a free port; none: no plain TCP listener)",
    ),
    ("storage", DEFAULTS.storage, "file://DIR or s3://bucket/prefix"),
    ("s3-endpoint-url", None, "S3 endpoint (MinIO, moto, ...)"),
    ("flush-interval-ms", str(DEFAULTS.flush_interval_ms), "how often update records are flushed"),
    ("requirepass", None, "password for the default user"),
    ("masterauth", None, "password a replica gives its primary (AUTH), as Redis' masterauth"),
    ("masteruser", None, "the user a replica authenticates as with masterauth (Redis' name)"),
    ("aclfile", None, "ACL users loaded at start, in Redis' aclfile format (ACL LOAD/SAVE)"),
    ("databases", str(DEFAULTS.databases), "number of databases"),
    ("log-level", DEFAULTS.log_level, "debug, info, warning or error"),
    ("history", DEFAULTS.history, "history kept in memory: all, versions:N or ms:N"),
    ("durability", DEFAULTS.durability, "async (acknowledge when applied) or sync (when stored)"),
    (
        "segment-max-bytes",
        str(DEFAULTS.segment_max_bytes),
        "flush early when a batch reaches this size",
    ),
    (
        "max-unflushed-bytes",
        str(DEFAULTS.max_unflushed_bytes),
        "writes wait, then fail, past this backlog",
    ),
    (
        "checkpoint-every-records",
        str(DEFAULTS.checkpoint_every_records),
        "write a checkpoint after this many records",
    ),
    (
        "checkpoint-every-seconds",
        str(DEFAULTS.checkpoint_every_seconds),
        "... or after this many seconds",
    ),
    (
        "checkpoint-every-bytes",
        str(DEFAULTS.checkpoint_every_bytes),
        "... or after this many bytes of records logged (bounds what a restart replays; 0: off)",
    ),
    (
        "keep-checkpoints",
        str(DEFAULTS.keep_checkpoints),
        "checkpoints kept; older ones and their segments are deleted (0: keep all)",
    ),
    (
        "write-wait-ms",
        str(DEFAULTS.write_wait_ms),
        "how long a write waits for the flush backlog before TRYAGAIN",
    ),
    ("fault-injection", "no", "yes: enable TS.FAULT to inject object storage faults (tests)"),
    (
        "maxclients",
        str(DEFAULTS.maxclients),
        "connections beyond this get Redis' max-clients error",
    ),
    ("timeout", str(DEFAULTS.timeout), "close clients idle this many seconds (0: never)"),
    (
        "protected-mode",
        DEFAULTS.protected_mode,
        "yes: with no password, accept only loopback clients",
    ),
    ("tls-port", None, "also serve TLS on this port (0 picks a free port)"),
    ("tls-cert-file", None, "the server's TLS certificate (PEM)"),
    ("tls-key-file", None, "its private key (PEM, not encrypted)"),
    ("tls-ca-cert-file", None, "CA certificate(s) that client certificates are checked against"),
    ("tls-auth-clients", "yes", "yes: clients need a certificate; optional: checked if sent; no"),
    ("maxmemory", "0", "past this used memory (100mb, 1gb...) keys are evicted or writes get -OOM"),
    ("maxmemory-policy", "noeviction", "what is evicted past maxmemory (Redis' eight policies)"),
    (
        "max-pinned-history",
        "0",
        "TS.SEAL is refused while history pinned by seals and branches is past this; 0: no cap",
    ),
    (
        "history-memory",
        "0",
        "older versions move to a local spill file while history in memory is past this (0: never)",
    ),
    (
        "history-hot-memory",
        "64mb",
        "with history-memory 0: older versions are frozen into compressed blocks in memory "
        "while plain history in memory is past this (0: never)",
    ),
    ("history-spill-dir", "", "where that file is made (unlinked; default: the temp directory)"),
    (
        "enable-debug-command",
        "no",
        "no|yes|local: allow DEBUG (local: from loopback and Unix socket clients only)",
    ),
    (
        "enable-protected-configs",
        "no",
        "no|yes|local: allow CONFIG SET of protected configs (dir, dbfilename)",
    ),
    ("enable-module-command", "no", "no|yes|local: allow MODULE"),
    ("client-output-buffer-limit", None, 'per class: "<class> <hard> <soft> <seconds> ..."'),
    ("client-query-buffer-limit", "1gb", "close a client whose unparsed input grows past this"),
    ("proto-max-bulk-len", "512mb", "the longest argument a request may carry"),
    ("replicaof", None, '"HOST PORT": serve as a replica of that primary (same --storage)'),
    (
        "min-replicas-to-write",
        None,
        "as Redis: refuse writes (-NOREPLICAS) while fewer replicas acknowledge within the lag",
    ),
    ("min-replicas-max-lag", None, "as Redis: the lag in seconds (default 10)"),
    ("etcd-endpoints", None, "URL[,URL...]: join a group on etcd (failover, raft tables)"),
    (
        "cluster-enabled",
        "no",
        "yes: a Redis Cluster node, primary of its own shard, or with --group a node of "
        "that replicated shard; the slot map is in etcd (needs --etcd-endpoints; "
        "`temporalstore cluster create` writes it)",
    ),
    ("cluster-name", "temporalstore", "the cluster's name in etcd (with --cluster-enabled yes)"),
    (
        "group",
        None,
        "answer the Sentinel protocol for this group (default with etcd: temporalstore)",
    ),
    ("announce-host", None, "the address other nodes and clients reach this node at"),
    ("announce-port", None, "... and its port (default: the listening port)"),
    ("http-port", None, "serve /metrics and the history explorer over HTTP on this port (0: free)"),
    ("http-bind", "127.0.0.1", "address the HTTP listener binds (loopback unless told)"),
    (
        "checkpoint-cpulist",
        "",
        "CPUs for the checkpoint child, as Redis' bgsave_cpulist (0-3,5; empty: the server's)",
    ),
    ("s3-put-cost", "0", "dollars per 1,000 PUTs, for the storage cost estimate (INFO, /metrics)"),
]
SECRET_BEARING_LOGGERS = ("botocore", "aiobotocore", "urllib3", "aiohttp", "s3transfer")
# Flags that are CONFIG parameters, checked and stored as CONFIG SET would.
REDIS_PARAM_FLAGS = (
    "maxmemory",
    "max-pinned-history",
    "history-memory",
    "history-hot-memory",
    "maxmemory-policy",
    "client-output-buffer-limit",
    "client-query-buffer-limit",
    "proto-max-bulk-len",
    "tls-auth-clients",
    "enable-debug-command",
    "enable-protected-configs",
    "enable-module-command",
    "min-replicas-to-write",
    "min-replicas-max-lag",
    "masterauth",
    "masteruser",
)


# The serve flags `import --rdb` takes (storage and durability); the others (listening,
# clients, groups) keep their defaults there.
IMPORT_RDB_FLAGS = (
    "storage",
    "s3-endpoint-url",
    "flush-interval-ms",
    "databases",
    "log-level",
    "history",
    "durability",
    "segment-max-bytes",
    "max-unflushed-bytes",
    "checkpoint-every-records",
    "checkpoint-every-seconds",
    "checkpoint-every-bytes",
    "keep-checkpoints",
    "write-wait-ms",
)


def _env(flag: str, default: str | None) -> str | None:
    return os.environ.get("TEMPORALSTORE_" + flag.upper().replace("-", "_"), default)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="temporalstore", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve the Redis protocol")
    for name, default, help_text in SERVE_FLAGS:
        serve.add_argument(f"--{name}", default=_env(name, default), help=help_text)
    # Not an environment variable: a start that imports is a one-off.
    serve.add_argument(
        "--import-rdb",
        metavar="FILE",
        help="first load this Redis RDB file into the (new, empty) storage, then serve",
    )
    # Two imports: FILE, an export file, into a running server (docs/export-format.md);
    # --rdb FILE, a Redis RDB file, into a new storage (no server running on it).
    imp = sub.add_parser(
        "import",
        help="FILE: load an export file into a running server as new versions; "
        "--rdb FILE: load a Redis RDB file into a new storage",
    )
    imp.add_argument("file", nargs="?", help="an export file (docs/export-format.md)")
    imp.add_argument("--rdb", metavar="FILE", help="a Redis RDB file (SAVE's dump.rdb)")
    for name, default, help_text in SERVE_FLAGS:
        if name in IMPORT_RDB_FLAGS:
            imp.add_argument(f"--{name}", default=_env(name, default), help=help_text)
    add_import_flags(imp)
    inspect = sub.add_parser("inspect", help="list and verify what a storage prefix holds")
    for name in ("storage", "s3-endpoint-url"):
        inspect.add_argument(
            f"--{name}", default=_env(name, dict((n, d) for n, d, _ in SERVE_FLAGS)[name])
        )
    export = sub.add_parser("export", help="write a point of history to a file (JSON Lines)")
    add_export_flags(export)
    cluster = sub.add_parser("cluster", help="manage a Redis Cluster of TemporalStore nodes")
    actions = cluster.add_subparsers(dest="action", required=True)
    create = actions.add_parser(
        "create", help="one shard per node, the 16384 slots spread evenly (redis-cli's way)"
    )
    create.add_argument("--etcd-endpoints", required=True, help="URL[,URL...] of etcd")
    create.add_argument("--cluster-name", default="temporalstore", help="the cluster in etcd")
    create.add_argument("nodes", nargs="+", metavar="HOST:PORT", help="the nodes (announce)")
    show = actions.add_parser("show", help="the slot map, each shard's keys, a move in progress")
    move = actions.add_parser(
        "move", help="move a slot range to a node's shard (fence, flush, replay, take over)"
    )
    for action in (show, move):
        action.add_argument("--etcd-endpoints", required=True, help="URL[,URL...] of etcd")
        action.add_argument("--cluster-name", default="temporalstore", help="the cluster in etcd")
    move.add_argument("--slots", required=True, metavar="FIRST-LAST", help="slot range or slot")
    move.add_argument("--to", required=True, metavar="HOST:PORT", help="the taking node")
    move.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        help="seconds to wait for each shard's move before aborting it (default 120)",
    )
    return p


def config_from_args(ns: argparse.Namespace) -> Config:
    def num(name: str, value: str, minimum: int = 0) -> int:
        try:
            n = int(value)
        except ValueError:
            raise SystemExit(f"temporalstore: --{name} must be an integer, not {value!r}") from None
        if n < minimum:
            raise SystemExit(f"temporalstore: --{name} must be at least {minimum}")
        return n

    def size(name: str, value: str) -> int:
        """Bytes, as an integer or in Redis' units (`32mb`, `1gb`)."""
        n = memtoull(value)
        if n is None:
            raise SystemExit(f"temporalstore: --{name} must be a size (bytes, or like 32mb)")
        return n

    databases = num("databases", ns.databases)
    if databases < 1:
        raise SystemExit("temporalstore: --databases must be at least 1")
    try:
        HistoryPolicy.parse(ns.history)
    except ValueError as e:
        raise SystemExit(f"temporalstore: --history: {e}") from None
    if ns.durability not in ("async", "sync"):
        raise SystemExit("temporalstore: --durability must be async or sync")
    if ns.fault_injection not in ("yes", "no"):
        raise SystemExit("temporalstore: --fault-injection must be yes or no")
    config = Config(
        host=ns.host,
        port=-1 if ns.port == "none" else num("port", ns.port),
        storage=ns.storage,
        s3_endpoint_url=ns.s3_endpoint_url,
        flush_interval_ms=num("flush-interval-ms", ns.flush_interval_ms, 1),
        requirepass=ns.requirepass or None,
        databases=databases,
        log_level=ns.log_level,
        history=ns.history,
        durability=ns.durability,
        segment_max_bytes=num("segment-max-bytes", ns.segment_max_bytes, 1024),
        max_unflushed_bytes=num("max-unflushed-bytes", ns.max_unflushed_bytes, 1024),
        checkpoint_every_records=num("checkpoint-every-records", ns.checkpoint_every_records, 1),
        checkpoint_every_seconds=num("checkpoint-every-seconds", ns.checkpoint_every_seconds, 1),
        checkpoint_every_bytes=size("checkpoint-every-bytes", ns.checkpoint_every_bytes),
        keep_checkpoints=num("keep-checkpoints", ns.keep_checkpoints),
        write_wait_ms=num("write-wait-ms", ns.write_wait_ms),
        fault_injection=ns.fault_injection == "yes",
    )
    config.etcd_endpoints = ns.etcd_endpoints or None
    config.group = ns.group or ("temporalstore" if config.etcd_endpoints else None)
    if config.etcd_endpoints and ns.replicaof:
        raise SystemExit("temporalstore: --replicaof and --etcd-endpoints: etcd picks the primary")
    if ns.cluster_enabled not in ("yes", "no"):
        raise SystemExit("temporalstore: --cluster-enabled must be yes or no")
    if ns.cluster_enabled == "yes":
        # etcd holds the slot map; with --group the node is one of a replicated shard's
        # nodes (the group elects the shard's primary), else a shard of its own.
        if not config.etcd_endpoints:
            raise SystemExit("temporalstore: --cluster-enabled yes needs --etcd-endpoints")
        config.cluster_etcd, config.cluster_name = config.etcd_endpoints, ns.cluster_name
        if not ns.group:
            config.etcd_endpoints = config.group = None
    config.announce_host = ns.announce_host or (
        ns.host if ns.host not in ("0.0.0.0", "::") else "127.0.0.1"
    )
    config.announce_port = num("announce-port", ns.announce_port) if ns.announce_port else 0
    config.http_port = num("http-port", ns.http_port) if ns.http_port is not None else None
    if config.http_port is not None and config.http_port > 65535:
        raise SystemExit("temporalstore: --http-port must be at most 65535")
    config.http_bind = ns.http_bind
    config.history_spill_dir = getattr(ns, "history_spill_dir", "") or None
    try:
        config.checkpoint_cpus = cpulist(ns.checkpoint_cpulist)
    except ValueError as e:
        raise SystemExit(f"temporalstore: --checkpoint-cpulist: {e}") from None
    try:
        config.s3_put_cost = float(ns.s3_put_cost)
    except ValueError:
        raise SystemExit(
            f"temporalstore: --s3-put-cost must be a number, not {ns.s3_put_cost!r}"
        ) from None
    if not 0 <= config.s3_put_cost < float("inf"):
        raise SystemExit("temporalstore: --s3-put-cost must be a finite number, at least 0")
    try:
        config.replicaof = replica_of(ns.replicaof)
    except ValueError as e:
        raise SystemExit(f"temporalstore: {e}") from None
    config.params["maxclients"] = str(num("maxclients", ns.maxclients, 1))
    config.params["timeout"] = str(num("timeout", ns.timeout))
    if ns.protected_mode not in ("yes", "no"):
        raise SystemExit("temporalstore: --protected-mode must be yes or no")
    config.params["protected-mode"] = ns.protected_mode
    config.aclfile = ns.aclfile or None
    if config.aclfile:
        try:  # read now, so that a bad file stops the start naming every problem in it
            Users(config.params, config.requirepass, config.aclfile)
        except AclFileError as e:
            raise SystemExit(f"temporalstore: --aclfile: {e}") from None
    for name in REDIS_PARAM_FLAGS:
        value = getattr(ns, name.replace("-", "_"))
        if value is not None:
            try:
                set_at_start(config, name, value)
            except ValueError as e:
                raise SystemExit(f"temporalstore: --{name}: {e}") from None
    if config.port < 0 and ns.tls_port is None:
        raise SystemExit("temporalstore: --port none needs --tls-port (nothing to listen on)")
    if ns.tls_port is not None:
        config.params["tls-port"] = str(num("tls-port", ns.tls_port))
        for name in ("tls-cert-file", "tls-key-file", "tls-ca-cert-file"):
            config.params[name] = getattr(ns, name.replace("-", "_")) or ""
    return config


def tls_context(config: Config) -> ssl.SSLContext | None:
    """The TLS listener's context when --tls-port is given (SystemExit if unusable)."""
    params = config.params
    if "tls-port" not in params:
        return None
    try:
        return server_context(
            params["tls-cert-file"],
            params["tls-key-file"],
            params["tls-ca-cert-file"],
            params["tls-auth-clients"],
        )
    except TLSConfigError as e:
        raise SystemExit(f"temporalstore: TLS: {e}") from None


def durability_config(config: Config) -> DurabilityConfig:
    return DurabilityConfig(
        mode=config.durability,
        flush_interval_ms=config.flush_interval_ms,
        segment_max_bytes=config.segment_max_bytes,
        max_unflushed_bytes=config.max_unflushed_bytes,
        checkpoint_every_records=config.checkpoint_every_records,
        checkpoint_every_seconds=config.checkpoint_every_seconds,
        checkpoint_every_bytes=config.checkpoint_every_bytes,
        keep_checkpoints=config.keep_checkpoints,
        s3_put_cost=config.s3_put_cost,
        checkpoint_cpus=config.checkpoint_cpus,
    )


class LoadProgress:
    """Replay progress: INFO persistence fields and a console bar (on a terminal)."""

    def __init__(self, state: ServerCore) -> None:
        from tqdm import tqdm

        self.state = state
        self.bar = tqdm(desc="replaying", unit=" records", disable=None, file=sys.stderr)

    def __call__(self, records: int, segments_left: int) -> None:
        self.state.loading_progress = {
            "loading_records": records,
            "loading_segments_left": segments_left,
        }
        self.bar.update(records - self.bar.n)

    def close(self) -> None:
        self.bar.close()


async def serve(config: Config, rdb: tuple[str, RdbContents] | None = None) -> int:
    # Every write allocates a few long-lived containers (records, versions); a larger
    # young generation keeps the collector from running on every few thousand writes.
    gc.set_threshold(50_000, 50, 100)
    store = Store(databases=config.databases, history=HistoryPolicy.parse(config.history))
    attach_spill(store, config.history_spill_dir, memory=True)
    state = ServerState(store, config)
    state.write_wait_s = config.write_wait_ms / 1000
    state.loading = True
    server = Server(state)
    try:
        objects: ObjectStore = open_object_store(config.storage, config.s3_endpoint_url)
        if config.fault_injection:
            faulty = FaultyObjectStore(objects)
            state.faults = faulty
            objects = faulty
    except ObjectStoreError as e:
        log.error("cannot open storage: %s", e)
        return 1
    metered = MeteredObjectStore(objects)  # outermost: injected faults count as failures
    objects = metered
    tls = tls_context(config)
    plain = config.port >= 0
    port = await server.start(config.host, config.port, tls, int(config.params.get("tls-port", 0)))
    if plain:
        log.info("listening on %s:%d", config.host, port)
    log.info("hot path: %s (%s)", native.STATE, native.REASON)
    if tls is not None:
        log.info("accepting TLS connections on %s:%d", config.host, server.tls_port)
    http: HttpServer | None = None
    if config.http_port is not None:  # before the replay: /metrics shows its progress
        # Imported here: aiohttp's server and prometheus_client cost a server without
        # --http-port RSS for nothing.
        from proxy.metrics import registry_for
        from proxy.web import HttpServer

        http = HttpServer(state, registry_for(state, metered.stats, config.s3_put_cost))
        http_port = await http.start(config.http_bind, config.http_port)
        log.info("serving HTTP on %s:%d", config.http_bind, http_port)
    progress = LoadProgress(state)
    node = Node(state, objects, durability_config(config), port, progress)
    try:
        await node.start(config.replicaof)
    except (ReplayError, ObjectStoreError) as e:
        log.error("cannot start from %s: %s", redact(config.storage), e)
        if http is not None:
            await http.close()
        await server.close()
        await objects.close()
        return 1
    finally:
        progress.close()
        node.progress = None
    if rdb is not None:
        try:
            await import_rdb(state, node, rdb[1], rdb[0])
        except RdbImportError as e:
            log.error("%s", e)
            await server.close()
            await node.close()
            return 1
    cluster_node = None
    if config.cluster_etcd:
        from proxy.cluster_node import ClusterNode

        cluster_node = ClusterNode(
            state,
            config.cluster_etcd,
            config.cluster_name,
            *node.announce,
            group=config.group or "",
            leading=node.leading,
        )
        if (failed := await cluster_node.start()) is not None:
            log.error("%s", failed)
            await server.close()
            await node.close()
            return 1
    state.loading = False
    # Everything alive now (imports, the replayed store) is long-lived and holds no
    # cycles that matter: keep the cyclic collector from walking it again and again.
    # Frozen without a collection first: replay ran with the collector off, and a
    # full pass over what it built found nothing to free (0 objects after 2M
    # overwriting SETs, 1M SETs) and took 0.33 s of the restart.
    gc.freeze()
    # From now on large buffers (clients' socket reads) go back to the system when
    # freed; not during the replay, whose segment buffers reuse the heap 7-10 % faster.
    allocator.tune()
    await server.serve_until_stopped()
    if http is not None:
        await http.close()
    if cluster_node is not None:
        await cluster_node.close()
    await node.close()
    return 0


async def import_only(config: Config, path: str, contents: RdbContents) -> int:
    """`temporalstore import --rdb FILE`: take the storage over, import, stop."""
    store = Store(databases=config.databases, history=HistoryPolicy.parse(config.history))
    state = ServerState(store, config)
    try:
        objects = open_object_store(config.storage, config.s3_endpoint_url)
    except ObjectStoreError as e:
        log.error("cannot open storage: %s", e)
        return 1
    node = Node(state, objects, durability_config(config), 0)
    try:
        await node.start(None)
    except (ReplayError, ObjectStoreError) as e:
        log.error("cannot start from %s: %s", redact(config.storage), e)
        await objects.close()
        return 1
    code = 0
    try:
        await import_rdb(state, node, contents, path)
    except RdbImportError as e:
        log.error("%s", e)
        code = 1
    await node.close()
    return code


def main(argv: Sequence[str] | None = None) -> int:
    ns = build_parser().parse_args(argv)
    # The subcommands that are not the server import their code here: `inspect` uses
    # tqdm, `export` and `import FILE` redis-py, which no server needs in its memory.
    if ns.command == "inspect":
        from replay.inspect import main as inspect_main

        return inspect_main(ns.storage, ns.s3_endpoint_url)
    if ns.command == "cluster":
        from proxy.cluster_node import cluster_main

        return cluster_main(ns)
    if ns.command == "export":
        from temporalstore.cli import export_main

        return export_main(ns)
    if ns.command == "import":
        if ns.rdb and ns.file:
            raise SystemExit("temporalstore import: give an export FILE or --rdb FILE, not both")
        if not ns.rdb:
            if not ns.file:
                raise SystemExit("temporalstore import: give an export FILE, or --rdb FILE")
            from temporalstore.cli import import_main

            return import_main(ns)
        for name, default, _help in SERVE_FLAGS:  # what import --rdb does not take
            ns.__dict__.setdefault(name.replace("-", "_"), default)
    config = config_from_args(ns)
    rdb_path = ns.rdb if ns.command == "import" else ns.import_rdb
    if rdb_path and (config.replicaof or config.etcd_endpoints):
        raise SystemExit("temporalstore: an RDB file is imported by a primary only")
    level = getattr(logging, config.log_level.upper(), None)
    if not isinstance(level, int):
        print(f"temporalstore: unknown --log-level {config.log_level!r}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=level, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr
    )
    # The S3 client libraries' debug output carries request headers (credentials,
    # session tokens): --log-level debug is for our own lines only.
    for name in SECRET_BEARING_LOGGERS:
        logging.getLogger(name).setLevel(max(level, logging.INFO))
    loop_runner: Any = asyncio.run
    try:
        import uvloop

        loop_runner = uvloop.run
    except ImportError:  # pragma: no cover - uvloop is a dependency where it builds
        pass
    rdb: tuple[str, RdbContents] | None = None
    if rdb_path:
        try:
            rdb = (rdb_path, read_rdb(rdb_path))
        except RdbImportError as e:
            log.error("%s", e)
            return 1
        if ns.command == "import":
            result: int = loop_runner(import_only(config, *rdb))
            return result
    try:
        code: int = loop_runner(serve(config, rdb))
    except OSError as e:
        log.error("cannot serve: %s", e)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
