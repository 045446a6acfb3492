"""Server commands: FLUSHDB, FLUSHALL, DBSIZE (INFO, COMMAND, CONFIG, ... to come)."""

from __future__ import annotations

from commands.errors import SYNTAX, CommandError
from commands.registry import Flag, command
from commands.replies import OK, Reply
from commands.session import Session
from store.ops import DEL


def flush_db(s: Session, dbi: int) -> None:
    db = s.store.dbs[dbi]
    for key in list(db.data):
        s.store.apply(db, key, (DEL,))


def _flush_mode(argv: list[bytes]) -> None:
    if len(argv) > 2 or (len(argv) == 2 and argv[1].lower() not in (b"sync", b"async")):
        raise CommandError(SYNTAX)


@command("flushdb", -1, Flag.WRITE)
def cmd_flushdb(s: Session, argv: list[bytes]) -> Reply:
    _flush_mode(argv)
    flush_db(s, s.dbi)
    return OK


@command("flushall", -1, Flag.WRITE)
def cmd_flushall(s: Session, argv: list[bytes]) -> Reply:
    _flush_mode(argv)
    for i in range(len(s.store.dbs)):
        flush_db(s, i)
    return OK


@command("dbsize", 1, Flag.READONLY | Flag.FAST)
def cmd_dbsize(s: Session, argv: list[bytes]) -> Reply:
    return len(s.db)
