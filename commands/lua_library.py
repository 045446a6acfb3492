"""Function libraries' metadata (the `#!lua name=...` line) and FUNCTION DUMP /
RESTORE payloads (Redis 7.0's RDB records: one per library, the RDB version, CRC64)."""

from __future__ import annotations

from commands.errors import CommandError
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
RDB_VERSION = 10
_CRC64_POLY = 0x95AC9329AC4BC9B5  # Jones, reflected (Redis' crc64)


def _crc64_table() -> list[int]:
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ _CRC64_POLY if c & 1 else c >> 1
        table.append(c)
    return table


_CRC64 = _crc64_table()


def crc64(data: bytes, crc: int = 0) -> int:
    t = _CRC64
    for b in data:
        crc = t[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc


def _rdb_len(n: int) -> bytes:
    if n < 64:
        return bytes([n])
    if n < 16384:
        return bytes([0x40 | (n >> 8), n & 0xFF])
    if n <= 0xFFFFFFFF:
        return b"\x80" + n.to_bytes(4, "big")
    return b"\x81" + n.to_bytes(8, "big")


def dump_payload(codes: list[bytes]) -> bytes:
    body = b"".join(bytes([RDB_OPCODE_FUNCTION2]) + _rdb_len(len(c)) + c for c in codes)
    body += RDB_VERSION.to_bytes(2, "little")
    return body + crc64(body).to_bytes(8, "little")


def _lzf_decompress(data: bytes, size: int) -> bytes:
    out = bytearray()
    i = 0
    while i < len(data):
        ctrl = data[i]
        i += 1
        if ctrl < 32:
            out += data[i : i + ctrl + 1]
            i += ctrl + 1
        else:
            n = ctrl >> 5
            if n == 7:
                n += data[i]
                i += 1
            ref = len(out) - ((ctrl & 0x1F) << 8) - data[i] - 1
            i += 1
            for _ in range(n + 2):
                out.append(out[ref])
                ref += 1
    if len(out) != size:
        raise ValueError("bad lzf data")
    return bytes(out)


def _read_len(p: bytes, i: int) -> tuple[int, int, bool]:
    """An RDB length at `i`: (value, next index, whether it is a special encoding)."""
    b = p[i]
    kind = b >> 6
    if kind == 0:
        return b & 0x3F, i + 1, False
    if kind == 1:
        return ((b & 0x3F) << 8) | p[i + 1], i + 2, False
    if kind == 3:
        return b & 0x3F, i + 1, True
    if b == 0x80:
        return int.from_bytes(p[i + 1 : i + 5], "big"), i + 5, False
    return int.from_bytes(p[i + 1 : i + 9], "big"), i + 9, False


def parse_payload(p: bytes) -> list[bytes] | None:
    """The library codes of a FUNCTION DUMP payload, or None if it is not valid."""
    if len(p) < 10:
        return None
    body, footer = p[:-8], p[-8:]
    if int.from_bytes(body[-2:], "little") > RDB_VERSION:
        return None
    if int.from_bytes(footer, "little") != crc64(body):
        return None
    codes = []
    i, end = 0, len(body) - 2
    try:
        while i < end:
            if body[i] != RDB_OPCODE_FUNCTION2:
                return None
            n, i, special = _read_len(body, i + 1)
            if special:
                if n != 3:  # only LZF strings hold code
                    return None
                clen, i, _ = _read_len(body, i)
                ulen, i, _ = _read_len(body, i)
                codes.append(_lzf_decompress(body[i : i + clen], ulen))
                i += clen
            else:
                codes.append(body[i : i + n])
                i += n
    except (IndexError, ValueError):
        return None
    return codes
