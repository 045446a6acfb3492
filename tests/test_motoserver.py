"""bench/motoserver.py: moto's S3 over kept HTTP/1.1 connections (the S3 server of the
tests and the benchmark). Several requests go over one raw socket, with bodies read and
unread, chunked and not, and each answer must be the right one."""

from __future__ import annotations

import select
import socket
import uuid
from collections.abc import Iterator

import pytest

Response = tuple[int, dict[str, str], bytes]

# moto checks no signature, but answers a request without one as an anonymous user's.
AUTH = (
    "Authorization: AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/s3/aws4_request,"
    " SignedHeaders=host, Signature=0"
)


class Conn:
    """One TCP connection to the server, requests written raw, responses read by their
    Content-Length."""

    def __init__(self, endpoint: str) -> None:
        host, port = endpoint.removeprefix("http://").split(":")
        self.sock = socket.create_connection((host, int(port)), timeout=10)
        self.file = self.sock.makefile("rb")

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def response(self, head: bool = False) -> Response:
        status_line = self.file.readline()
        assert status_line.startswith(b"HTTP/1.1 "), status_line
        status = int(status_line.split()[1])
        headers: dict[str, str] = {}
        while (line := self.file.readline()) not in (b"\r\n", b""):
            name, _, value = line.decode("latin-1").partition(":")
            headers[name.strip().lower()] = value.strip()
        if status == 100:
            return status, headers, b""
        n = 0 if head else int(headers["content-length"])
        body = self.file.read(n)
        assert len(body) == n
        return status, headers, body

    def request(self, method: str, path: str, body: bytes = b"", **headers: str) -> Response:
        self.send(_request(method, path, body, **headers))
        return self.response(head=method == "HEAD")

    def closed_by_server(self) -> bool:
        return self.file.read(1) == b""

    def close(self) -> None:
        self.file.close()
        self.sock.close()


def _request(method: str, path: str, body: bytes = b"", **headers: str) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: 127.0.0.1", AUTH]
    if body and "Transfer_Encoding" not in headers:
        lines.append(f"Content-Length: {len(body)}")
    lines += [f"{k.replace('_', '-')}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


@pytest.fixture
def conn(moto_s3: str) -> Iterator[Conn]:
    c = Conn(moto_s3)
    yield c
    c.close()


@pytest.fixture
def bucket(conn: Conn) -> str:
    name = f"ka-{uuid.uuid4().hex[:12]}"
    status, _, _ = conn.request("PUT", f"/{name}")
    assert status == 200
    return name


def test_requests_share_one_connection(conn: Conn, bucket: str) -> None:
    bodies = {f"k{i}": bytes([65 + i]) * (100 + 1000 * i) for i in range(5)}
    for key, body in bodies.items():
        status, headers, _ = conn.request("PUT", f"/{bucket}/{key}", body)
        assert status == 200
        assert headers.get("connection", "") != "close"
    for key, body in bodies.items():
        status, _, got = conn.request("GET", f"/{bucket}/{key}")
        assert (status, got) == (200, body)
    status, headers, _ = conn.request("HEAD", f"/{bucket}/k1")
    assert (status, headers["content-length"]) == (200, "1100")
    status, _, got = conn.request("GET", f"/{bucket}/k0")
    assert (status, got) == (200, bodies["k0"])


def test_put_if_absent_over_a_kept_connection(conn: Conn, bucket: str) -> None:
    status, _, _ = conn.request("PUT", f"/{bucket}/once", b"first", If_None_Match="*")
    assert status == 200
    status, _, body = conn.request("PUT", f"/{bucket}/once", b"second", If_None_Match="*")
    assert status == 412 and b"PreconditionFailed" in body
    assert conn.request("GET", f"/{bucket}/once")[2] == b"first"


def test_unread_body_does_not_leak_into_the_next_request(conn: Conn, bucket: str) -> None:
    # A GET with a body the application never reads, and the next request written in
    # the same packet: the next one is answered, not mistaken for the leftover body.
    assert conn.request("PUT", f"/{bucket}/a", b"alpha")[0] == 200
    conn.send(
        _request("GET", f"/{bucket}/a", b"GET /junk HTTP/1.1\r\n\r\n")
        + _request("GET", f"/{bucket}/a")
    )
    assert conn.response()[::2] == (200, b"alpha")
    assert conn.response()[::2] == (200, b"alpha")


def test_chunked_body_then_another_request(conn: Conn, bucket: str) -> None:
    chunked = b"4\r\nabcd\r\n3\r\nefg\r\n0\r\n\r\n"
    conn.send(_request("PUT", f"/{bucket}/c", chunked, Transfer_Encoding="chunked"))
    assert conn.response()[0] == 200
    assert conn.request("GET", f"/{bucket}/c")[::2] == (200, b"abcdefg")


def test_expect_100_continue(conn: Conn, bucket: str) -> None:
    conn.send(_request("PUT", f"/{bucket}/e", b"", Content_Length="4", Expect="100-continue"))
    assert conn.response()[0] == 100
    conn.send(b"body")
    assert conn.response()[0] == 200
    assert conn.request("GET", f"/{bucket}/e")[::2] == (200, b"body")


def test_connection_close_is_honoured(conn: Conn, bucket: str) -> None:
    status, headers, _ = conn.request("GET", f"/{bucket}", Connection="close")
    assert status == 200
    assert headers["connection"] == "close"
    assert conn.closed_by_server()


def test_bad_length_closes_the_connection(conn: Conn) -> None:
    conn.send(b"PUT /x/y HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: nope\r\n\r\n")
    status, headers, _ = conn.response()
    assert status == 400
    assert headers["connection"] == "close"
    assert conn.closed_by_server()


def test_an_idle_connection_stays_open(moto_s3: str, bucket: str) -> None:
    c = Conn(moto_s3)
    try:
        assert c.request("GET", f"/{bucket}")[0] == 200
        # Nothing comes (no byte, and no end of stream: the server does not hang up).
        assert select.select([c.sock], [], [], 0.5)[0] == []
        assert c.request("GET", f"/{bucket}")[0] == 200
    finally:
        c.close()
