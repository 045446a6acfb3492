"""The flags of `temporalstore export` and `temporalstore import FILE`, apart from the
subcommands themselves so that the server's command line can offer them without
importing redis-py (which only those subcommands use)."""

from __future__ import annotations

import argparse
import os


def add_connection_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default=os.environ.get("TEMPORALSTORE_HOST", "127.0.0.1"))
    p.add_argument("--port", type=int, default=int(os.environ.get("TEMPORALSTORE_PORT", "6379")))
    p.add_argument("--user", default=os.environ.get("REDISCLI_USER"))
    p.add_argument("--password", default=os.environ.get("REDISCLI_AUTH"))


def add_export_flags(p: argparse.ArgumentParser) -> None:
    add_connection_flags(p)
    p.add_argument(
        "--at",
        nargs=2,
        metavar=("KIND", "VALUE"),
        help="SNAPSHOT name | VERSION n | TIME unix-ms (default: the current version)",
    )
    p.add_argument("--match", help="only keys matching this glob pattern")
    p.add_argument("--db", type=int, help="the database to export (default 0)")
    p.add_argument("-o", "--output", default="-", help="file to write (default: stdout)")


def add_import_flags(p: argparse.ArgumentParser) -> None:
    add_connection_flags(p)
    p.add_argument("--branch", help="the new branch to import into (default: import-<snapshot>)")
    p.add_argument("--db", type=int, help="the database (default: the exported one)")
    p.add_argument(
        "--main-line",
        action="store_true",
        help="import into the main line's database; refused if any imported key exists",
    )
    p.add_argument(
        "--replace",
        action="store_true",
        help="import into the main line, writing over keys that exist",
    )
