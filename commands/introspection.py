"""COMMAND and its subcommands, as Redis 7.0.15 answers them.

COMMAND · COMMAND COUNT · COMMAND LIST [FILTERBY MODULE name|ACLCAT category|PATTERN glob]
COMMAND INFO [command-name ...] · COMMAND DOCS [command-name ...] · COMMAND HELP
COMMAND GETKEYS command [arg ...] · COMMAND GETKEYSANDFLAGS command [arg ...]
    Answered from `redis_commands.json` (`commands.redis_table`), restricted to the
    commands in our command table; a command or subcommand Redis 7.0 does not have is
    described from our table. Keys are found by `commands.getkeys`.
"""

from __future__ import annotations

from typing import Any

from commands.acl_categories import own_categories
from commands.common import help_reply
from commands.errors import SYNTAX, CommandError
from commands.getkeys import KEY_FLAG_ORDER, get_keys, range_spec
from commands.glob import glob_match
from commands.redis_table import OrderedSet, command_data, redis_entry, to_reply, typed_names
from commands.registry import (
    COMMANDS,
    FLAG_NAMES,
    LOADING_STALE,
    Command,
    Flag,
    command,
    container,
    lookup_by_name,
)
from commands.replies import PairsMap, Reply, Simple
from commands.session import Session
from commands.ts_docs import docs_for

COMMAND_HELP = [
    "(no subcommand)",
    "    Return details about all Redis commands.",
    "COUNT",
    "    Return the total number of commands in this Redis server.",
    "LIST",
    "    Return a list of all commands in this Redis server.",
    "INFO [<command-name> ...]",
    "    Return details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "DOCS [<command-name> ...]",
    "    Return documentation details about multiple Redis commands.",
    "    If no command names are given, documentation details for all",
    "    commands are returned.",
    "GETKEYS <full-command>",
    "    Return the keys from a full Redis command.",
    "GETKEYSANDFLAGS <full-command>",
    "    Return the keys and the access flags from a full Redis command.",
]


def _typed(v: Any) -> Any:
    """The plain form of a key spec as a typed tree (dicts are maps, lists are sets)."""
    if isinstance(v, dict):
        return {"%": [[k, _typed(x)] for k, x in v.items()]}
    if isinstance(v, list):
        return {"~": [{"+": x} for x in v]}
    return v


def _synth_info(cmd: Command) -> list[Any]:
    flags = [{"+": n} for f, n in FLAG_NAMES if cmd.flags & f]
    cats = [{"+": n} for n in own_categories(cmd)]  # what ACL CAT lists it under
    first, last, step = cmd.first_key, cmd.last_key, cmd.step
    specs = [_typed(range_spec(first, last, step))] if first else []
    return [cmd.name, cmd.arity, {"~": flags}, first, last, step, {"~": cats}, {"~": []},
            {"~": specs}, {"~": []}]  # fmt: skip


def _synth_docs(cmd: Command) -> dict[str, Any]:
    documented = docs_for(cmd.name)
    if documented is not None:
        return documented
    doc = (cmd.handler.__doc__ or "").strip().splitlines() if cmd.handler else []
    pairs: list[list[Any]] = [["summary", doc[0]]] if doc else []
    group = "generic"
    top = command_data()["commands"].get(cmd.name.partition("|")[0])
    if top is not None:
        group = dict(top["docs"]["%"])["group"]
    pairs.append(["group", group])
    return {"%": pairs}


def typed_entry(cmd: Command) -> tuple[list[Any], dict[str, Any]]:
    """(info, docs) typed trees for one of our commands, subcommands restricted to ours."""
    found = redis_entry(cmd.name)
    info, docs = found if found is not None else (_synth_info(cmd), _synth_docs(cmd))
    if cmd.subcommands is None:
        return info, docs
    subs = sorted({c.name: c for c in cmd.subcommands.values()}.values(), key=lambda c: c.name)
    entries = [typed_entry(c) for c in subs]
    info = [*info[:9], [e[0] for e in entries] if entries else {"~": []}]
    pairs = [p for p in docs["%"] if p[0] != "subcommands"]
    pairs.append(
        ["subcommands", {"%": [[c.name, e[1]] for c, e in zip(subs, entries, strict=True)]}]
    )
    return info, {"%": pairs}


_REPLY_CACHE: dict[tuple[str, str], Reply] = {}
_CACHE_KEY: list[int] = [-1]


def _table_size() -> int:
    return sum(1 + len(c.subcommands or ()) for c in COMMANDS.values())


def command_reply(cmd: Command, part: str) -> Reply:
    """COMMAND INFO (`part` "info") or DOCS ("docs") of one command, as reply values."""
    size = _table_size()
    if _CACHE_KEY[0] != size:
        _REPLY_CACHE.clear()
        _CACHE_KEY[0] = size
    key = (cmd.name, part)
    r = _REPLY_CACHE.get(key)
    if r is None:
        info, docs = typed_entry(cmd)
        r = _REPLY_CACHE[key] = to_reply(info if part == "info" else docs)
    return r


def top_commands() -> list[Command]:
    seen: dict[str, Command] = {}
    for c in COMMANDS.values():
        seen.setdefault(c.name, c)
    return list(seen.values())


container("command", -1, LOADING_STALE | Flag.SENTINEL)


def cmd_command(s: Session, argv: list[bytes]) -> Reply:
    return [command_reply(c, "info") for c in top_commands()]


COMMANDS[b"command"].handler = cmd_command


@command("command|count", 2, LOADING_STALE | Flag.SENTINEL)
def cmd_command_count(s: Session, argv: list[bytes]) -> Reply:
    return len(top_commands())


@command("command|info", -2, LOADING_STALE | Flag.SENTINEL)
def cmd_command_info(s: Session, argv: list[bytes]) -> Reply:
    if len(argv) == 2:
        return cmd_command(s, argv)
    out = []
    for name in argv[2:]:
        c = lookup_by_name(name)
        out.append(command_reply(c, "info") if c is not None else None)
    return out


@command("command|docs", -2, LOADING_STALE | Flag.SENTINEL)
def cmd_command_docs(s: Session, argv: list[bytes]) -> Reply:
    cmds = top_commands() if len(argv) == 2 else [lookup_by_name(n) for n in argv[2:]]
    pairs = [(c.name.encode(), command_reply(c, "docs")) for c in cmds if c is not None]
    if len({name for name, _ in pairs}) == len(pairs):
        return dict(pairs)
    return PairsMap(pairs)


def _all_commands() -> list[Command]:
    """Every command and subcommand, as COMMAND LIST names them."""
    out = []
    for c in top_commands():
        out.append(c)
        if c.subcommands is not None:
            out.extend({x.name: x for x in c.subcommands.values()}.values())
    return out


@command("command|list", -2, LOADING_STALE | Flag.SENTINEL)
def cmd_command_list(s: Session, argv: list[bytes]) -> Reply:
    kind = arg = b""
    i = 2
    while i < len(argv):
        if argv[i].lower() != b"filterby" or len(argv) - 1 - i != 2:
            raise CommandError(SYNTAX)
        kind, arg = argv[i + 1].lower(), argv[i + 2]
        if kind not in (b"module", b"aclcat", b"pattern"):
            raise CommandError(SYNTAX)
        i += 3
    names = _all_commands()
    if kind == b"module":
        return []  # no modules are loaded
    if kind == b"aclcat":
        cat = "@" + arg.decode("utf-8", "replace").lower()
        return [c.name.encode() for c in names if cat in typed_names(typed_entry(c)[0][6])]
    if kind == b"pattern":
        return [c.name.encode() for c in names if glob_match(arg, c.name.encode(), nocase=True)]
    return [c.name.encode() for c in names]


@command("command|help", 2, LOADING_STALE | Flag.SENTINEL)
def cmd_command_help(s: Session, argv: list[bytes]) -> Reply:
    return help_reply(argv[0], COMMAND_HELP)


@command("command|getkeys", -4, LOADING_STALE | Flag.SENTINEL)
def cmd_command_getkeys(s: Session, argv: list[bytes]) -> Reply:
    return [argv[2 + i] for i, _ in get_keys(argv[2:])]


@command("command|getkeysandflags", -4, LOADING_STALE | Flag.SENTINEL)
def cmd_command_getkeysandflags(s: Session, argv: list[bytes]) -> Reply:
    out = []
    for i, flags in get_keys(argv[2:]):
        names = [f for f in KEY_FLAG_ORDER if f in flags]
        out.append([argv[2 + i], OrderedSet(Simple(f.encode()) for f in names)])
    return out
