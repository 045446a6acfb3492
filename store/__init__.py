"""The versioned keyspace: databases of values, expiry, per-key version chains, the
history policy and the single commit point that assigns LSNs and hands update
records to a sink. Knows nothing of sockets or object storage."""

import store.branches
import store.stream  # noqa: F401  (registers the stream type and its ops)
from store.keyspace import (
    CountingSink,
    Database,
    HistoryPolicy,
    PrunedError,
    RecordSink,
    Snapshot,
    Store,
    TablePolicy,
    UpdateRecord,
    VersionEntry,
    WriteMeta,
    now_ms,
)

__all__ = [
    "CountingSink",
    "Database",
    "HistoryPolicy",
    "PrunedError",
    "RecordSink",
    "Snapshot",
    "Store",
    "TablePolicy",
    "UpdateRecord",
    "VersionEntry",
    "WriteMeta",
    "now_ms",
]
