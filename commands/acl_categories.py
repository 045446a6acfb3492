"""ACL categories and the command catalog ACL rules act on, as Redis 7.0.15 has them.

Categories: Redis' commands have the ones in `redis_commands.json`; ours have those
their flags imply (as Redis' setImplicitACLCategories) plus `OWN_CATEGORIES`.

The commands the rules act on (`Catalog`) are Redis 7.0.15's whole command table plus
our own: an aclfile written for Redis loads unchanged even where it names a command we
do not serve, and a user is described with Redis' words. Each command has a bit in a
selector's command bitmap (`CommandEntry.bit`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from commands.redis_table import command_data, typed_names
from commands.registry import COMMANDS, Command, Flag, unique_commands

# Redis' category table, in its order (ACL CAT, COMMAND INFO and rule descriptions).
CATEGORIES = (
    "keyspace", "read", "write", "set", "sortedset", "list", "hash", "string", "bitmap",
    "hyperloglog", "geo", "stream", "pubsub", "admin", "fast", "slow", "blocking",
    "dangerous", "connection", "transaction", "scripting",
)  # fmt: skip
CATEGORY_INDEX = {name: i for i, name in enumerate(CATEGORIES)}

# Categories of our own commands beyond those their flags imply.
OWN_CATEGORIES: dict[str, tuple[str, ...]] = {
    "waitaof": ("connection",),
    "client|setinfo": ("connection",),
    "ts.meta": ("connection",),
    "ts.checkout": ("read", "connection"),
    "ts.waitdurable": ("connection",),
    "ts.waitlsn": ("connection",),
    "ts.lastlsn": ("connection",),
    "ts.asof": ("keyspace",),
    "ts.history": ("keyspace",),
    "ts.diff": ("keyspace",),
    "ts.revert": ("keyspace",),
    "ts.restore": ("keyspace", "dangerous"),
    "ts.export": ("keyspace",),
    "ts.import": ("keyspace",),
    "ts.merge": ("keyspace",),
    "ts.branch|create": ("keyspace",),
    "ts.branch|drop": ("keyspace", "dangerous"),
    "ts.branch|list": ("keyspace",),
}


def _cat_bit(name: str) -> int:
    return 1 << CATEGORY_INDEX[name]


def implied_categories(flags: Flag) -> int:
    """The category bits Redis derives from command flags (setImplicitACLCategories)."""
    bits = 0
    if flags & Flag.WRITE:
        bits |= _cat_bit("write")
    if flags & Flag.READONLY:
        bits |= _cat_bit("read")
    if flags & Flag.ADMIN:
        bits |= _cat_bit("admin") | _cat_bit("dangerous")
    if flags & Flag.PUBSUB:
        bits |= _cat_bit("pubsub")
    if flags & Flag.FAST:
        bits |= _cat_bit("fast")
    if flags & Flag.BLOCKING:
        bits |= _cat_bit("blocking")
    if not flags & Flag.FAST:
        bits |= _cat_bit("slow")
    return bits


def own_category_bits(cmd: Command) -> int:
    bits = implied_categories(cmd.flags)
    for name in OWN_CATEGORIES.get(cmd.name, ()):
        bits |= _cat_bit(name)
    return bits


def category_names(bits: int) -> list[str]:
    """`@name` for each category bit, in Redis' order."""
    return ["@" + name for i, name in enumerate(CATEGORIES) if bits >> i & 1]


def own_categories(cmd: Command) -> list[str]:
    """COMMAND INFO's categories for one of our commands that Redis 7.0 lacks."""
    return category_names(own_category_bits(cmd))


# -- the command universe ----------------------------------------------------------------------


@dataclass(eq=False, slots=True)
class CommandEntry:
    name: str  # full lower-case name: "get", "config|get"
    id: int
    categories: int
    no_auth: bool
    parent: CommandEntry | None = None
    subs: dict[str, CommandEntry] | None = None
    served: bool = False  # in our command table
    own: bool = False  # ours only: Redis 7.0 does not have it

    @property
    def bit(self) -> int:
        return 1 << self.id

    def perm_mask(self) -> int:
        """The bits ACL +cmd / -cmd change: the command and, for a container, every
        subcommand."""
        mask = self.bit
        for sub in (self.subs or {}).values():
            mask |= sub.bit
        return mask


class Catalog:
    """Every command ACL rules can name, in a fixed order (top-level commands by name,
    each followed by its subcommands), with per-category bitmaps.

    `member_mask` (what the description's best fit counts) leaves our own commands out,
    so that a user is described with the very categories Redis would choose; our
    commands follow the categories applied, or are named one by one."""

    def __init__(self, entries: list[CommandEntry]) -> None:
        self.entries = entries
        self.tops = {e.name: e for e in entries if e.parent is None}
        self.by_name = {e.name: e for e in entries}
        n = len(CATEGORIES)
        self.members: list[list[CommandEntry]] = [[] for _ in range(n)]
        self.member_mask = [0] * n  # Redis' commands in the category
        self.apply_mask = [0] * n  # all members, and the subcommands of member containers
        for e in entries:
            for j in range(n):
                if e.categories >> j & 1:
                    self.members[j].append(e)
                    self.apply_mask[j] |= e.perm_mask()
                    if not e.own:
                        self.member_mask[j] |= e.bit
        self.member_count = [m.bit_count() for m in self.member_mask]

    def lookup(self, name: bytes) -> CommandEntry | None:
        """Redis' lookupCommandBySds (strict): `cmd` or `container|sub`, any case."""
        parts = name.decode("latin-1").lower().split("|")
        if len(parts) > 2:
            return None
        base = self.tops.get(parts[0])
        if base is None or base.subs is None:
            return base if len(parts) == 1 else None
        if len(parts) == 1:
            return base
        return base.subs.get(parts[1])


def _redis_bits(info: list[Any]) -> tuple[int, bool]:
    cats = 0
    for name in typed_names(info[6]):
        cats |= _cat_bit(name.removeprefix("@"))
    return cats, "no_auth" in typed_names(info[2])


def build_catalog() -> Catalog:
    """Redis 7.0.15's command table (from `redis_commands.json`) plus our own commands."""
    Bits = tuple[int, bool]  # categories, no_auth
    tops: dict[str, tuple[Bits, dict[str, Bits] | None]] = {}
    for name, entry in command_data()["commands"].items():
        info = entry["info"]
        subs = {s[0]: _redis_bits(s) for s in info[9]} if isinstance(info[9], list) else None
        tops[name] = (_redis_bits(info), subs)
    redis = {name for name in tops} | {s for _, subs in tops.values() for s in subs or ()}
    served: set[str] = set()
    for cmd in unique_commands():
        served.add(cmd.name)
        own_subs: dict[str, Bits] | None = None if cmd.subcommands is None else {}
        known = tops.setdefault(cmd.name, ((own_category_bits(cmd), _no_auth(cmd)), own_subs))
        for sub in (cmd.subcommands or {}).values():
            served.add(sub.name)
            if known[1] is not None and sub.name not in known[1]:
                known[1][sub.name] = (own_category_bits(sub), _no_auth(sub))
    entries: list[CommandEntry] = []

    def add(name: str, bits: Bits, parent: CommandEntry | None) -> CommandEntry:
        e = CommandEntry(name, len(entries), bits[0], bits[1], parent)
        e.served, e.own = name in served, name not in redis
        entries.append(e)
        return e

    for name in sorted(tops):
        bits, subs = tops[name]
        top = add(name, bits, None)
        if subs is not None:
            top.subs = {n.partition("|")[2]: add(n, subs[n], top) for n in sorted(subs)}
    return Catalog(entries)


def _no_auth(cmd: Command) -> bool:
    return bool(cmd.flags & Flag.NO_AUTH)


_CATALOG: list[Any] = [None, -1]


def catalog(rebuild: bool = False) -> Catalog:
    """The catalog, built on first use (every command family is registered by then) and
    again should more commands be registered later."""
    size = len(COMMANDS)
    if _CATALOG[1] != size or rebuild:
        _CATALOG[0], _CATALOG[1] = build_catalog(), size
    cat: Catalog = _CATALOG[0]
    return cat
