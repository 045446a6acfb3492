"""TLS (--tls-port, --tls-cert-file, --tls-key-file, --tls-ca-cert-file, --tls-auth-clients):
a CA, a server and a client certificate made in the test (trustme), real server
processes, redis-py and raw sockets as clients."""

from __future__ import annotations

import re
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
import trustme
from redis.backoff import NoBackoff
from redis.retry import Retry

from tests.conftest import ROOT, ServerProcess, free_port, start_temporalstore
from tests.resp_client import RawClient


@dataclass
class Certs:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    stranger_cert: Path  # signed by another CA
    stranger_key: Path


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    d = tmp_path_factory.mktemp("tls")
    ca, other = trustme.CA(), trustme.CA()
    server = ca.issue_cert("localhost", "127.0.0.1")
    client = ca.issue_cert("client@example.com")
    stranger = other.issue_cert("stranger@example.com")
    paths = Certs(
        *(d / n for n in ("ca.pem", "s.crt", "s.key", "c.crt", "c.key", "x.crt", "x.key"))
    )
    ca.cert_pem.write_to_path(str(paths.ca))
    for leaf, cert, key in (
        (server, paths.server_cert, paths.server_key),
        (client, paths.client_cert, paths.client_key),
        (stranger, paths.stranger_cert, paths.stranger_key),
    ):
        leaf.cert_chain_pems[0].write_to_path(str(cert))
        leaf.private_key_pem.write_to_path(str(key))
    return paths


def tls_flags(c: Certs, port: int, auth: str = "yes") -> list[str]:
    return [
        "--tls-port",
        str(port),
        "--tls-cert-file",
        str(c.server_cert),
        "--tls-key-file",
        str(c.server_key),
        "--tls-ca-cert-file",
        str(c.ca),
        "--tls-auth-clients",
        auth,
    ]


@dataclass
class TLSServer:
    proc: ServerProcess
    tls_port: int


@pytest.fixture(scope="module")
def tls_server(certs: Certs) -> Iterator[TLSServer]:
    port = free_port()
    p = start_temporalstore(tls_flags(certs, port))
    yield TLSServer(p, port)
    p.stop()


def tls_client(c: Certs, port: int, cert: bool = True, **kw: object) -> redis.Redis:
    extra: dict[str, object] = {}
    if cert:
        extra = {"ssl_certfile": str(c.client_cert), "ssl_keyfile": str(c.client_key)}
    return redis.Redis(
        host="127.0.0.1",
        port=port,
        ssl=True,
        ssl_ca_certs=str(c.ca),
        socket_timeout=10,
        retry=Retry(NoBackoff(), 0),  # a refused handshake fails at once
        **extra,
        **kw,  # type: ignore[arg-type]
    )


def test_commands_over_tls(certs: Certs, tls_server: TLSServer) -> None:
    r = tls_client(certs, tls_server.tls_port)
    try:
        assert r.ping()
        assert r.set("tls:k", "v") and r.get("tls:k") == b"v"
        assert r.hset("tls:h", mapping={"a": "1", "b": "2"}) == 2
        assert r.hgetall("tls:h") == {b"a": b"1", b"b": b"2"}
        assert r.config_get("tls-port") == {"tls-port": str(tls_server.tls_port)}
        assert r.config_get("tls-auth-clients") == {"tls-auth-clients": "yes"}
        # The peer address reaches the session through the TLS transport.
        info = r.client_info()
        assert info["addr"].startswith("127.0.0.1:")
        assert info["laddr"] == f"127.0.0.1:{tls_server.tls_port}"
        # The same data over the plain listener.
        plain = RawClient(tls_server.proc.port)
        assert plain.call("GET", "tls:k") == b"$1\r\nv\r\n"
        plain.close()
    finally:
        r.close()


def test_big_replies_and_pipelines_over_tls(certs: Certs, tls_server: TLSServer) -> None:
    """Replies larger than the write buffer's high-water mark: writing pauses and
    resumes through the TLS transport, and nothing is lost or reordered."""
    r = tls_client(certs, tls_server.tls_port)
    try:
        big = b"x" * (6 * 1024 * 1024)
        assert r.set("tls:big", big)
        pipe = r.pipeline(transaction=False)
        for _ in range(4):
            pipe.get("tls:big")
            pipe.incr("tls:n")
        out = pipe.execute()
        assert out == [big, 1, big, 2, big, 3, big, 4]
        pipe = r.pipeline(transaction=False)
        for i in range(20000):
            pipe.set(f"tls:p:{i}", i)
        assert all(pipe.execute())
        assert r.get("tls:p:19999") == b"19999"
    finally:
        r.close()


def test_pubsub_over_tls(certs: Certs, tls_server: TLSServer) -> None:
    sub = tls_client(certs, tls_server.tls_port).pubsub()
    pub = tls_client(certs, tls_server.tls_port)
    try:
        sub.subscribe("tls:news")
        assert sub.get_message(timeout=5)["type"] == "subscribe"  # type: ignore[index]
        assert pub.publish("tls:news", "hello") == 1
        msg = sub.get_message(timeout=5)
        assert msg is not None and msg["data"] == b"hello"
    finally:
        sub.close()
        pub.close()


def test_client_without_certificate_is_refused(certs: Certs, tls_server: TLSServer) -> None:
    for kw in (
        {"cert": False},
        {
            "cert": False,
            "ssl_certfile": str(certs.stranger_cert),
            "ssl_keyfile": str(certs.stranger_key),
        },
    ):
        r = tls_client(certs, tls_server.tls_port, **kw)  # type: ignore[arg-type]
        with pytest.raises(redis.exceptions.ConnectionError):
            r.ping()
        r.close()
    ok = tls_client(certs, tls_server.tls_port)
    assert ok.ping()  # the server keeps serving others
    ok.close()


def _read_until_closed(sock: socket.socket) -> bytes:
    data = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return data
        data += chunk


def test_plain_text_client_on_the_tls_port_gets_no_reply(
    certs: Certs, tls_server: TLSServer
) -> None:
    with socket.create_connection(("127.0.0.1", tls_server.tls_port), timeout=10) as sock:
        sock.sendall(b"*1\r\n$4\r\nPING\r\n")
        data = _read_until_closed(sock)  # the server ends the connection
    assert b"PONG" not in data and b"-ERR" not in data
    with socket.create_connection(("127.0.0.1", tls_server.tls_port), timeout=10) as sock:
        sock.sendall(b"PING\r\n" * 1000)
        assert b"PONG" not in _read_until_closed(sock)
    r = tls_client(certs, tls_server.tls_port)
    assert r.ping()
    r.close()
    plain = RawClient(tls_server.proc.port)
    assert plain.call("PING") == b"+PONG\r\n"
    plain.close()
    assert tls_server.proc.proc.poll() is None
    assert not any("Traceback" in line for line in tls_server.proc.log_lines)


def test_optional_client_certificates(certs: Certs) -> None:
    port = free_port()
    p = start_temporalstore(tls_flags(certs, port, auth="optional"))
    try:
        anon = tls_client(certs, port, cert=False)
        assert anon.ping()
        anon.close()
        known = tls_client(certs, port)
        assert known.ping()
        known.close()
        # A certificate that is sent is checked.
        stranger = tls_client(
            certs,
            port,
            cert=False,
            ssl_certfile=str(certs.stranger_cert),
            ssl_keyfile=str(certs.stranger_key),
        )
        with pytest.raises(redis.exceptions.ConnectionError):
            stranger.ping()
        stranger.close()
    finally:
        p.stop()


def start_tls_only(flags: list[str]) -> tuple[subprocess.Popen[bytes], list[str]]:
    """A server with --port none: wait for its TLS listener and storage log lines."""
    workdir = Path(tempfile.mkdtemp(prefix="ts-tls-"))
    cmd = [sys.executable, "-m", "proxy.cli", "serve", "--port", "none"]
    cmd += ["--storage", f"file://{workdir}/data", *flags]
    proc = subprocess.Popen(cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    lines: list[str] = []
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        line = proc.stderr.readline().decode(errors="replace")
        if not line:
            break
        lines.append(line)
        if re.search(r"storage .*: epoch \d+", line):
            return proc, lines
    proc.kill()
    proc.wait()
    raise RuntimeError("server did not start:\n" + "".join(lines))


def test_tls_only_with_port_none(certs: Certs) -> None:
    port = free_port()
    proc, lines = start_tls_only(tls_flags(certs, port))
    try:
        assert any(f"accepting TLS connections on 127.0.0.1:{port}" in line for line in lines)
        assert not any("listening on" in line for line in lines)  # no plain TCP listener
        r = tls_client(certs, port)
        assert r.set("k", "v") and r.get("k") == b"v"
        assert r.config_get("port") == {"port": "0"}  # as Redis shows a disabled port
        r.close()
    finally:
        proc.terminate()
        assert proc.wait(10) == 0
        assert proc.stderr is not None
        proc.stderr.close()


def test_bad_tls_settings_stop_the_server_at_start(certs: Certs, tmp_path: Path) -> None:
    from proxy.cli import build_parser, config_from_args, tls_context

    def settings(*flags: str) -> None:
        ns = build_parser().parse_args(["serve", "--tls-port", "0", *flags])
        tls_context(config_from_args(ns))

    cert = ["--tls-cert-file", str(certs.server_cert), "--tls-key-file", str(certs.server_key)]
    no_ca = ["--tls-auth-clients", "no"]
    with pytest.raises(SystemExit, match="No tls-cert-file configured!"):
        settings()
    with pytest.raises(SystemExit, match="Either tls-ca-cert-file or tls-ca-cert-dir must be"):
        settings(*cert)  # tls-auth-clients yes needs a CA, as in Redis
    with pytest.raises(SystemExit, match="--tls-auth-clients: argument"):
        settings(*cert, "--tls-auth-clients", "maybe")
    with pytest.raises(SystemExit, match="Failed to load certificate"):
        settings("--tls-cert-file", str(tmp_path / "none.crt"), "--tls-key-file", "x", *no_ca)
    ctx = tls_context(
        config_from_args(build_parser().parse_args(["serve", "--tls-port", "0", *cert, *no_ca]))
    )
    assert ctx is not None and ctx.verify_mode == ssl.CERT_NONE
    assert ctx.minimum_version == ssl.TLSVersion.TLSv1_2


def test_tls_settings_are_fixed_at_runtime(certs: Certs, tls_server: TLSServer) -> None:
    c = RawClient(tls_server.proc.port)
    try:
        assert c.call("CONFIG", "SET", "tls-auth-clients", "no") == (
            b"-ERR CONFIG SET failed (possibly related to argument 'tls-auth-clients') - "
            b"Unable to update TLS configuration. Check server logs.\r\n"
        )
        assert c.call("CONFIG", "SET", "tls-port", str(tls_server.tls_port + 1)) == (
            b"-ERR CONFIG SET failed (possibly related to argument 'tls-port') - "
            b"Unable to listen on this port. Check server logs.\r\n"
        )
        # Setting the value in force is accepted, as a no-op.
        assert c.call("CONFIG", "SET", "tls-auth-clients", "yes") == b"+OK\r\n"
    finally:
        c.close()
