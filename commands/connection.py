"""Connection commands, as Redis 7.0.15 answers them.

PING [message] · ECHO message · SELECT index · QUIT · RESET
AUTH [username] password
HELLO [protover [AUTH username password] [SETNAME clientname]]

(CLIENT lives in `commands.client`.)
"""

from __future__ import annotations

from commands.cleanup import tracking_off, unsubscribe_all, unwatch_all
from commands.client_info import set_client_name
from commands.errors import (
    AUTH_NOT_SET,
    DB_INDEX_OUT_OF_RANGE,
    NOPROTO,
    NOT_INTEGER,
    SYNTAX,
    WRONG_ARITY,
    CommandError,
)
from commands.parsing import string2ll
from commands.permissions import authenticate, default_auth
from commands.redis_table import REDIS_VERSION
from commands.registry import LOADING_STALE, Flag, command
from commands.replies import OK, PONG, CloseAfterReply, Reply, Simple
from commands.session import Session
from store import PrunedError

PROTOVER_NOT_INTEGER = "ERR Protocol version is not an integer or out of range"
HELLO_OPTION = "ERR Syntax error in HELLO option '{}'"
HELLO_NOAUTH = (
    "NOAUTH HELLO must be called with the client already authenticated, otherwise the "
    "HELLO AUTH <user> <pass> option can be used to authenticate the client and select "
    "the RESP protocol version at the same time"
)
INT_RANGE = "ERR value is out of range, value must between -2147483648 and 2147483647"
RESET_REPLY = Simple(b"RESET")

# AUTH, HELLO, QUIT, RESET: allowed before authentication and while busy.
PRE_AUTH = Flag.NOSCRIPT | LOADING_STALE | Flag.FAST | Flag.NO_AUTH | Flag.ALLOW_BUSY


@command("ping", -1, Flag.FAST | Flag.SENTINEL | Flag.SUBSCRIBE_OK)
def cmd_ping(s: Session, argv: list[bytes]) -> Reply:
    if len(argv) > 2:
        raise CommandError(WRONG_ARITY.format("ping"))
    if s.resp == 2 and (s.channels or s.patterns):
        return [b"pong", argv[1] if len(argv) == 2 else b""]
    return PONG if len(argv) == 1 else argv[1]


@command("echo", 2, LOADING_STALE | Flag.FAST)
def cmd_echo(s: Session, argv: list[bytes]) -> Reply:
    return argv[1]


@command("quit", -1, PRE_AUTH | Flag.SUBSCRIBE_OK | Flag.TX_CONTROL)
def cmd_quit(s: Session, argv: list[bytes]) -> Reply:
    return CloseAfterReply(OK)


@command("auth", -2, PRE_AUTH | Flag.SENTINEL)
def cmd_auth(s: Session, argv: list[bytes]) -> Reply:
    if len(argv) > 3:
        raise CommandError(SYNTAX)
    if len(argv) == 2:
        if s.server.users.default.nopass:
            raise CommandError(AUTH_NOT_SET)
        authenticate(s, argv[0], b"default", argv[1])
    else:
        authenticate(s, argv[0], argv[1], argv[2])
    return OK


@command("hello", -1, PRE_AUTH | Flag.SENTINEL)
def cmd_hello(s: Session, argv: list[bytes]) -> Reply:
    ver = 0
    j = 1
    if len(argv) >= 2:
        n = string2ll(argv[1])
        if n is None:
            raise CommandError(PROTOVER_NOT_INTEGER)
        if n < 2 or n > 3:
            raise CommandError(NOPROTO)
        ver = n
        j = 2
    while j < len(argv):
        more = len(argv) - 1 - j
        opt = argv[j].lower()
        if opt == b"auth" and more >= 2:
            authenticate(s, argv[0], argv[j + 1], argv[j + 2])
            j += 2
        elif opt == b"setname" and more:
            set_client_name(s, argv[j + 1])
            j += 1
        else:
            shown = argv[j].split(b"\0", 1)[0].decode("utf-8", "replace")
            raise CommandError(HELLO_OPTION.format(shown))
        j += 1
    if not s.authenticated:
        raise CommandError(HELLO_NOAUTH)
    if ver:
        s.resp = ver
    return {
        b"server": b"redis",
        b"version": REDIS_VERSION.encode(),
        b"proto": s.resp,
        b"id": s.id,
        b"mode": b"standalone",
        b"role": b"master",
        b"modules": [],
    }


@command("select", 2, LOADING_STALE | Flag.FAST)
def cmd_select(s: Session, argv: list[bytes]) -> Reply:
    n = string2ll(argv[1])
    if n is None:
        raise CommandError(NOT_INTEGER)
    if not -(2**31) <= n < 2**31:
        raise CommandError(INT_RANGE)
    if not 0 <= n < len(s.store.dbs):
        raise CommandError(DB_INDEX_OUT_OF_RANGE)
    try:
        s.select(n)
    except PrunedError as e:  # under TS.CHECKOUT AT: that database's history is gone
        raise CommandError(str(e)) from None
    return OK


@command("reset", 1, PRE_AUTH | Flag.SUBSCRIBE_OK | Flag.TX_CONTROL)
def cmd_reset(s: Session, argv: list[bytes]) -> Reply:
    s.multi = None
    s.multi_error = False
    unwatch_all(s)
    unsubscribe_all(s)
    tracking_off(s)
    s.view_lsn = None
    s.branch = None
    s.select(0)
    s.resp = 2
    s.name = None
    s.meta = None
    s.reply_mode = 0  # CLIENT REPLY ON
    s.monitor = False  # no longer a MONITOR
    s.server.monitors.pop(s.id, None)
    default_auth(s)
    return RESET_REPLY
