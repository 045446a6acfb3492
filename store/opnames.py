"""What an op is: the tuple types (`Op`, `Undo`), the op names and the shared undos, and
`lookup` (a key's value in a database's dict). The bottom of the store: `database`,
`chains` and `records` name ops through this module, and `ops` (which applies them to a
`Database`) builds on it, so no module below `ops` imports it.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any, Final

Op = tuple[Any, ...]
Undo = tuple[Op, ...]

KEEP_TTL: Final = -1  # ("set", value, KEEP_TTL) leaves the key's expiry as it was

# Op names (Final: the compiled build inlines them, no module-dict lookup).
SET: Final = "set"  # (SET, value, ttl): ttl is an absolute ms time, None (persist) or KEEP_TTL
RESTORE: Final = "restore"  # (RESTORE, value | None, expire_ms | None): exact prior state
DEL: Final = "del"  # (DEL,)
EXPIRE: Final = "expire"  # (EXPIRE, at_ms | None)
HSET: Final = "hset"  # (HSET, ((field, value), ...))
HDEL: Final = "hdel"  # (HDEL, (field, ...))
# (HSETF, field, value): one field set. The undo of an HSET that replaced one field's
# value: two tuples fewer than (HSET, ((field, value),)) to build, keep in history and
# free when it is cut.
HSETF: Final = "hsetf"
LPUSH: Final = "lpush"  # (LPUSH, (item, ...)) each pushed to the head in turn
RPUSH: Final = "rpush"  # (RPUSH, (item, ...))
LPOP: Final = "lpop"  # (LPOP, count)
RPOP: Final = "rpop"  # (RPOP, count)
LSET: Final = "lset"  # (LSET, index, value)
SADD: Final = "sadd"  # (SADD, (member, ...))
SREM: Final = "srem"  # (SREM, (member, ...))
ZADD: Final = "zadd"  # (ZADD, ((member, score), ...))
ZREM: Final = "zrem"  # (ZREM, (member, ...))
# (SETRANGE, offset, data, length): the string resized to `length` (zero padded or cut),
# then `data` written at `offset`; a bitmap or HyperLogLog write carries only the bytes
# it changed.
SETRANGE: Final = "setrange"

# The undo of creating a key (shared: most keys' first version holds it).
CREATED: Final[Undo] = ((RESTORE, None, None),)
# The undos of pushing one item onto a list (shared: most pushes push one, and their
# versions keep these: nothing to build per push, nor to free when history is cut).
POP_ONE_LEFT: Final[Undo] = ((LPOP, 1),)
POP_ONE_RIGHT: Final[Undo] = ((RPOP, 1),)


def lookup(data: MutableMapping[bytes, Any], key: bytes) -> Any:
    """`data.get(key)`: a C call in the compiled build when `data` is a plain dict (a
    main-line database's), instead of a method looked up by name."""
    if type(data) is dict:
        d: dict[bytes, Any] = data
        return d.get(key)
    return data.get(key)
