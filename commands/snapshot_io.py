"""TS.EXPORT and TS.IMPORT: a point of history taken out of the server as JSON Lines, and
such lines written back as versions (docs/export-format.md; the CLI's `temporalstore
export` / `import` and the client's `export_snapshot` / `import_snapshot` drive them).

TS.EXPORT <at> [MATCH pattern] [COUNT n] [CURSOR c]
    One page of the selected database as of <at>: [next cursor, [line, ...]]. The first
    page (CURSOR 0, the default) starts with the header line; then one line per key, in
    key order, up to COUNT keys (100) or 4 MB of lines; the next cursor is "0" after the
    last page.
TS.IMPORT [CHECK] [REPLACE] line [line ...]
    Write the keys of these key lines (header lines are checked and skipped) into the
    connection's database, or its branch, as one version; replies how many keys it wrote.
    Every line is decoded before anything is written. Keys that exist are refused
    (-ERR ... exist already) unless REPLACE; CHECK decodes and checks, writing nothing.
"""

from __future__ import annotations

import json
from bisect import bisect_right
from importlib.metadata import PackageNotFoundError, version
from typing import Any

from commands.common import history_keys
from commands.errors import SYNTAX, CommandError
from commands.parsing import get_int
from commands.points import Point, parse_point, state_as_of
from commands.registry import Flag, command
from commands.replies import Reply
from commands.session import Session
from commands.snapshot_codec import (
    FORMAT,
    FORMAT_VERSION,
    FormatError,
    dec,
    decode_value,
    enc,
    encode_value,
)
from store import now_ms
from store.ops import RESTORE

DEFAULT_COUNT = 100
# A page also ends once its lines pass this many bytes (after at least one key), so
# that pages of large values stay small on both sides.
PAGE_BYTES = 4 << 20
BAD_CURSOR = "ERR invalid cursor"
MAIN_LINE_ONLY = "ERR TS.EXPORT reads points of the main line: TS.CHECKOUT HEAD first"
# The keys of one export, sorted once per connection and point: later pages only bisect.
_CACHE = "export_keys"


def _server_version() -> str:
    try:
        return version("temporalstore")
    except PackageNotFoundError:
        return "unknown"


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def header(s: Session, kind: bytes, arg: bytes, point: Point, pattern: bytes | None) -> bytes:
    """The export's first line: what was exported, from where, as of what."""
    snap = s.store.snapshots.get(arg) if kind == b"snapshot" else None
    at: dict[str, Any] = {kind.decode(): enc(arg) if kind == b"snapshot" else int(arg)}
    return _dumps(
        {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "point": at,
            "lsn": point.lsn,
            "at_ms": point.at_ms,
            "snapshot": None
            if snap is None
            else {
                "name": enc(snap.name),
                "trigger": enc(snap.trigger),
                "lsn": snap.lsn,
                "created_ms": s.store.time_of(snap.lsn),
                "metadata": {
                    dec_str(k): enc(v) for k, v in zip(snap.meta[::2], snap.meta[1::2], strict=True)
                },
            },
            "db": s.dbi,
            "match": None if pattern is None else enc(pattern),
            "server": {"name": "temporalstore", "version": _server_version()},
            "exported_ms": now_ms(),
        }
    )


def dec_str(b: bytes) -> str:
    return b.decode("utf-8", "replace")


def key_line(key: bytes, value: Any, expire: int | None) -> bytes:
    kind, json_value = encode_value(value)
    return _dumps({"key": enc(key), "type": kind, "value": json_value, "expire_ms": expire})


def _sorted_keys(s: Session, point: Point, pattern: bytes | None) -> list[bytes]:
    tag = (s.dbi, point, pattern)
    cached = s.extra.get(_CACHE)
    if cached is not None and cached[0] == tag:
        keys: list[bytes] = cached[1]
        return keys
    keys = sorted(history_keys(s, pattern))
    s.extra[_CACHE] = (tag, keys)
    return keys


@command("ts.export", -3, Flag.READONLY)
def cmd_ts_export(s: Session, argv: list[bytes]) -> Reply:
    if s.branch is not None or s.view_lsn is not None:
        raise CommandError(MAIN_LINE_ONLY)
    kind, arg = argv[1].lower(), argv[2] if len(argv) > 2 else b""
    if kind == b"back":
        raise CommandError("ERR BACK is only valid for a single key")
    point, i = parse_point(s, argv, 1)
    pattern: bytes | None = None
    count, cursor = DEFAULT_COUNT, b"0"
    while i < len(argv):
        opt = argv[i].lower()
        if i + 1 >= len(argv):
            raise CommandError(SYNTAX)
        if opt == b"match":
            pattern = argv[i + 1]
        elif opt == b"count":
            count = get_int(argv[i + 1])
            if count < 1:
                raise CommandError(SYNTAX)
        elif opt == b"cursor":
            cursor = argv[i + 1]
        else:
            raise CommandError(SYNTAX)
        i += 2
    keys = _sorted_keys(s, point, pattern)
    lines: list[Reply] = []
    if cursor == b"0":
        start = 0
        lines.append(header(s, kind, arg, point, pattern))
    else:
        try:
            after = bytes.fromhex(cursor[1:].decode()) if cursor[:1] == b"k" else None
        except ValueError:
            after = None
        if after is None:
            raise CommandError(BAD_CURSOR)
        start = bisect_right(keys, after)
    i, written, size = start, 0, 0
    while i < len(keys) and written < count and size < PAGE_BYTES:
        value, expire = state_as_of(s, keys[i], point)
        if value is not None:
            line = key_line(keys[i], value, expire)
            lines.append(line)
            written += 1
            size += len(line)
        i += 1
    next_cursor = b"0" if i >= len(keys) else b"k" + keys[i - 1].hex().encode()
    return [next_cursor, lines]


def parse_line(line: bytes, n: int) -> tuple[bytes, Any, int | None] | None:
    """A key line's (key, value, expire_ms); None for a header line."""
    try:
        obj = json.loads(line)
    except (UnicodeDecodeError, ValueError) as e:
        raise CommandError(f"ERR TS.IMPORT line {n}: not JSON ({e})") from None
    try:
        if not isinstance(obj, dict):
            raise FormatError("a line must be a JSON object")
        if "format" in obj:
            if obj["format"] != FORMAT or obj.get("format_version") != FORMAT_VERSION:
                raise FormatError(f"not a {FORMAT} header of format_version {FORMAT_VERSION}")
            return None
        if set(obj) != {"key", "type", "value", "expire_ms"}:
            raise FormatError("a key line has exactly key, type, value and expire_ms")
        expire = obj["expire_ms"]
        if expire is not None and (isinstance(expire, bool) or not isinstance(expire, int)):
            raise FormatError("expire_ms must be an integer or null")
        value = decode_value(obj["type"], obj["value"])
        if value is None:
            raise FormatError(f"an empty {obj['type']}")
        return dec(obj["key"]), value, expire
    except FormatError as e:
        raise CommandError(f"ERR TS.IMPORT line {n}: {e}") from None


@command("ts.import", -2, Flag.WRITE | Flag.DENYOOM)
def cmd_ts_import(s: Session, argv: list[bytes]) -> Reply:
    i, check, replace = 1, False, False
    while i < len(argv) and argv[i][:1] != b"{":
        opt = argv[i].lower()
        if opt == b"check":
            check = True
        elif opt == b"replace":
            replace = True
        else:
            raise CommandError(SYNTAX)
        i += 1
    states = [st for n, line in enumerate(argv[i:], 1) if (st := parse_line(line, n))]
    now = now_ms()
    # A key whose expiry has passed is not written (as restoring it would delete it).
    states = [st for st in states if st[2] is None or st[2] > now]
    keys = [k for k, _, _ in states]
    if len(set(keys)) != len(keys):
        raise CommandError("ERR TS.IMPORT: a key appears twice")
    if not replace:
        exist = [k for k in keys if s.db.get(k) is not None]
        if exist:
            shown = ", ".join(dec_str(k) for k in exist[:10])
            raise CommandError(
                f"ERR TS.IMPORT: {len(exist)} key(s) exist already: {shown} "
                "(import into a new branch or database, or pass REPLACE)"
            )
    if check:
        return len(states)
    for key, value, expire in states:
        s.store.apply(s.db, key, (RESTORE, value, expire))
    return len(states)
