"""What a handler returns, independent of the wire protocol.

`bytes` is a bulk string, `int` an integer, `None` a null, `float` a double,
`list`/`tuple` an array, `dict` a map, `set` a set, and the classes below the
rest. `commands.resp` encodes them as RESP2 or RESP3 for the connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any


class Simple(bytes):
    """A simple string (+OK)."""

    __slots__ = ()


class ErrorReply(bytes):
    """An error as a value (inside an EXEC reply, or returned directly)."""

    __slots__ = ()


class Verbatim(bytes):
    """A verbatim string (RESP3 `=`); a bulk string in RESP2."""

    __slots__ = ()


class BigNumber(bytes):
    """A big number (RESP3 `(`), its decimal digits; a bulk string in RESP2."""

    __slots__ = ()


class Encoded(bytes):
    """A reply already encoded in RESP for the connection's protocol, written as is."""

    __slots__ = ()


class Push(list[Any]):
    """An out-of-band push (RESP3 `>`); an array in RESP2."""

    __slots__ = ()


class Frames(list[Any]):
    """Several replies to one command, written back to back (SUBSCRIBE a b c)."""

    __slots__ = ()


class IntSetReply(set[bytes]):
    """A set reply whose members go out in ascending numeric order, as Redis
    writes an intset."""

    __slots__ = ("order",)

    def __init__(self, members: Iterable[bytes]) -> None:
        self.order = sorted(members, key=int)
        super().__init__(self.order)

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.order)


class _NullArray:
    """RESP2's null array (*-1); RESP3's null."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NULL_ARRAY"


NULL_ARRAY = _NullArray()


class Paused:
    """CLIENT PAUSE holds this command: the connection runs it again when the pause
    ends (commands.pause)."""

    __slots__ = ()


PAUSED = Paused()
# No reply at all (CLIENT REPLY OFF|SKIP, MONITOR when already monitoring).
NO_REPLY = Encoded(b"")
OK = Simple(b"OK")
QUEUED = Simple(b"QUEUED")
PONG = Simple(b"PONG")

Reply = Any


@dataclass
class Blocked:
    """A blocking command found nothing: wait for a commit to one of `keys`
    (database, key) or until `timeout` seconds pass (0 = forever), then run the
    command again; on timeout reply `on_timeout`."""

    keys: list[tuple[int, bytes]]
    timeout: float
    on_timeout: Reply = NULL_ARRAY
    # A blocking read can also be woken by a specific condition (XREAD's `$`).
    retry_argv: list[bytes] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class CloseAfterReply:
    """Send `reply`, then close the connection (QUIT)."""

    reply: Reply


@dataclass
class Deferred:
    """The reply comes later: `start` is called with a callback taking the reply."""

    start: Callable[[Callable[[Reply], None]], None]


def deferred(coro: Callable[[], Coroutine[Any, Any, Reply]]) -> Deferred:
    """A reply computed by a coroutine (the connection waits for it, in order)."""
    return _deferred(lambda: asyncio.get_running_loop().create_task(coro()))


def _deferred(run: Callable[[], asyncio.Future[Reply] | asyncio.Task[Reply]]) -> Deferred:
    def start(done: Callable[[Reply], None]) -> None:
        task = run()

        def finished(t: asyncio.Future[Reply]) -> None:
            exc = t.exception()
            done(ErrorReply(f"ERR {exc}".encode()) if exc is not None else t.result())

        task.add_done_callback(finished)

    return Deferred(start)


class PairsMap(dict[bytes, Any]):
    """A map reply that may repeat a key (COMMAND DOCS get get repeats the entry, as
    Redis does); the encoder sees `len` and `items` of the pairs."""

    def __init__(self, pairs: list[tuple[bytes, Any]]) -> None:
        super().__init__(pairs)
        self.pairs = pairs

    def __len__(self) -> int:
        return len(self.pairs)

    def items(self) -> Any:
        return iter(self.pairs)
