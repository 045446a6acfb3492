"""The Python client of TemporalStore's temporal API: typed wrappers over the TS.* verbs
for redis-py (`Temporal` on `redis.Redis`, `AsyncTemporal` on `redis.asyncio.Redis`), the
read-only views, writer metadata and branch sessions they hand out, the entries they
return and the exceptions they raise. It speaks only RESP to a server; it imports nothing
of the server's packages.

    import redis
    from temporalstore import Temporal
    ts = Temporal(redis.Redis())

docs/client.md is the guide.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from temporalstore.aio import AsyncTemporal
    from temporalstore.client import Temporal
    from temporalstore.errors import (
        AlreadyExistsError,
        BranchNotFoundError,
        MergeConflictError,
        PrunedError,
        ReadOnlyViewError,
        SnapshotNotFoundError,
        TemporalError,
    )
    from temporalstore.transfer import ExportFileError, Imported
    from temporalstore.types import BranchInfo, HistoryEntry, Point, SnapshotInfo, TableInfo

# Where each name lives. They are imported on first use (PEP 562), so that importing a
# module of this package (the server's command line reads `temporalstore.flags`) does
# not import redis-py: about 8 MB of every server's memory.
_WHERE = {
    "AsyncTemporal": "temporalstore.aio",
    "Temporal": "temporalstore.client",
    "ExportFileError": "temporalstore.transfer",
    "Imported": "temporalstore.transfer",
    **dict.fromkeys(
        [
            "AlreadyExistsError",
            "BranchNotFoundError",
            "MergeConflictError",
            "PrunedError",
            "ReadOnlyViewError",
            "SnapshotNotFoundError",
            "TemporalError",
        ],
        "temporalstore.errors",
    ),
    **dict.fromkeys(
        ["BranchInfo", "HistoryEntry", "Point", "SnapshotInfo", "TableInfo"], "temporalstore.types"
    ),
}


def __getattr__(name: str) -> Any:
    where = _WHERE.get(name)
    if where is None:
        raise AttributeError(f"module 'temporalstore' has no attribute {name!r}")
    value = getattr(importlib.import_module(where), name)
    globals()[name] = value
    return value


__all__ = [
    "AlreadyExistsError",
    "AsyncTemporal",
    "BranchInfo",
    "BranchNotFoundError",
    "ExportFileError",
    "HistoryEntry",
    "Imported",
    "MergeConflictError",
    "Point",
    "PrunedError",
    "ReadOnlyViewError",
    "SnapshotInfo",
    "SnapshotNotFoundError",
    "TableInfo",
    "Temporal",
    "TemporalError",
]
