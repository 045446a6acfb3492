"""The connections MIGRATE keeps to its targets (Redis' migrateCachedSocket), one cache
per server, the core's: `commands.migrate` uses and fills it, INFO reports its size
(`cached_sockets`, which first closes the connections idle past `CACHE_TTL`)."""

from __future__ import annotations

import errno
import socket
import time
import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from commands.session import ServerCore


CACHE_TTL = 10  # MIGRATE_SOCKET_CACHE_TTL, seconds
LINE_MAX = 1024  # the buffer Redis reads each reply line into


class _Cached:
    """A connection MIGRATE keeps to one target (migrateCachedSocket)."""

    __slots__ = ("buf", "last_dbid", "last_use", "sock")

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.last_dbid = -1
        self.last_use = time.time()
        self.buf = b""  # read past the last line

    def read_line(self) -> bytes:
        """syncReadLine: one line without its CRLF; OSError (or timeout) on failure,
        an empty read (connection closed) included."""
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise OSError(errno.ECONNRESET, "connection closed")
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line.rstrip(b"\r")[: LINE_MAX - 1]


_SOCKETS: weakref.WeakKeyDictionary[ServerCore, dict[bytes, _Cached]] = weakref.WeakKeyDictionary()


def cached_sockets(server: ServerCore) -> int:
    """INFO's migrate_cached_sockets (idle ones closed first, as Redis' cron does)."""
    cache = _SOCKETS.get(server)
    if not cache:
        return 0
    now = time.time()
    for name, cs in list(cache.items()):
        if now - cs.last_use > CACHE_TTL:
            cs.sock.close()
            del cache[name]
    return len(cache)
