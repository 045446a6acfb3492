"""`temporalstore serve` and `temporalstore inspect`: the process entry points.

Every flag can also be given as an environment variable TEMPORALSTORE_<FLAG>
(upper case, dashes as underscores)."""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

import commands.families  # noqa: F401  (registers every command)
from commands.session import Config, ServerState
from flusher.objectstore import (
    FaultyObjectStore,
    ObjectStore,
    ObjectStoreError,
    open_object_store,
)
from proxy.server import Server
from replay.replay import ReplayError
from replay.startup import DurabilityConfig, DurableStore
from store import HistoryPolicy, Store

log = logging.getLogger("temporalstore")

SERVE_FLAGS: list[tuple[str, str | None, str]] = [
    ("host", "127.0.0.1", "address to listen on"),
    ("port", "6379", "port to listen on (0 picks a free port)"),
    ("storage", "file://./data", "file://DIR or s3://bucket/prefix"),
    ("s3-endpoint-url", None, "S3 endpoint (MinIO, moto, ...)"),
    ("flush-interval-ms", "100", "how often update records are flushed"),
    ("requirepass", None, "password for the default user"),
    ("databases", "16", "number of databases"),
    ("log-level", "info", "debug, info, warning or error"),
    ("history", "versions:64", "history kept in memory: all, versions:N or ms:N"),
    ("durability", "async", "async (acknowledge when applied) or sync (when stored)"),
    ("segment-max-bytes", str(8 * 1024 * 1024), "flush early when a batch reaches this size"),
    ("max-unflushed-bytes", str(256 * 1024 * 1024), "writes wait, then fail, past this backlog"),
    ("checkpoint-every-records", "1000000", "write a checkpoint after this many records"),
    ("checkpoint-every-seconds", "300", "... or after this many seconds"),
    (
        "keep-checkpoints",
        "2",
        "checkpoints kept; older ones and their segments are deleted (0: keep all)",
    ),
    ("write-wait-ms", "5000", "how long a write waits for the flush backlog before TRYAGAIN"),
    ("fault-injection", "no", "yes: enable TS.FAULT to inject object storage faults (tests)"),
    ("maxclients", "10000", "connections beyond this get Redis' max-clients error"),
    ("timeout", "0", "close clients idle this many seconds (0: never)"),
    ("protected-mode", "yes", "yes: with no password, accept only loopback clients"),
]


def _env(flag: str, default: str | None) -> str | None:
    return os.environ.get("TEMPORALSTORE_" + flag.upper().replace("-", "_"), default)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="temporalstore", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve the Redis protocol")
    for name, default, help_text in SERVE_FLAGS:
        serve.add_argument(f"--{name}", default=_env(name, default), help=help_text)
    inspect = sub.add_parser("inspect", help="list and verify what a storage prefix holds")
    for name in ("storage", "s3-endpoint-url"):
        inspect.add_argument(
            f"--{name}", default=_env(name, dict((n, d) for n, d, _ in SERVE_FLAGS)[name])
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
        port=num("port", ns.port),
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
        keep_checkpoints=num("keep-checkpoints", ns.keep_checkpoints),
        write_wait_ms=num("write-wait-ms", ns.write_wait_ms),
        fault_injection=ns.fault_injection == "yes",
    )
    config.params["maxclients"] = str(num("maxclients", ns.maxclients, 1))
    config.params["timeout"] = str(num("timeout", ns.timeout))
    if ns.protected_mode not in ("yes", "no"):
        raise SystemExit("temporalstore: --protected-mode must be yes or no")
    config.params["protected-mode"] = ns.protected_mode
    return config


def durability_config(config: Config) -> DurabilityConfig:
    return DurabilityConfig(
        mode=config.durability,
        flush_interval_ms=config.flush_interval_ms,
        segment_max_bytes=config.segment_max_bytes,
        max_unflushed_bytes=config.max_unflushed_bytes,
        checkpoint_every_records=config.checkpoint_every_records,
        checkpoint_every_seconds=config.checkpoint_every_seconds,
        keep_checkpoints=config.keep_checkpoints,
    )


class LoadProgress:
    """Replay progress: INFO persistence fields and a console bar (on a terminal)."""

    def __init__(self, state: ServerState) -> None:
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


async def serve(config: Config) -> int:
    # Every write allocates a few long-lived containers (records, versions); a larger
    # young generation keeps the collector from running on every few thousand writes.
    gc.set_threshold(50_000, 50, 100)
    store = Store(databases=config.databases, history=HistoryPolicy.parse(config.history))
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
    port = await server.start(config.host, config.port)
    log.info("listening on %s:%d", config.host, port)
    progress = LoadProgress(state)
    try:
        durable = await DurableStore.open(store, objects, durability_config(config), progress)
    except (ReplayError, ObjectStoreError) as e:
        log.error("cannot start from %s: %s", config.storage, e)
        await server.close()
        await objects.close()
        return 1
    finally:
        progress.close()
    durable.start()
    state.durability = durable
    state.loading = False
    # Everything alive now (imports, the replayed store) is long-lived and holds no
    # cycles that matter: keep the cyclic collector from walking it again and again.
    gc.collect()
    gc.freeze()
    await server.serve_until_stopped()
    await durable.close()
    log.info("stopped at LSN %d (durable %d)", store.lsn, durable.durable_lsn)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    ns = build_parser().parse_args(argv)
    if ns.command == "inspect":
        from replay.inspect import main as inspect_main

        return inspect_main(ns.storage, ns.s3_endpoint_url)
    config = config_from_args(ns)
    level = getattr(logging, config.log_level.upper(), None)
    if not isinstance(level, int):
        print(f"temporalstore: unknown --log-level {config.log_level!r}", file=sys.stderr)
        return 2
    logging.basicConfig(
        level=level, format="%(asctime)s %(levelname)s %(message)s", stream=sys.stderr
    )
    loop_runner: Any = asyncio.run
    try:
        import uvloop

        loop_runner = uvloop.run
    except ImportError:  # pragma: no cover - uvloop is a dependency where it builds
        pass
    try:
        code: int = loop_runner(serve(config))
    except OSError as e:
        log.error("cannot serve: %s", e)
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
