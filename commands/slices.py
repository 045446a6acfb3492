"""Verbs whose work grows with the data run in slices: a few milliseconds of work,
then the event loop lets other clients in (`SLICE_MS`). Their reading phase reads
history, which does not change; their writing phase commits slice by slice, so
such a verb is atomic only up to `ATOMIC_ITEMS` items (and inside MULTI/EXEC, where
it runs whole): past that, other clients may see it part done. The reply comes when
the last slice is committed, in order with the connection's other replies.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterable, Iterator
from typing import Any, TypeVar

from commands.errors import CommandError
from commands.notify import notify_command
from commands.replies import ErrorReply, Reply, deferred
from commands.session import Session

SLICE_MS = 3.0
ATOMIC_ITEMS = 1024  # up to this many items a verb runs whole, as one command

T = TypeVar("T")
R = TypeVar("R")


def sliced(s: Session, items: int) -> bool:
    """Whether a verb over `items` items runs in slices (not inside MULTI/EXEC)."""
    return items > ATOMIC_ITEMS and not s.in_exec


class _Budget:
    def __init__(self) -> None:
        self.deadline = time.perf_counter() + SLICE_MS / 1000

    def spent(self) -> bool:
        return time.perf_counter() > self.deadline

    async def pause(self) -> None:
        await asyncio.sleep(0)
        self.deadline = time.perf_counter() + SLICE_MS / 1000


async def each_in_slices(items: Iterable[T]) -> AsyncIterator[T]:
    """The items, letting the loop in every few milliseconds of the caller's work."""
    budget = _Budget()
    for n, x in enumerate(items, 1):
        yield x
        if not n & 31 and budget.spent():
            await budget.pause()


async def map_in_slices(fn: Callable[[T], R], items: Iterable[T]) -> list[R]:
    """[fn(x) for x in items], letting the loop in every few milliseconds."""
    return [fn(x) async for x in each_in_slices(items)]


async def write_in_slices(
    s: Session, cmd: str, writes: Iterable[T], apply: Callable[[T], bool]
) -> int:
    """Apply `writes` through the store, one commit per slice (named `cmd`, written
    for `s`); return how many `apply` said it changed."""
    store = s.store
    budget = _Budget()
    changed = 0
    it: Iterator[T] = iter(writes)
    done = False
    while not done:
        savepoint = store.begin(cmd, s)
        try:
            for n, w in enumerate(it, 1):
                changed += apply(w)
                if not n & 31 and budget.spent():
                    break
            else:
                done = True
        except BaseException:
            store.rollback_to(0)
            raise
        if s.server.notify_flags and len(store.pending) > savepoint:
            notify_command(s, cmd, [], store.pending[savepoint:])
        if s.server.tracking is not None and len(store.pending) > savepoint:
            s.server.tracking.sliced_writes(s, store.pending[savepoint:])
        stream = s.server.repl_stream  # Redis replicas (commands.redis_repl)
        if stream is not None and stream.effects is not None and len(store.pending) > savepoint:
            own = [p for p in store.pending[savepoint:] if p[4] != "expired"]
            stream.propagate(s.server, stream.effects(s, own), True)
        store.commit()
        if not done:
            await budget.pause()
    return changed


def run_sliced(work: Callable[[], Coroutine[Any, Any, Reply]]) -> Reply:
    """The reply of a sliced verb: `work` runs on the loop; a CommandError it raises
    is its error reply."""

    async def guarded() -> Reply:
        try:
            return await work()
        except CommandError as e:
            return ErrorReply(e.text)

    return deferred(guarded)
