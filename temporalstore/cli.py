"""`temporalstore export` and `temporalstore import FILE`: the export format between a
running server and a file, over RESP like redis-cli (`--host`, `--port`, `--user`,
`--password`; the password also from REDISCLI_AUTH, the user from REDISCLI_USER)."""

from __future__ import annotations

import argparse
import os
import sys

import redis

from temporalstore.client import Temporal
from temporalstore.transfer import ExportFileError
from temporalstore.types import Point

POINTS = {"snapshot": "snapshot", "version": "version", "time": "time"}


def _client(ns: argparse.Namespace) -> Temporal:
    r = redis.Redis(host=ns.host, port=ns.port, username=ns.user, password=ns.password)
    return Temporal(r)


def _point(at: list[str] | None) -> Point | None:
    if at is None:
        return None
    kind, value = at[0].lower(), at[1]
    if kind not in POINTS:
        raise SystemExit(f"temporalstore: --at takes SNAPSHOT, VERSION or TIME, not {at[0]!r}")
    if kind == "snapshot":
        return Point(snapshot=value)
    if not value.isdigit():
        raise SystemExit(f"temporalstore: --at {at[0]} needs an integer, not {value!r}")
    return Point(version=int(value)) if kind == "version" else Point(time=int(value))


def export_main(ns: argparse.Namespace) -> int:
    ts = _client(ns)
    try:
        if ns.output == "-":
            with os.fdopen(os.dup(sys.stdout.fileno()), "wb") as out:
                n = ts.export_snapshot(out, at=_point(ns.at), match=ns.match, db=ns.db)
        else:
            n = ts.export_snapshot(ns.output, at=_point(ns.at), match=ns.match, db=ns.db)
    except redis.RedisError as e:
        print(f"temporalstore export: {e}", file=sys.stderr)
        return 1
    print(f"temporalstore export: {n} keys", file=sys.stderr)
    return 0


def import_main(ns: argparse.Namespace) -> int:
    ts = _client(ns)
    try:
        done = ts.import_snapshot(
            ns.file, branch=ns.branch, db=ns.db, replace=ns.replace, main_line=ns.main_line
        )
    except (ExportFileError, OSError, ValueError) as e:
        print(f"temporalstore import: {e} (nothing was written)", file=sys.stderr)
        return 1
    except redis.RedisError as e:
        print(f"temporalstore import: {e}", file=sys.stderr)
        return 1
    where = f"branch {done.branch!r}" if done.branch is not None else "the main line"
    print(f"temporalstore import: {done.keys} keys into {where}, db {done.db}", file=sys.stderr)
    return 0
