"""SLOWLOG, as Redis 7.0.15 answers it.

SLOWLOG GET [count] · SLOWLOG LEN · SLOWLOG RESET · SLOWLOG HELP
    Entries (newest first): id, unix time, microseconds, the arguments, the client's
    address ("?:0" for a script's commands) and name. What is logged, trimmed and
    redacted: `commands.ops_log`; how commands are timed: `commands.ops_state`.
"""

from __future__ import annotations

from commands.common import help_reply
from commands.errors import SUBCOMMAND_SYNTAX, CommandError
from commands.parsing import string2ll
from commands.registry import Flag, command, container
from commands.replies import OK, Reply
from commands.session import Session

COUNT_RANGE = "ERR count should be greater than or equal to -1"
SLOWLOG_HELP = [
    "GET [<count>]",
    "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
    "    Entries are made of:",
    "    id, timestamp, time in microseconds, arguments array, client IP and port,",
    "    client name",
    "LEN",
    "    Return the length of the slowlog.",
    "RESET",
    "    Reset the slowlog.",
]

# -- SLOWLOG ---------------------------------------------------------------------------

SLOWLOG_FLAGS = Flag.ADMIN | Flag.LOADING | Flag.STALE

container("slowlog", -2)


@command("slowlog|get", -2, SLOWLOG_FLAGS)
def cmd_slowlog_get(s: Session, argv: list[bytes]) -> Reply:
    if len(argv) > 3:
        raise CommandError(SUBCOMMAND_SYNTAX % (argv[1], argv[0].upper()))
    log = s.server.ops.slowlog
    count = 10
    if len(argv) == 3:
        n = string2ll(argv[2])
        if n is None or n < -1:
            raise CommandError(COUNT_RANGE)
        count = len(log) if n == -1 else n
    return [
        [e.id, e.time, e.duration, list(e.argv), e.peer, e.name] for e in list(log)[: max(0, count)]
    ]


@command("slowlog|len", 2, SLOWLOG_FLAGS)
def cmd_slowlog_len(s: Session, argv: list[bytes]) -> Reply:
    return len(s.server.ops.slowlog)


@command("slowlog|reset", 2, SLOWLOG_FLAGS)
def cmd_slowlog_reset(s: Session, argv: list[bytes]) -> Reply:
    s.server.ops.slowlog.clear()
    return OK


@command("slowlog|help", 2, Flag.LOADING | Flag.STALE)
def cmd_slowlog_help(s: Session, argv: list[bytes]) -> Reply:
    return help_reply(argv[0], SLOWLOG_HELP)
