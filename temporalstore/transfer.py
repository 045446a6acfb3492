"""Export files (docs/export-format.md): writing one from TS.EXPORT pages, checking one
end to end before anything is written, and feeding its key lines to TS.IMPORT.

A file is the header line TS.EXPORT gives, one line per key, and an end line this module
writes: `{"end": {"keys": N, "sha256": "<hex>"}}`, the SHA-256 of every byte before it.
A file cut short or changed anywhere fails that check.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import IO, Any

from typing_extensions import Unpack

from temporalstore.errors import TemporalError
from temporalstore.ops import Command, Op, safe_name
from temporalstore.types import ExportOptions, ImportOptions

FORMAT = "temporalstore-export"
PAGE = 500
BATCH_LINES = 1000
BATCH_BYTES = 4 << 20
IMPORT_AUTHOR = "temporalstore-import"


class ExportFileError(TemporalError):
    """An export file that is not whole and valid: nothing was written."""


def select(db: int | None) -> list[Command]:
    """A session's set-up for database `db` (none: the client's own)."""
    return [] if db is None else [("SELECT", db)]


def export_op(out: IO[bytes], **options: Unpack[ExportOptions]) -> Op:
    """Page TS.EXPORT into `out`, then the end line; returns the number of keys."""
    at, match = options.get("at"), options.get("match")
    point = at.args() if at is not None else ["VERSION", int((yield ("TS.VERSION",)))]
    digest = hashlib.sha256()
    keys, cursor = -1, b"0"  # the first line is the header
    while True:
        cmd: list[Any] = ["TS.EXPORT", *point, "COUNT", PAGE, "CURSOR", cursor]
        if match is not None:
            cmd += ["MATCH", match]
        cursor, lines = yield tuple(cmd)
        for line in lines:
            raw = (line if isinstance(line, bytes) else line.encode()) + b"\n"
            digest.update(raw)
            out.write(raw)
            keys += 1
        if cursor in (b"0", "0"):
            end = {"end": {"keys": keys, "sha256": digest.hexdigest()}}
            out.write(json.dumps(end).encode() + b"\n")
            return keys


@dataclass(frozen=True)
class Checked:
    """What `check_file` found: the header and how many key lines follow it."""

    header: dict[str, Any]
    keys: int


def _lines(path: str | os.PathLike[str]) -> Iterator[bytes]:
    with open(path, "rb") as f:
        yield from f


def check_file(path: str | os.PathLike[str]) -> Checked:
    """Read the whole file once: a header first, an end line last whose count and
    SHA-256 match what precedes it (ExportFileError otherwise)."""
    digest = hashlib.sha256()
    header: dict[str, Any] | None = None
    end: Any = None
    count = 0
    for n, raw in enumerate(_lines(path), 1):
        if end is not None:
            raise ExportFileError(f"{path}: line {n} follows the end line")
        if not raw.endswith(b"\n"):
            raise ExportFileError(f"{path}: line {n} is cut short (no newline)")
        if raw.startswith(b'{"end"'):
            end = _json(raw, n, path).get("end")
            continue
        digest.update(raw)
        if n == 1:
            header = _json(raw, n, path)
            if header.get("format") != FORMAT:
                raise ExportFileError(f"{path}: not a {FORMAT} file (line 1 is no header)")
        else:
            count += 1
    if header is None:
        raise ExportFileError(f"{path}: empty file")
    if not isinstance(end, dict):
        raise ExportFileError(f"{path}: no end line: the file is truncated")
    if end.get("keys") != count or end.get("sha256") != digest.hexdigest():
        raise ExportFileError(f"{path}: the end line does not match the content (corrupt)")
    return Checked(header, count)


def _json(raw: bytes, n: int, path: Any) -> dict[str, Any]:
    try:
        obj = json.loads(raw)
    except ValueError:
        raise ExportFileError(f"{path}: line {n} is not JSON") from None
    if not isinstance(obj, dict):
        raise ExportFileError(f"{path}: line {n} is not a JSON object")
    return obj


def _batches(path: str | os.PathLike[str]) -> Iterator[list[bytes]]:
    """The key lines (no header, no end line) in batches for one TS.IMPORT each."""
    batch: list[bytes] = []
    size = 0
    for n, raw in enumerate(_lines(path), 1):
        if n == 1 or raw.startswith(b'{"end"'):
            continue
        batch.append(raw.rstrip(b"\n"))
        size += len(raw)
        if len(batch) >= BATCH_LINES or size >= BATCH_BYTES:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def import_op(path: str | os.PathLike[str], replace: bool) -> Op:
    """On a connection set up for the target: check every batch with TS.IMPORT CHECK,
    then write them; returns the number of keys written."""
    mode = ["REPLACE"] if replace else []
    for batch in _batches(path):
        yield ("TS.IMPORT", "CHECK", *mode, *batch)
    written = 0
    for batch in _batches(path):
        written += int((yield ("TS.IMPORT", *mode, *batch)))
    return written


@dataclass(frozen=True)
class Imported:
    """Where an import went (a branch, or the main line when None), and how many keys."""

    branch: str | None
    db: int
    keys: int


@dataclass(frozen=True)
class Target:
    """Where an import goes: a new branch (`branch`), or the main line's database `db`."""

    branch: str | None
    db: int
    replace: bool
    setup: list[Command]


def target(checked: Checked, source: str, **options: Unpack[ImportOptions]) -> Target:
    """The connection set-up for an import: SELECT, TS.CHECKOUT the branch, TS.META
    saying what was imported from where. A branch is the default target."""
    branch, db = options.get("branch"), options.get("db")
    replace = bool(options.get("replace"))
    h = checked.header
    db = int(h.get("db", 0)) if db is None else db
    snap = h.get("snapshot") or {}
    what = f"snapshot {snap['name']!s}" if snap else f"LSN {h.get('lsn')}"
    message = (
        f"imported from {source}: {what}, {checked.keys} keys, exported {h.get('exported_ms')}"
    )
    meta: Command = ("TS.META", "AUTHOR", IMPORT_AUTHOR, "MESSAGE", message)
    if options.get("main_line") or replace:
        if branch is not None:
            raise ValueError("a branch import cannot also go to the main line")
        return Target(None, db, replace, [("SELECT", db), meta])
    name = branch or default_branch(h)
    return Target(name, db, False, [("SELECT", db), ("TS.CHECKOUT", name), meta])


def default_branch(header: dict[str, Any]) -> str:
    snap = header.get("snapshot") or {}
    stem = str(snap.get("name") or f"lsn-{header.get('lsn')}")
    return f"import-{safe_name(stem, 60)}"


def open_out(path: str | None) -> Callable[[], IO[bytes]]:
    """A factory for the export's output: a file, or stdout's bytes for '-' / None."""

    def opener() -> IO[bytes]:
        if path in (None, "-"):
            return os.fdopen(os.dup(1), "wb")
        return open(path, "wb")

    return opener
