"""Each operation of the temporal API written once, for both the blocking and the asyncio
client: a generator that yields the commands to send (tuples of arguments), receives each
reply and returns the operation's result. `client.Temporal` and `aio.AsyncTemporal` drive
them with their own connection."""

from __future__ import annotations

import secrets
import time as _time
from collections.abc import Generator
from typing import Any

from typing_extensions import Unpack

from temporalstore.types import (
    BranchInfo,
    HistoryEntry,
    HistoryOptions,
    Point,
    SnapshotInfo,
    TableInfo,
    as_map,
    text,
)

Command = tuple[Any, ...]
Op = Generator[Command, Any, Any]

STRATEGIES = ("fail", "ours", "theirs")
DIFF_PAGE = 500


def safe_name(text: str, limit: int) -> str:
    """`text` cut to `limit` characters, anything but letters, digits, -, _ and . as -."""
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in text)[:limit]


def snapshot_name(trigger: str) -> str:
    """A new snapshot's name: the trigger (when it is a usable name), the time and a random
    suffix, so that two seals of one trigger never collide."""
    stem = safe_name(trigger, 40) or "snap"
    return f"{stem}-{int(_time.time() * 1000)}-{secrets.token_hex(3)}"


def seal(trigger: str, name: str | None, metadata: dict[str, Any]) -> Op:
    name = name or snapshot_name(trigger)
    args: list[Any] = ["TS.SEAL", name]
    if trigger:
        args += ["TRIGGER", trigger]
    if metadata:
        args.append("META")
        for k, v in metadata.items():
            args += [k, v if isinstance(v, bytes) else str(v)]
    yield tuple(args)
    return name


def snapshots() -> Op:
    reply = yield ("TS.SNAPSHOTS",)
    infos = [SnapshotInfo.parse(x) for x in reply]
    return {s.name: s for s in infos}


def unseal(name: str) -> Op:
    return bool((yield ("TS.UNSEAL", name)))


def version() -> Op:
    return int((yield ("TS.VERSION",)))


def get_as_of(key: Any, at: Point) -> Op:
    return (yield ("TS.ASOF", key, *at.args()))


def history_of(key: Any, **options: Unpack[HistoryOptions]) -> Op:
    since, until = options.get("since"), options.get("until")
    count, author = options.get("count"), options.get("author")
    args: list[Any] = ["TS.HISTORY", key]
    if since is not None:
        args += ["FROM", *since.args()]
    if until is not None:
        args += ["TO", *until.args()]
    if count is not None:
        args += ["COUNT", count]
    if options.get("reverse"):
        args.append("REV")
    if author is not None:
        args += ["AUTHOR", author]
    if options.get("with_values"):
        args.append("WITHVALUES")
    reply = yield tuple(args)
    return [HistoryEntry.parse(x) for x in reply]


def revert(key: Any, to: Point) -> Op:
    return bool((yield ("TS.REVERT", key, *to.args())))


def restore(at: Point, match: str | None) -> Op:
    args: list[Any] = ["TS.RESTORE", *at.args()]
    if match is not None:
        args += ["MATCH", match]
    return int((yield tuple(args)))


def is_main(name: str) -> bool:
    return name.lower() in ("main", "head")


def side_args(side: Point | str, head: int) -> list[Any]:
    """One side of a diff: a Point, a branch's head given by its name, or the main line's
    head (`main`), which is `head`, the version current when the diff began."""
    if isinstance(side, Point):
        return side.args()
    if is_main(side):
        return ["VERSION", head]
    return ["BRANCH", side]


def diff(a: Point | str, b: Point | str, match: str | None) -> Op:
    """Every difference between a and b, paged with COUNT/AFTER (docs/temporal.md)."""
    out: dict[str, str] = {}
    after: list[Any] = []
    sides = [x for x in (a, b) if isinstance(x, str) and is_main(x)]
    head = int((yield ("TS.VERSION",))) if sides else 0
    while True:
        args: list[Any] = ["TS.DIFF", *side_args(a, head), *side_args(b, head), "COUNT", DIFF_PAGE]
        if match is not None:
            args += ["MATCH", match]
        page = as_map((yield tuple(args + after)))
        out.update({k: text(v) for k, v in page.items()})
        if len(page) < DIFF_PAGE:
            return out
        after = ["AFTER", list(page)[-1]]


def checkout(branch: str) -> Command:
    """The command that puts a connection on a branch (`main`/`head`: the main line)."""
    return ("TS.CHECKOUT", "HEAD" if is_main(branch) else branch)


def meta(author: str, message: str | None) -> Command:
    """The command that attaches writer metadata to a connection's later writes."""
    return ("TS.META", "AUTHOR", author) + (() if message is None else ("MESSAGE", message))


def branch(name: str, from_: Point | None) -> Op:
    args: list[Any] = ["TS.BRANCH", "CREATE", name]
    if from_ is not None:
        args += ["FROM", *from_.args()]
    yield tuple(args)


def drop_branch(name: str) -> Op:
    yield ("TS.BRANCH", "DROP", name)


def branches() -> Op:
    reply = yield ("TS.BRANCH", "LIST")
    infos = [BranchInfo.parse(x) for x in reply]
    return {b.name: b for b in infos}


def merge(source: str, into: str | None, strategy: str) -> Op:
    if strategy.lower() not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}")
    args: list[Any] = ["TS.MERGE", source]
    if into is not None:
        args += ["INTO", into]
    args += ["STRATEGY", strategy.upper()]
    return int((yield tuple(args)))


def table_options(
    *,
    durability: str | None = None,
    retain: str | None = None,
    snapshot_every: int | None = None,
    max_pinned: int | str | None = None,
) -> list[Any]:
    """`DURABILITY ASYNC|SYNC`, `RETAIN ALL|VERSIONS n|MS ms` (given as "all",
    "versions:n" or "ms:n", as --history takes it), `SNAPSHOT-EVERY n`, `MAXPINNED m`."""
    args: list[Any] = []
    if durability is not None:
        args += ["DURABILITY", durability.upper()]
    if retain is not None:
        kind, _, n = retain.partition(":")
        args += ["RETAIN", kind.upper(), *([n] if n else [])]
    if snapshot_every is not None:
        args += ["SNAPSHOT-EVERY", snapshot_every]
    if max_pinned is not None:
        args += ["MAXPINNED", max_pinned]
    return args


def create_table(name: str, options: list[Any]) -> Op:
    yield ("TS.TABLE", "CREATE", name, *options)


def alter_table(name: str, options: list[Any]) -> Op:
    yield ("TS.TABLE", "ALTER", name, *options)


def tables() -> Op:
    reply = yield ("TS.TABLE", "LIST")
    infos = [TableInfo.parse(x) for x in reply]
    return {t.name: t for t in infos}


def drop_table(name: str) -> Op:
    yield ("TS.TABLE", "DROP", name)


def table_info(name: str) -> Op:
    return TableInfo.parse((yield ("TS.TABLE", "INFO", name)))
