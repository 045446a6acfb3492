"""CLIENT subcommands (ID, SETNAME, GETNAME, LIST, INFO, KILL, SETINFO, ...)."""

from __future__ import annotations

from commands.errors import CLIENT_NAME_SPACES, CommandError
from commands.registry import Flag, command, container
from commands.replies import OK, Reply
from commands.session import Session

container("client", -2, Flag.SENTINEL)


def set_client_name(s: Session, name: bytes) -> None:
    if any(c < 33 or c > 126 for c in name):
        raise CommandError(CLIENT_NAME_SPACES)
    s.name = name or None


@command("client|id", 2, Flag.NOSCRIPT | Flag.LOADING | Flag.STALE)
def cmd_client_id(s: Session, argv: list[bytes]) -> Reply:
    return s.id


@command("client|setname", 3, Flag.NOSCRIPT | Flag.LOADING | Flag.STALE)
def cmd_client_setname(s: Session, argv: list[bytes]) -> Reply:
    set_client_name(s, argv[2])
    return OK


@command("client|getname", 2, Flag.NOSCRIPT | Flag.LOADING | Flag.STALE)
def cmd_client_getname(s: Session, argv: list[bytes]) -> Reply:
    return s.name
