"""What a commit produces and where it goes: the update record, the metadata a
writer attaches to it, the sink that receives it, and who is told its LSN."""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

from store.ops import Op


class WriteMeta(NamedTuple):
    """Who wrote, and why: attached to a connection's writes and kept in history."""

    client_id: int
    author: bytes | None = None
    message: bytes | None = None


class UpdateRecord(NamedTuple):
    """One committed change: what the flusher persists and replay applies."""

    lsn: int
    time_ms: int
    ops: tuple[tuple[Any, bytes | None, Op], ...]  # (database, key, op)
    cmds: tuple[str, ...]  # the command behind each op
    meta: WriteMeta | None


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
        self.ops += len(record.ops)
        self.last_lsn = record.lsn


class Writer(Protocol):
    """Who a transaction writes for (a client connection): the commit records its
    metadata and tells it the LSN, and the LSN of its latest write to data with
    sync durability (the acknowledgement a held-back reply waits for)."""

    meta: WriteMeta | None
    last_write_lsn: int
    last_sync_lsn: int
    last_raft_lsn: int  # ... and to data with raft durability (committed in etcd)


class LsnMismatch(Exception):
    """A replayed record's LSN is not the next one."""

    def __init__(self, got: int, expected: int) -> None:
        self.got = got
        self.expected = expected
        super().__init__(f"record LSN {got} where {expected} was expected")
