"""`RequestReader` in process, with byte literals: the inline, pipelined, split and
malformed inputs of tests/test_protocol.py (which compares the same inputs with
redis-server through sockets), and the limits and parser choices behind them."""

from __future__ import annotations

import pytest

from commands.session import ServerState, Session
from proxy import reader as reader_module
from proxy.reader import QUERY_BUFFER_OVERFLOW, RequestReader
from store import Store
from tests.resp_client import encode_command

UNBALANCED = b"ERR Protocol error: unbalanced quotes in request"
INVALID_MULTIBULK = b"ERR Protocol error: invalid multibulk length"
INVALID_BULK = b"ERR Protocol error: invalid bulk length"


def expected_dollar(got: str) -> bytes:
    return b"ERR Protocol error: expected '$', got '%b'" % got.encode()


def new_reader(authed: bool = True) -> RequestReader:
    session = Session(ServerState(Store()))
    session.authenticated = authed
    return RequestReader(session)


def read(
    chunks: list[bytes], reader: RequestReader | None = None
) -> tuple[list[list[bytes]], bytes | None]:
    """Feed `chunks` in turn: every request read, and the text of the error that ended
    the input (None if none did; b"overflow" for the query buffer limit)."""
    reader = reader or new_reader()
    got: list[list[bytes]] = []
    for chunk in chunks:
        requests, error = reader.feed(chunk)
        got += requests
        if error is QUERY_BUFFER_OVERFLOW:
            return got, b"overflow"
        if error is not None:
            return got, error.text
    return got, None


def bytewise(data: bytes) -> list[bytes]:
    return [bytes([b]) for b in data]


INLINE = [
    (b"PING\r\n", [[b"PING"]], None),
    (b"PING\n", [[b"PING"]], None),
    (b"ECHO hello\r\n", [[b"ECHO", b"hello"]], None),
    (b'ECHO "hello world"\r\n', [[b"ECHO", b"hello world"]], None),
    (b"ECHO 'it''s'\r\n", [], UNBALANCED),
    (b"ECHO 'a\\'b'\r\n", [[b"ECHO", b"a'b"]], None),
    (b'ECHO "tab\\there\\x41\\n"\r\n', [[b"ECHO", b"tab\thereA\n"]], None),
    (b"SET k v\r\nGET k\r\n", [[b"SET", b"k", b"v"], [b"GET", b"k"]], None),
    (b"   \r\n\r\nPING\r\n", [[b"PING"]], None),
    (b"set  k   'a b'  \r\nget k\r\n", [[b"set", b"k", b"a b"], [b"get", b"k"]], None),
    (b"GET\r\n", [[b"GET"]], None),
    (b"NOSUCH a b\r\n", [[b"NOSUCH", b"a", b"b"]], None),
]


@pytest.mark.parametrize(("data", "requests", "error"), INLINE, ids=lambda d: repr(d)[:40])
def test_inline(data: bytes, requests: list[list[bytes]], error: bytes | None) -> None:
    assert read([data]) == (requests, error)
    assert read(bytewise(data)) == (requests, error)


MALFORMED = [
    (b'ECHO "unbalanced\r\n', [], UNBALANCED),
    (b"ECHO 'unbalanced\r\n", [], UNBALANCED),
    (b'ECHO "a"b\r\n', [], UNBALANCED),
    (b"*abc\r\n", [], INVALID_MULTIBULK),
    (b"*3000000000\r\n", [], INVALID_MULTIBULK),
    (b"*1\r\n:5\r\n", [], expected_dollar(":")),
    (b"*1\r\n*1\r\n", [], expected_dollar("*")),
    (b"*1\r\n*3000000000\r\n", [], expected_dollar("*")),
    (b"*2\r\n$4\r\nECHO\r\n*2000000000\r\n", [], expected_dollar("*")),
    (b"*1\r\n$-5\r\n", [], INVALID_BULK),
    (b"*1\r\n$abc\r\n", [], INVALID_BULK),
    (b"*1\r\n$600000000\r\n", [], INVALID_BULK),
    (b"*2\r\n$4\r\nECHO\r\n+hi\r\n", [], expected_dollar("+")),
    (b"*1\r\n$4\r\nPING\r\n*x\r\n", [[b"PING"]], INVALID_MULTIBULK),
    (b"*1\r\n$4\r\nPING\r\nPING\r\n*1\r\n:1\r\n", [[b"PING"], [b"PING"]], expected_dollar(":")),
    (b"*1\r\n" + b"1" * 70000, [], b"ERR Protocol error: too big bulk count string"),
    (
        b"*1\r\n$4\r\nPING\r\n" + b"*" + b"1" * 70000,
        [[b"PING"]],
        b"ERR Protocol error: too big mbulk count string",
    ),
    (b"P" * 70000, [], b"ERR Protocol error: too big inline request"),
    # Encodings hiredis accepts and Redis does not: the exact parser has the last word.
    (b"*1\r\n$04\r\nPING\r\n", [], INVALID_BULK),
    (b"*1\r\n$4\r\nPING\r\n*01\r\n$4\r\nPING\r\n", [[b"PING"]], INVALID_MULTIBULK),
    # CR and LF quoted from the input become spaces: the error stays one line.
    (b"*1\r\n\r\n", [], expected_dollar(" ")),
]


@pytest.mark.parametrize(("data", "requests", "error"), MALFORMED, ids=lambda d: repr(d)[:40])
def test_malformed(data: bytes, requests: list[list[bytes]], error: bytes) -> None:
    assert read([data]) == (requests, error)


@pytest.mark.parametrize(("data", "requests", "error"), MALFORMED[:15], ids=lambda d: repr(d)[:40])
def test_malformed_byte_by_byte(data: bytes, requests: list[list[bytes]], error: bytes) -> None:
    assert read(bytewise(data)) == (requests, error)


def test_a_bad_count_or_length_is_refused_before_the_request_is_complete() -> None:
    """As Redis: the header alone is enough, hiredis would wait for the rest."""
    assert read([b"*2\r\n$4\r\nECHO\r\n$-5\r\n"]) == ([], INVALID_BULK)
    assert read([b"*1\r\n$4\r\nPING\r\n*2\r\n$700000000\r\n"]) == ([[b"PING"]], INVALID_BULK)


def test_the_error_comes_after_the_good_requests_before_it() -> None:
    good = encode_command("SET", "k", "v") + b"GET k\r\n"
    assert read([good + b"*1\r\n:1\r\n"]) == (
        [[b"SET", b"k", b"v"], [b"GET", b"k"]],
        expected_dollar(":"),
    )


def test_empty_and_negative_multibulk_are_skipped() -> None:
    data = b"*0\r\n*-1\r\n*1\r\n$4\r\nPING\r\n"
    assert read([data]) == ([[b"PING"]], None)
    assert read(bytewise(data)) == ([[b"PING"]], None)


def test_pipelining_keeps_order() -> None:
    commands: list[list[bytes]] = []
    for i in range(300):
        commands += [[b"SET", b"k%d" % i, b"v%d" % i], [b"GET", b"k%d" % i], [b"INCR", b"counter"]]
    commands.append([b"GET", b"nosuch", b"extra"])
    data = b"".join(encode_command(*c) for c in commands)
    reader = new_reader()
    assert read([data], reader) == (commands, None)
    assert reader.exact is None  # all on the fast path


def test_split_byte_by_byte() -> None:
    data = encode_command("SET", "key", "a value with spaces") + encode_command("GET", "key")
    data += b"ECHO inline\r\n" + encode_command("STRLEN", "key")
    expected = [
        [b"SET", b"key", b"a value with spaces"],
        [b"GET", b"key"],
        [b"ECHO", b"inline"],
        [b"STRLEN", b"key"],
    ]
    assert read(bytewise(data)) == (expected, None)


def test_frames_split_across_reads() -> None:
    expected = [[b"APPEND", b"s", b"x" * i] for i in range(1, 60)]
    data = b"".join(encode_command(*c) for c in expected)
    for size in (1, 2, 3, 7, 100, 4096):
        chunks = [data[i : i + size] for i in range(0, len(data), size)]
        assert read(chunks) == (expected, None), size


def test_multibulk_then_inline_in_one_packet() -> None:
    data = encode_command("SET", "a", "1") + b"GET a\r\n" + encode_command("GET", "a")
    assert read([data]) == ([[b"SET", b"a", b"1"], [b"GET", b"a"], [b"GET", b"a"]], None)


def test_each_request_is_returned_once_it_is_complete() -> None:
    reader = new_reader()
    assert reader.feed(b"*2\r\n$3\r\nGET\r\n$1\r") == ([], None)
    assert reader.feed(b"\nk\r\n*1\r\n$4\r\nPI") == ([[b"GET", b"k"]], None)
    assert reader.feed(b"NG\r\nECH") == ([[b"PING"]], None)
    assert reader.feed(b"O x\r\n") == ([[b"ECHO", b"x"]], None)


def test_a_large_value() -> None:
    value = bytes(range(256)) * (40 * 1024)
    data = encode_command("SET", "big", value)
    chunks = [data[i : i + 65536] for i in range(0, len(data), 65536)]
    assert read(chunks) == ([[b"SET", b"big", value]], None)


def test_counts_of_a_million_take_the_exact_parser() -> None:
    """hiredis would allocate the whole array at the header: the exact parser reads
    such a request lazily, then hands back to hiredis at the next clean boundary."""
    n = 1_200_000
    args = [b"RPUSH", b"many", *[b"%d" % i for i in range(n - 2)]]
    data = encode_command(*args)
    reader = new_reader()
    chunks = [data[i : i + 65536] for i in range(0, len(data), 65536)]
    assert reader.feed(chunks[0]) == ([], None)
    assert reader.exact is not None
    assert read(chunks[1:], reader) == ([args], None)
    assert reader.exact is None
    assert reader.feed(encode_command("PING")) == ([[b"PING"]], None)


def test_nested_huge_counts_are_refused_by_the_exact_parser() -> None:
    assert read([b"*2\r\n$1\r\na\r\n*2000000000\r\n"]) == ([], expected_dollar("*"))
    assert read([b"*2000000000\r\n$1\r\na\r\n"]) == ([], None)


def test_unauthenticated_clients_may_not_declare_much() -> None:
    assert read([b"*11\r\n"], new_reader(authed=False)) == (
        [],
        b"ERR Protocol error: unauthenticated multibulk length",
    )
    assert read([b"*1\r\n$16385\r\n"], new_reader(authed=False)) == (
        [],
        b"ERR Protocol error: unauthenticated bulk length",
    )
    assert read([b"*10\r\n"], new_reader(authed=False)) == ([], None)
    assert read([b"*11\r\n$16385\r\n"]) == ([], None)


def test_proto_max_bulk_len() -> None:
    reader = new_reader()
    reader.session.server.limits.proto_max_bulk = 10
    assert read([b"*1\r\n$10\r\n0123456789\r\n*1\r\n$11\r\n"], reader) == (
        [[b"0123456789"]],
        INVALID_BULK,
    )


@pytest.mark.parametrize(
    "chunks",
    [
        [b"*2\r\n$4\r\nECHO\r\n$100\r\n", b"x" * 60],  # hiredis holds a partial request
        [b"ECHO ", b"x" * 60],  # an inline request on the exact parser
        [b"*1\r\n$4\r\nPING\r\nECHO ", b"x" * 60],
    ],
    ids=["multibulk", "inline", "after-a-request"],
)
def test_query_buffer_limit(chunks: list[bytes]) -> None:
    reader = new_reader()
    reader.session.server.limits.query_buffer = 50
    requests, error = read(chunks, reader)
    assert error == b"overflow"
    assert requests in ([], [[b"PING"]])


def test_clear_drops_the_buffered_input() -> None:
    reader = new_reader()
    reader.feed(b"*2\r\n$3\r\nGET\r\n")
    reader.clear()
    assert reader.since == [] and reader.exact is None and reader.partial_head is None


@pytest.mark.parametrize(
    ("data", "big"),
    [
        (b"*1234567\r\n", True),
        (b"*1\r\n$4\r\nPING\r\n*1234567\r\n", True),  # after a request, in a pipeline
        (b"*2\r\n$1\r\na\r\n*2000000000\r\n", True),  # nested
        (b"*1\r\n$4\r\nPING\r\n*123456\r\n", False),  # six digits
        (b"*3\r\n$3\r\nSET\r\n$16\r\nkey:000000000042\r\n$1\r\nx\r\n", False),
        (b"*1\r\n$4\r\nPING\r\n*12345x7\r\n", False),
        (b"*1\r\n$9\r\nab*1234567\r\n", True),  # in a payload: the exact parser reads it
        (b"*1234567", True),  # at the end of the input, no line end yet
        (b"*123456", False),  # fewer bytes than seven after the "*"
        (b"**1234567", True),  # an empty piece between two "*"
        (b"*123456*1234567", True),  # the seventh byte is the next "*"
        (b"*12345678\r\n", True),  # more than seven
        (b"*1234x67\r\n", False),  # a non-digit among the first six
        (b"x1234567", False),  # digits without a "*"
    ],
)
def test_the_check_for_huge_counts(data: bytes, big: bool) -> None:
    assert reader_module._big_count(data) is big


GET_16 = encode_command("GET", "key:000000000042") * 16


@pytest.mark.parametrize(
    ("data", "count"),
    [
        (b"*1\r\n$4\r\nPING\r\n", 1),
        (b"*1\r\n$4\r\nPING\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\n", 2),
        (GET_16, 16),
        (b"*1\r\n$0\r\n\r\n", 1),  # an empty argument
        (b"*1\r\n$10\r\nab*1234567\r\n", 1),  # a payload is skipped, not searched
        (b"*1\r\n$4\r\nPING\r\n*1\r\n", -1),  # the last request is incomplete
        (b"*1\r\n$4\r\nPIN", -1),
        (b"*1\r\n$4\r\nPING\r", -1),
        (b"*1\r\n$4\r\nPINGxx", -1),  # no line end after the payload
        (b"*01\r\n$4\r\nPING\r\n", -1),  # leading zeros: not canonical
        (b"*1\r\n$04\r\nPING\r\n", -1),
        (b"*0\r\n", -1),  # an empty request
        (b"*-1\r\n", -1),
        (b"*1\r\n$-1\r\n", -1),  # a null argument
        (b"*1\r\n:4\r\n", -1),  # not a bulk string
        (b"*2\r\n$1\r\na\r\n*1\r\n$1\r\nb\r\n", -1),  # nested
        (b"*1234567\r\n$1\r\na\r\n", -1),  # a count of a million or more
        (b"*999999\r\n", -1),  # six digits, incomplete
        (b"*1\r\n$99999999999\r\nab\r\n", -1),  # eleven digits
        (b"*1 \r\n$4\r\nPING\r\n", -1),
        (b"*1\n$4\r\nPING\r\n", -1),
        (b"PING\r\n", -1),  # inline
        (b"*1\r\n$4\r\nPING\r\nPING\r\n", -1),  # then inline
    ],
)
def test_whole_requests(data: bytes, count: int) -> None:
    assert reader_module._whole_requests(data) == count


def test_a_pipeline_of_whole_requests_is_read_at_once() -> None:
    reader = new_reader()
    assert reader.feed(GET_16) == ([[b"GET", b"key:000000000042"]] * 16, None)
    assert not reader.partial and not reader.hiredis.has_data() and reader.exact is None
    # The fast path leaves the reader as the general one would: a split request next.
    data = encode_command("SET", "k", "v" * 100)
    assert reader.feed(data[:20]) == ([], None)
    assert reader.partial
    assert reader.feed(data[20:] + GET_16) == (
        [[b"SET", b"k", b"v" * 100]] + [[b"GET", b"key:000000000042"]] * 16,
        None,
    )
    assert not reader.partial
    assert reader.feed(b"*1\r\n$10\r\nab*1234567\r\n") == ([[b"ab*1234567"]], None)
    assert reader.exact is None


def test_unauthenticated_limits_apply_to_complete_requests() -> None:
    """Redis refuses more than 10 arguments, or one over 16 KiB, from a client that
    must authenticate, whole or not, while it parses each request: so up to the first
    AUTH or HELLO of a read, whose effect decides for the requests after it."""
    ping = encode_command("PING")
    eleven = encode_command("ECHO", *["a"] * 10)
    ten = encode_command("ECHO", *["a"] * 9)
    big = encode_command("ECHO", "x" * 16385)
    unauth_mbulk = b"ERR Protocol error: unauthenticated multibulk length"
    assert read([ping + eleven], new_reader(authed=False)) == ([[b"PING"]], unauth_mbulk)
    assert read([ten], new_reader(authed=False)) == ([[b"ECHO", *[b"a"] * 9]], None)
    assert read([ping + big + ping], new_reader(authed=False)) == (
        [[b"PING"]],
        b"ERR Protocol error: unauthenticated bulk length",
    )
    auth = encode_command("AUTH", "pw")
    assert read([auth + eleven], new_reader(authed=False)) == (
        [[b"AUTH", b"pw"], [b"ECHO", *[b"a"] * 10]],
        None,
    )
    # Authenticated, the same input is read whole.
    assert read([ping + eleven + big]) == (
        [[b"PING"], [b"ECHO", *[b"a"] * 10], [b"ECHO", b"x" * 16385]],
        None,
    )
