"""Server commands, as Redis 7.0.15 answers them (INFO, CONFIG and COMMAND have their
own modules: `commands.info`, `commands.config`, `commands.introspection`).

DBSIZE · FLUSHDB [ASYNC|SYNC] · FLUSHALL [ASYNC|SYNC] · SWAPDB index1 index2 · TIME
LASTSAVE · SAVE · BGSAVE [SCHEDULE] · BGREWRITEAOF
    Every commit already streams to the object store; these write checkpoints, which
    bound how much a restart replays. SAVE writes a checkpoint now (the durable layer
    then deletes what older checkpoints it no longer keeps) and replies once it is
    stored, or `-ERR checkpoint failed: ...`. BGSAVE asks for one at the durable
    layer's next check and replies at once. Both record the time LASTSAVE reports (for
    BGSAVE, when it was asked). Without a durable layer (in-process) they only record it.
SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]
"""

from __future__ import annotations

import asyncio
import logging
import time

from commands.errors import SYNTAX, CommandError
from commands.parsing import string2ll
from commands.registry import ADMIN, LOADING_STALE, Flag, command
from commands.replies import OK, CloseAfterReply, ErrorReply, Frames, Reply, Simple, deferred
from commands.session import Session
from store.ops import DEL

INVALID_FIRST_DB = "ERR invalid first DB index"
INVALID_SECOND_DB = "ERR invalid second DB index"
DB_OUT_OF_RANGE = "ERR DB index is out of range"
NO_SHUTDOWN = "ERR No shutdown in progress."
log = logging.getLogger("temporalstore")


# -- keyspace ------------------------------------------------------------------------------


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


def _db_index(arg: bytes, error: str) -> int:
    n = string2ll(arg)
    if n is None or not -(2**31) <= n < 2**31:
        raise CommandError(error)
    return n


@command("swapdb", 3, Flag.WRITE | Flag.FAST)
def cmd_swapdb(s: Session, argv: list[bytes]) -> Reply:
    a = _db_index(argv[1], INVALID_FIRST_DB)
    b = _db_index(argv[2], INVALID_SECOND_DB)
    n = len(s.store.dbs)
    if not (0 <= a < n and 0 <= b < n):
        raise CommandError(DB_OUT_OF_RANGE)
    if a != b:
        s.store.swap_dbs(a, b)
    return OK


# -- time, persistence, shutdown ---------------------------------------------------------------


@command("time", 1, LOADING_STALE | Flag.FAST)
def cmd_time(s: Session, argv: list[bytes]) -> Reply:
    ns = time.time_ns()
    return [b"%d" % (ns // 1_000_000_000), b"%d" % (ns // 1000 % 1_000_000)]


@command("lastsave", 1, LOADING_STALE | Flag.FAST)
def cmd_lastsave(s: Session, argv: list[bytes]) -> Reply:
    return s.server.save_stats.lastsave


def _saved(s: Session) -> None:
    saved = s.server.save_stats
    saved.lastsave = int(time.time())
    saved.lsn_at_save = s.store.lsn
    saved.saves += 1


@command("save", 1, Flag.ADMIN | Flag.NOSCRIPT | Flag.NO_ASYNC_LOADING | Flag.NO_MULTI)
def cmd_save(s: Session, argv: list[bytes]) -> Reply:
    """Write a checkpoint now (and compact); reply once it is stored."""
    dur = s.server.durability
    if dur is None:
        _saved(s)
        return OK

    async def save() -> Reply:
        assert dur is not None
        try:
            await dur.checkpoint()
        except Exception as e:  # storage down or fenced: Redis answers an error too
            return ErrorReply(f"ERR checkpoint failed: {e}".encode())
        _saved(s)
        return OK

    return deferred(save)


@command("bgsave", -1, Flag.ADMIN | Flag.NOSCRIPT | Flag.NO_ASYNC_LOADING)
def cmd_bgsave(s: Session, argv: list[bytes]) -> Reply:
    if len(argv) > 2 or (len(argv) == 2 and argv[1].lower() != b"schedule"):
        raise CommandError(SYNTAX)
    dur = s.server.durability
    if dur is not None:
        dur.checkpoint_soon()
    _saved(s)
    return Simple(b"Background saving started")


AOF_IN_PROGRESS = "ERR Background append only file rewriting already in progress"
AOF_FAILED = (
    "ERR Can't execute an AOF background rewriting. "
    "Please check the server logs for more information."
)


@command("bgrewriteaof", 1, Flag.ADMIN | Flag.NOSCRIPT | Flag.NO_ASYNC_LOADING)
def cmd_bgrewriteaof(s: Session, argv: list[bytes]) -> Reply:
    """Our AOF rewrite is a checkpoint: a compacted image of the store that a restart
    (or DEBUG LOADAOF) loads instead of replaying the records before it. It runs in
    the background; INFO persistence's aof_rewrite_* fields follow it."""
    saved = s.server.save_stats
    if saved.aof_rewrite_since:
        raise CommandError(AOF_IN_PROGRESS)
    dur = s.server.durability
    if dur is not None and dur.fenced:
        log.warning("BGREWRITEAOF refused: %s", dur.fenced)
        raise CommandError(AOF_FAILED)
    if s.in_exec:
        # As Redis inside MULTI/EXEC: it starts once the transaction is over.
        saved.aof_rewrite_scheduled = True
        saved.aof_failures = 0
        asyncio.get_running_loop().call_soon(_start_rewrite, s)
        return Simple(b"Background append only file rewriting scheduled")
    _start_rewrite(s)
    return Simple(b"Background append only file rewriting started")


def _start_rewrite(s: Session) -> None:
    saved = s.server.save_stats
    saved.aof_rewrite_scheduled = False
    if saved.aof_rewrite_since:
        return
    saved.aof_rewrite_since = time.monotonic()
    saved.aof_rewrites += 1
    dur = s.server.durability

    async def rewrite() -> None:
        try:
            if dur is not None:
                await dur.checkpoint()
            saved.aof_last_status = "ok"
            saved.aof_failures = 0
        except Exception as e:  # storage down or fenced
            log.warning("BGREWRITEAOF: checkpoint failed: %s", e)
            saved.aof_last_status = "err"
            saved.aof_failures += 1
        finally:
            saved.aof_last_time_s = int(time.monotonic() - saved.aof_rewrite_since)
            saved.aof_rewrite_since = 0.0
            saved.aof_task = None

    saved.aof_task = asyncio.get_running_loop().create_task(rewrite())


@command("shutdown", -1, ADMIN | Flag.NO_MULTI | Flag.ALLOW_BUSY)
def cmd_shutdown(s: Session, argv: list[bytes]) -> Reply:
    save = nosave = abort = other = False
    for a in argv[1:]:
        opt = a.lower()
        if opt == b"nosave":
            nosave = True
        elif opt == b"save":
            save = True
        elif opt in (b"now", b"force"):
            other = True
        elif opt == b"abort":
            abort = True
        else:
            raise CommandError(SYNTAX)
    if (abort and (save or nosave or other)) or (save and nosave):
        raise CommandError(SYNTAX)
    if abort:
        raise CommandError(NO_SHUTDOWN)
    s.server.shutdown_requested()
    return CloseAfterReply(Frames())  # Redis exits without replying
