"""CLUSTER, READONLY, READWRITE and ASKING, as a redis-server 7.0 not in cluster mode
answers them; in cluster mode (`--cluster-enabled yes`) the subcommands
commands.cluster_mode implements answer from the slot map instead.

CLUSTER <subcommand> [args...] · READONLY · READWRITE · ASKING
    Every subcommand Redis 7.0 has is known, with its arity and flags (so a wrong
    argument count, an unknown subcommand, and a call from a script are refused as
    Redis refuses them: CLUSTER RESET is not allowed from scripts); each then answers
    "ERR This instance has cluster support disabled", as Redis does with
    cluster-enabled no. In cluster mode: SLOTS, SHARDS, NODES, INFO, MYID, KEYSLOT,
    COUNTKEYSINSLOT, GETKEYSINSLOT, READONLY, READWRITE and ASKING answer
    (commands.cluster_mode); the others still answer that.
"""

from __future__ import annotations

from commands.cluster_mode import HANDLERS
from commands.errors import CommandError
from commands.redis_table import command_data, typed_names
from commands.registry import FLAG_NAMES, NO_FLAGS, Flag, command, container
from commands.replies import Reply
from commands.session import Session

DISABLED = "ERR This instance has cluster support disabled"
_FLAGS = {name: flag for flag, name in FLAG_NAMES}


def _disabled(s: Session, argv: list[bytes]) -> Reply:
    raise CommandError(DISABLED)


def _flags(info: list[object]) -> Flag:
    flags = NO_FLAGS
    for name in typed_names(info[2]):
        flags |= _FLAGS.get(name, NO_FLAGS)
    return flags


def _register() -> None:
    table = command_data()["commands"]
    top = table["cluster"]["info"]
    container("cluster", top[1], _flags(top))
    for sub in top[9]:
        command(sub[0], sub[1], _flags(sub))(HANDLERS.get(sub[0], _disabled))
    for name in ("readonly", "readwrite", "asking"):
        info = table[name]["info"]
        command(name, info[1], _flags(info))(HANDLERS.get(name, _disabled))


_register()
