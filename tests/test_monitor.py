"""MONITOR against redis-server, RESP2 and RESP3: the same commands run on both servers
give the same lines (times and client ports masked), in the same order: a script's
commands as `[0 lua]` after the EVAL/FCALL, MULTI/EXEC's commands between them,
admin commands left out, secrets redacted, the monitor's own commands answered and
shown, its keyspace commands refused."""

from __future__ import annotations

import re
import time

from tests.conftest import Differ
from tests.resp_client import RawClient, encode_command

LINE = re.compile(rb"\+(\d+)\.(\d{6}) \[(\d+) ([^\]]+)\] (.*)")


def _lines(raw: bytes) -> list[bytes]:
    """Monitor lines with the time and the client's port masked (both checked)."""
    out = []
    for line in raw.split(b"\r\n"):
        m = LINE.fullmatch(line)
        if m is None:
            out.append(line)
            continue
        assert abs(int(m[1]) - time.time()) < 60
        where = m[4]
        assert where == b"lua" or re.fullmatch(rb"127\.0\.0\.1:\d+", where), where
        out.append(b"+T [%b %b] %b" % (m[3], b"lua" if where == b"lua" else b"addr", m[5]))
    return out


def _session(port: int, resp: int, script: list[tuple[str, ...]]) -> list[bytes]:
    """What a monitor on `port` receives (lines, and the replies to its own commands)
    while another client runs `script`."""
    mon = RawClient(port)
    other = RawClient(port)
    try:
        if resp == 3:
            mon.call("HELLO", "3")
            other.call("HELLO", "3")
        assert mon.call("MONITOR") == b"+OK\r\n"
        for args in script:
            if args[0] == "@monitor":  # the monitor itself sends this
                mon.send(encode_command(*args[1:]))
            else:
                other.call(*args)
        return _lines(mon.read_pending(0.3))
    finally:
        mon.close()
        other.close()


SCRIPT: list[tuple[str, ...]] = [
    ("SET", "foo", "bar"),
    ("GET", "foo"),
    ("EVAL", "redis.call('set', KEYS[1], ARGV[1])", "1", "foo", "bar"),
    ("EVAL", "return redis.call('get', 'foo')", "0"),
    (
        "FUNCTION",
        "LOAD",
        "REPLACE",
        "#!lua name=montest\n"
        "redis.register_function('montest', function() return redis.call('set', 'foo', 'bar') end)",
    ),
    ("FCALL", "montest", "0"),
    ("MULTI",),
    ("SET", "foo", "bar"),
    ("EXEC",),
    ("MULTI",),
    ("NOSUCHCOMMAND",),
    ("EXEC",),
    ("CONFIG", "GET", "maxmemory"),
    ("AUTH", "not-real"),
    ("AUTH", "not-real", "not-a-password"),
    ("HELLO", "2", "AUTH", "not-real", "not-a-password"),
    ("CONFIG", "SET", "masterauth", ""),
    ("SET", "bin", 'a"b\\c\n\r\t\x07\x08\x01\xff'),
    ("SELECT", "3"),
    ("PING",),
    ("SELECT", "0"),
    ("DEL", "foo", "bin"),
    ("@monitor", "PING"),
    ("@monitor", "CLIENT", "GETNAME"),
    ("@monitor", "GET", "foo"),
    ("@monitor", "EVAL", "return 1", "0"),
    ("@monitor", "MONITOR"),
    ("@monitor", "ECHO", "last"),
]


def test_monitor_lines(diff: Differ) -> None:
    ref = _session(diff.ref.sock.getpeername()[1], diff.resp, SCRIPT)
    ours = _session(diff.ours.sock.getpeername()[1], diff.resp, SCRIPT)
    assert ours == ref, "\n".join(f"{a!r}\n{b!r}" for a, b in zip(ref, ours, strict=False))
    # Spot checks of what the comparison covers.
    text = b"\n".join(ours)
    assert b'[0 lua] "set" "foo" "bar"' in text
    assert b'"AUTH" "(redacted)" "(redacted)"' in text
    assert b'"config"' not in text.lower()
    assert b"Replica can't interact with the keyspace" in text
    diff.record(len(SCRIPT), True)


def test_monitor_errors(diff: Differ) -> None:
    diff.run("""
        MONITOR x
        MULTI
        MONITOR
        EXEC
    """)
