"""What history is kept: the history policy, tables (key prefixes with their own
durability and retention) and sealed snapshots that pin history."""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple


class Snapshot(NamedTuple):
    name: bytes
    lsn: int
    time_ms: int
    trigger: bytes
    # TS.SEAL ... META field value ...: flat field, value pairs, in the order given.
    meta: tuple[bytes, ...] = ()


@dataclass(frozen=True)
class HistoryPolicy:
    """How much of each key's version chain stays in memory."""

    kind: str = "versions"  # "all" | "versions" | "ms"
    limit: int = 64

    @classmethod
    def parse(cls, text: str) -> HistoryPolicy:
        if text == "all":
            return cls("all", 0)
        kind, _, n = text.partition(":")
        if kind in ("versions", "ms") and n.isdigit() and int(n) > 0:
            return cls(kind, int(n))
        raise ValueError(f"invalid history policy {text!r}: use all, versions:N or ms:N")

    def __str__(self) -> str:
        return "all" if self.kind == "all" else f"{self.kind}:{self.limit}"


class TablePolicy(NamedTuple):
    """A table's durability, history retention and full-copy frequency."""

    durability: str  # "async" | "sync" | "raft"
    retain: HistoryPolicy
    snapshot_every: int
    max_pinned: int = 0  # TS.SEAL is refused while the table's pinned history is past it
