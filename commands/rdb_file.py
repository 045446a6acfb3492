"""Whole RDB files (what redis-server's SAVE writes): `parse_rdb` reads every record of
a Redis 7.0 file (RDB version 10; older versions and Redis 7.2's 11 are read too) and
checks its CRC-64 before anything is handed back, so a truncated or corrupt file is
refused whole. Used by `temporalstore import --rdb` and `serve --import-rdb`.

Aux fields, RESIZEDB hints and LRU/LFU hints are read and ignored; empty collections
are skipped and counted, as Redis 7.0 skips them; FUNCTION2 records
give the function libraries' code; module values and module aux data are refused
(no module types here), as are the pre-release function records Redis 7.0 refuses.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from commands.rdb import (
    MAX_TYPE_70,
    T_STREAM_LISTPACKS_3,
    RdbEmptyKey,
    RdbError,
    Reader,
    crc64,
    load_value,
)
from commands.rdb import module_type_name as _module_name

OP_FUNCTION2 = 245
OP_FUNCTION_PRE_GA = 246
OP_MODULE_AUX = 247
OP_IDLE = 248
OP_FREQ = 249
OP_AUX = 250
OP_RESIZEDB = 251
OP_EXPIRETIME_MS = 252
OP_EXPIRETIME = 253
OP_SELECTDB = 254
OP_EOF = 255

MAX_VERSION = 11  # Redis 7.2's files hold nothing 7.0's do not, besides types 20 and 21
PROGRESS_EVERY = 1 << 20  # bytes between progress calls


@dataclass
class RdbContents:
    version: int
    # (database, key, value, absolute expiry in ms or None), in file order
    keys: list[tuple[int, bytes, Any, int | None]] = field(default_factory=list)
    functions: list[bytes] = field(default_factory=list)
    aux: dict[bytes, bytes] = field(default_factory=dict)
    checksum: int = 0  # 0: the file was saved with rdbchecksum no (nothing to check)
    empty_keys: int = 0  # collections with no elements, skipped as Redis skips them


def parse_rdb(data: bytes, progress: Callable[[int], None] | None = None) -> RdbContents:
    """Every record of an RDB file, checked; RdbError names what is wrong and where.
    `progress(bytes read)` is called as the parse goes."""
    if len(data) < 9 or data[:5] != b"REDIS" or not data[5:9].isdigit():
        raise RdbError("not an RDB file (no REDIS signature)")
    version = int(data[5:9])
    if version < 1 or version > MAX_VERSION:
        raise RdbError(f"can't handle RDB format version {version}")
    max_type = T_STREAM_LISTPACKS_3 if version >= 11 else MAX_TYPE_70
    out = RdbContents(version)
    r = Reader(data, 9)
    db = 0
    expire: int | None = None
    next_report = PROGRESS_EVERY
    while True:
        if progress is not None and r.pos >= next_report:
            progress(r.pos)
            next_report = r.pos + PROGRESS_EVERY
        start = r.pos
        try:
            op = r.byte()
            if op == OP_EOF:
                break
            if op == OP_EXPIRETIME_MS:
                expire = int.from_bytes(r.take(8), "little", signed=True)
            elif op == OP_EXPIRETIME:
                expire = int.from_bytes(r.take(4), "little", signed=True) * 1000
            elif op == OP_SELECTDB:
                db = r.length()
            elif op == OP_RESIZEDB:
                r.length()
                r.length()
            elif op == OP_AUX:
                k = r.string()
                out.aux[k] = r.string()
            elif op == OP_IDLE:
                r.length()
            elif op == OP_FREQ:
                r.byte()
            elif op == OP_FUNCTION2:
                out.functions.append(r.string())
            elif op == OP_FUNCTION_PRE_GA:
                raise RdbError("Pre-release function format not supported")
            elif op == OP_MODULE_AUX:
                raise RdbError(
                    "The RDB file contains AUX module data I can't load: no matching module "
                    f"'{_module_name(r.length())}'"
                )
            else:
                key = r.string()
                try:
                    out.keys.append((db, key, load_value(r, op, max_type), expire))
                except RdbEmptyKey:
                    out.empty_keys += 1
                expire = None
        except RdbError as e:
            raise RdbError(f"{e} (record at byte {start})") from None
    if version >= 5:
        body_end = r.pos
        out.checksum = int.from_bytes(r.take(8), "little")
        if out.checksum and out.checksum != crc64(memoryview(data)[:body_end]):
            raise RdbError("wrong RDB checksum: the file is corrupt")
    if r.pos != len(data):
        raise RdbError(f"{len(data) - r.pos} bytes after the end of the RDB data")
    if progress is not None:
        progress(len(data))
    return out
