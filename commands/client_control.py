"""CLIENT PAUSE, UNPAUSE, UNBLOCK and REPLY, and MONITOR, as Redis 7.0.15 does them.

CLIENT PAUSE timeout [WRITE|ALL] · CLIENT UNPAUSE
    While a pause is in force the dispatcher asks `gate` about every command that
    passed its checks (arity, auth, ACL, ...): ALL holds every command, WRITE those
    that write or may replicate (PUBLISH, PFCOUNT, an EXEC whose queue holds such a
    command, an EVAL/EVALSHA/FCALL whose script or function may write: without a
    shebang, or without the `no-writes` flag). A held command answers `PAUSED`; its
    connection (proxy.server) keeps it and what follows, counts as blocked
    (INFO blocked_clients), and runs them in order when the pause ends, connection by
    connection in the order they were held. Expiry pauses too: keys whose time has
    come read as missing but are not deleted (`Store.expiry_held`) until the pause
    ends. Replicas' links are never paused. A pause started inside EXEC holds nothing
    of that transaction.
CLIENT UNBLOCK id [TIMEOUT|ERROR]
    Ends a client's blocking command (BLPOP, XREAD BLOCK, ...) with its timeout reply
    or `-UNBLOCKED client unblocked via CLIENT UNBLOCK`: 1 if it was blocked, else 0.
CLIENT REPLY ON|OFF|SKIP
    OFF: no replies from here on; SKIP: none for the next command; ON: replies again
    (its own OK is sent). Pushes (pub/sub messages and (un)subscribe confirmations,
    MONITOR lines) still arrive.
MONITOR
    Every command run afterwards, by any client, is pushed to the monitor as
    `+<unix>.<usec> [<db> <addr>] "cmd" "arg" ...` (a script's commands as
    `[<db> lua]`; EVAL and FCALL before the commands they run; admin commands
    not at all), with the arguments SLOWLOG redacts redacted (commands.ops_log). A
    monitor is a replica in Redis' eyes: its own commands that touch the keyspace get
    `-ERR Replica can't interact with the keyspace`, and it is never paused.
"""

from __future__ import annotations

import asyncio
import time

import commands.client  # noqa: F401  (declares the CLIENT container these subcommands join)
from commands.errors import SUBCOMMAND_SYNTAX, SYNTAX, CommandError
from commands.lua_engine import FLAG_EVAL_COMPAT, FLAG_NO_WRITES
from commands.lua_state import engine_of, shebang_flags
from commands.ops_state import (
    MONITOR_LINES,
    PAUSE_ALL,
    PAUSE_OFF,
    PAUSE_WRITE,
    REPLY_MONITOR,
    REPLY_OFF,
    REPLY_SKIP,
    REPLY_SKIP_NEXT,
)
from commands.parsing import string2ll
from commands.registry import Command, Flag, command
from commands.replies import (
    NO_REPLY,
    OK,
    PAUSED,
    Blocked,
    CloseAfterReply,
    Deferred,
    Frames,
    Paused,
    Push,
    Reply,
)
from commands.session import ServerCore, Session

CONN = Flag.NOSCRIPT | Flag.LOADING | Flag.STALE
ADMIN = Flag.ADMIN | CONN
REPLICA_KEYSPACE = b"ERR Replica can't interact with the keyspace"
PAUSE_MODE = "ERR CLIENT PAUSE mode must be WRITE or ALL"
TIMEOUT_NOT_INT = "ERR timeout is not an integer or out of range"
TIMEOUT_NEGATIVE = "ERR timeout is negative"
UNBLOCK_REASON = "ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR"
NOT_INTEGER = "ERR value is not an integer or out of range"
MONITOR_DENIED = "ERR MONITOR isn't allowed for DENY BLOCKING client"

_SCRIPT_CALLS = frozenset({"eval", "evalsha", "eval_ro", "evalsha_ro", "fcall", "fcall_ro"})


# -- the dispatcher's gate -------------------------------------------------------------


def _script_writes(s: Session, cmd: Command, argv: list[bytes]) -> bool:
    """Whether an EVAL/EVALSHA/FCALL counts as a write for a pause (Redis'
    evalGetCommandFlags / fcallGetCommandFlags)."""
    name = cmd.name
    ro = name.endswith("_ro")
    eng = engine_of(s.server)
    if name.startswith("fcall"):
        eng.sync_functions(s.store.functions)
        found = eng.functions.get(argv[1].lower())
        if found is None:
            return not ro
        return not found[1] & FLAG_NO_WRITES
    if name.startswith("evalsha"):
        known = eng.scripts.get(argv[1].lower())
        if known is None:
            return not ro
        flags = known[1]
    else:
        try:
            flags = shebang_flags(argv[1])[0]
        except CommandError:
            return not ro
    if flags & FLAG_EVAL_COMPAT:
        return not ro
    return not flags & FLAG_NO_WRITES


def _writes(s: Session, cmd: Command, argv: list[bytes]) -> bool:
    if cmd.name == "exec":
        return s.multi is not None and any(_writes(s, c, a) for c, a in s.multi)
    if cmd.name in _SCRIPT_CALLS:
        return _script_writes(s, cmd, argv)
    return cmd.is_write or bool(cmd.flags & Flag.MAY_REPLICATE)


def _touches_keyspace(s: Session, cmd: Command, argv: list[bytes]) -> bool:
    if cmd.name == "exec":
        return s.multi is not None and any(_touches_keyspace(s, c, a) for c, a in s.multi)
    return _writes(s, cmd, argv) or bool(cmd.flags & Flag.READONLY)


def gate(s: Session, cmd: Command, argv: list[bytes]) -> Paused | bytes | None:
    """ServerState.gate while a pause is in force or someone monitors: PAUSED to hold
    the command, an error text to refuse it, None to let it run."""
    server = s.server
    if s.monitor:
        return REPLICA_KEYSPACE if _touches_keyspace(s, cmd, argv) else None
    p = server.ops.pause
    if s.id in server.replication.links or s.blocked:
        # A replica's link is never paused, as in Redis; nor is a blocked command
        # being served (it was admitted when it blocked: Redis serves it in a pause).
        return None
    if p.kind == PAUSE_OFF:
        if not server.monitors:
            server.gate = None
        return None
    if time.monotonic() >= p.end:
        unpause(server)
        return None
    if p.kind == PAUSE_ALL or _writes(s, cmd, argv):
        return PAUSED
    return None


def _update_gate(server: ServerCore) -> None:
    server.gate = gate if server.monitors or server.ops.pause.kind != PAUSE_OFF else None


# -- pausing ---------------------------------------------------------------------------


def pause(server: ServerCore, kind: int, end: float) -> None:
    """Start a pause or extend the one in force (the larger kind, the later end)."""
    p = server.ops.pause
    store = server.store
    if p.kind == PAUSE_OFF:
        store.expiry_held = True  # expired keys read as missing, nothing is deleted
        p.kind, p.end = kind, end
    else:
        p.kind, p.end = max(p.kind, kind), max(p.end, end)
    _update_gate(server)
    _schedule_end(server)


def _schedule_end(server: ServerCore) -> None:
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return  # no loop (a test driving sessions directly): the gate ends it

    def check() -> None:
        p = server.ops.pause
        if p.kind == PAUSE_OFF:
            return
        if time.monotonic() >= p.end:
            unpause(server)
        else:
            loop.call_at(loop.time() + p.end - time.monotonic(), check)

    p = server.ops.pause
    loop.call_at(loop.time() + max(0.0, p.end - time.monotonic()), check)


def unpause(server: ServerCore) -> None:
    """End the pause: expiry resumes, and the held connections run their commands in
    the order they were held (each on its own turn of the event loop)."""
    p = server.ops.pause
    if p.kind == PAUSE_OFF:
        return
    p.kind = PAUSE_OFF
    server.store.expiry_held = False
    waiters, p.waiters = p.waiters, []
    _update_gate(server)
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        loop = None
    for wake in waiters:
        if loop is not None:
            loop.call_soon(wake)
        else:
            wake()


def parse_pause_timeout(arg: bytes) -> int:
    """getTimeoutFromObjectOrReply in milliseconds."""
    ms = string2ll(arg)
    if ms is None:
        raise CommandError(TIMEOUT_NOT_INT)
    if ms < 0:
        raise CommandError(TIMEOUT_NEGATIVE)
    return ms


def _mode(argv: list[bytes], first: bytes, second: bytes, error: str) -> bool | None:
    """The optional last argument of CLIENT PAUSE / UNBLOCK: True for `first`, False for
    `second`, None when absent (more arguments: Redis' subcommand syntax error)."""
    if len(argv) > 4:
        raise CommandError(SUBCOMMAND_SYNTAX % (argv[1], argv[0].upper()))
    if len(argv) < 4:
        return None
    mode = argv[3].lower()
    if mode not in (first, second):
        raise CommandError(error)
    return mode == first


@command("client|pause", -3, ADMIN)
def cmd_client_pause(s: Session, argv: list[bytes]) -> Reply:
    write = _mode(argv, b"write", b"all", PAUSE_MODE)
    ms = parse_pause_timeout(argv[2])
    pause(s.server, PAUSE_WRITE if write else PAUSE_ALL, time.monotonic() + ms / 1000)
    return OK


@command("client|unpause", 2, ADMIN)
def cmd_client_unpause(s: Session, argv: list[bytes]) -> Reply:
    unpause(s.server)
    return OK


# -- UNBLOCK, REPLY --------------------------------------------------------------------


@command("client|unblock", -3, ADMIN)
def cmd_client_unblock(s: Session, argv: list[bytes]) -> Reply:
    error = bool(_mode(argv, b"error", b"timeout", UNBLOCK_REASON))
    cid = string2ll(argv[2])
    if cid is None:
        raise CommandError(NOT_INTEGER)
    target = s.server.clients.get(cid)
    return 1 if target is not None and target.unblock(error) else 0


@command("client|reply", 3, CONN)
def cmd_client_reply(s: Session, argv: list[bytes]) -> Reply:
    opt = argv[2].lower()
    if opt == b"on":
        s.reply_mode = REPLY_MONITOR if s.monitor else 0
        return OK
    if opt == b"off":
        s.reply_mode = REPLY_OFF
        return NO_REPLY
    if opt == b"skip":
        if s.reply_mode != REPLY_OFF:
            s.reply_mode = REPLY_SKIP_NEXT
        return NO_REPLY
    raise CommandError(SYNTAX)


def quiet_reply(s: Session, reply: Reply) -> Reply:
    """A reply of a session whose replies CLIENT REPLY silences (reply_mode set): what
    is sent instead. A command that blocks, waits or is held keeps its turn: its
    reply is judged when it comes."""
    t = type(reply)
    if t is Blocked or t is Deferred or t is Paused:
        return reply
    mode = s.reply_mode
    if mode == REPLY_MONITOR:
        lines = s.extra.pop(MONITOR_LINES, None)
        return Frames([reply, *lines]) if lines and t is not CloseAfterReply else reply
    if mode == REPLY_SKIP_NEXT:
        s.reply_mode = REPLY_SKIP  # the next command's reply goes
    elif mode == REPLY_SKIP:
        s.reply_mode = 0
    if t is CloseAfterReply:
        return CloseAfterReply(NO_REPLY)
    if t is Push or (t is Frames and all(type(x) is Push for x in reply)):
        return reply  # (un)subscribe confirmations are pushes: sent anyway, as Redis
    return NO_REPLY


# -- MONITOR ---------------------------------------------------------------------------


@command("monitor", 1, ADMIN)
def cmd_monitor(s: Session, argv: list[bytes]) -> Reply:
    if s.in_exec:
        raise CommandError(MONITOR_DENIED)
    if s.monitor:
        return NO_REPLY  # as Redis: a monitor asking again gets no reply at all
    s.monitor = True
    if not s.reply_mode:
        s.reply_mode = REPLY_MONITOR
    s.server.monitors[s.id] = s
    _update_gate(s.server)
    return OK
