"""Replies as JSON, written in bounded chunks: a large value never holds the event loop.

`pieces` walks a reply and yields JSON text a little at a time: a bulk string is cut
into `PIECE` bytes, each decoded and escaped on its own; a collection yields per
element. `stream_json` gathers pieces until `CHUNK` characters, writes them (waiting
for the socket to drain when the client reads slowly) and lets the loop run other
work before it renders more. So RESP clients keep being served while a value of
hundreds of megabytes goes out; memory is the reply (shared, not copied: bulk strings
are immutable and the verbs build their replies fresh) plus one chunk.

Encoding (docs/explorer.md): bytes are JSON strings, decoded as UTF-8; a byte that is
not part of valid UTF-8 becomes the escape `\\udcXX` (XX its value: Python's
"surrogateescape"), which no valid UTF-8 text produces, so the page can show it and
send the exact bytes back. Integers are numbers, doubles are numbers (`inf`, `-inf`
and `nan` as strings), null is null, maps are arrays of [key, value] pairs (in their
order), arrays and sets are arrays.
"""

from __future__ import annotations

import asyncio
import codecs
import math
from collections.abc import Iterator
from json.encoder import encode_basestring_ascii
from typing import Any, Protocol

PIECE = 64 * 1024  # bytes of a bulk string decoded and escaped at once
CHUNK = 256 * 1024  # characters written between two turns of the loop


class Writer(Protocol):
    async def write(self, data: bytes) -> None: ...


def _text(b: bytes) -> Iterator[str]:
    if len(b) <= PIECE:
        yield encode_basestring_ascii(b.decode("utf-8", "surrogateescape"))
        return
    decoder = codecs.getincrementaldecoder("utf-8")("surrogateescape")
    view = memoryview(b)
    yield '"'
    for i in range(0, len(b), PIECE):
        part = decoder.decode(view[i : i + PIECE], final=i + PIECE >= len(b))
        yield encode_basestring_ascii(part)[1:-1]
    yield '"'


def pieces(value: Any) -> Iterator[str]:
    """JSON text of `value` (a reply, or dicts and lists holding replies)."""
    if value is None:
        yield "null"
    elif isinstance(value, bytes | bytearray | memoryview):
        yield from _text(bytes(value) if not isinstance(value, bytes) else value)
    elif isinstance(value, str):
        yield encode_basestring_ascii(value)
    elif isinstance(value, bool):
        yield "true" if value else "false"
    elif isinstance(value, int):
        yield str(value)
    elif isinstance(value, float):
        yield repr(value) if math.isfinite(value) else f'"{value}"'
    elif isinstance(value, dict):
        if isinstance(next(iter(value), ""), str):  # an object of ours
            yield "{"
            for i, (k, v) in enumerate(value.items()):
                yield ("," if i else "") + encode_basestring_ascii(k) + ":"
                yield from pieces(v)
            yield "}"
        else:  # a map of the reply: [key, value] pairs, in order
            yield "["
            for i, (k, v) in enumerate(value.items()):
                yield ",[" if i else "["
                yield from pieces(k)
                yield ","
                yield from pieces(v)
                yield "]"
            yield "]"
    elif isinstance(value, list | tuple | set | frozenset):
        yield "["
        for i, item in enumerate(value):
            if i:
                yield ","
            yield from pieces(item)
        yield "]"
    else:
        raise TypeError(f"cannot render {type(value).__name__} as JSON")


async def stream_json(out: Writer, value: Any) -> None:
    """Write `value` as JSON to `out`, CHUNK characters at a time."""
    buf: list[str] = []
    size = 0
    for piece in pieces(value):
        buf.append(piece)
        size += len(piece)
        if size >= CHUNK:
            await out.write("".join(buf).encode("ascii"))
            buf, size = [], 0
            await asyncio.sleep(0)  # other clients' turn, even if the socket took it all
    await out.write("".join(buf).encode("ascii"))
