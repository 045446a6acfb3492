"""Graceful shutdown with a real server process: replies held back for sync durability
are sent once object storage has the writes, before the connections close."""

from __future__ import annotations

import signal
import socket
import time
from pathlib import Path

import pytest

from tests.conftest import start_temporalstore
from tests.resp_client import RawClient, encode_command

WRITERS = 6


def read_until_closed(sock: socket.socket, timeout: float) -> bytes:
    sock.settimeout(timeout)
    got = b""
    try:
        while part := sock.recv(65536):
            got += part
    except (TimeoutError, ConnectionResetError):
        pass
    return got


@pytest.mark.parametrize("how", ["SIGTERM", "SHUTDOWN"])
def test_held_sync_replies_are_sent_before_the_close(tmp_path: Path, how: str) -> None:
    p = start_temporalstore(["--durability", "sync", "--fault-injection", "yes"], workdir=tmp_path)
    try:
        admin = RawClient(p.port)
        # Every object store call now takes 1.5 s: the writes below are still being
        # flushed when the shutdown starts.
        assert admin.call("TS.FAULT", "LATENCY", "1500") == b"+OK\r\n"
        writers = [socket.create_connection(("127.0.0.1", p.port)) for _ in range(WRITERS)]
        for i, sock in enumerate(writers):
            sock.sendall(encode_command("SET", f"k{i}", f"v{i}"))
        deadline = time.monotonic() + 10
        while admin.call("DBSIZE") != b":%d\r\n" % WRITERS:
            assert time.monotonic() < deadline, "the writes were not applied"
            time.sleep(0.02)
        for sock in writers:  # applied, not yet durable: no reply so far
            sock.setblocking(False)
            with pytest.raises(BlockingIOError):
                sock.recv(1)
            sock.setblocking(True)
        if how == "SIGTERM":
            p.proc.send_signal(signal.SIGTERM)
        else:
            admin.send(encode_command("SHUTDOWN"))
        replies = [read_until_closed(sock, 30) for sock in writers]
        for sock in writers:
            sock.close()
        admin.close()
        assert replies == [b"+OK\r\n"] * WRITERS
        assert p.proc.wait(60) == 0
    finally:
        p.stop()
    q = start_temporalstore(workdir=tmp_path)
    try:
        c = RawClient(q.port)
        for i in range(WRITERS):
            assert c.call("GET", f"k{i}") == b"$2\r\nv%d\r\n" % i
        c.close()
    finally:
        q.stop()
