"""Raw-socket protocol tests: inline commands, pipelining, partial frames and
protocol errors, each compared byte for byte with redis-server."""

from __future__ import annotations

import socket
import time

import pytest

from tests.conftest import ServerProcess, proc_status_kb
from tests.resp_client import RawClient, encode_command


def exchange(
    port: int, chunks: list[bytes], pause: float = 0.0, expect: int = 0, wait: float = 0.3
) -> tuple[bytes, bool]:
    """Send `chunks` (pausing between them), then read until the server closes the
    connection, or `expect` bytes have come and `wait` more seconds pass quietly
    (a loaded machine gets up to 10 s for the expected bytes).
    Returns (bytes received, closed?)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    try:
        for c in chunks:
            sock.sendall(c)
            if pause:
                time.sleep(pause)
        got = b""
        deadline = time.monotonic() + 10
        while True:
            quiet = wait if len(got) >= expect else max(0.05, deadline - time.monotonic())
            sock.settimeout(quiet)
            try:
                part = sock.recv(1 << 20)
            except TimeoutError:
                return got, False
            except ConnectionResetError:
                return got, True
            if not part:
                return got, True
            got += part
    finally:
        sock.close()


def bytewise(data: bytes) -> list[bytes]:
    return [bytes([b]) for b in data]


@pytest.fixture
def both(redis_ref: ServerProcess, ts_server: ServerProcess) -> tuple[int, int]:
    for port in (redis_ref.port, ts_server.port):
        c = RawClient(port)
        c.call("FLUSHALL")
        c.close()
    return redis_ref.port, ts_server.port


def same(both: tuple[int, int], chunks: list[bytes], pause: float = 0.0) -> bytes:
    ref = exchange(both[0], chunks, pause=pause)
    ours = exchange(both[1], chunks, pause=pause, expect=len(ref[0]))
    assert ours == ref, f"redis: {ref!r}\nours:  {ours!r}"
    return ref[0]


INLINE_CASES = [
    b"PING\r\n",
    b"PING\n",
    b"ECHO hello\r\n",
    b'ECHO "hello world"\r\n',
    b"ECHO 'it''s'\r\n",
    b"ECHO 'a\\'b'\r\n",
    b'ECHO "tab\\there\\x41\\n"\r\n',
    b"SET k v\r\nGET k\r\n",
    b"   \r\n\r\nPING\r\n",
    b"set  k   'a b'  \r\nget k\r\n",
    b"GET\r\n",
    b"NOSUCH a b\r\n",
]


@pytest.mark.parametrize("data", INLINE_CASES, ids=lambda d: repr(d)[:40])
def test_inline(both: tuple[int, int], data: bytes) -> None:
    same(both, [data])


ERROR_CASES = [
    b'ECHO "unbalanced\r\n',
    b"ECHO 'unbalanced\r\n",
    b'ECHO "a"b\r\n',
    b"*abc\r\n",
    b"*3000000000\r\n",
    b"*1\r\n:5\r\n",
    b"*1\r\n*1\r\n",
    b"*1\r\n*3000000000\r\n",
    b"*2\r\n$4\r\nECHO\r\n*2000000000\r\n",
    b"*1\r\n$-5\r\n",
    b"*1\r\n$abc\r\n",
    b"*1\r\n$600000000\r\n",
    b"*2\r\n$4\r\nECHO\r\n+hi\r\n",
    b"*1\r\n$4\r\nPING\r\n*x\r\n",
    b"*1\r\n$4\r\nPING\r\nPING\r\n*1\r\n:1\r\n",
    b"*1\r\n" + b"1" * 70000,
    b"*1\r\n$4\r\nPING\r\n" + b"*" + b"1" * 70000,
    b"P" * 70000,
]


@pytest.mark.parametrize("data", ERROR_CASES, ids=lambda d: repr(d)[:40])
def test_protocol_errors_close_like_redis(both: tuple[int, int], data: bytes) -> None:
    got = same(both, [data])
    assert b"-ERR Protocol error" in got


def test_empty_and_negative_multibulk_are_ignored(both: tuple[int, int]) -> None:
    same(both, [b"*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n"])


def test_pipelining_keeps_order(both: tuple[int, int]) -> None:
    cmds = []
    for i in range(300):
        cmds.append(encode_command("SET", f"k{i}", f"v{i}"))
        cmds.append(encode_command("GET", f"k{i}"))
        cmds.append(encode_command("INCR", "counter"))
    cmds.append(encode_command("GET", "nosuch", "extra"))
    got = same(both, [b"".join(cmds)])
    assert got.count(b"+OK\r\n") == 300


def test_one_read_of_repeated_and_changing_command_names(both: tuple[int, int]) -> None:
    """One read whose requests repeat a name (the batch loop reuses the table entry
    of the name before), change its case, name unknown commands, or repeat a name
    with the wrong arity: the same replies, in order."""
    cmds = [
        ("SET", "k", "1"),
        ("SET", "k", "2"),
        ("set", "k", "3"),
        ("SeT", "k", "4"),
        ("NOSUCH", "k"),
        ("NOSUCH", "k"),
        ("SET", "k"),
        ("SET", "k", "5"),
        ("INCR", "k"),
        ("incr", "k"),
        ("INCR", "k", "extra"),
        ("GET", "k"),
        ("get", "k"),
    ]
    got = same(both, [b"".join(encode_command(*c) for c in cmds)])
    assert got.endswith(b"$1\r\n7\r\n$1\r\n7\r\n"), got


def test_partial_frames_byte_by_byte(both: tuple[int, int]) -> None:
    data = encode_command("SET", "key", "a value with spaces") + encode_command("GET", "key")
    data += b"ECHO inline\r\n" + encode_command("STRLEN", "key")
    same(both, bytewise(data), pause=0.002)


def test_a_bad_element_split_byte_by_byte(both: tuple[int, int]) -> None:
    """The whole request, not just the chunk that completes it, must be canonical."""
    got = same(both, bytewise(b"*2\r\n$4\r\nECHO\r\n+hi\r\n"), pause=0.002)
    assert got.startswith(b"-ERR Protocol error")


def test_protocol_error_after_a_blocked_command(both: tuple[int, int]) -> None:
    """The error behind a blocking command is answered once the command times out."""
    got = same(both, [b"BLPOP nosuch 0.2\r\n*abc\r\n"])
    assert got == b"*-1\r\n-ERR Protocol error: invalid multibulk length\r\n"


def test_frames_split_across_reads(both: tuple[int, int]) -> None:
    data = b"".join(encode_command("APPEND", "s", "x" * i) for i in range(1, 60))
    chunks = [data[i : i + 7] for i in range(0, len(data), 7)]
    same(both, chunks, pause=0.0005)


def test_multibulk_then_inline_in_one_packet(both: tuple[int, int]) -> None:
    same(both, [encode_command("SET", "a", "1") + b"GET a\r\n" + encode_command("GET", "a")])


def test_large_value_roundtrip(ts_server: ServerProcess) -> None:
    c = RawClient(ts_server.port)
    value = bytes(range(256)) * (40 * 1024)  # 10 MiB, every byte value
    assert c.call("SET", "big", value) == b"+OK\r\n"
    assert c.call("GET", "big") == b"$%d\r\n%b\r\n" % (len(value), value)
    assert c.call("STRLEN", "big") == b":%d\r\n" % len(value)
    c.call("DEL", "big")
    c.close()


def test_unknown_command_and_arity_texts(both: tuple[int, int]) -> None:
    long_arg = "x" * 300
    same(
        both,
        [
            encode_command("FOO")
            + encode_command("foo", "a", "b\r\nc")
            + encode_command("FOO", long_arg, long_arg)
            + encode_command("GET")
            + encode_command("get", "a", "b")
            + encode_command("ClIeNt")
            + encode_command("client", "nosuch")
        ],
    )


def test_client_that_never_reads_cannot_exhaust_memory(ts_server: ServerProcess) -> None:
    """A client pipelines requests for ~2 GiB of replies without reading: the server
    stops reading from it instead of buffering, and keeps serving others."""
    setup = RawClient(ts_server.port)
    setup.call("SET", "blob", "x" * (100 * 1024))
    before = proc_status_kb(ts_server.proc.pid)
    flood = socket.create_connection(("127.0.0.1", ts_server.port))
    flood.setblocking(False)
    request = encode_command("GET", "blob") * 1000
    sent = 0
    deadline = time.monotonic() + 5
    while sent < 20_000 and time.monotonic() < deadline:
        try:
            flood.send(request)
            sent += 1000
        except BlockingIOError:
            time.sleep(0.01)
    time.sleep(0.5)
    grown_mb = (proc_status_kb(ts_server.proc.pid) - before) / 1024
    other = RawClient(ts_server.port)
    assert other.call("PING") == b"+PONG\r\n"
    other.close()
    flood.close()
    setup.call("DEL", "blob")
    setup.close()
    assert grown_mb < 300, f"server grew {grown_mb:.0f} MiB for a client that never reads"


def test_huge_declared_counts_cost_nothing_until_arguments_arrive(
    ts_server: ServerProcess,
) -> None:
    """A count of two billion, at the top or nested, is read lazily: the server
    neither reserves memory for it nor stalls when the client goes away."""
    before = proc_status_kb(ts_server.proc.pid, "VmSize")
    for data in (b"*2000000000\r\n$1\r\na\r\n", b"*2\r\n$1\r\na\r\n*2000000000\r\n"):
        for _ in range(3):
            sock = socket.create_connection(("127.0.0.1", ts_server.port))
            sock.sendall(data)
            time.sleep(0.05)
            sock.close()
    other = RawClient(ts_server.port)
    assert other.call("PING") == b"+PONG\r\n"
    other.close()
    grown_mb = (proc_status_kb(ts_server.proc.pid, "VmSize") - before) / 1024
    assert grown_mb < 1024, f"address space grew {grown_mb:.0f} MiB for declared counts"


def test_a_request_of_a_million_arguments(ts_server: ServerProcess) -> None:
    """Counts of a million and more take the exact parser: it reads such a request
    once as its chunks arrive (and the request still works)."""
    n = 1_200_000
    c = RawClient(ts_server.port)
    c.send(encode_command("RPUSH", "many", *[b"%d" % i for i in range(n - 2)]))
    assert c.read_reply() == b":%d\r\n" % (n - 2)
    assert c.call("LINDEX", "many", "-1") == b"$7\r\n%d\r\n" % (n - 3)
    assert c.call("DEL", "many") == b":1\r\n"
    c.close()
