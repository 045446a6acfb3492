"""Strings as bit arrays, the core's: the string at a key as stored (`string_value`: not
copied, bitmaps can be large), writing a byte range of it (`write_range`), and
Redis' unsharing of a string a write left as it was (`unshare`). Shared by the bitmap
commands (`commands.bitops`) and HyperLogLog (`commands.hyperloglog`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from commands.common import wrongtype
from store.ops import SETRANGE
from store.values import STRING_TYPES

if TYPE_CHECKING:
    from commands.session import Session


def string_value(s: Session, key: bytes) -> bytes | bytearray | None:
    """The string at `key` as stored (not copied: bitmaps can be large)."""
    v = s.db.get(key)
    if v is None or type(v) in STRING_TYPES:
        return v  # type: ignore[no-any-return]
    raise wrongtype()


def write_range(s: Session, key: bytes, offset: int, data: bytes, length: int) -> None:
    """Write `data` at `offset` of the string at `key`, now `length` bytes long."""
    s.store.apply(s.db, key, (SETRANGE, offset, data, length))


def unshare(s: Session, key: bytes, v: bytes | bytearray | None) -> None:
    """A write command that leaves a string as it was still turns it into a raw
    string in Redis (dbUnshareStringValue): OBJECT ENCODING then says "raw"."""
    if type(v) is bytes:
        write_range(s, key, 0, b"", len(v))
