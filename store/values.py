"""Value types held in the keyspace and their Redis type names.

Strings are `bytes` (or `bytearray` once APPEND/SETRANGE made them "raw"), hashes
are `dict` (`HashTable` once converted past the listpack limits), lists `deque`,
sets `set` (`HashSet` once past the intset limits), sorted sets `ZSet`, streams
`Stream` (see `store.stream`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator
from typing import Any, Final

from sortedcontainers import SortedList

# Subclasses of builtins stay Python classes: store.containers is never compiled.
from store.containers import HashSet as HashSet
from store.containers import HashTable as HashTable

# Redis 7.0's defaults for the compact encodings; `LIMITS` holds the ones in force.
HASH_MAX_LISTPACK_ENTRIES = 512
HASH_MAX_LISTPACK_VALUE = 64
SET_MAX_INTSET_ENTRIES = 512
ZSET_MAX_LISTPACK_ENTRIES = 128
ZSET_MAX_LISTPACK_VALUE = 64
STREAM_NODE_MAX_ENTRIES = 100
STREAM_NODE_MAX_BYTES = 4096


class EncodingLimits:
    """The compact-encoding limits in force: Redis 7.0's defaults, changed by CONFIG SET
    hash-max-listpack-entries/-value, set-max-intset-entries and
    zset-max-listpack-entries/-value (and their ziplist aliases). A value converts once
    it passes them and stays converted (until DEBUG RELOAD). Also the size of a stream's
    nodes (stream-node-max-entries, stream-node-max-bytes), which XADD records in its op
    when they are not the defaults."""

    __slots__ = (
        "hash_entries",
        "hash_value",
        "set_entries",
        "stream_node_bytes",
        "stream_node_entries",
        "zset_entries",
        "zset_value",
    )

    def __init__(self) -> None:
        self.hash_entries = HASH_MAX_LISTPACK_ENTRIES
        self.hash_value = HASH_MAX_LISTPACK_VALUE
        self.set_entries = SET_MAX_INTSET_ENTRIES
        self.zset_entries = ZSET_MAX_LISTPACK_ENTRIES
        self.zset_value = ZSET_MAX_LISTPACK_VALUE
        self.stream_node_entries = STREAM_NODE_MAX_ENTRIES
        self.stream_node_bytes = STREAM_NODE_MAX_BYTES


LIMITS: Final = EncodingLimits()  # Final: a C static in the compiled build


class ZSet:
    """A sorted set: member -> score, plus (score, member) kept in order."""

    __slots__ = ("big", "order", "scores")

    def __init__(self) -> None:
        self.scores: dict[bytes, float] = {}
        self.order: SortedList = SortedList()
        self.big = False  # skiplist encoding once past the listpack limits

    def __len__(self) -> int:
        return len(self.scores)

    def __iter__(self) -> Iterator[tuple[float, bytes]]:
        return iter(self.order)

    def add(self, member: bytes, score: float) -> float | None:
        """Set a member's score; return its previous score or None if new."""
        old = self.scores.get(member)
        if old is not None:
            if old == score:
                return old
            self.order.remove((old, member))
        self.scores[member] = score
        self.order.add((score, member))
        if not self.big and (
            len(self.scores) > LIMITS.zset_entries or len(member) > LIMITS.zset_value
        ):
            self.big = True
        return old

    def remove(self, member: bytes) -> float | None:
        old = self.scores.pop(member, None)
        if old is not None:
            self.order.remove((old, member))
        return old

    def copy(self) -> ZSet:
        z = ZSet()
        z.scores = dict(self.scores)
        z.order = SortedList(self.order)
        z.big = self.big
        return z

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ZSet) and other.scores == self.scores

    __hash__ = None  # type: ignore[assignment]


def new_hash(pairs: dict[bytes, bytes]) -> dict[bytes, bytes]:
    """A hash of the right encoding for its contents."""
    limit = LIMITS.hash_value
    if len(pairs) > LIMITS.hash_entries or any(
        len(f) > limit or len(v) > limit for f, v in pairs.items()
    ):
        return HashTable(pairs)
    return pairs


def is_int_member(m: bytes) -> bool:
    """True when Redis would store the member in an intset."""
    if not m or len(m) > 20:
        return False
    try:
        n = int(m)
    except ValueError:
        return False
    return str(n).encode() == m and -(2**63) <= n < 2**63


def new_set(members: set[bytes]) -> set[bytes]:
    """A set of the right encoding for its contents."""
    if len(members) > LIMITS.set_entries or not all(is_int_member(m) for m in members):
        return HashSet(members)
    return members


STRING_TYPES = (bytes, bytearray)

TYPE_NAMES: dict[type, bytes] = {
    bytes: b"string",
    bytearray: b"string",
    dict: b"hash",
    HashTable: b"hash",
    deque: b"list",
    set: b"set",
    HashSet: b"set",
    ZSet: b"zset",
}


def type_name(value: Any) -> bytes:
    return TYPE_NAMES[type(value)]


def copy_value(value: Any) -> Any:
    """A deep-enough copy: collections are copied, strings are immutable or copied."""
    t = type(value)
    if t is bytes:
        return value
    if t is bytearray:
        return bytearray(value)
    if t is deque:
        return deque(value)
    if t is HashSet or t is HashTable:
        return t(value)
    return value.copy()
