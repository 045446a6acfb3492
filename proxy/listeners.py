"""CONFIG SET port: the plain TCP listener moves, as Redis' changeListenPort moves it.

The new port is bound first, on the address the server was started with; if that
fails (OSError), nothing changes. Then the old listeners stop accepting (connections
they accepted stay open) and the new sockets are served. Port 0: no plain TCP listener,
as in Redis.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from typing import Any, Protocol

from commands.session import ServerCore


class Listening(Protocol):
    """What moving the listener changes of the server (`proxy.server.Server`, which
    calls it: the server imports this module, never the reverse)."""

    state: ServerCore
    plain: list[asyncio.base_events.Server]  # the plain TCP listeners
    servers: list[asyncio.base_events.Server]  # every listener
    tasks: set[asyncio.Task[Any]]
    port: int


BACKLOG = 511  # Redis' tcp-backlog default, as Server.start listens


def bind_port(host: str, port: int) -> list[socket.socket]:
    """Listening sockets for every address of `host` (all interfaces when empty) on
    `port`; OSError (and none left open) when one cannot be bound."""
    socks: list[socket.socket] = []
    try:
        for family, kind, proto, _name, addr in socket.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        ):
            sock = socket.socket(family, kind, proto)
            socks.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(addr)
            sock.listen(BACKLOG)
            sock.setblocking(False)
    except OSError:
        for sock in socks:
            sock.close()
        raise
    return socks


def move_listener(server: Listening, port: int, protocol: Callable[[], asyncio.Protocol]) -> None:
    """Listen on `port` instead of the current plain port (see the module's text),
    each connection served by a new `protocol()`."""
    socks = bind_port(server.state.config.host, port) if port else []
    loop = asyncio.get_running_loop()
    for srv in server.plain:
        srv.close()  # listening only: accepted connections go on
        server.servers.remove(srv)
    server.plain = []

    def started(task: asyncio.Task[asyncio.base_events.Server]) -> None:
        if not task.cancelled() and task.exception() is None:
            server.plain.append(task.result())
            server.servers.append(task.result())

    for sock in socks:
        task = loop.create_task(loop.create_server(protocol, sock=sock))
        task.add_done_callback(started)
        server.tasks.add(task)
        task.add_done_callback(server.tasks.discard)
    server.port = port
    server.state.config.port = port
