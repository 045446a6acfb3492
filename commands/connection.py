"""Connection commands: PING, ECHO, HELLO, AUTH, SELECT, QUIT, RESET.

(CLIENT lives in `commands.client`.)
"""

from __future__ import annotations

import hmac

from commands.cleanup import unsubscribe_all, unwatch_all
from commands.errors import (
    AUTH_NOT_SET,
    DB_INDEX_OUT_OF_RANGE,
    NOT_INTEGER,
    SYNTAX,
    WRONG_ARITY,
    WRONGPASS,
    CommandError,
)
from commands.parsing import string2ll
from commands.registry import Flag, command
from commands.replies import OK, PONG, CloseAfterReply, Reply, Simple
from commands.session import Session

REDIS_VERSION = b"7.0.15"
CONN = Flag.NOSCRIPT | Flag.LOADING | Flag.STALE | Flag.FAST
RESET_REPLY = Simple(b"RESET")


@command("ping", -1, Flag.FAST | Flag.SENTINEL | Flag.SUBSCRIBE_OK)
def cmd_ping(s: Session, argv: list[bytes]) -> Reply:
    if len(argv) > 2:
        raise CommandError(WRONG_ARITY.format("ping"))
    if s.resp == 2 and (s.channels or s.patterns):
        return [b"pong", argv[1] if len(argv) == 2 else b""]
    return PONG if len(argv) == 1 else argv[1]


@command("echo", 2, Flag.FAST)
def cmd_echo(s: Session, argv: list[bytes]) -> Reply:
    return argv[1]


@command("quit", -1, Flag.ALLOW_BUSY | Flag.NO_AUTH | Flag.FAST | CONN | Flag.SUBSCRIBE_OK | Flag.TX_CONTROL)
def cmd_quit(s: Session, argv: list[bytes]) -> Reply:
    return CloseAfterReply(OK)


def check_password(s: Session, user: bytes, password: bytes) -> bool:
    required = s.server.config.requirepass
    if user != b"default":
        return False
    if required is None:
        return True
    return hmac.compare_digest(password, required.encode())


@command("auth", -2, Flag.NO_AUTH | CONN | Flag.SENTINEL)
def cmd_auth(s: Session, argv: list[bytes]) -> Reply:
    if len(argv) > 3:
        raise CommandError(SYNTAX)
    if len(argv) == 2:
        if s.server.config.requirepass is None:
            raise CommandError(AUTH_NOT_SET)
        user, password = b"default", argv[1]
    else:
        user, password = argv[1], argv[2]
    if not check_password(s, user, password):
        raise CommandError(WRONGPASS)
    s.authenticated = True
    s.user = user
    return OK


@command("hello", -1, Flag.NO_AUTH | CONN | Flag.SENTINEL)
def cmd_hello(s: Session, argv: list[bytes]) -> Reply:
    from commands.client import set_client_name

    ver = 0
    j = 1
    if len(argv) >= 2:
        n = string2ll(argv[1])
        if n is None:
            raise CommandError("ERR Protocol version is not an integer or out of range")
        ver = n
        j = 2
        if ver < 2 or ver > 3:
            raise CommandError("NOPROTO unsupported protocol version")
    while j < len(argv):
        more = len(argv) - 1 - j
        opt = argv[j].lower()
        if opt == b"auth" and more >= 2:
            if not check_password(s, argv[j + 1], argv[j + 2]):
                raise CommandError(WRONGPASS)
            s.authenticated = True
            s.user = argv[j + 1]
            j += 2
        elif opt == b"setname" and more:
            set_client_name(s, argv[j + 1])
            j += 1
        else:
            raise CommandError(f"ERR Syntax error in HELLO option '{argv[j].decode(errors='replace')}'")
        j += 1
    if not s.authenticated:
        raise CommandError(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the "
            "HELLO AUTH <user> <pass> option can be used to authenticate the client and select "
            "the RESP protocol version at the same time"
        )
    if ver:
        s.resp = ver
    return {
        b"server": b"redis",
        b"version": REDIS_VERSION,
        b"proto": s.resp,
        b"id": s.id,
        b"mode": b"standalone",
        b"role": b"master",
        b"modules": [],
    }


@command("select", 2, CONN)
def cmd_select(s: Session, argv: list[bytes]) -> Reply:
    n = string2ll(argv[1])
    if n is None or not -(2**31) <= n < 2**31:
        raise CommandError(NOT_INTEGER)
    if not 0 <= n < len(s.store.dbs):
        raise CommandError(DB_INDEX_OUT_OF_RANGE)
    s.select(n)
    return OK


@command("reset", 1, CONN | Flag.NO_AUTH | Flag.SUBSCRIBE_OK | Flag.TX_CONTROL | Flag.ALLOW_BUSY)
def cmd_reset(s: Session, argv: list[bytes]) -> Reply:
    s.multi = None
    s.multi_error = False
    unwatch_all(s)
    unsubscribe_all(s)
    s.select(0)
    s.resp = 2
    s.name = None
    s.meta = None
    s.authenticated = s.server.config.requirepass is None
    s.user = b"default"
    return RESET_REPLY
