"""CONFIG, as Redis 7.0.15 answers it.

CONFIG GET parameter [parameter ...] · CONFIG SET parameter value [parameter value ...]
CONFIG RESETSTAT · CONFIG REWRITE · CONFIG HELP
    The parameters, their values and checks are `commands.config_table`. CONFIG GET
    never shows a secret (`requirepass` and the like read `<redacted>`).
"""

from __future__ import annotations

import dataclasses
import logging

from commands.common import help_reply
from commands.config_table import (
    PORT_UNAVAILABLE,
    ConfigParam,
    config_normalize,
    config_store,
    config_table,
    shown_config_value,
)
from commands.dispatch import protected_allowed
from commands.errors import LOADING, SYNTAX, CommandError
from commands.glob import glob_match
from commands.registry import ADMIN, LOADING_STALE, command, container
from commands.replies import OK, Reply
from commands.session import Session, Stats

NO_CONFIG_FILE = "ERR The server is running without a config file"
CONFIG_UNKNOWN = "ERR Unknown option or number of arguments for CONFIG SET - '{}'"
CONFIG_FAILED = "ERR CONFIG SET failed (possibly related to argument '{}') - {}"

log = logging.getLogger("temporalstore")

container("config", -2)

CONFIG_HELP = [
    "GET <pattern>",
    "    Return parameters matching the glob-like <pattern> and their values.",
    "SET <directive> <value>",
    "    Set the configuration <directive> to <value>.",
    "RESETSTAT",
    "    Reset statistics reported by the INFO command.",
    "REWRITE",
    "    Rewrite the configuration file.",
]


@command("config|get", -3, ADMIN)
def cmd_config_get(s: Session, argv: list[bytes]) -> Reply:
    table = config_table()
    out: dict[bytes, bytes] = {}
    seen: set[bytes] = set()  # Redis matches names case-insensitively
    for arg in argv[2:]:
        if not any(c in arg for c in b"[*?"):
            p = table.get(arg.decode("utf-8", "replace").lower())
            if p is not None and arg.lower() not in seen:
                seen.add(arg.lower())
                out[arg] = shown_config_value(s.server, p.canonical).encode()
            continue
        for name, p in table.items():
            key = name.encode()
            if "hidden" not in p.flags and key not in seen and glob_match(arg, key, nocase=True):
                seen.add(key)
                out[key] = shown_config_value(s.server, p.canonical).encode()
    return out


@command("config|set", -4, ADMIN)
def cmd_config_set(s: Session, argv: list[bytes]) -> Reply:
    if len(argv) % 2:
        raise CommandError(SYNTAX)
    table = config_table()
    chosen: list[tuple[ConfigParam, str]] = []
    seen: set[str] = set()
    error: str | None = None
    for i in range(2, len(argv), 2):
        typed = argv[i].decode("utf-8", "replace")
        p = table.get(typed.lower())
        if p is None:
            error = error or CONFIG_UNKNOWN.format(typed)
            continue
        if error:
            continue
        if "immutable" in p.flags:
            error = CONFIG_FAILED.format(typed, "can't set immutable config")
        elif "protected" in p.flags and not protected_allowed(s, "enable-protected-configs"):
            error = CONFIG_FAILED.format(typed, "can't set protected config")
        elif s.server.loading and "deny_loading" in p.flags:
            error = LOADING
        elif p.name in seen:
            error = CONFIG_FAILED.format(typed, "duplicate parameter")
        seen.add(p.name)
        chosen.append((p, argv[i + 1].decode("utf-8", "surrogateescape")))
    if error:
        raise CommandError(error)
    values = []
    for p, raw in chosen:
        try:
            values.append((p.canonical, config_normalize(s.server, p, raw)))
        except ValueError as e:
            raise CommandError(CONFIG_FAILED.format(p.name, e)) from None
    port = next((int(v) for name, v in values if name == "port"), s.server.config.port)
    if port != s.server.config.port:
        # Applied first: when it fails, nothing else has changed (Redis rolls back).
        try:
            if s.server.listen_port is None:
                raise OSError("no listener to move")
            s.server.listen_port(port)
        except OSError as e:
            log.warning("CONFIG SET port %d: %s", port, e)
            raise CommandError(CONFIG_FAILED.format("port", PORT_UNAVAILABLE)) from None
    for name, value in values:
        config_store(s.server, name, value)
    return OK


@command("config|resetstat", 2, ADMIN)
def cmd_config_resetstat(s: Session, argv: list[bytes]) -> Reply:
    stats = s.server.stats
    for f in dataclasses.fields(Stats):
        setattr(stats, f.name, f.default)
    s.server.error_stats.clear()  # INFO errorstats, commandstats and latencystats too
    for st in s.server.command_stats.values():
        st.reset()  # in place: this command's own call is then counted, as in Redis
    return OK


@command("config|rewrite", 2, ADMIN)
def cmd_config_rewrite(s: Session, argv: list[bytes]) -> Reply:
    raise CommandError(NO_CONFIG_FILE)


@command("config|help", 2, LOADING_STALE)
def cmd_config_help(s: Session, argv: list[bytes]) -> Reply:
    return help_reply(argv[0], CONFIG_HELP)
