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
