"""CONFIG SET port moves the listener, as redis-server's does: connections stay, new ones
go to the new port; a port that cannot be bound fails the whole CONFIG SET with Redis'
text and changes nothing. Both servers started for the test (their ports change)."""

from __future__ import annotations

import contextlib
import socket

from tests.conftest import free_port, start_redis, start_temporalstore
from tests.resp_client import RawClient


def _refused(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.connect(("127.0.0.1", port))
        except ConnectionRefusedError:
            return True
    return False


def test_config_set_port_moves_the_listener() -> None:
    servers = [start_redis(), start_temporalstore()]
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen(1)
    used = str(busy.getsockname()[1])
    try:
        replies = []
        for p in servers:
            c = RawClient(p.port)
            before = c.call("CONFIG", "GET", "maxmemory")
            failed = c.call(
                "CONFIG", "SET", "maxmemory", "10000001", "port", used,
                "client-query-buffer-limit", "10m",
            )  # fmt: skip
            after = [c.call("CONFIG", "GET", name) for name in ("maxmemory", "port")]
            assert c.call("CONFIG", "GET", "maxmemory") == before
            new = free_port()
            moved = c.call("CONFIG", "SET", "port", str(new))
            # The connection that asked stays; new ones go to the new port only.
            assert c.call("PING") == b"+PONG\r\n"
            d = RawClient(new)
            shown = d.call("CONFIG", "GET", "port")
            assert shown == b"*2\r\n$4\r\nport\r\n$%d\r\n%d\r\n" % (len(str(new)), new)
            assert b"tcp_port:%d\r\n" % new in d.call("INFO", "server")
            assert _refused(p.port)
            same = d.call("CONFIG", "SET", "port", str(new))
            d.close()
            c.close()
            replies.append((failed, after[0], moved, same))
            p.port = new
        assert replies[0] == replies[1]
        assert replies[0][0] == (
            b"-ERR CONFIG SET failed (possibly related to argument 'port') - "
            b"Unable to listen on this port. Check server logs.\r\n"
        )
    finally:
        busy.close()
        for p in servers:
            with contextlib.suppress(Exception):
                p.stop()
