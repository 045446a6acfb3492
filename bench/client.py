"""A tiny blocking RESP client (hiredis parses replies), a pipelined loader, an
INFO sampler that runs in a thread beside a load and a PING prober that times a
second client's requests while a long command runs."""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

import hiredis


def encode(args: Iterable[bytes | str | int]) -> bytes:
    parts: list[bytes] = []
    n = 0
    for a in args:
        if isinstance(a, str):
            b = a.encode()
        elif isinstance(a, int):
            b = str(a).encode()
        else:
            b = a
        parts.append(b"$%d\r\n%b\r\n" % (len(b), b))
        n += 1
    return b"*%d\r\n" % n + b"".join(parts)


class ServerError(Exception):
    pass


class Client:
    def __init__(self, port: int, timeout: float = 120.0) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.reader = hiredis.Reader()
        self.received = 0  # bytes of replies read

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _reply(self) -> Any:
        while True:
            r = self.reader.gets()
            if r is not False:
                return r
            data = self.sock.recv(1 << 20)
            if not data:
                raise ConnectionError("server closed the connection")
            self.received += len(data)
            self.reader.feed(data)

    def call(self, *args: bytes | str | int) -> Any:
        self.sock.sendall(encode(args))
        r = self._reply()
        if isinstance(r, hiredis.ReplyError):
            raise ServerError(f"{args[0]!r}: {r}")
        return r

    def info(self, section: str) -> dict[str, str]:
        text: bytes = self.call("INFO", section)
        out: dict[str, str] = {}
        for line in text.decode().splitlines():
            if ":" in line and not line.startswith("#"):
                k, v = line.split(":", 1)
                out[k] = v
        return out

    def pipeline(self, commands: Iterator[bytes], batch: int = 1000) -> int:
        """Send pre-encoded commands `batch` at a time, keeping one batch in flight
        while the previous one's replies are read. Raises on any error reply."""
        sent = 0
        pending = 0  # replies owed for the batch before the one just sent
        done = False
        while not done:
            chunk: list[bytes] = []
            for cmd in commands:
                chunk.append(cmd)
                if len(chunk) == batch:
                    break
            else:
                done = True
            if chunk:
                self.sock.sendall(b"".join(chunk))
            self._drain(pending)
            pending = len(chunk)
            sent += len(chunk)
        self._drain(pending)
        return sent

    def call_unparsed(self, *args: bytes | str | int) -> tuple[int, float, bytes]:
        """Send one command and read its reply without parsing it (a reply of
        millions of elements costs more to parse here than to produce); its end is
        found by an ECHO of a random token sent right behind it. Returns the reply's
        size in bytes, the seconds until its last byte and its first 64 bytes."""
        token = os.urandom(16).hex().encode()
        tail = b"$%d\r\n%b\r\n" % (len(token), token)
        buf = bytearray(1 << 20)
        view = memoryview(buf)
        head = b""
        last = b""
        total = 0
        t0 = time.perf_counter()
        self.sock.sendall(encode(args) + encode([b"ECHO", token]))
        while not last.endswith(tail):
            n = self.sock.recv_into(buf)
            if not n:
                raise ConnectionError("server closed the connection")
            if len(head) < 64:
                head += bytes(view[: min(n, 64 - len(head))])
            total += n
            last = (last + bytes(view[max(0, n - len(tail)) : n]))[-len(tail) :]
        secs = time.perf_counter() - t0
        if head.startswith(b"-"):
            line = head.split(b"\r\n", 1)[0].decode(errors="replace")
            raise ServerError(f"{args[0]!r}: {line}")
        return total - len(tail), secs, head

    def _drain(self, n: int) -> None:
        for _ in range(n):
            r = self._reply()
            if isinstance(r, hiredis.ReplyError):
                raise ServerError(str(r))


def wait_flushed(port: int, timeout: float = 120.0) -> None:
    """Until TemporalStore's update stream is durable up to its last LSN."""
    deadline = time.monotonic() + timeout
    with Client(port) as c:
        while time.monotonic() < deadline:
            p = c.info("persistence")
            if p["durable_lsn"] == p["last_lsn"] and p["unflushed_bytes"] == "0":
                return
            time.sleep(0.05)
    raise RuntimeError("the flusher did not catch up")


class Sampler(threading.Thread):
    """Reads one INFO field every `interval` seconds until stopped."""

    def __init__(self, port: int, section: str, field: str, interval: float = 0.05) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.section = section
        self.field = field
        self.interval = interval
        self.samples: list[float] = []
        self.errors = 0
        self._stop_event = threading.Event()

    def run(self) -> None:
        with Client(self.port) as c:
            nxt = time.monotonic()
            while not self._stop_event.is_set():
                try:
                    self.samples.append(float(c.info(self.section)[self.field]))
                except (ServerError, KeyError, ValueError):
                    self.errors += 1
                nxt += self.interval
                self._stop_event.wait(max(0.0, nxt - time.monotonic()))

    def stop(self) -> list[float]:
        self._stop_event.set()
        self.join(10)
        return self.samples


class PingProber(threading.Thread):
    """PINGs the server one request at a time over its own connection until stopped,
    keeping each PING's (send time, latency) in perf_counter seconds."""

    def __init__(self, port: int) -> None:
        super().__init__(daemon=True)
        self.port = port
        self.pings: list[tuple[float, float]] = []
        self._stop_event = threading.Event()
        self._ready = threading.Event()

    def run(self) -> None:
        with Client(self.port) as c:
            c.call("PING")
            self._ready.set()
            while not self._stop_event.is_set():
                t0 = time.perf_counter()
                c.call("PING")
                self.pings.append((t0, time.perf_counter() - t0))

    def start_probing(self) -> None:
        self.start()
        if not self._ready.wait(10):
            raise RuntimeError("the PING prober did not connect")

    def stop(self) -> None:
        self._stop_event.set()
        self.join(120)

    def during(self, t0: float, t1: float) -> list[float]:
        """Latencies (ms) of the PINGs that were in flight at some time in [t0, t1]."""
        return [lat * 1000 for sent, lat in self.pings if sent < t1 and sent + lat > t0]
