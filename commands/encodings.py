"""What OBJECT ENCODING and OBJECT REFCOUNT say of a value, as Redis 7.0 names them
(`object_encoding`, `string_encoding`, `refcount`): shared by OBJECT (`commands.keys`),
DEBUG OBJECT, DUMP and what the Redis replication stream sends. A compiled module."""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING

from commands.hotwrites import shared_integer
from commands.parsing import string2ll
from store.stream import Stream
from store.values import HashSet, HashTable, ZSet

if TYPE_CHECKING:
    from commands.session import Session

SHARED_REFCOUNT = 2**31 - 1  # Redis' refcount of its shared small integers


_ENCODINGS: dict[type, bytes] = {
    dict: b"listpack",
    HashTable: b"hashtable",
    deque: b"quicklist",
    set: b"intset",
    HashSet: b"hashtable",
    Stream: b"stream",
}


def object_encoding(v: object, made_by: str = "") -> bytes:
    """OBJECT ENCODING of a value, as Redis 7.0 names it."""
    if isinstance(v, bytes | bytearray):
        return string_encoding(v, made_by)
    if isinstance(v, ZSet):
        return b"skiplist" if v.big else b"listpack"
    return _ENCODINGS[type(v)]


def refcount(s: Session, v: object) -> int:
    """OBJECT REFCOUNT of a value: Redis' shared small integers count as INT_MAX."""
    return 1 if shared_integer(s, v) is None else SHARED_REFCOUNT


def string_encoding(v: bytes | bytearray, made_by: str = "") -> bytes:
    """OBJECT ENCODING of a string value. `made_by` is the command that wrote it:
    INCRBYFLOAT stores its result as a plain string even when it reads as an integer."""
    if type(v) is bytearray:
        return b"raw"
    if made_by != "incrbyfloat" and len(v) <= 20 and string2ll(bytes(v)) is not None:
        return b"int"
    return b"embstr" if len(v) <= 44 else b"raw"
