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

from commands.acl_categories import CATEGORIES, catalog
from commands.common import help_reply
from commands.errors import (
    ACL_DEFAULT_UNDELETABLE,
    ACL_GENPASS_RANGE,
    ACL_NO_ACLFILE,
    ACL_SAVE_FAILED,
    ACL_UNKNOWN_CATEGORY,
    ACL_USERNAME_SPACES,
    SUBCOMMAND_SYNTAX,
    WRONG_ARITY,
    CommandError,
)
from commands.parsing import get_int
from commands.permissions import (
    _c,
    _channel_allowed,
    check_user,
)
from commands.permissions import denied as denied
from commands.redis_table import OrderedSet
from commands.registry import ADMIN, Flag, command, container, lookup_for_call
from commands.replies import OK, Reply
from commands.session import ServerCore, Session
from commands.users import (
    DENIED_CHANNEL,
    DENIED_CMD,
    DENIED_KEY,
    REASONS,
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

DRYRUN_TEXTS = {
    DENIED_CMD: b"This user has no permissions to run the '%s' command",
    DENIED_KEY: b"This user has no permissions to access the '%s' key",
    DENIED_CHANNEL: b"This user has no permissions to access the '%s' channel",
}


def _error(text: bytes) -> CommandError:
    """An error quoting user input stays one line (Redis' addReplyErrorSdsSafe)."""
    return CommandError(text.replace(b"\r", b" ").replace(b"\n", b" "))


# -- sessions ------------------------------------------------------------------------------------


def refresh_sessions(server: ServerCore) -> None:
    """Rules changed: recompute every connection's fast-path flag."""
    users = server.users
    for c in server.clients.values():
        u = users.get(c.user)
        c.acl_all = u is not None and u.unrestricted


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
