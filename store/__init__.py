"""The versioned keyspace, with no knowledge of sockets or object storage.

The package owns: numbered databases of values with expiry (`database`), values
and the ops that change them with their undo (`values`, `ops`, `stream`; what an op
is, at the bottom: `opnames`), each key's version chain (`chains`), what history is
kept (`policy`), the update records a commit produces and the sink that receives them
(`records`); the keyspace's state and the operations its features build on
(`core`: `StoreCore`); the features, built on it and never importing the `Store`:
reads in the past (`asof`), views (`views`), branches (`branches`), history out of
memory (`coldhistory`), the commit's common cases (`commitpath`), checkpoint images
(`image`) and replay in bulk (`bulkreplay`); and on top the `Store` (`keyspace`): the
transaction (begin, apply, commit or roll back) at the single commit point that
assigns LSNs and hands records to the sink, and replay of persisted records (in
bulk where it can: `bulkreplay`). For cluster mode: hash slots and the slot map as
plain data (`slots`), and the keys of a slot range moving between shards (`moves`:
taken out with their history, renumbered, the IMPORT and FORGET ops). And, because
every other package may import `store` (`flusher` imports nothing else, `proxy.server`
no durable layer), one helper they all share that has nothing to do with keys:
`tasks` (`cancel_and_wait`: stopping background asyncio tasks)."""

from store.native import extend as _extend

# The compiled build, when it is used, comes first on this package's path (store/native.py).
__path__ = _extend(__path__, __name__)

import store.stream  # noqa: F401  (registers the stream type and its ops)
from store.asof import PrunedError, lsn_by_time
from store.chains import (
    V_CMD,
    V_LSN,
    V_META,
    V_SNAP,
    V_TIME,
    V_UNDO,
    VersionEntry,
    entry_created,
)
from store.database import Database, now_ms
from store.keyspace import Store
from store.policy import HistoryPolicy, Snapshot, TablePolicy
from store.records import (
    R_CMDS,
    R_LSN,
    R_META,
    R_OPS,
    R_TIME,
    CountingSink,
    RecordSink,
    UpdateRecord,
    WriteMeta,
    Writer,
)

__all__ = [
    "R_CMDS",
    "R_LSN",
    "R_META",
    "R_OPS",
    "R_TIME",
    "V_CMD",
    "V_LSN",
    "V_META",
    "V_SNAP",
    "V_TIME",
    "V_UNDO",
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
    "Writer",
    "entry_created",
    "lsn_by_time",
    "now_ms",
]
