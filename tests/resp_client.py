"""A raw RESP client for tests: sends commands, returns each reply's exact bytes.

Differential tests compare these bytes between redis-server and TemporalStore, so
nothing a client library would smooth over (simple vs bulk strings, RESP3 types,
error texts) can hide a difference.
"""

from __future__ import annotations

import socket
from typing import Any


def encode_command(*args: bytes | str | int | float) -> bytes:
    parts = [b"*%d\r\n" % len(args)]
    for a in args:
        if isinstance(a, bytes):
            b = a
        elif isinstance(a, str):
            b = a.encode()
        else:
            b = str(a).encode()
        parts.append(b"$%d\r\n%b\r\n" % (len(b), b))
    return b"".join(parts)


class RawClient:
    def __init__(self, port: int, host: str = "127.0.0.1", timeout: float = 10.0) -> None:
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.buf = b""

    def close(self) -> None:
        self.sock.close()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def call(self, *args: bytes | str | int | float) -> bytes:
        self.send(encode_command(*args))
        return self.read_reply()

    def _fill(self) -> None:
        chunk = self.sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("connection closed")
        self.buf += chunk

    def _line(self, pos: int) -> int:
        while True:
            i = self.buf.find(b"\r\n", pos)
            if i >= 0:
                return i
            self._fill()

    def _frame_end(self, pos: int) -> int:
        """Index just past the reply starting at `pos` (reading more as needed)."""
        while len(self.buf) <= pos:
            self._fill()
        nl = self._line(pos)
        kind = self.buf[pos : pos + 1]
        head = self.buf[pos + 1 : nl]
        end = nl + 2
        if kind in (b"$", b"=", b"!"):
            n = int(head)
            if n < 0:
                return end
            while len(self.buf) < end + n + 2:
                self._fill()
            return end + n + 2
        if kind in (b"*", b"~", b">", b"%", b"|"):
            n = int(head)
            if n < 0:
                return end
            if kind in (b"%", b"|"):
                n *= 2
            for _ in range(n):
                end = self._frame_end(end)
            if kind == b"|":
                end = self._frame_end(end)
            return end
        return end

    def read_bytes(self, n: int) -> bytes:
        """The next `n` bytes the server sends: a run of replies of known size (a
        pipeline's, or one huge reply), read and checked whole, in O(n)."""
        out = bytearray(n)
        got = min(len(self.buf), n)
        out[:got] = self.buf[:got]
        self.buf = self.buf[got:]
        view = memoryview(out)
        while got < n:
            k = self.sock.recv_into(view[got:], min(1 << 20, n - got))
            if not k:
                raise ConnectionError("connection closed")
            got += k
        return bytes(out)

    def read_reply(self) -> bytes:
        end = self._frame_end(0)
        raw, self.buf = self.buf[:end], self.buf[end:]
        return raw

    def read_pending(self, wait: float) -> bytes:
        """Everything sent until `wait` seconds pass without more (b"" when nothing
        comes: the reply is held back)."""
        data, self.buf = self.buf, b""
        before = self.sock.gettimeout()
        self.sock.settimeout(wait)
        try:
            while chunk := self.sock.recv(1 << 16):
                data += chunk
        except TimeoutError:
            pass
        finally:
            self.sock.settimeout(before)
        return data

    def read_closed(self) -> bool:
        """True once the server has closed the connection (after any buffered data)."""
        try:
            while True:
                chunk = self.sock.recv(1 << 16)
                if not chunk:
                    return True
                self.buf += chunk
        except (ConnectionResetError, TimeoutError, OSError):
            return True


def parse(raw: bytes) -> Any:
    """Raw reply bytes to a tagged structure, for order-insensitive comparisons."""
    value, end = _parse(raw, 0)
    assert end == len(raw), raw
    return value


def _parse(raw: bytes, pos: int) -> tuple[Any, int]:
    nl = raw.index(b"\r\n", pos)
    kind = raw[pos : pos + 1]
    head = raw[pos + 1 : nl]
    end = nl + 2
    if kind in (b"$", b"=", b"!"):
        n = int(head)
        if n < 0:
            return ("null",), end
        return (kind.decode(), raw[end : end + n]), end + n + 2
    if kind in (b"*", b"~", b">", b"%", b"|"):
        n = int(head)
        if n < 0:
            return ("null-array",), end
        count = n * 2 if kind in (b"%", b"|") else n
        items = []
        for _ in range(count):
            v, end = _parse(raw, end)
            items.append(v)
        return (kind.decode(), items), end
    return (kind.decode(), head), end


def canonical(value: Any, depth: int = 1) -> Any:
    """Sort aggregates (to `depth` levels) so unordered replies compare equal;
    map entries stay paired."""
    if depth <= 0 or not isinstance(value, tuple) or len(value) != 2:
        return value
    kind, items = value
    if not isinstance(items, list):
        return value
    inner = [canonical(i, depth - 1) for i in items]
    if kind in ("%", "|"):
        pairs = sorted(zip(inner[0::2], inner[1::2], strict=True), key=repr)
        return (kind, pairs)
    return (kind, sorted(inner, key=repr))
