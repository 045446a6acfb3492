"""The JSON form of keys and values in an export (docs/export-format.md): each value as
JSON that round-trips exactly, and back. Binary-safe: a byte string that is valid UTF-8
is a JSON string, any other is `{"b64": "<base64>"}`; a double is a JSON number (Python's
shortest repr, which reads back to the same double) or "inf" / "-inf"; stream IDs are
"ms-seq" strings."""

from __future__ import annotations

import base64
import binascii
import math
from collections import deque
from typing import Any

from store.stream import Stream, StreamID
from store.values import ZSet, new_hash, new_set, type_name

FORMAT = "temporalstore-export"
FORMAT_VERSION = 1
TYPES = ("string", "hash", "list", "set", "zset", "stream")


class FormatError(ValueError):
    """A line that is not a valid line of the export format."""


def enc(b: bytes) -> Any:
    try:
        return b.decode("utf-8")
    except UnicodeDecodeError:
        return {"b64": base64.b64encode(b).decode("ascii")}


def dec(x: Any) -> bytes:
    if isinstance(x, str):
        return x.encode("utf-8", "surrogatepass")
    if isinstance(x, dict) and set(x) == {"b64"} and isinstance(x["b64"], str):
        try:
            return base64.b64decode(x["b64"], validate=True)
        except binascii.Error as e:
            raise FormatError(f"bad base64: {e}") from None
    raise FormatError('a byte string must be a JSON string or {"b64": ...}')


def enc_score(f: float) -> Any:
    return f if math.isfinite(f) else ("inf" if f > 0 else "-inf")


def dec_score(x: Any) -> float:
    if x == "inf":
        return math.inf
    if x == "-inf":
        return -math.inf
    if isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x):
        return float(x)
    raise FormatError('a score must be a number, "inf" or "-inf"')


def enc_id(sid: StreamID) -> str:
    return f"{sid[0]}-{sid[1]}"


def dec_id(x: Any) -> StreamID:
    if isinstance(x, str):
        ms, sep, seq = x.partition("-")
        if sep and ms.isdigit() and seq.isdigit() and int(ms) < 2**64 and int(seq) < 2**64:
            return int(ms), int(seq)
    raise FormatError('a stream ID must be "ms-seq"')


def _stream(value: Stream) -> dict[str, Any]:
    last, first, max_deleted, added = value.meta()
    groups = []
    for name, (g_last, read, consumers, pel) in value.groups_state():
        groups.append(
            {
                "name": enc(name),
                "last_id": enc_id(g_last),
                "entries_read": read,
                "consumers": [[enc(c), seen] for c, seen in consumers],
                "pel": [[enc_id(sid), enc(c), t, n] for sid, (t, n, c) in pel],
            }
        )
    return {
        "entries": [
            [enc_id(sid), [enc(x) for x in value.entries[sid][1]]]
            for sid in value.iter_ids((0, 0), (2**64 - 1, 2**64 - 1))
        ],
        "last_id": enc_id(last),
        "first_id": enc_id(first),
        "max_deleted_id": enc_id(max_deleted),
        "entries_added": added,
        "groups": groups,
    }


def encode_value(value: Any) -> tuple[str, Any]:
    """(type name, JSON value) of a stored value."""
    kind = type_name(value).decode() if not isinstance(value, Stream) else "stream"
    if kind == "string":
        return kind, enc(bytes(value))
    if kind == "hash":
        return kind, [[enc(f), enc(v)] for f, v in value.items()]
    if kind == "list":
        return kind, [enc(x) for x in value]
    if kind == "set":
        return kind, [enc(x) for x in value]
    if kind == "zset":
        return kind, [[enc(m), enc_score(sc)] for sc, m in value.order]
    return kind, _stream(value)


def _list(x: Any, what: str) -> list[Any]:
    if not isinstance(x, list):
        raise FormatError(f"{what} must be a JSON array")
    return x


def _pairs(x: Any, what: str) -> list[tuple[Any, Any]]:
    out = []
    for p in _list(x, what):
        if not isinstance(p, list) or len(p) != 2:
            raise FormatError(f"each item of {what} must be a pair")
        out.append((p[0], p[1]))
    return out


def _int(x: Any, what: str, least: int = 0) -> int:
    if isinstance(x, bool) or not isinstance(x, int) or x < least:
        raise FormatError(f"{what} must be an integer, at least {least}")
    return x


def _decode_stream(x: Any) -> Stream:
    if not isinstance(x, dict):
        raise FormatError("a stream must be a JSON object")
    entries = []
    for sid, fv in _pairs(x.get("entries"), "entries"):
        fields = tuple(dec(f) for f in _list(fv, "an entry's fields"))
        if not fields or len(fields) % 2:
            raise FormatError("an entry's fields must be field, value pairs")
        entries.append((dec_id(sid), fields))
    ids = [sid for sid, _ in entries]
    if ids != sorted(set(ids)):
        raise FormatError("stream entries must be in increasing ID order")
    meta = (
        dec_id(x.get("last_id")),
        dec_id(x.get("first_id")),
        dec_id(x.get("max_deleted_id")),
        _int(x.get("entries_added"), "entries_added"),
    )
    if ids and meta[0] < ids[-1]:
        raise FormatError("last_id is below the stream's last entry")
    groups = []
    for g in _list(x.get("groups", []), "groups"):
        if not isinstance(g, dict):
            raise FormatError("a consumer group must be a JSON object")
        consumers = tuple(
            (dec(c), _int(t, "seen time")) for c, t in _pairs(g.get("consumers"), "consumers")
        )
        pel = []
        for item in _list(g.get("pel"), "pel"):
            if not isinstance(item, list) or len(item) != 4:
                raise FormatError("a pending entry must be [id, consumer, time, count]")
            sid, c, t, n = item
            pel.append((dec_id(sid), (_int(t, "delivery time"), _int(n, "delivery count"), dec(c))))
        state = (dec_id(g.get("last_id")), _int(g.get("entries_read"), "entries_read", -1))
        groups.append((dec(g.get("name")), (*state, consumers, tuple(pel))))
    return Stream.rebuilt(entries, meta, tuple(groups))


def decode_value(kind: Any, x: Any) -> Any:
    """The stored value for a key line's type and JSON value (FormatError if invalid)."""
    if kind == "string":
        return dec(x)
    if kind == "hash":
        pairs = {dec(f): dec(v) for f, v in _pairs(x, "a hash")}
        return new_hash(pairs) if pairs else None
    if kind == "list":
        items = deque(dec(i) for i in _list(x, "a list"))
        return items or None
    if kind == "set":
        members = {dec(m) for m in _list(x, "a set")}
        return new_set(members) if members else None
    if kind == "zset":
        z = ZSet()
        for m, sc in _pairs(x, "a sorted set"):
            z.add(dec(m), dec_score(sc))
        return z if len(z) else None
    if kind == "stream":
        return _decode_stream(x)
    raise FormatError(f"unknown type {kind!r} (one of {', '.join(TYPES)})")
