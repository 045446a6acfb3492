"""Redis 7.0.15's command and config tables, as `redis_commands.json` records them
(generated from redis-server by `tools/gen_command_docs.py`): COMMAND INFO and DOCS of
every Redis command in a typed JSON form, and every config parameter's spec and
default. COMMAND, CONFIG, COMMAND GETKEYS and the ACL categories read it from here."""

from __future__ import annotations

import json
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any

from commands.replies import Reply, Simple

DATA_PATH = Path(__file__).with_name("redis_commands.json")

REDIS_VERSION = "7.0.15"
"""The Redis release whose replies we match (HELLO, INFO; the tables here are its)."""


class OrderedSet(frozenset[Any]):
    """A RESP3 set reply whose members (maps included: they need not be hashable) go on
    the wire in the order given. Only `len` and iteration are meaningful."""

    __slots__ = ("order",)
    order: tuple[Any, ...]

    def __new__(cls, items: Iterable[Any] = ()) -> OrderedSet:
        obj = super().__new__(cls)
        obj.order = tuple(items)
        return obj

    def __len__(self) -> int:
        return len(self.order)

    def __iter__(self) -> Any:
        return iter(self.order)


@cache
def command_data() -> dict[str, Any]:
    """`redis_commands.json`: COMMAND INFO/DOCS of every Redis 7.0 command, configs."""
    with DATA_PATH.open(encoding="utf-8") as f:
        data: dict[str, Any] = json.load(f)
    return data


def to_reply(v: Any) -> Reply:
    """A typed JSON tree (see tools/gen_command_docs.py) as handler reply values."""
    if isinstance(v, str):
        return v.encode()
    if isinstance(v, int) or v is None:
        return v
    if isinstance(v, list):
        return [to_reply(x) for x in v]
    if "+" in v:
        return Simple(v["+"].encode())
    if "~" in v:
        return OrderedSet(to_reply(x) for x in v["~"])
    return {to_reply(k): to_reply(x) for k, x in v["%"]}


def typed_names(typed_set: Any) -> list[str]:
    """The names in a typed set (`{"~": [...]}` of simple strings or plain ones)."""
    return [x["+"] if isinstance(x, dict) else x for x in typed_set["~"]]


def redis_entry(name: str) -> tuple[list[Any], dict[str, Any]] | None:
    """Redis' typed (info, docs) for a command or `container|sub`, if Redis has it."""
    top, _, sub = name.partition("|")
    entry = command_data()["commands"].get(top)
    if entry is None:
        return None
    if not sub:
        return entry["info"], entry["docs"]
    infos = entry["info"][9]
    docs = dict(entry["docs"]["%"]).get("subcommands")
    info = next((i for i in infos if i[0] == name), None) if isinstance(infos, list) else None
    doc = dict(docs["%"]).get(name) if docs else None
    if info is None or doc is None:
        return None
    return info, doc


def plain(v: Any) -> Any:
    """A typed tree as plain JSON-ish values (sets as lists, maps as dicts)."""
    if isinstance(v, list):
        return [plain(x) for x in v]
    if isinstance(v, dict):
        if "+" in v:
            return v["+"]
        if "~" in v:
            return [plain(x) for x in v["~"]]
        return {k: plain(x) for k, x in v["%"]}
    return v
