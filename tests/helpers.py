"""In-process helpers shared by the tests: a sink that keeps every record, a session
on a fresh server, and running one command through the dispatcher."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import strategies as st

import commands.families  # noqa: F401  (registers every command)
from commands.dispatch import DISPATCHER
from commands.replies import Deferred
from commands.session import ServerState, Session
from store import HistoryPolicy, Store, UpdateRecord, WriteMeta


class ListSink:
    """A record sink that keeps every record it is given, in order."""

    def __init__(self) -> None:
        self.records: list[UpdateRecord] = []

    def append(self, record: UpdateRecord) -> None:
        self.records.append(record)


def make_session(databases: int = 16, history: str | None = None) -> tuple[Session, ListSink]:
    """A session on a fresh in-process server (listed among its clients, as a
    connection's is) whose store hands its records to a `ListSink`."""
    sink = ListSink()
    policy = None if history is None else HistoryPolicy.parse(history)
    server = ServerState(Store(databases, history=policy, sink=sink))
    s = Session(server)
    server.clients[s.id] = s
    return s, sink


def run(s: Session, *args: str | bytes) -> Any:
    """Execute one command (str arguments are encoded) and return its reply; a
    deferred reply (a verb run in slices) is awaited on a loop of its own."""
    reply = DISPATCHER.execute(s, [a.encode() if isinstance(a, str) else a for a in args])
    if isinstance(reply, Deferred):
        return asyncio.run(_settle(reply))
    return reply


async def _settle(reply: Deferred) -> Any:
    done: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    reply.start(done.set_result)
    return await done


def read_value(r: Any, key: bytes, kind: bytes) -> Any:
    """A key's whole value through redis-py by its type (a stream's entries only)."""
    if kind == b"string":
        return r.get(key)
    if kind == b"hash":
        return r.hgetall(key)
    if kind == b"list":
        return r.lrange(key, 0, -1)
    if kind == b"set":
        return sorted(r.smembers(key))
    if kind == b"zset":
        return r.zrange(key, 0, -1, withscores=True)
    return r.xrange(key)


def write_metas(max_id: int, size: int) -> Any:
    """A Hypothesis strategy: None or a `WriteMeta` with every field given (a compiled
    WriteMeta's annotations do not say its field types, so `st.builds` cannot infer
    them)."""
    blob = st.binary(max_size=size)
    return st.none() | st.builds(WriteMeta, st.integers(0, max_id), blob, st.none() | blob)
