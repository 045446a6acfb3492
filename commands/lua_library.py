"""Function libraries' metadata (the `#!lua name=...` line) and FUNCTION DUMP /
RESTORE payloads (Redis 7.0's RDB records: one per library, the RDB version, CRC64)."""

from __future__ import annotations

from commands.errors import CommandError
from commands.rdb import RdbError, Reader, payload_ok
from commands.rdb_write import rdb_string, trailer
from commands.resp import split_inline

NAME_ERROR = (
    "Library names can only contain letters, numbers, or underscores(_) "
    "and must be at least one character long"
)


def valid_name(name: bytes) -> bool:
    return bool(name) and all(
        48 <= c <= 57 or 65 <= c <= 90 or 97 <= c <= 122 or c == 95 for c in name
    )


def shebang_parts(code: bytes, no_line: str, empty: str | None = None) -> tuple[list[bytes], int]:
    """The words of a `#!` first line (split as Redis' sdssplitargs) and its length;
    errors `no_line` without a newline, `empty` (or `no_line`) without words."""
    end = code.find(b"\n")
    if end < 0:
        raise CommandError(no_line)
    try:
        parts = split_inline(code[:end])
    except Exception:
        parts = []
    if not parts:
        raise CommandError(empty or no_line)
    return parts, end


def library_metadata(code: bytes) -> tuple[bytes, bytes, bytes]:
    """Redis' functionExtractLibMetaData: (engine, name, code after the shebang)."""
    if not code.startswith(b"#!"):
        raise CommandError("ERR Missing library metadata")
    parts, end = shebang_parts(code, "ERR Invalid library metadata")
    engine = parts[0][2:]
    name: bytes | None = None
    for p in parts[1:]:
        if p[:5].lower() == b"name=":
            if name is not None:
                raise CommandError(
                    "ERR Invalid metadata value, name argument was given multiple times"
                )
            name = p[5:]
            continue
        raise CommandError(b"ERR Invalid metadata value given: " + p)
    if name is None:
        raise CommandError("ERR Library name was not given")
    return engine, name, code[end:]


# -- FUNCTION DUMP / RESTORE payloads (RDB 7.0: function records, version, CRC64) ------

RDB_OPCODE_FUNCTION2 = 245


def dump_payload(codes: list[bytes], compress: bool = True) -> bytes:
    """FUNCTION DUMP: one FUNCTION2 record per library (its code as rdbSaveRawString
    writes it, LZF-compressed with `rdbcompression`), then the trailer."""
    body = b"".join(bytes([RDB_OPCODE_FUNCTION2]) + rdb_string(c, compress) for c in codes)
    return trailer(body)


def parse_payload(p: bytes) -> list[bytes] | None:
    """The library codes of a FUNCTION DUMP payload, or None if it is not valid."""
    if not payload_ok(p):
        return None
    r = Reader(p, 0, len(p) - 10)
    codes = []
    try:
        while r.pos < r.end:
            if r.byte() != RDB_OPCODE_FUNCTION2:
                return None
            codes.append(r.string())
    except RdbError:
        return None
    return codes
