"""ACL, as Redis 7.0.15 answers it: the ACL command, the permission check the
dispatcher runs before a command (and EXEC before each queued one), and logging in
as a user (AUTH, HELLO AUTH).

ACL SETUSER username [rule ...]        create or change a user (all rules or none)
ACL GETUSER username                   flags, passwords, commands, keys, channels, selectors
ACL LIST · ACL USERS · ACL WHOAMI
ACL DELUSER username [username ...]    also disconnects the clients logged in as them
ACL CAT [category]                     categories, or the commands we serve in one
ACL DRYRUN username command [arg ...]  OK, or why the user could not run it
ACL GENPASS [bits] · ACL LOG [count | RESET] · ACL HELP
ACL LOAD · ACL SAVE                    the file given with --aclfile

The users themselves (rules, descriptions, the aclfile format, the log) are
`commands.users`. A session whose user may run every command on every key and
channel has `s.acl_all` set, and the dispatcher checks nothing more for it.
"""

from __future__ import annotations

import secrets
import time

from commands.acl_categories import CATEGORIES, CommandEntry, catalog
from commands.client import info_line
from commands.common import help_reply
from commands.errors import (
    ACL_DEFAULT_UNDELETABLE,
    ACL_GENPASS_RANGE,
    ACL_NO_ACLFILE,
    ACL_SAVE_FAILED,
    ACL_UNKNOWN_CATEGORY,
    ACL_USERNAME_SPACES,
    NOPERM_CHANNEL,
    NOPERM_COMMAND,
    NOPERM_EXEC,
    NOPERM_KEY,
    SUBCOMMAND_SYNTAX,
    WRONG_ARITY,
    WRONGPASS,
    CommandError,
)
from commands.getkeys import get_keys
from commands.glob import glob_match
from commands.parsing import get_int
from commands.redis_table import OrderedSet
from commands.registry import ADMIN, Command, Flag, command, container, lookup_for_call
from commands.replies import OK, Reply
from commands.session import ServerState, Session
from commands.users import (
    DENIED_AUTH,
    DENIED_CHANNEL,
    DENIED_CMD,
    DENIED_KEY,
    READ,
    REASONS,
    WRITE_PERM,
    LogEntry,
    RuleError,
    Selector,
    User,
    has_spaces,
)

OPEN = Flag.NOSCRIPT | Flag.LOADING | Flag.STALE

ACL_HELP = [
    "CAT [<category>]",
    "    List all commands that belong to <category>, or all command categories",
    "    when no category is specified.",
    "DELUSER <username> [<username> ...]",
    "    Delete a list of users.",
    "DRYRUN <username> <command> [<arg> ...]",
    "    Returns whether the user can execute the given command without executing the command.",
    "GETUSER <username>",
    "    Get the user's details.",
    "GENPASS [<bits>]",
    "    Generate a secure 256-bit user password. The optional `bits` argument can",
    "    be used to specify a different size.",
    "LIST",
    "    Show users details in config file format.",
    "LOAD",
    "    Reload users from the ACL file.",
    "LOG [<count> | RESET]",
    "    Show the ACL log entries.",
    "SAVE",
    "    Save the current config to the ACL file.",
    "SETUSER <username> <attribute> [<attribute> ...]",
    "    Create or modify a user with the specified attributes.",
    "USERS",
    "    List all the registered usernames.",
    "WHOAMI",
    "    Return the current connection username.",
]

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
DRYRUN_TEXTS = {
    DENIED_CMD: b"This user has no permissions to run the '%s' command",
    DENIED_KEY: b"This user has no permissions to access the '%s' key",
    DENIED_CHANNEL: b"This user has no permissions to access the '%s' channel",
}


def _c(arg: bytes) -> bytes:
    """What Redis' %s shows of an argument: up to its first NUL."""
    return arg.split(b"\0", 1)[0]


def _error(text: bytes) -> CommandError:
    """An error quoting user input stays one line (Redis' addReplyErrorSdsSafe)."""
    return CommandError(text.replace(b"\r", b" ").replace(b"\n", b" "))


# -- permission checks -------------------------------------------------------------------------


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


# -- sessions ------------------------------------------------------------------------------------


def refresh_sessions(server: ServerState) -> None:
    """Rules changed: recompute every connection's fast-path flag."""
    users = server.users
    for c in server.clients.values():
        u = users.get(c.user)
        c.acl_all = u is not None and u.unrestricted


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


def _disconnect(s: Session, c: Session) -> None:
    """As Redis' ACLFreeUserAndKillClients: back to the default user, unauthenticated,
    and closed (the caller after its reply)."""
    c.user = b"default"
    c.authenticated = False
    c.acl_all = False
    c.killed = True
    if c is not s:
        c.close()


def _kill_pubsub_if_needed(s: Session, user: User, before: User) -> None:
    """Redis' ACLKillPubsubClientsIfNeeded: channel permissions were taken away, so the
    user's subscribers to channels no longer allowed are disconnected."""
    if any(sel.allchannels for sel in user.selectors):
        return
    upcoming = [c for sel in user.selectors for c in sel.channels]
    if all(
        not sel.allchannels and all(c in upcoming for c in sel.channels) for sel in before.selectors
    ):
        return
    for c in list(s.server.clients.values()):
        if c.user != user.name or not (c.channels or c.patterns):
            continue
        if any(not _channel_allowed(upcoming, p, True) for p in c.patterns) or any(
            not _channel_allowed(upcoming, ch, False) for ch in c.channels
        ):
            c.killed = True
            if c is not s:
                c.close()


# -- ACL ----------------------------------------------------------------------------------------

container("acl", -2)


@command("acl|setuser", -3, ADMIN)
def cmd_acl_setuser(s: Session, argv: list[bytes]) -> Reply:
    name = argv[2]
    if has_spaces(name):
        raise CommandError(ACL_USERNAME_SPACES)
    try:
        user, before = s.server.users.set_user(name, argv[3:])
    except RuleError as e:
        raise _error(b"ERR " + e.reason.encode("utf-8", "surrogateescape")) from None
    if before is not None:
        _kill_pubsub_if_needed(s, user, before)
    refresh_sessions(s.server)
    return OK


@command("acl|getuser", 3, ADMIN)
def cmd_acl_getuser(s: Session, argv: list[bytes]) -> Reply:
    user = s.server.users.get(argv[2])
    if user is None:
        return None
    cat = catalog()

    def describe(sel: Selector) -> dict[bytes, bytes]:
        return {
            b"commands": sel.describe_commands(cat),
            b"keys": sel.keys_text(),
            b"channels": sel.channels_text(),
        }

    return {
        b"flags": OrderedSet(user.flag_names()),
        b"passwords": list(user.passwords),
        **describe(user.root),
        b"selectors": [describe(sel) for sel in user.selectors[1:]],
    }


@command("acl|list", 2, ADMIN)
def cmd_acl_list(s: Session, argv: list[bytes]) -> Reply:
    return s.server.users.list_lines()


@command("acl|users", 2, ADMIN)
def cmd_acl_users(s: Session, argv: list[bytes]) -> Reply:
    return s.server.users.names()


@command("acl|whoami", 2, OPEN)
def cmd_acl_whoami(s: Session, argv: list[bytes]) -> Reply:
    return s.user


@command("acl|deluser", -3, ADMIN)
def cmd_acl_deluser(s: Session, argv: list[bytes]) -> Reply:
    if b"default" in argv[2:]:
        raise CommandError(ACL_DEFAULT_UNDELETABLE)
    users = s.server.users
    deleted = 0
    for name in argv[2:]:
        if users.delete(name) is None:
            continue
        deleted += 1
        for c in list(s.server.clients.values()):
            if c.user == name:
                _disconnect(s, c)
    refresh_sessions(s.server)
    return deleted


@command("acl|cat", -2, OPEN)
def cmd_acl_cat(s: Session, argv: list[bytes]) -> Reply:
    if len(argv) > 3:
        raise _subcommand_syntax(argv)
    if len(argv) == 2:
        return [name.encode() for name in CATEGORIES]
    wanted = _c(argv[2]).decode("latin-1").lower()
    if wanted not in CATEGORIES:
        raise _error(ACL_UNKNOWN_CATEGORY.encode() % _c(argv[2])[:128])
    cat = catalog()
    return [e.name.encode() for e in cat.members[CATEGORIES.index(wanted)] if e.served]


@command("acl|dryrun", -4, ADMIN)
def cmd_acl_dryrun(s: Session, argv: list[bytes]) -> Reply:
    user = s.server.users.get(argv[2])
    if user is None:
        raise _error(b"ERR User '%s' not found" % _c(argv[2]))
    call = argv[3:]
    cmd = lookup_for_call(call)
    if cmd is None:
        raise _error(b"ERR Command '%s' not found" % _c(argv[3]))
    if (cmd.arity > 0 and cmd.arity != len(call)) or len(call) < -cmd.arity:
        raise CommandError(WRONG_ARITY.format(cmd.name))
    result, i = check_user(user, cmd, call)
    if not result:
        return OK
    return DRYRUN_TEXTS[result] % (cmd.name.encode() if result == DENIED_CMD else _c(call[i]))


@command("acl|genpass", -2, OPEN)
def cmd_acl_genpass(s: Session, argv: list[bytes]) -> Reply:
    if len(argv) > 3:
        raise _subcommand_syntax(argv)
    bits = get_int(argv[2]) if len(argv) == 3 else 256
    if bits <= 0 or bits > 4096:
        raise CommandError(ACL_GENPASS_RANGE)
    chars = (bits + 3) // 4
    return secrets.token_hex((chars + 1) // 2)[:chars].encode()


@command("acl|log", -2, ADMIN)
def cmd_acl_log(s: Session, argv: list[bytes]) -> Reply:
    if len(argv) > 3:
        raise _subcommand_syntax(argv)
    users = s.server.users
    count = 10
    if len(argv) == 3:
        if _c(argv[2]).lower() == b"reset":
            users.log.clear()
            return OK
        count = max(get_int(argv[2]), 0)
    now = int(time.time() * 1000)
    return [
        {
            b"count": e.count,
            b"reason": REASONS[e.reason],
            b"context": e.context,
            b"object": e.object,
            b"username": e.username,
            b"age-seconds": (now - e.ctime_ms) / 1000,
            b"client-info": e.client_info,
        }
        for e in users.log[:count]
    ]


def _aclfile(s: Session) -> str:
    path = s.server.config.aclfile
    if not path:
        raise CommandError(ACL_NO_ACLFILE)
    return path


@command("acl|load", 2, ADMIN)
def cmd_acl_load(s: Session, argv: list[bytes]) -> Reply:
    users = s.server.users
    loaded = users.parse_file(_aclfile(s))
    if isinstance(loaded, str):
        raise _error(b"ERR " + loaded.encode("utf-8", "surrogateescape"))
    users.replace(loaded)
    # As Redis, every client logged in as a user other than the default one is closed:
    # the users it was logged in as are gone (replaced by the file's).
    for c in list(s.server.clients.values()):
        if c.user != b"default":
            _disconnect(s, c)
    refresh_sessions(s.server)
    return OK


@command("acl|save", 2, ADMIN)
def cmd_acl_save(s: Session, argv: list[bytes]) -> Reply:
    if not s.server.users.save_file(_aclfile(s)):
        raise CommandError(ACL_SAVE_FAILED)
    return OK


@command("acl|help", 2, Flag.LOADING | Flag.STALE)
def cmd_acl_help(s: Session, argv: list[bytes]) -> Reply:
    return help_reply(argv[0], ACL_HELP)


def _subcommand_syntax(argv: list[bytes]) -> CommandError:
    return _error(SUBCOMMAND_SYNTAX % (argv[1][:128], argv[0].upper()))
