"""ACL permission checks, the core's: whether a session's user may run a command with
these arguments (`denied`, which the dispatcher asks; `exec_denied`, EXEC's check of
each queued command; `check_user`, for scripts and ACL DRYRUN; `full_key_access`, for
SORT's BY and GET), the ACL LOG entries a denial or a failed login leaves, and logging
in (`authenticate`, `default_auth`). The users and their rules are `commands.users`';
the ACL commands are the `commands.acl` family's."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from commands.acl_categories import CommandEntry, catalog
from commands.client_info import info_line
from commands.errors import (
    NOPERM_CHANNEL,
    NOPERM_COMMAND,
    NOPERM_EXEC,
    NOPERM_KEY,
    WRONGPASS,
    CommandError,
)
from commands.getkeys import get_keys
from commands.glob import glob_match
from commands.registry import Command, Flag
from commands.users import (
    DENIED_AUTH,
    DENIED_CHANNEL,
    DENIED_CMD,
    DENIED_KEY,
    READ,
    WRITE_PERM,
    LogEntry,
    Selector,
    User,
)

if TYPE_CHECKING:
    from commands.session import Session


# Commands whose arguments name channels (Redis' commands_with_channels): first argument,
# how many (-1: the rest), patterns. UNSUBSCRIBE and PUNSUBSCRIBE are never refused.
CHANNEL_ARGS = {
    "subscribe": (1, -1, False),
    "ssubscribe": (1, -1, False),
    "psubscribe": (1, -1, True),
    "publish": (1, 1, False),
    "spublish": (1, 1, False),
}


NOPERM = {DENIED_CMD: NOPERM_COMMAND, DENIED_KEY: NOPERM_KEY, DENIED_CHANNEL: NOPERM_CHANNEL}


EXEC_REASONS = {
    DENIED_CMD: "no permission to execute the command or subcommand",
    DENIED_KEY: "no permission to touch the specified keys",
    DENIED_CHANNEL: "no permission to access one of the channels used as arguments",
}


def _c(arg: bytes) -> bytes:
    """What Redis' %s shows of an argument: up to its first NUL."""
    return arg.split(b"\0", 1)[0]


def _key_perms(flags: tuple[str, ...], cmd: Command, own: bool) -> int:
    """The key permissions a key spec's flags ask for (Redis' ACLSelectorCheckKey). Our
    own commands' keys carry no spec flags: theirs come from the command's flags."""
    if own and not flags:
        if cmd.flags & Flag.WRITE:
            return READ | WRITE_PERM
        return READ if cmd.flags & Flag.READONLY else 0
    perms = READ if "access" in flags else 0
    if "insert" in flags or "delete" in flags or "update" in flags:
        perms |= WRITE_PERM
    return perms


def _key_refs(cmd: Command, own: bool, argv: list[bytes]) -> list[tuple[int, int]]:
    """(argument index, permissions needed) of each key the call names."""
    try:
        refs = get_keys(argv)
    except CommandError:  # no keys (or none to be found in these arguments)
        return []
    return [(i, _key_perms(flags, cmd, own)) for i, flags in refs]


def _channel_allowed(patterns: list[bytes], channel: bytes, is_pattern: bool) -> bool:
    """Redis' ACLCheckChannelAgainstList: a PSUBSCRIBE pattern must be listed as it is;
    a channel may match any listed pattern."""
    if is_pattern:
        return channel in patterns
    return any(glob_match(p, channel) for p in patterns)


def _check_selector(
    sel: Selector,
    cmd: Command,
    entry: CommandEntry,
    argv: list[bytes],
    keys: list[list[tuple[int, int]]],
) -> tuple[int, int]:
    """Redis' ACLSelectorCheckCmd: (0, 0) or (why denied, argument index)."""
    if not sel.allcommands and not entry.no_auth and not sel.allowed >> entry.id & 1:
        firsts = sel.firstargs.get(entry.id)
        if len(argv) < 2 or not firsts:
            return DENIED_CMD, 0
        arg = _c(argv[2 if entry.parent else 1]).lower()
        if all(_c(f).lower() != arg for f in firsts):
            return DENIED_CMD, 0
    if not sel.allkeys:
        if not keys:
            keys.append(_key_refs(cmd, entry.own, argv))
        for i, need in keys[0]:
            if not any(
                p.perms & need == need and glob_match(p.pattern, argv[i]) for p in sel.patterns
            ):
                return DENIED_KEY, i
    spec = CHANNEL_ARGS.get(cmd.name)
    if spec is not None and not sel.allchannels:
        start, count, is_pattern = spec
        stop = len(argv) if count == -1 else min(start + count, len(argv))
        for i in range(start, stop):
            if not _channel_allowed(sel.channels, argv[i], is_pattern):
                return DENIED_CHANNEL, i
    return 0, 0


def check_user(user: User, cmd: Command, argv: list[bytes]) -> tuple[int, int]:
    """Redis' ACLCheckAllUserCommandPerm: (0, 0) when some selector allows the call;
    else the reason (a key or channel over the command, the latest argument first) and
    the argument it concerns."""
    relevant, last = DENIED_CMD, 0
    entry = catalog().by_name.get(cmd.name) or catalog(rebuild=True).by_name[cmd.name]
    keys: list[list[tuple[int, int]]] = []  # computed once, for every selector
    for sel in user.selectors:
        result, i = _check_selector(sel, cmd, entry, argv, keys)
        if not result:
            return 0, 0
        if result > relevant or (result == relevant and i > last):
            relevant, last = result, i
    return relevant, last


def full_key_access(s: Session, cmd: Command, argv: list[bytes]) -> bool:
    """Redis' ACLUserCheckCmdWithUnrestrictedKeyAccess (read access): some selector that
    allows the call reads every key (SORT's BY and GET need it)."""
    if s.acl_all:
        return True
    entry = catalog().by_name.get(cmd.name) or catalog(rebuild=True).by_name[cmd.name]
    keys: list[list[tuple[int, int]]] = []
    for sel in _user_of(s).selectors:
        if _check_selector(sel, cmd, entry, argv, keys)[0]:
            continue
        if sel.allkeys or any(p.perms & READ and p.pattern == b"*" for p in sel.patterns):
            return True
    return False


def _context(s: Session) -> bytes:
    return b"multi" if s.multi is not None or s.in_exec else b"toplevel"


def log_denial(s: Session, reason: int, obj: bytes, username: bytes | None = None) -> None:
    s.server.users.add_log(
        LogEntry(
            count=1,
            reason=reason,
            context=_context(s),
            object=obj,
            username=s.user if username is None else username,
            ctime_ms=int(time.time() * 1000),
            client_info=info_line(s),
        )
    )


def _user_of(s: Session) -> User:
    users = s.server.users
    return users.get(s.user) or users.default


def denied(s: Session, cmd: Command, argv: list[bytes]) -> bytes | None:
    """The NOPERM error for a command the session's user may not run (logged to the ACL
    LOG), or None. The dispatcher calls it only when `s.acl_all` is false."""
    if s.multi is not None and cmd.flags & Flag.NO_MULTI:
        return None  # refused as not allowed in MULTI first, as Redis does
    result, i = check_user(_user_of(s), cmd, argv)
    if not result:
        return None
    log_denial(s, result, cmd.name.encode() if result == DENIED_CMD else argv[i])
    return NOPERM[result].format(cmd.name).encode()


def exec_denied(s: Session, cmd: Command, argv: list[bytes]) -> bytes | None:
    """EXEC checks each queued command again: the rules may have changed since."""
    result, i = check_user(_user_of(s), cmd, argv)
    if not result:
        return None
    log_denial(s, result, cmd.name.encode() if result == DENIED_CMD else argv[i])
    return NOPERM_EXEC.format(EXEC_REASONS[result]).encode()


def default_auth(s: Session) -> None:
    """Back to the default user, authenticated if it needs no password (RESET)."""
    default = s.server.users.default
    s.user = b"default"
    s.authenticated = default.login_free
    s.acl_all = default.unrestricted


def authenticate(s: Session, argv0: bytes, name: bytes, password: bytes) -> None:
    """AUTH / HELLO AUTH (Redis' ACLAuthenticateUser): log in as `name`, or log the
    failure to the ACL LOG and raise WRONGPASS (also for a user that is off)."""
    user = s.server.users.get(name)
    if user is None or not user.check_password(password):
        log_denial(s, DENIED_AUTH, argv0, name)
        raise CommandError(WRONGPASS)
    s.authenticated = True
    s.user = name
    s.acl_all = user.unrestricted
