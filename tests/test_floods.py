"""Slow clients and floods against a real server process: many idle connections
plus one client pipelining a flood of commands without reading a reply. The server
stops reading from a client whose replies pile up instead of buffering them, so its
memory stays bounded; the idle clients and a third client keep being served; once the
flooder reads, every reply arrives, in order. A flooder that never reads and then
disconnects leaves the server as it was. And connections closed before a checkpoint
must be freed like any other."""

from __future__ import annotations

import resource
import socket
import threading
import time
from pathlib import Path

from tests.conftest import ServerProcess, start_temporalstore
from tests.reliability import figure, rss_mb, sampling, sized
from tests.resp_client import RawClient, encode_command

BLOB = bytes(range(256)) * 4  # 1 KiB: GET replies make the flood's replies big
GROUP = (
    encode_command("GET", "flood:blob")
    + encode_command("SET", "flood:k", "v")
    + encode_command("EXISTS", "flood:blob")
    + encode_command("PING")
)
GROUP_REPLY = b"$1024\r\n" + BLOB + b"\r\n+OK\r\n:1\r\n+PONG\r\n"
PER_GROUP = 4
CHUNK_GROUPS = 250  # 1,000 commands per send


def allow_files(n: int) -> None:
    """Raise this process's soft limit on open files to at least `n` (the server
    inherits it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n:
        assert hard == resource.RLIM_INFINITY or hard >= n, f"open files limit {hard} < {n}"
        resource.setrlimit(resource.RLIMIT_NOFILE, (n, hard))


class Flooder(threading.Thread):
    """Sends `commands` commands (whole groups) as fast as the server takes them."""

    def __init__(self, sock: socket.socket, commands: int) -> None:
        super().__init__(daemon=True)
        self.sock = sock
        self.chunks = commands // (PER_GROUP * CHUNK_GROUPS)
        self.sent = 0  # commands
        self.error: BaseException | None = None

    def run(self) -> None:
        chunk = GROUP * CHUNK_GROUPS
        try:
            for _ in range(self.chunks):
                self.sock.sendall(chunk)
                self.sent += PER_GROUP * CHUNK_GROUPS
        except BaseException as e:  # reported by the test
            self.error = e

    def wait_stalled(self, quiet: float = 1.0, limit: float = 120.0) -> None:
        """Until everything is sent or nothing more was taken for `quiet` seconds."""
        deadline = time.monotonic() + limit
        last, since = -1, time.monotonic()
        while self.is_alive() and time.monotonic() < deadline:
            if self.sent != last:
                last, since = self.sent, time.monotonic()
            elif time.monotonic() - since >= quiet:
                return
            time.sleep(0.05)


def read_all_replies(sock: socket.socket, groups: int) -> int:
    """Read `groups` groups of replies, checking every byte; returns bytes read."""
    total = groups * len(GROUP_REPLY)
    pattern = GROUP_REPLY * (2 + (1 << 20) // len(GROUP_REPLY))
    got = 0
    while got < total:
        chunk = sock.recv(min(1 << 20, total - got))
        assert chunk, f"the server closed the flood connection after {got} of {total} bytes"
        start = got % len(GROUP_REPLY)
        assert chunk == pattern[start : start + len(chunk)], f"wrong reply bytes at {got}"
        got += len(chunk)
    return got


def served(p: ServerProcess) -> bool:
    c = RawClient(p.port)
    try:
        return c.call("PING") == b"+PONG\r\n" and c.call("GET", "flood:blob") == (
            b"$1024\r\n" + BLOB + b"\r\n"
        )
    finally:
        c.close()


def test_idle_connections_and_a_client_that_never_reads(tmp_path: Path) -> None:
    idle_count = sized(200, 1000)
    commands = sized(100_000, 1_000_000)
    allow_files(idle_count + 200)
    p = start_temporalstore(["--storage", f"file://{tmp_path}/store"])
    setup = RawClient(p.port)
    assert setup.call("SET", "flood:blob", BLOB) == b"+OK\r\n"
    started = time.monotonic()
    try:
        with sampling(p.proc.pid) as memory:
            idle = [RawClient(p.port) for _ in range(idle_count)]
            for c in idle:
                assert c.call("PING") == b"+PONG\r\n"
            rss_idle = rss_mb(p.proc.pid)
            sock = socket.create_connection(("127.0.0.1", p.port))
            flooder = Flooder(sock, commands)
            flooder.start()
            flooder.wait_stalled()
            taken_unread = flooder.sent
            # The flooder reads nothing yet: everyone else is still served.
            assert served(p), "a third client was not served during the flood"
            assert all(c.call("PING") == b"+PONG\r\n" for c in idle[:: max(1, idle_count // 20)])
            rss_unread = rss_mb(p.proc.pid)
            got = read_all_replies(sock, commands // PER_GROUP)
            flooder.join(60)
            assert flooder.error is None, flooder.error
            sock.close()
            peak_reading = memory.peak_mb
            persistence = setup.call("INFO", "persistence").decode()
            lag_ms, backlog = (
                int(persistence.split(f"{field}:")[1].split("\r\n")[0])
                for field in ("flush_lag_ms", "unflushed_bytes")
            )

            # A second flooder never reads at all, then disconnects abruptly.
            rude = socket.create_connection(("127.0.0.1", p.port))
            rude_flooder = Flooder(rude, commands)
            rude_flooder.start()
            rude_flooder.wait_stalled()
            rude.setsockopt(
                socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00"
            )
            rude.close()
            rude_flooder.join(30)
            assert served(p), "the server did not recover from a flooder that left"
            assert all(c.call("PING") == b"+PONG\r\n" for c in idle), "an idle client was lost"
            for c in idle:
                c.close()
    finally:
        setup.close()
        p.stop()
    peak_growth = memory.peak_mb - memory.start_mb
    figure(
        "floods",
        idle_connections=idle_count,
        commands_pipelined=commands,
        taken_before_reading=taken_unread,
        reply_mb=got / 2**20,
        rude_commands_taken=rude_flooder.sent,
        rss_start_mb=memory.start_mb,
        rss_with_idle_mb=rss_idle,
        rss_unread_mb=rss_unread,
        rss_peak_reading_mb=peak_reading,
        flush_lag_ms_after=lag_ms,
        unflushed_bytes_after=backlog,
        rss_peak_mb=memory.peak_mb,
        seconds=time.monotonic() - started,
    )
    assert peak_growth < 300, f"server memory grew {peak_growth:.0f} MB during the flood"


def test_connections_closed_before_a_checkpoint_are_freed(tmp_path: Path) -> None:
    """Short-lived connections, then a checkpoint, over and over: memory must level
    off, not grow with every connection ever served."""
    p = start_temporalstore(["--storage", f"file://{tmp_path}/store"])
    c = RawClient(p.port)
    request = encode_command("SET", "k", "v") * 3
    rounds, per_round = 6, sized(1500, 3000)
    rss: list[float] = []
    try:
        for _ in range(rounds):
            for _ in range(per_round):
                with socket.create_connection(("127.0.0.1", p.port), timeout=10) as s:
                    s.sendall(request)
                    s.shutdown(socket.SHUT_WR)
                    while s.recv(1 << 16):
                        pass
            assert c.call("SAVE") == b"+OK\r\n"
            rss.append(rss_mb(p.proc.pid))
    finally:
        c.close()
        p.stop()
    growth = rss[-1] - rss[0]
    figure(
        "connections-across-checkpoints",
        connections=rounds * per_round,
        checkpoints=rounds,
        rss_after_first_mb=rss[0],
        rss_after_last_mb=rss[-1],
    )
    assert growth < 10, (
        f"memory grew {growth:.0f} MB over {(rounds - 1) * per_round} closed connections "
        f"and {rounds - 1} checkpoints ({', '.join(f'{m:.0f}' for m in rss)} MB)"
    )
