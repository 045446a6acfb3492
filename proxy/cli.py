"""`temporalstore serve`: the process entry point. Every flag can also be given as
an environment variable TEMPORALSTORE_<FLAG> (dashes become underscores)."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

import commands.families  # noqa: F401  (registers every command)
from commands.session import Config, ServerState
from proxy.server import Server
from store import HistoryPolicy, Store

log = logging.getLogger("temporalstore")


def _env(flag: str, default: str | None) -> str | None:
    return os.environ.get("TEMPORALSTORE_" + flag.upper().replace("-", "_"), default)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="temporalstore", description=__doc__)
    sub = p.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="serve the Redis protocol")
    flags: list[tuple[str, str | None, str]] = [
        ("host", "127.0.0.1", "address to listen on"),
        ("port", "6379", "port to listen on (0 picks a free port)"),
        ("storage", "file://./data", "file://DIR or s3://bucket/prefix"),
        ("s3-endpoint-url", None, "S3 endpoint (MinIO, moto, ...)"),
        ("flush-interval-ms", "100", "how often update records are flushed"),
        ("requirepass", None, "password for the default user"),
        ("databases", "16", "number of databases"),
        ("log-level", "info", "debug, info, warning or error"),
        ("history", "versions:64", "history kept in memory: all, versions:N or ms:N"),
    ]
    for name, default, help_text in flags:
        serve.add_argument(f"--{name}", default=_env(name, default), help=help_text)
    return p


def config_from_args(ns: argparse.Namespace) -> Config:
    def num(name: str, value: str) -> int:
        try:
            n = int(value)
        except ValueError:
            raise SystemExit(f"temporalstore: --{name} must be an integer, not {value!r}") from None
        if n < 0:
            raise SystemExit(f"temporalstore: --{name} must not be negative")
        return n

    databases = num("databases", ns.databases)
    if databases < 1:
        raise SystemExit("temporalstore: --databases must be at least 1")
    try:
        HistoryPolicy.parse(ns.history)
    except ValueError as e:
        raise SystemExit(f"temporalstore: --history: {e}") from None
    return Config(
        host=ns.host,
        port=num("port", ns.port),
        storage=ns.storage,
        s3_endpoint_url=ns.s3_endpoint_url,
        flush_interval_ms=num("flush-interval-ms", ns.flush_interval_ms),
        requirepass=ns.requirepass or None,
        databases=databases,
        log_level=ns.log_level,
        history=ns.history,
    )


async def serve(config: Config) -> None:
    store = Store(databases=config.databases, history=HistoryPolicy.parse(config.history))
    state = ServerState(store, config)
    server = Server(state)
    port = await server.start(config.host, config.port)
    log.info("listening on %s:%d", config.host, port)
    await server.serve_until_stopped()


def main(argv: Sequence[str] | None = None) -> int:
    ns = build_parser().parse_args(argv)
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
        loop_runner(serve(config))
    except OSError as e:
        log.error("cannot serve: %s", e)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
