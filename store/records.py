"""What a commit produces and where it goes: the update record, the metadata a
writer attaches to it, the sink that receives it, and who is told its LSN."""

from __future__ import annotations

from typing import Any, Final, NamedTuple, Protocol

from store.opnames import Op


class WriteMeta(NamedTuple):
    """Who wrote, and why: attached to a connection's writes and kept in history."""

    client_id: int
    author: bytes | None = None
    message: bytes | None = None


# One committed change, what the flusher persists and replay applies:
# (lsn, time_ms, ops, cmds, meta), where ops holds (database, key, op) and cmds the
# command behind each op. A plain tuple (issue 13: a named tuple's construction and
# release cost ~1,000 instructions per write more), read with the indexes below.
# The open tail keeps it a boxed tuple in compiled code (see store.chains.VersionEntry).
UpdateRecord = tuple[
    int,
    int,
    "tuple[tuple[Any, bytes | None, Op], ...]",
    "tuple[str, ...]",
    "WriteMeta | None",
    *tuple[Any, ...],
]
R_LSN: Final = 0
R_TIME: Final = 1
R_OPS: Final = 2
R_CMDS: Final = 3
R_META: Final = 4


class RecordSink(Protocol):
    def append(self, record: UpdateRecord) -> None: ...


class CountingSink:
    """The sink until records are persisted: counts what it is given."""

    def __init__(self) -> None:
        self.records = 0
        self.ops = 0
        self.last_lsn = 0

    def append(self, record: UpdateRecord) -> None:
        self.records += 1
        self.ops += len(record[R_OPS])
        self.last_lsn = record[R_LSN]


class Writer:
    """Who a transaction writes for (a client connection, `commands.session_state.Session`
    derives from it): the commit records its metadata and tells it the LSN, and the LSN
    of its latest write to data with sync durability (the acknowledgement a held-back
    reply waits for). A class, not a protocol: the compiled commit reads and writes
    these as fields, not attributes looked up by name."""

    def __init__(self) -> None:
        self.meta: WriteMeta | None = None
        self.last_write_lsn = 0  # the LSN of this connection's latest write
        self.last_sync_lsn = 0  # ... and of its latest write to sync-durability data
        self.last_raft_lsn = 0  # ... and to data with raft durability (committed in etcd)


class LsnMismatch(Exception):
    """A replayed record's LSN is not the next one."""

    def __init__(self, got: int, expected: int) -> None:
        self.got = got
        self.expected = expected
        super().__init__(f"record LSN {got} where {expected} was expected")
