"""DEBUG DIGEST and DEBUG DIGEST-VALUE: Redis' dataset and value digests (debug.c), so
that the same data gives the same 40 hex digits here as in redis-server.

A value's digest starts from its type code; strings and list elements are mixed in
order (digest = SHA1(digest xor SHA1(data))), set members xored in (order-free), each
hash field/value pair and each sorted-set member/score ("%.17g") digested on its own
and the SHA1 of that xored in, stream entries mixed in ID order ("ms.seq", then each
field and value).
A key with an expiry xors in SHA1("!!expire!!"). The dataset digest xors in the SHA1
of each key's digest (the key mixed in first), after mixing in each non-empty
database's number.
"""

from __future__ import annotations

from collections import deque
from hashlib import sha1
from typing import Any

from store import Database
from store.stream import MAX_ID, MIN_ID, Stream
from store.values import ZSet

_STRING, _LIST, _SET, _ZSET, _HASH, _STREAM = 0, 1, 2, 3, 4, 6
_EXPIRE = int.from_bytes(sha1(b"!!expire!!").digest())


def _h(data: bytes) -> int:
    return int.from_bytes(sha1(data).digest())


def _mix(digest: int, data: bytes) -> int:
    """Redis' mixDigest: SHA1(digest xor SHA1(data))."""
    return _h((digest ^ _h(data)).to_bytes(20))


def _pair(a: bytes, b: bytes) -> int:
    """An element's own digest of two parts, as xorDigest xors it in: SHA1 of it."""
    return _h(_mix(_mix(0, a), b).to_bytes(20))


def value_digest(value: Any, expires: bool, digest: int = 0) -> int:
    """Redis' xorObjectDigest of one value, continuing from `digest`."""
    if isinstance(value, bytes | bytearray):
        return _finish(_mix(_mix(digest, _type(_STRING)), bytes(value)), expires)
    if isinstance(value, deque):
        digest = _mix(digest, _type(_LIST))
        for item in value:
            digest = _mix(digest, item)
    elif isinstance(value, set):
        digest = _mix(digest, _type(_SET))
        for member in value:
            digest ^= _h(member)
    elif isinstance(value, ZSet):
        digest = _mix(digest, _type(_ZSET))
        for member, score in value.scores.items():
            digest ^= _pair(member, b"%.17g" % score)
    elif isinstance(value, dict):
        digest = _mix(digest, _type(_HASH))
        for field, v in value.items():
            digest ^= _pair(field, v)
    elif isinstance(value, Stream):
        digest = _mix(digest, _type(_STREAM))
        for sid in value.iter_ids(MIN_ID, MAX_ID):
            digest = _mix(digest, b"%d.%d" % sid)
            for part in value.entries[sid][1]:
                digest = _mix(digest, part)
    else:
        raise TypeError(f"no digest for {type(value).__name__}")
    return _finish(digest, expires)


def _type(code: int) -> bytes:
    return code.to_bytes(4)  # htonl(o->type)


def _finish(digest: int, expires: bool) -> int:
    return digest ^ _EXPIRE if expires else digest


def hex_digest(digest: int) -> bytes:
    return b"%040x" % digest


def key_value_digest(db: Database, key: bytes) -> int:
    """DIGEST-VALUE's digest of one key: its value as stored, even if logically
    expired (Redis looks it up without expiring it); 0 for a missing key."""
    value = db.data.get(key)
    if value is None:
        return 0
    return value_digest(value, key in db.expires)


def dataset_digest(dbs: list[Database]) -> int:
    """Redis' computeDatasetDigest over every database."""
    final = 0
    for i, db in enumerate(dbs):
        if not db.data:
            continue
        final = _mix(final, i.to_bytes(4))
        expires = db.expires
        for key, value in db.data.items():
            kv = value_digest(value, key in expires, _mix(0, key))
            final ^= _h(kv.to_bytes(20))
    return final
