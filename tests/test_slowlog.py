"""SLOWLOG against redis-server, RESP2 and RESP3: errors and help byte for byte; entries
compared with what cannot be equal (ids, times, durations, client ports) masked: the
arguments as logged (trimmed, redacted, EXEC's commands, a script's commands as "?:0"),
the client names, the order and the lengths."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import Differ
from tests.resp_client import RawClient, parse


@pytest.fixture
def slow(diff: Differ) -> Iterator[Differ]:
    yield diff
    for c in (diff.ref, diff.ours):
        c.call("CONFIG", "SET", "slowlog-log-slower-than", "10000", "slowlog-max-len", "128")
        c.call("SLOWLOG", "RESET")
        c.call("ACL", "DELUSER", "slowlog-test-user")


def _masked(raw: bytes) -> Any:
    """SLOWLOG GET's entries with id, time, duration and client port masked (checked)."""
    kind, entries = parse(raw)
    assert kind == "*"
    out = []
    ids = []
    for kind, e in entries:
        assert kind == "*" and len(e) == 6
        ids.append(int(e[0][1]))
        assert e[1][0] == ":" and abs(int(e[1][1]) - int(__import__("time").time())) < 60
        assert e[2][0] == ":" and int(e[2][1]) >= 0
        peer = e[4][1]
        assert peer == b"?:0" or re.fullmatch(rb"127\.0\.0\.1:\d+", peer), peer
        out.append([e[3], b"?:0" if peer == b"?:0" else b"addr", e[5]])
    assert ids == sorted(ids, reverse=True) and len(set(ids)) == len(ids)
    return out


def _same_log(d: Differ, *args: str) -> None:
    ref, ours = d.both("SLOWLOG", "GET", *args)
    same = _masked(ours) == _masked(ref)
    d.record(1, same)
    assert same, f"redis: {ref!r}\nours:  {ours!r}"


def test_slowlog_errors_and_help(slow: Differ) -> None:
    slow.run("""
        SLOWLOG
        SLOWLOG HELP
        SLOWLOG HELP x
        SLOWLOG FOO
        SLOWLOG GET -2
        SLOWLOG GET -222
        SLOWLOG GET x
        SLOWLOG GET 1 2
        SLOWLOG LEN x
        SLOWLOG RESET x
        CONFIG SET slowlog-log-slower-than -2
        CONFIG SET slowlog-max-len -1
        ~CONFIG GET slowlog-*
        SLOWLOG RESET
        SLOWLOG LEN
        SLOWLOG GET
        SLOWLOG GET 0
        SLOWLOG GET -1
    """)


MANY = " ".join(str(i) for i in range(3, 34))  # 33 arguments: trimmed to 32
LONG = "A" * 129  # trimmed to 128 bytes


def test_slowlog_entries(slow: Differ) -> None:
    slow.run(f"""
        CONFIG SET slowlog-log-slower-than 0
        SLOWLOG RESET
        CLIENT SETNAME slowclient
        SET key value
        SADD set {MANY}
        SADD set2 foo {LONG}
        SPOP set 100
        GETSET key 5
        INCRBYFLOAT num 1.0
        CLIENT SETNAME ""
        AUTH not-real
        AUTH not-real not-a-password
        AUTH a b c
        HELLO 2 AUTH not-real not-a-password
        HELLO 9 AUTH not-real not-a-password
        ACL SETUSER slowlog-test-user +get +set
        CONFIG SET masterauth ""
        CONFIG SET masterauth "" slowlog-max-len 128
        CONFIG SET maxmemory 0 masterauth
        MULTI
        SET inmulti 1
        GET inmulti
        EXEC
        EVAL "redis.call('set', KEYS[1], 'v'); return redis.call('get', KEYS[1])" 1 scripted
        SLOWLOG LEN
    """)
    _same_log(slow, "-1")
    _same_log(slow, "3")


def test_slowlog_threshold_max_len_and_disable(slow: Differ) -> None:
    slow.run("""
        CONFIG SET slowlog-log-slower-than 1000000
        SLOWLOG RESET
        PING
        SET a b
        SLOWLOG LEN
        CONFIG SET slowlog-log-slower-than 0 slowlog-max-len 3
        SLOWLOG RESET
        SET key test
        SADD set a b c
        INCR num
        LPUSH list a
        SLOWLOG LEN
        SLOWLOG GET 0
        CONFIG SET slowlog-max-len 1
        SLOWLOG LEN
        CONFIG SET slowlog-log-slower-than -1
        SLOWLOG RESET
        PING
        SLOWLOG LEN
    """)
    for n in ("1", "-1", "3"):
        _same_log(slow, n)


def test_slowlog_logs_blocked_command_when_served(
    slow: Differ,
) -> None:
    """A BLPOP is logged once, when an LPUSH inside MULTI serves it (Redis' test), and
    counted as one call."""
    logs = []
    for c in (slow.ref, slow.ours):
        port = c.sock.getpeername()[1]
        waiter = RawClient(port)
        try:
            c.call("CONFIG", "SET", "slowlog-log-slower-than", "0")
            c.call("CONFIG", "RESETSTAT")
            c.call("DEL", "l")
            waiter.send(b"*3\r\n$5\r\nBLPOP\r\n$1\r\nl\r\n$1\r\n0\r\n")
            for _ in range(100):
                if b"blocked_clients:1" in c.call("INFO", "clients"):
                    break
                __import__("time").sleep(0.02)
            c.call("MULTI")
            c.call("LPUSH", "l", "foo")
            c.call("SLOWLOG", "RESET")
            c.call("EXEC")
            assert parse(waiter.read_reply())[1][1] == ("$", b"foo")
            logs.append(_masked(c.call("SLOWLOG", "GET")))
            # Counted once, as one call, in INFO commandstats and LATENCY HISTOGRAM.
            stats = c.call("INFO", "commandstats")
            logs.append(re.findall(rb"cmdstat_blpop:calls=(\d+),", stats))
            logs.append(re.findall(rb"calls\r\n:(\d+)", c.call("LATENCY", "HISTOGRAM", "blpop")))
        finally:
            waiter.close()
    assert logs[:3] == logs[3:]
    assert logs[4:] == [[b"1"], [b"1"]]
    assert logs[3][0][0] == ("*", [("$", b"BLPOP"), ("$", b"l"), ("$", b"0")])
    slow.record(1, True)
