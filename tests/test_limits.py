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


def test_protected_mode_accepts_only_loopback_without_a_password() -> None:
    from commands.session import Config, ServerState
    from proxy.server import PROTECTED_MODE_DENIED, protected_denied
    from store import Store

    state = ServerState(Store(), Config())
    remote, local6, local4 = ("10.1.2.3", 5555), ("::1", 5555, 0, 0), ("127.0.0.1", 5555)
    assert protected_denied(state, remote)
    assert not protected_denied(state, local4) and not protected_denied(state, local6)
    assert not protected_denied(state, ("::ffff:127.0.0.1", 1, 0, 0))
    state.config.requirepass = "secret"
    assert not protected_denied(state, remote)
    state.config.requirepass = None
    state.config.params["protected-mode"] = "no"
    assert not protected_denied(state, remote)
    assert PROTECTED_MODE_DENIED.startswith(b"-DENIED Redis is running in protected mode")
    assert PROTECTED_MODE_DENIED.endswith(b"\r\n") and PROTECTED_MODE_DENIED.count(b"\r\n") == 1


def test_bound_beyond_loopback_still_serves_loopback_clients() -> None:
    ours = start_temporalstore(["--host", "0.0.0.0", "--protected-mode", "yes"])
    try:
        c = RawClient(ours.port)
        assert c.call("PING") == b"+PONG\r\n"
        assert c.call("CONFIG", "GET", "protected-mode") == (
            b"*2\r\n$14\r\nprotected-mode\r\n$3\r\nyes\r\n"
        )
        c.close()
    finally:
        ours.stop()
