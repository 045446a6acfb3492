"""Connection limits: --maxclients (Redis' error, as redis-server gives it) and
--timeout for idle clients."""

from __future__ import annotations

import time

from tests.conftest import start_redis, start_temporalstore
from tests.resp_client import RawClient


def test_maxclients_matches_redis() -> None:
    ref = start_redis(["--maxclients", "3"])
    ours = start_temporalstore(["--maxclients", "3"])
    try:
        for server in (ref, ours):
            held = [RawClient(server.port) for _ in range(3)]
            for c in held:
                assert c.call("PING") == b"+PONG\r\n"
            extra = RawClient(server.port)
            assert extra.read_reply() == b"-ERR max number of clients reached\r\n"
            assert extra.read_closed()
            extra.close()
            held.pop().close()
            time.sleep(0.2)
            again = RawClient(server.port)
            assert again.call("PING") == b"+PONG\r\n"
            again.close()
            for c in held:
                c.close()
    finally:
        ref.stop()
        ours.stop()


def test_idle_clients_are_closed_after_timeout() -> None:
    ours = start_temporalstore(["--timeout", "1"])
    try:
        idle = RawClient(ours.port)
        busy = RawClient(ours.port)
        sub = RawClient(ours.port)
        sub.call("SUBSCRIBE", "news")
        assert idle.call("PING") == b"+PONG\r\n"
        deadline = time.monotonic() + 4
        while time.monotonic() < deadline:
            assert busy.call("PING") == b"+PONG\r\n"
            time.sleep(0.2)
        assert idle.read_closed()
        assert busy.call("PING") == b"+PONG\r\n"  # active clients stay
        assert sub.call("PING") == b"*2\r\n$4\r\npong\r\n$0\r\n\r\n"  # subscribers stay
        assert busy.call("CONFIG", "GET", "timeout") == b"*2\r\n$7\r\ntimeout\r\n$1\r\n1\r\n"
        for c in (idle, busy, sub):
            c.close()
    finally:
        ours.stop()
