"""What the temporal API returns: points in time, history entries, snapshots, branches and
tables, and how the server's replies (RESP2 flat pairs or RESP3 maps, bytes or str as the
redis-py client decodes them) become these."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypedDict


def text(x: Any) -> str:
    """A bulk string as str, whether the client decodes responses or not."""
    if isinstance(x, bytes):
        return x.decode("utf-8", "surrogateescape")
    return str(x)


def opt_text(x: Any) -> str | None:
    return None if x is None else text(x)


def as_map(reply: Any) -> dict[str, Any]:
    """A map reply with str keys: a RESP3 map or RESP2's flat field, value pairs."""
    if isinstance(reply, dict):
        return {text(k): v for k, v in reply.items()}
    items = list(reply)
    return {text(k): v for k, v in zip(items[0::2], items[1::2], strict=True)}


def from_ms(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)


def to_ms(t: int | float | datetime) -> int:
    """Unix milliseconds from an int (already ms), a float (seconds) or a datetime."""
    if isinstance(t, datetime):
        return int(t.timestamp() * 1000)
    if isinstance(t, float):
        return int(t * 1000)
    return int(t)


@dataclass(frozen=True)
class Point:
    """A point in history: exactly one of version (LSN), time (unix ms, or a datetime),
    snapshot (a sealed snapshot's name) or back (versions of one key before its latest)."""

    version: int | None = None
    time: int | float | datetime | None = None
    snapshot: str | None = None
    back: int | None = None

    def __post_init__(self) -> None:
        given = [x is not None for x in (self.version, self.time, self.snapshot, self.back)]
        if sum(given) != 1:
            raise ValueError("a point is exactly one of version=, time=, snapshot=, back=")

    def args(self) -> list[Any]:
        """The point as the TS.* verbs take it (`VERSION n`, `TIME ms`, ...)."""
        if self.version is not None:
            return ["VERSION", self.version]
        if self.time is not None:
            return ["TIME", to_ms(self.time)]
        if self.snapshot is not None:
            return ["SNAPSHOT", self.snapshot]
        return ["BACK", self.back]


def point(
    at: Point | None = None,
    *,
    version: int | None = None,
    time: int | float | datetime | None = None,
    snapshot: str | None = None,
    back: int | None = None,
) -> Point:
    """A Point from either a Point or the keyword form."""
    if at is not None:
        if any(x is not None for x in (version, time, snapshot, back)):
            raise ValueError("give a Point or keywords, not both")
        return at
    return Point(version, time, snapshot, back)


class HistoryOptions(TypedDict, total=False):
    """What `history` takes besides the key: versions written under `author`, between
    `since` and `until` (both included), with each version's value, the first `count`,
    newest first with `reverse`."""

    author: str | None
    since: Point | None
    until: Point | None
    with_values: bool
    count: int | None
    reverse: bool


class ExportOptions(TypedDict, total=False):
    """What `export_snapshot` writes: the state `at` a Point (now by default) of the keys
    matching `match` in database `db` (the client's own by default)."""

    at: Point | None
    match: str | None
    db: int | None


class ImportOptions(TypedDict, total=False):
    """Where `import_snapshot` writes: a new `branch` (the default target, named after
    the snapshot unless given), or with `main_line` the main line's database `db` (the
    exported one unless given) where no imported key may exist, or with `replace` over
    the main line's keys."""

    branch: str | None
    db: int | None
    replace: bool
    main_line: bool


@dataclass(frozen=True)
class HistoryEntry:
    """One version of a key (`TS.HISTORY`)."""

    version: int
    time_ms: int
    command: str
    author: str | None
    message: str | None
    value: Any = None  # only with with_values=True: the key's value just after it

    @property
    def time(self) -> datetime:
        return from_ms(self.time_ms)

    @classmethod
    def parse(cls, reply: Any) -> HistoryEntry:
        m = as_map(reply)
        return cls(
            int(m["version"]),
            int(m["time"]),
            text(m["command"]),
            opt_text(m["author"]),
            opt_text(m["message"]),
            m.get("value"),
        )


@dataclass(frozen=True)
class SnapshotInfo:
    """A sealed snapshot (`TS.SNAPSHOTS`)."""

    name: str
    version: int
    created_ms: int
    trigger: str
    metadata: dict[str, str] = field(default_factory=dict)
    pinned_bytes: int = 0
    pinned_versions: int = 0

    @property
    def created_at(self) -> datetime:
        return from_ms(self.created_ms)

    @property
    def lsn(self) -> int:
        return self.version

    @classmethod
    def parse(cls, reply: Any) -> SnapshotInfo:
        m = as_map(reply)
        meta = {k: text(v) for k, v in as_map(m.get("meta") or {}).items()}
        return cls(
            text(m["name"]),
            int(m["version"]),
            int(m["time"]),
            text(m["trigger"]),
            meta,
            int(m["pinned_bytes"]),
            int(m["pinned_versions"]),
        )


@dataclass(frozen=True)
class BranchInfo:
    """A branch (`TS.BRANCH LIST`)."""

    name: str
    parent: str
    fork: int
    latest: int
    changed: int

    @classmethod
    def parse(cls, reply: Any) -> BranchInfo:
        m = as_map(reply)
        return cls(
            text(m["name"]), text(m["parent"]), int(m["fork"]), int(m["latest"]), int(m["changed"])
        )


@dataclass(frozen=True)
class TableInfo:
    """A table's policy (`TS.TABLE LIST` / `TS.TABLE INFO`): every field the server gives."""

    name: str
    fields: dict[str, Any]

    @classmethod
    def parse(cls, reply: Any) -> TableInfo:
        m = as_map(reply)
        return cls(text(m["name"]), {k: v for k, v in m.items() if k != "name"})
