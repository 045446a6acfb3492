"""The TS.* verbs (commands/temporal.py), in RESP2 and RESP3: versions, points in
time, history with metadata, snapshots, checkouts, diffs, reverts and restores,
retention, persistence across restarts, and a Hypothesis property test of every
as-of read against a model of the whole history."""

from __future__ import annotations

import copy
import re
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from tests.conftest import ServerProcess, start_temporalstore
from tests.resp_client import RawClient, canonical, encode_command, parse

# --------------------------------------------------------------------------- helpers


class ReplyError(Exception):
    pass


def decode(tagged: Any) -> Any:
    """A parsed reply (tests.resp_client.parse) as plain Python values."""
    kind = tagged[0]
    if kind in ("null", "null-array", "_"):
        return None
    value = tagged[1]
    if kind in ("$", "+", "="):
        return value
    if kind == ":":
        return int(value)
    if kind == ",":
        return float(value)
    if kind == "#":
        return value == b"t"
    if kind == "-":
        raise ReplyError(value.decode())
    items = [decode(x) for x in value]
    if kind == "~":
        return set(items)
    if kind == "%":
        return dict(zip(items[0::2], items[1::2], strict=True))
    return items


_OPEN: list[Conn] = []


@pytest.fixture(autouse=True)
def _close_connections() -> Iterator[None]:
    """Close every Conn a test opened, even when it failed halfway."""
    yield
    while _OPEN:
        _OPEN.pop().close()


class Conn:
    """A raw connection speaking RESP2 or RESP3: exact bytes or decoded values."""

    def __init__(self, port: int, resp: int = 2) -> None:
        self.c = RawClient(port)
        self.resp = resp
        _OPEN.append(self)
        if resp == 3:
            assert self.c.call("HELLO", "3").startswith(b"%")

    def raw(self, *args: Any) -> bytes:
        return self.c.call(*args)

    def __call__(self, *args: Any) -> Any:
        return decode(parse(self.c.call(*args)))

    def err(self, *args: Any) -> str:
        """The error text of a command that must fail."""
        raw = self.c.call(*args)
        assert raw.startswith(b"-"), (args, raw)
        return raw[1:-2].decode()

    def pipe(self, cmds: list[tuple[Any, ...]]) -> list[Any]:
        """Send every command at once, then read the replies (errors as ReplyError)."""
        self.c.send(b"".join(encode_command(*c) for c in cmds))
        out: list[Any] = []
        for _ in cmds:
            try:
                out.append(decode(parse(self.c.read_reply())))
            except ReplyError as e:
                out.append(e)
        return out

    def version(self) -> int:
        v = self("TS.VERSION")
        assert isinstance(v, int)
        return v

    def close(self) -> None:
        self.c.close()


def as_map(reply: Any) -> dict[Any, Any]:
    """A map whichever protocol answered it (RESP3 map or RESP2 flat pairs)."""
    if isinstance(reply, dict):
        return reply
    assert isinstance(reply, list) and len(reply) % 2 == 0, reply
    return dict(zip(reply[0::2], reply[1::2], strict=True))


def history(c: Conn, *args: Any) -> list[dict[bytes, Any]]:
    return [as_map(e) for e in c("TS.HISTORY", *args)]


@pytest.fixture(scope="module", autouse=True)
def _quiet_shared_server(ts_server: ServerProcess) -> Iterator[None]:
    """Empty the shared server before and after this module: a key with a TTL left by
    another module would commit its `expired` version in the middle of a test here
    (they count versions), and ours must not do that to theirs."""
    flush = RawClient(ts_server.port)
    flush.call("FLUSHALL")
    yield
    flush.call("FLUSHALL")
    flush.close()


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def resp(request: pytest.FixtureRequest) -> int:
    return int(request.param)


@pytest.fixture
def c(ts_server: ServerProcess, resp: int) -> Iterator[Conn]:
    conn = Conn(ts_server.port, resp)
    yield conn
    conn.close()


def dbn(c: Conn, n: int) -> int:
    """This protocol's database number n. FLUSHDB keeps version chains, so the RESP2
    and RESP3 runs of a test use different databases (1-10, and 11-15) to keep each
    run's histories its own."""
    return n if c.resp == 2 else 11 + n % 5


def fresh_db(c: Conn, n: int) -> int:
    """Select (this protocol's) database n and empty it: the shared server keeps
    other tests' keys. Returns the database number."""
    db = dbn(c, n)
    assert c("SELECT", db) == b"OK"
    c("FLUSHDB")
    return db


@pytest.fixture(scope="module")
def pruning_server() -> Iterator[ServerProcess]:
    # SAVE writes a checkpoint and compacts down to it, so versions retention
    # dropped from memory are then gone from object storage too: PRUNED everywhere.
    p = start_temporalstore(["--history", "versions:2", "--keep-checkpoints", "1"])
    yield p
    p.stop()


ERR_SYNTAX = "ERR syntax error"
ERR_NOT_INT = "ERR value is not an integer or out of range"
ERR_NEGATIVE = "ERR value is out of range, must be positive"
ERR_BACK = "ERR BACK is only valid for a single key"
READONLY = "READONLY You can't write against a historical view"


# --------------------------------------------------------------------------- TS.VERSION


def test_version_counts_commits(c: Conn) -> None:
    fresh_db(c, 1)
    v = c.version()
    assert c.raw("TS.VERSION") == b":%d\r\n" % v
    c("SET", "ver:a", "1")
    assert c.version() == v + 1
    c("GET", "ver:a")
    assert c.version() == v + 1  # reads make no version
    c("SADD", "ver:s", "m")
    c("SADD", "ver:s", "m")  # changes nothing: no version
    assert c.version() == v + 2
    c("MULTI")
    c("SET", "ver:a", "2")
    c("HSET", "ver:h", "f", "1")
    c("INCR", "ver:n")
    assert c("EXEC") == [b"OK", 1, 1]
    assert c.version() == v + 3  # one MULTI/EXEC block, one version
    assert c.err("TS.VERSION", "x") == "ERR wrong number of arguments for 'ts.version' command"


# --------------------------------------------------------------------------- TS.ASOF shapes

READS = {
    "string": ("GET",),
    "hash": ("HGETALL",),
    "list": ("LRANGE", 0, -1),
    "set": ("SMEMBERS",),
    "zset": ("ZRANGE", 0, -1, "WITHSCORES"),
    "stream": ("XRANGE", "-", "+"),
}


def test_asof_reply_shapes_match_the_read_commands(c: Conn) -> None:
    """For every type, TS.ASOF at each past version answers exactly the bytes its
    natural read command answered then."""
    fresh_db(c, 2)
    writes: list[tuple[str, str, tuple[Any, ...]]] = [
        ("string", "as:s", ("SET", "as:s", "v1")),
        ("string", "as:s", ("APPEND", "as:s", "-more")),
        ("hash", "as:h", ("HSET", "as:h", "f1", "1", "f2", "2")),
        ("hash", "as:h", ("HDEL", "as:h", "f1")),
        ("hash", "as:h", ("HSET", "as:h", "f3", "3")),
        ("list", "as:l", ("RPUSH", "as:l", "a", "b", "c")),
        ("list", "as:l", ("LPOP", "as:l")),
        ("list", "as:l", ("LPUSH", "as:l", "z")),
        ("set", "as:t", ("SADD", "as:t", "x", "y", "z")),
        ("set", "as:t", ("SREM", "as:t", "y")),
        ("zset", "as:z", ("ZADD", "as:z", "1.5", "a", "-2", "b", "inf", "c")),
        ("zset", "as:z", ("ZINCRBY", "as:z", "10", "b")),
        ("stream", "as:x", ("XADD", "as:x", "1-1", "f", "v")),
        ("stream", "as:x", ("XADD", "as:x", "2-1", "g", "w", "h", "u")),
        ("stream", "as:x", ("XDEL", "as:x", "1-1")),
        ("string", "as:s", ("DEL", "as:s")),
    ]
    seen: list[tuple[int, str, str, bytes]] = []
    before = c.version()
    for kind, key, cmd in writes:
        c(*cmd)
        v = c.version()
        seen.append((v, kind, key, c.raw(READS[kind][0], key, *READS[kind][1:])))
    for v, kind, key, expected in seen:
        got = c.raw("TS.ASOF", key, "VERSION", v)
        if kind == "set":
            assert canonical(parse(got), 1) == canonical(parse(expected), 1)
            assert got[:1] == (b"~" if c.resp == 3 else b"*")
        elif kind == "hash":
            # Field order is not kept by undo (an undone HDEL re-adds at the end).
            assert as_map(decode(parse(got))) == as_map(decode(parse(expected)))
            assert got[:1] == expected[:1] == (b"%" if c.resp == 3 else b"*")
        else:
            assert got == expected, (kind, v)
    nil = b"$-1\r\n" if c.resp == 2 else b"_\r\n"
    # Before each key existed: a null, in the protocol's own spelling.
    for key in ("as:s", "as:h", "as:l", "as:t", "as:z", "as:x"):
        assert c.raw("TS.ASOF", key, "VERSION", before) == nil
    assert c.raw("TS.ASOF", "as:never", "VERSION", before) == nil


def test_asof_exact_bytes_per_type(c: Conn) -> None:
    fresh_db(c, 2)
    c("SET", "ab:s", "v")
    c("HSET", "ab:h", "f", "1")
    c("RPUSH", "ab:l", "a", "b")
    c("SADD", "ab:t", "m")
    c("ZADD", "ab:z", "1.5", "a", "2", "b")
    c("XADD", "ab:x", "5-1", "f", "v")
    v = c.version()
    c("DEL", "ab:s", "ab:h", "ab:l", "ab:t", "ab:z", "ab:x")

    def asof(key: str) -> bytes:
        return c.raw("TS.ASOF", key, "VERSION", v)

    assert asof("ab:s") == b"$1\r\nv\r\n"
    assert asof("ab:l") == b"*2\r\n$1\r\na\r\n$1\r\nb\r\n"
    assert asof("ab:x") == b"*1\r\n*2\r\n$3\r\n5-1\r\n*2\r\n$1\r\nf\r\n$1\r\nv\r\n"
    if c.resp == 3:
        assert asof("ab:h") == b"%1\r\n$1\r\nf\r\n$1\r\n1\r\n"
        assert asof("ab:t") == b"~1\r\n$1\r\nm\r\n"
        assert asof("ab:z") == b"*2\r\n*2\r\n$1\r\na\r\n,1.5\r\n*2\r\n$1\r\nb\r\n,2\r\n"
    else:
        assert asof("ab:h") == b"*2\r\n$1\r\nf\r\n$1\r\n1\r\n"
        assert asof("ab:t") == b"*1\r\n$1\r\nm\r\n"
        assert asof("ab:z") == b"*4\r\n$1\r\na\r\n$3\r\n1.5\r\n$1\r\nb\r\n$1\r\n2\r\n"


def test_asof_stream_in_id_order_after_undoing_xdel(c: Conn) -> None:
    """Regression: undoing an XDEL re-inserted the entry at the end of the stream."""
    fresh_db(c, 2)
    c("XADD", "xo:x", "1-1", "a", "1")
    c("XADD", "xo:x", "2-1", "b", "2")
    c("XADD", "xo:x", "3-1", "c", "3")
    whole = c.raw("XRANGE", "xo:x", "-", "+")
    c("XDEL", "xo:x", "1-1", "2-1")
    assert c("TS.ASOF", "xo:x", "BACK", 1) == decode(parse(whole))
    assert c.raw("TS.ASOF", "xo:x", "BACK", 1) == whole


def test_asof_across_a_full_copy_taken_inside_a_multi(c: Conn) -> None:
    """Every 64th version of a collection keeps a full copy of its state (so an
    as-of read undoes at most 64 versions). The copy is of the state after the whole
    commit; when a MULTI/EXEC touched the key twice, reads starting from it must
    undo the commit's later entries too."""
    fresh_db(c, 2)
    key = "fc:l"
    c.pipe([("RPUSH", key, f"x{i}") for i in range(63)])  # chain entries 0..62
    expected: dict[int, bytes] = {c.version(): c.raw("LRANGE", key, 0, -1)}
    c("MULTI")
    c("RPUSH", key, "a")  # chain entry 63: takes the full copy
    c("RPUSH", key, "b")  # chain entry 64: same version
    assert c("EXEC") == [64, 65]
    expected[c.version()] = c.raw("LRANGE", key, 0, -1)
    for value in ("c", "d"):
        c("RPUSH", key, value)
        expected[c.version()] = c.raw("LRANGE", key, 0, -1)
    for v, want in expected.items():
        assert c.raw("TS.ASOF", key, "VERSION", v) == want, v
    for v, want in expected.items():
        c("TS.CHECKOUT", "AT", "VERSION", v)
        assert c.raw("LRANGE", key, 0, -1) == want, v
    c("TS.CHECKOUT", "HEAD")


# --------------------------------------------------------------------------- points in time


def test_point_errors(c: Conn) -> None:
    fresh_db(c, 3)
    c("SET", "pe:k", "v")
    v = c.version()
    assert c.err("TS.ASOF", "pe:k", "VERSION", v + 1) == (
        f"ERR version {v + 1} is in the future (current version is {v})"
    )
    assert c.err("TS.ASOF", "pe:k", "VERSION", -1) == ERR_NEGATIVE
    assert c.err("TS.ASOF", "pe:k", "VERSION", "x") == ERR_NOT_INT
    assert c.err("TS.ASOF", "pe:k", "VERSION", "1.5") == ERR_NOT_INT
    assert c.err("TS.ASOF", "pe:k", "TIME", "soon") == ERR_NOT_INT
    assert c.err("TS.ASOF", "pe:k", "TIME", -5) == ERR_NEGATIVE
    assert c.err("TS.ASOF", "pe:k", "BACK", -1) == ERR_NEGATIVE
    assert c.err("TS.ASOF", "pe:k", "BACK", "two") == ERR_NOT_INT
    assert c.err("TS.ASOF", "pe:k", "SNAPSHOT", "pe-none") == "ERR no such snapshot 'pe-none'"
    assert c.err("TS.ASOF", "pe:k", "LATER", 1) == ERR_SYNTAX
    assert c.err("TS.ASOF", "pe:k", "VERSION") == (
        "ERR wrong number of arguments for 'ts.asof' command"
    )
    assert c.err("TS.ASOF", "pe:k", "VERSION", 1, "x") == (
        "ERR wrong number of arguments for 'ts.asof' command"
    )
    # BACK counts versions of one key: the database-wide verbs refuse it.
    assert c.err("TS.DIFF", "BACK", 1, "VERSION", v) == ERR_BACK
    assert c.err("TS.DIFF", "VERSION", v, "BACK", 1) == ERR_BACK
    assert c.err("TS.CHECKOUT", "AT", "BACK", 1) == ERR_BACK
    assert c.err("TS.RESTORE", "BACK", 1) == ERR_BACK
    assert c.err("TS.RESTORE", "VERSION", v + 5) == (
        f"ERR version {v + 5} is in the future (current version is {v})"
    )
    assert c.err("TS.CHECKOUT", "AT", "SNAPSHOT", "pe-none") == "ERR no such snapshot 'pe-none'"
    assert c.version() == v  # none of these wrote anything


def test_time_points(c: Conn) -> None:
    fresh_db(c, 3)
    t0 = int(time.time() * 1000) - 1
    time.sleep(0.01)
    c("SET", "tp:k", "one")
    time.sleep(0.02)
    t1 = int(time.time() * 1000)
    time.sleep(0.02)
    c("SET", "tp:k", "two")
    assert c("TS.ASOF", "tp:k", "TIME", t0) is None
    assert c("TS.ASOF", "tp:k", "TIME", t1) == b"one"
    assert c("TS.ASOF", "tp:k", "TIME", int(time.time() * 1000)) == b"two"
    assert c("TS.ASOF", "tp:k", "TIME", int(time.time() * 1000) + 60_000) == b"two"
    assert c("TS.ASOF", "tp:k", "TIME", 0) is None
    # A version's own commit time names it (the last version at or before TIME).
    for e in history(c, "tp:k"):
        assert c("TS.ASOF", "tp:k", "TIME", e[b"time"]) == c(
            "TS.ASOF", "tp:k", "VERSION", e[b"version"]
        )


def test_back_points(c: Conn) -> None:
    fresh_db(c, 3)
    for value in ("a", "b", "c"):
        c("SET", "bk:k", value)
    assert [c("TS.ASOF", "bk:k", "BACK", n) for n in range(5)] == [b"c", b"b", b"a", None, None]
    assert c("TS.ASOF", "bk:never", "BACK", 0) is None
    assert c("TS.ASOF", "bk:never", "BACK", 3) is None
    # One MULTI/EXEC touching the key twice is one version, for BACK as for HISTORY.
    c("MULTI")
    c("SET", "bk:k", "d")
    c("APPEND", "bk:k", "e")
    c("EXEC")
    assert c("TS.ASOF", "bk:k", "BACK", 0) == b"de"
    assert c("TS.ASOF", "bk:k", "BACK", 1) == b"c"
    assert c("TS.ASOF", "bk:k", "BACK", 2) == b"b"
    # BACK counts the key's versions, not the database's.
    c("SET", "bk:other", "x")
    assert c("TS.ASOF", "bk:k", "BACK", 1) == b"c"
    c("DEL", "bk:k")
    assert c("TS.ASOF", "bk:k", "BACK", 0) is None
    assert c("TS.ASOF", "bk:k", "BACK", 1) == b"de"


def test_expiry_at_time_points(c: Conn) -> None:
    """A key with a TTL exists at TIME points before its expiry and not at or after
    it, whenever its `expired` deletion happens to be committed."""
    fresh_db(c, 3)
    expire_at = int(time.time() * 1000) + 300
    c("SET", "ex:k", "v", "PXAT", expire_at)
    set_v = c.version()
    assert c("TS.ASOF", "ex:k", "TIME", expire_at - 1) == b"v"
    time.sleep(0.55)  # active expiry (10 Hz) commits the deletion by now
    assert c("TS.ASOF", "ex:k", "TIME", expire_at - 1) == b"v"
    assert c("TS.ASOF", "ex:k", "TIME", expire_at) is None
    assert c("TS.ASOF", "ex:k", "TIME", expire_at + 50) is None
    assert c("TS.ASOF", "ex:k", "VERSION", set_v) == b"v"
    h = history(c, "ex:k")
    assert [e[b"command"] for e in h] == [b"set", b"expired"]
    assert h[1][b"time"] >= expire_at
    assert c("TS.ASOF", "ex:k", "VERSION", h[1][b"version"]) is None
    assert c("TS.ASOF", "ex:k", "BACK", 1) == b"v"
    # The same through a checkout.
    assert c("TS.CHECKOUT", "AT", "VERSION", set_v) == b"OK"
    assert c("GET", "ex:k") == b"v"
    assert c("PEXPIRETIME", "ex:k") == expire_at
    assert c("TS.CHECKOUT", "AT", "VERSION", h[1][b"version"]) == b"OK"
    assert c("GET", "ex:k") is None
    assert c("EXISTS", "ex:k") == 0
    assert c("TS.CHECKOUT", "HEAD") == b"OK"


# --------------------------------------------------------------------------- TS.HISTORY


def test_history_shape_and_options(c: Conn) -> None:
    fresh_db(c, 4)
    versions = []
    for value in ("a", "b", "c", "d"):
        c("SET", "hi:k", value)
        versions.append(c.version())
        time.sleep(0.003)  # distinct commit times, for TIME points
    c("DEL", "hi:k")
    versions.append(c.version())
    raw = c.raw("TS.HISTORY", "hi:k")
    tagged = parse(raw)
    assert tagged[0] == "*" and len(tagged[1]) == 5
    for entry in tagged[1]:
        if c.resp == 3:
            assert entry[0] == "%" and len(entry[1]) == 10
        else:
            assert entry[0] == "*" and len(entry[1]) == 10
        names = [x[1] for x in entry[1][0::2]]
        assert names == [b"version", b"time", b"command", b"author", b"message"]
        assert [x[0] for x in entry[1][1::2]] == (
            [":", ":", "$", "_", "_"] if c.resp == 3 else [":", ":", "$", "null", "null"]
        )
    h = history(c, "hi:k")
    assert [e[b"version"] for e in h] == versions
    assert [e[b"command"] for e in h] == [b"set"] * 4 + [b"del"]
    times = [e[b"time"] for e in h]
    assert times == sorted(times) and abs(times[-1] - time.time() * 1000) < 10_000
    assert all(e[b"author"] is None and e[b"message"] is None for e in h)

    def vs(*args: Any) -> list[int]:
        return [e[b"version"] for e in history(c, "hi:k", *args)]

    assert vs("REV") == versions[::-1]
    assert vs("COUNT", 2) == versions[:2]
    assert vs("REV", "COUNT", 2) == [versions[4], versions[3]]
    assert vs("COUNT", 0) == []
    assert vs("FROM", "VERSION", versions[1]) == versions[1:]
    assert vs("TO", "VERSION", versions[2]) == versions[:3]
    assert vs("FROM", "VERSION", versions[1], "TO", "VERSION", versions[3]) == versions[1:4]
    assert vs("FROM", "VERSION", versions[3], "TO", "VERSION", versions[1]) == []
    assert vs("FROM", "BACK", 1) == versions[3:]
    assert vs("TO", "BACK", 1) == versions[:4]
    # TIME t stands for the last LSN committed at or before t.
    assert vs("FROM", "TIME", h[2][b"time"]) == versions[2:]
    assert vs("TO", "TIME", h[2][b"time"]) == versions[:3]
    assert vs("FROM", "TIME", h[2][b"time"] - 1) == versions[1:]
    assert vs("TO", "TIME", 0) == []

    withvalues = history(c, "hi:k", "WITHVALUES")
    assert [e[b"value"] for e in withvalues] == [b"a", b"b", b"c", b"d", None]
    tagged = parse(c.raw("TS.HISTORY", "hi:k", "WITHVALUES", "COUNT", 1))
    assert len(tagged[1][0][1]) == 12 and tagged[1][0][1][10] == ("$", b"value")
    assert history(c, "hi:never") == []
    assert c.raw("TS.HISTORY", "hi:never") == b"*0\r\n"

    for bad in (
        ("COUNT",),
        ("COUNT", "x"),
        ("FROM",),
        ("FROM", "VERSION"),
        ("AUTHOR",),
        ("BOGUS",),
        ("FROM", "NEVER", 1),
    ):
        assert c.err("TS.HISTORY", "hi:k", *bad) in (ERR_SYNTAX, ERR_NOT_INT), bad
    assert c.err("TS.HISTORY", "hi:k", "COUNT", -1) == ERR_NEGATIVE
    assert c.err("TS.HISTORY", "hi:k", "COUNT", "x") == ERR_NOT_INT
    assert c.err("TS.HISTORY") == "ERR wrong number of arguments for 'ts.history' command"


def test_history_hash_values_and_multi_exec_as_one_version(c: Conn) -> None:
    fresh_db(c, 4)
    c("HSET", "hm:h", "f", "1")
    c("MULTI")
    c("HSET", "hm:h", "g", "2")
    c("HDEL", "hm:h", "f")
    c("SET", "hm:s", "x")
    assert c("EXEC") == [1, 1, b"OK"]
    v = c.version()
    h = history(c, "hm:h", "WITHVALUES")
    assert [e[b"version"] for e in h] == [v - 1, v]
    assert h[1][b"command"] == b"hset,hdel"  # both commands of the block, in order
    assert [as_map(e[b"value"]) for e in h] == [{b"f": b"1"}, {b"g": b"2"}]
    assert history(c, "hm:s")[0][b"version"] == v
    assert c("TS.ASOF", "hm:s", "VERSION", v - 1) is None
    assert as_map(c("TS.ASOF", "hm:h", "VERSION", v - 1)) == {b"f": b"1"}
    # A command touching one key twice (LMOVE within one list) is one version too.
    c("RPUSH", "hm:l", "a", "b", "c")
    c("LMOVE", "hm:l", "hm:l", "LEFT", "RIGHT")
    h = history(c, "hm:l", "WITHVALUES")
    assert [e[b"command"] for e in h] == [b"rpush", b"lmove"]
    assert [e[b"value"] for e in h] == [[b"a", b"b", b"c"], [b"b", b"c", b"a"]]


# --------------------------------------------------------------------------- TS.META


def test_meta_author_and_message(c: Conn, ts_server: ServerProcess) -> None:
    fresh_db(c, 4)
    assert c.raw("TS.META", "AUTHOR", "agent-1", "MESSAGE", "tool call: search") == b"+OK\r\n"
    c("SET", "me:k", "1")
    c("SET", "me:k", "2")
    assert c("TS.META", "AUTHOR", "agent-2") == b"OK"
    c("SET", "me:k", "3")
    other = Conn(ts_server.port, c.resp)  # metadata belongs to the connection that set it
    try:
        other("SELECT", dbn(c, 4))
        other("SET", "me:k", "4")
    finally:
        other.close()
    assert c("TS.META", "RESET") == b"OK"
    c("SET", "me:k", "5")
    h = history(c, "me:k")
    assert [(e[b"author"], e[b"message"]) for e in h] == [
        (b"agent-1", b"tool call: search"),
        (b"agent-1", b"tool call: search"),
        (b"agent-2", None),
        (None, None),
        (None, None),
    ]
    assert [e[b"version"] for e in history(c, "me:k", "AUTHOR", "agent-1")] == [
        h[0][b"version"],
        h[1][b"version"],
    ]
    assert [e[b"version"] for e in history(c, "me:k", "AUTHOR", "agent-2")] == [h[2][b"version"]]
    assert history(c, "me:k", "AUTHOR", "nobody") == []
    assert [e[b"version"] for e in history(c, "me:k", "AUTHOR", "agent-1", "REV", "COUNT", 1)] == [
        h[1][b"version"]
    ]
    # The metadata of a MULTI/EXEC block is the one set when EXEC commits.
    c("TS.META", "AUTHOR", "agent-3", "MESSAGE", "batch")
    c("MULTI")
    c("SET", "me:k", "6")
    c("INCR", "me:n")
    c("EXEC")
    assert history(c, "me:n", "AUTHOR", "agent-3")[0][b"message"] == b"batch"
    # RESET (the connection command) drops the metadata too.
    c("RESET")
    if c.resp == 3:
        c("HELLO", "3")
    c("SELECT", dbn(c, 4))
    c("SET", "me:k", "7")
    assert history(c, "me:k", "REV", "COUNT", 1)[0][b"author"] is None
    for bad in (
        ("AUTHOR",),
        ("AUTHOR", "a", "MESSAGE"),
        ("AUTHOR", "a", "NOTE", "x"),
        ("RESET", "x"),
        ("WHO", "a"),
    ):
        assert c.err("TS.META", *bad) in (
            ERR_SYNTAX,
            "ERR wrong number of arguments for 'ts.meta' command",
        ), bad
    assert c.err("TS.META") == "ERR wrong number of arguments for 'ts.meta' command"


# --------------------------------------------------------------------------- snapshots


def test_seal_snapshots_unseal(c: Conn) -> None:
    fresh_db(c, 5)
    name = f"sn-{c.resp}"
    c("SET", "sn:k", "sealed")
    v = c.version()
    lsn = c("TS.SEAL", name, "TRIGGER", "deploy 42")
    assert lsn == v + 1 == c.version()  # sealing is a version of its own
    assert c.err("TS.SEAL", name) == f"ERR snapshot '{name}' already exists"
    assert c.err("TS.SEAL", name, "TRIGGER") == ERR_SYNTAX
    assert c.err("TS.SEAL", name + "x", "WHY", "x") == ERR_SYNTAX
    assert c.version() == lsn
    plain = c("TS.SEAL", name + "-plain")
    c("SET", "sn:k", "later")
    snaps = {as_map(x)[b"name"]: as_map(x) for x in c("TS.SNAPSHOTS")}
    mine = snaps[name.encode()]
    assert mine[b"version"] == lsn and mine[b"trigger"] == b"deploy 42"
    assert abs(mine[b"time"] - time.time() * 1000) < 10_000
    assert snaps[(name + "-plain").encode()][b"trigger"] == b""
    assert snaps[(name + "-plain").encode()][b"version"] == plain
    assert as_map(mine[b"meta"]) == {} == as_map(snaps[(name + "-plain").encode()][b"meta"])
    # META: field, value pairs kept with the snapshot, after an optional TRIGGER.
    assert c("TS.SEAL", name + "-m", "META", "episode", "12", "agent", "\xff") == c.version()
    assert c("TS.SEAL", name + "-tm", "TRIGGER", "t", "META", "k", "v") == c.version()
    snaps = {as_map(x)[b"name"]: as_map(x) for x in c("TS.SNAPSHOTS")}
    assert as_map(snaps[(name + "-m").encode()][b"meta"]) == {
        b"episode": b"12",
        b"agent": "\xff".encode(),
    }
    assert as_map(snaps[(name + "-tm").encode()][b"meta"]) == {b"k": b"v"}
    assert snaps[(name + "-tm").encode()][b"trigger"] == b"t"
    for bad in (["META"], ["META", "k"], ["META", "k", "v", "w"], ["TRIGGER", "t", "x"]):
        assert c.err("TS.SEAL", name + "-bad", *bad) == ERR_SYNTAX
    assert c("TS.UNSEAL", name + "-m") == 1 and c("TS.UNSEAL", name + "-tm") == 1
    tagged = parse(c.raw("TS.SNAPSHOTS"))
    assert tagged[0] == "*"
    assert all(x[0] == ("%" if c.resp == 3 else "*") for x in tagged[1])
    assert [as_map(decode(x))[b"version"] for x in tagged[1]] == sorted(
        as_map(decode(x))[b"version"] for x in tagged[1]
    )
    assert c("TS.ASOF", "sn:k", "SNAPSHOT", name) == b"sealed"
    assert c("TS.ASOF", "sn:k", "SNAPSHOT", name + "-plain") == b"sealed"
    assert c("TS.UNSEAL", name) == 1
    assert c("TS.UNSEAL", name) == 0
    assert c("TS.UNSEAL", name + "-plain") == 1
    assert c.err("TS.ASOF", "sn:k", "SNAPSHOT", name) == f"ERR no such snapshot '{name}'"
    assert name.encode() not in {as_map(x)[b"name"] for x in c("TS.SNAPSHOTS")}
    # TS.SEAL inside MULTI seals the block's own version.
    c("MULTI")
    c("SET", "sn:k", "in-block")
    c("TS.SEAL", name + "-tx")
    [_, sealed] = c("EXEC")
    assert sealed == c.version()
    assert c("TS.ASOF", "sn:k", "SNAPSHOT", name + "-tx") == b"in-block"
    assert c("TS.UNSEAL", name + "-tx") == 1


# --------------------------------------------------------------------------- TS.CHECKOUT


def test_checkout_reads_as_of_and_refuses_writes(c: Conn, ts_server: ServerProcess) -> None:
    db = fresh_db(c, 6)
    db7 = fresh_db(c, 7)
    c("SELECT", db)
    c("MSET", "co:a", "1", "co:b", "2")
    c("HSET", "co:h", "f", "v")
    c("RPUSH", "co:l", "x", "y")
    c("SADD", "co:t", "m")
    c("ZADD", "co:z", "1", "a")
    c("XADD", "co:x", "1-1", "f", "v")
    c("SELECT", db7)
    c("SET", "co:db7", "seven")
    c("SELECT", db)
    v = c.version()
    expected = {
        "keys": sorted([b"co:a", b"co:b", b"co:h", b"co:l", b"co:t", b"co:z", b"co:x"]),
        "reads": [
            c.raw("GET", "co:a"),
            c.raw("MGET", "co:a", "co:b", "co:none"),
            c.raw("HGETALL", "co:h"),
            c.raw("LRANGE", "co:l", 0, -1),
            c.raw("SMEMBERS", "co:t"),
            c.raw("ZRANGE", "co:z", 0, -1, "WITHSCORES"),
            c.raw("XRANGE", "co:x", "-", "+"),
            c.raw("TYPE", "co:h"),
            c.raw("EXISTS", "co:a", "co:none"),
        ],
    }
    reads = [
        ("GET", "co:a"),
        ("MGET", "co:a", "co:b", "co:none"),
        ("HGETALL", "co:h"),
        ("LRANGE", "co:l", 0, -1),
        ("SMEMBERS", "co:t"),
        ("ZRANGE", "co:z", 0, -1, "WITHSCORES"),
        ("XRANGE", "co:x", "-", "+"),
        ("TYPE", "co:h"),
        ("EXISTS", "co:a", "co:none"),
    ]
    # Change everything afterwards.
    c("SET", "co:a", "changed")
    c("DEL", "co:b", "co:h", "co:l", "co:t", "co:z", "co:x")
    c("SET", "co:new", "1")
    c("SELECT", db7)
    c("SET", "co:db7", "changed")
    c("SELECT", db)

    assert c.raw("TS.CHECKOUT", "AT", "VERSION", v) == b"+OK\r\n"
    assert [c.raw(*r) for r in reads] == expected["reads"]
    assert sorted(c("KEYS", "*")) == expected["keys"]
    assert c("DBSIZE") == len(expected["keys"])
    cursor, found = c("SCAN", 0, "COUNT", 1000)
    assert cursor == b"0" and sorted(found) == expected["keys"]
    assert c("TYPE", "co:new") == b"none"
    # Writes of any kind are refused, and create no version.
    head = c.version()
    for w in (
        ("SET", "co:a", "x"),
        ("DEL", "co:a"),
        ("EXPIRE", "co:a", 10),
        ("HSET", "co:h", "f", "w"),
        ("FLUSHDB",),
        ("TS.SEAL", "co-snap"),
        ("TS.REVERT", "co:a", "VERSION", v),
        ("TS.RESTORE", "VERSION", v),
    ):
        assert c.err(*w) == READONLY, w
    assert c("MULTI") == b"OK"
    assert c.err("SET", "co:a", "x") == READONLY
    assert c.err("EXEC") == "EXECABORT Transaction discarded because of previous errors."
    assert c.version() == head
    # Other connections write on; the view does not move.
    other = Conn(ts_server.port)
    other("SELECT", db)
    other("SET", "co:a", "moved-on")
    other.close()
    assert c("GET", "co:a") == b"1"
    # SELECT under a view shows the other database as of the same point.
    assert c("SELECT", db7) == b"OK"
    assert c("GET", "co:db7") == b"seven"
    assert c.err("SET", "co:db7", "x") == READONLY
    c("SELECT", db)
    # TS.ASOF/TS.HISTORY still work in a view; HISTORY ends at the view's point.
    assert c("TS.ASOF", "co:a", "BACK", 0) == b"1"
    assert history(c, "co:a")[-1][b"version"] <= v
    # HEAD goes back to the live data, in the database selected now.
    assert c("TS.CHECKOUT", "HEAD") == b"OK"
    assert c("GET", "co:a") == b"moved-on"
    assert c("SET", "co:a", "again") == b"OK"
    # RESET leaves the view too.
    c("TS.CHECKOUT", "AT", "VERSION", v)
    c("RESET")
    if c.resp == 3:
        c("HELLO", "3")
    c("SELECT", db)
    assert c("GET", "co:a") == b"again"
    for bad in (("AT",), ("AT", "VERSION"), ("HEAD", "x"), ("AT", "VERSION", 1, "x")):
        assert c.err("TS.CHECKOUT", *bad) in (
            ERR_SYNTAX,
            "ERR wrong number of arguments for 'ts.checkout' command",
        ), bad


def test_checkout_refused_inside_multi(c: Conn) -> None:
    """Regression: a queued TS.CHECKOUT made the writes queued after it go into the
    view (acknowledged, versioned, persisted, but not applied to the live data)."""
    fresh_db(c, 6)
    c("SET", "cm:k", "live")
    v = c.version()
    c("MULTI")
    assert c.err("TS.CHECKOUT", "AT", "VERSION", v) == (
        "ERR Command not allowed inside a transaction"
    )
    c("SET", "cm:k", "lost?")
    assert c.err("EXEC") == "EXECABORT Transaction discarded because of previous errors."
    assert c("GET", "cm:k") == b"live"
    assert c.version() == v


def test_checkout_at_time_and_snapshot(c: Conn) -> None:
    fresh_db(c, 6)
    c("SET", "ct:k", "old")
    time.sleep(0.01)
    t = int(time.time() * 1000)
    time.sleep(0.01)
    c("SET", "ct:k", "new")
    c("TS.CHECKOUT", "AT", "TIME", t)
    assert c("GET", "ct:k") == b"old"
    name = f"ct-{c.resp}"
    c("TS.CHECKOUT", "HEAD")
    c("TS.SEAL", name)
    c("SET", "ct:k", "newer")
    c("TS.CHECKOUT", "AT", "SNAPSHOT", name)
    assert c("GET", "ct:k") == b"new"
    c("TS.CHECKOUT", "AT", "VERSION", 0)
    assert c("DBSIZE") == 0 and c("KEYS", "*") == []
    c("TS.CHECKOUT", "HEAD")
    assert c("GET", "ct:k") == b"newer"
    assert c("TS.UNSEAL", name) == 1


# --------------------------------------------------------------------------- TS.DIFF


def test_diff(c: Conn) -> None:
    fresh_db(c, 8)
    c("MSET", "df:same", "1", "df:changed", "1", "df:removed", "1", "df:ttl", "1")
    c("SADD", "df:set", "a")
    c("SET", "df:back", "1")
    a = c.version()
    c("SET", "df:changed", "2")
    c("DEL", "df:removed")
    c("SET", "df:added", "1")
    c("EXPIRE", "df:ttl", 1000)  # same value, new expiry: changed
    c("SADD", "df:set", "b")
    c("SET", "df:back", "2")
    c("SET", "df:back", "1")  # changed and changed back: the same state
    c("SET", "other:added", "1")
    b = c.version()
    expect = {
        b"df:added": b"added",
        b"df:changed": b"changed",
        b"df:removed": b"removed",
        b"df:set": b"changed",
        b"df:ttl": b"changed",
        b"other:added": b"added",
    }
    assert as_map(c("TS.DIFF", "VERSION", a, "VERSION", b)) == expect
    raw = c.raw("TS.DIFF", "VERSION", a, "VERSION", b, "COUNT", 1)
    if c.resp == 3:
        assert raw == b"%1\r\n$8\r\ndf:added\r\n$5\r\nadded\r\n"
    else:
        assert raw == b"*2\r\n$8\r\ndf:added\r\n$5\r\nadded\r\n"
    # Keys come in sorted order; COUNT stops after that many differences.
    assert list(as_map(c("TS.DIFF", "VERSION", a, "VERSION", b))) == sorted(expect)
    assert list(as_map(c("TS.DIFF", "VERSION", a, "VERSION", b, "COUNT", 3))) == sorted(expect)[:3]
    assert as_map(c("TS.DIFF", "VERSION", a, "VERSION", b, "COUNT", 0)) == {}
    assert as_map(c("TS.DIFF", "VERSION", a, "VERSION", b, "MATCH", "df:*d")) == {
        b"df:added": b"added",
        b"df:changed": b"changed",
        b"df:removed": b"removed",
    }
    assert as_map(c("TS.DIFF", "VERSION", a, "VERSION", b, "MATCH", "df:*", "COUNT", 2)) == {
        b"df:added": b"added",
        b"df:changed": b"changed",
    }
    assert as_map(c("TS.DIFF", "VERSION", b, "VERSION", a, "MATCH", "df:*d")) == {
        b"df:added": b"removed",
        b"df:changed": b"changed",
        b"df:removed": b"added",
    }
    assert as_map(c("TS.DIFF", "VERSION", a, "VERSION", a)) == {}
    assert c.raw("TS.DIFF", "VERSION", a, "VERSION", a) == (b"%0\r\n" if c.resp == 3 else b"*0\r\n")
    name = f"df-{c.resp}"
    c("TS.SEAL", name)
    c("SET", "df:after-seal", "1")
    assert as_map(c("TS.DIFF", "SNAPSHOT", name, "TIME", int(time.time() * 1000) + 1000)) == {
        b"df:after-seal": b"added"
    }
    assert c("TS.UNSEAL", name) == 1
    for bad in (
        ("VERSION", a, "VERSION", b, "MATCH"),
        ("VERSION", a, "VERSION", b, "COUNT"),
        ("VERSION", a, "VERSION", b, "LIMIT", 1),
        ("VERSION", a, "HEAD", "x"),
    ):
        assert c.err("TS.DIFF", *bad) == ERR_SYNTAX, bad
    assert c.err("TS.DIFF", "VERSION", a, "VERSION", b, "COUNT", -1) == ERR_NEGATIVE
    assert c.err("TS.DIFF", "VERSION", a, "VERSION", b, "COUNT", "x") == ERR_NOT_INT
    assert c.err("TS.DIFF", "VERSION", a, "VERSION") == (
        "ERR wrong number of arguments for 'ts.diff' command"
    )


def test_diff_sees_expiry_at_time_points(c: Conn) -> None:
    fresh_db(c, 8)
    expire_at = int(time.time() * 1000) + 200
    c("SET", "de:k", "v", "PXAT", expire_at)
    v = c.version()
    time.sleep(0.35)
    assert as_map(c("TS.DIFF", "VERSION", v, "TIME", expire_at)) == {b"de:k": b"removed"}
    assert as_map(c("TS.DIFF", "TIME", expire_at - 1, "TIME", expire_at)) == {b"de:k": b"removed"}
    assert as_map(c("TS.DIFF", "TIME", expire_at, "VERSION", v)) == {b"de:k": b"added"}


# --------------------------------------------------------------------------- TS.REVERT / TS.RESTORE


def test_revert_writes_a_new_version(c: Conn) -> None:
    fresh_db(c, 9)
    c("SET", "rv:k", "good")
    good = c.version()
    c("SET", "rv:k", "bad")
    before = history(c, "rv:k")
    assert c("TS.REVERT", "rv:k", "VERSION", good) == 1
    assert c("GET", "rv:k") == b"good"
    after = history(c, "rv:k")
    assert after[:-1] == before  # history is never rewritten
    assert after[-1][b"command"] == b"ts.revert" and after[-1][b"version"] == c.version()
    assert c("TS.REVERT", "rv:k", "VERSION", good) == 0  # already there: no version
    assert history(c, "rv:k") == after
    # Undo / redo with BACK: each step is a new version.
    assert c("TS.REVERT", "rv:k", "BACK", 1) == 1
    assert c("GET", "rv:k") == b"bad"
    assert c("TS.REVERT", "rv:k", "BACK", 1) == 1
    assert c("GET", "rv:k") == b"good"
    # Before the key existed: reverting deletes it.
    assert c("TS.REVERT", "rv:k", "VERSION", good - 1) == 1
    assert c("EXISTS", "rv:k") == 0
    assert history(c, "rv:k", "REV", "COUNT", 1)[0][b"command"] == b"ts.revert"
    # Types and TTLs come back whole; a hash replaced by a string, and back.
    c("HSET", "rv:h", "f", "1", "g", "2")
    c("PEXPIRE", "rv:h", 100_000)
    hv = c.version()
    expire_at = c("PEXPIRETIME", "rv:h")
    c("DEL", "rv:h")
    c("SET", "rv:h", "string now")
    assert c("TS.REVERT", "rv:h", "VERSION", hv) == 1
    assert c("TYPE", "rv:h") == b"hash"
    assert as_map(c("HGETALL", "rv:h")) == {b"f": b"1", b"g": b"2"}
    assert c("PEXPIRETIME", "rv:h") == expire_at
    # An old state whose expiry has passed since is restored as "no key".
    c("SET", "rv:e", "short", "PX", 50)
    ev = c.version()
    time.sleep(0.1)
    c("SET", "rv:e", "now")
    assert c("TS.REVERT", "rv:e", "VERSION", ev) == 1
    assert c("EXISTS", "rv:e") == 0
    assert c.err("TS.REVERT", "rv:k") == "ERR wrong number of arguments for 'ts.revert' command"
    assert c.err("TS.REVERT", "rv:k", "VERSION", "x") == ERR_NOT_INT
    assert c.err("TS.REVERT", "rv:k", "AT", 1) == ERR_SYNTAX


def test_restore_many_keys_as_one_version(c: Conn) -> None:
    fresh_db(c, 10)
    c("MSET", "rs:a", "1", "rs:b", "1", "keep:c", "1")
    c("RPUSH", "rs:l", "x")
    v = c.version()
    c("SET", "rs:a", "2")
    c("DEL", "rs:b")
    c("SET", "rs:new", "1")
    c("RPUSH", "rs:l", "y")
    c("SET", "keep:c", "2")
    before = c.version()
    assert c("TS.RESTORE", "VERSION", v, "MATCH", "rs:*") == 4
    assert c.version() == before + 1  # every reverted key in one version
    assert c("MGET", "rs:a", "rs:b", "rs:new", "keep:c") == [b"1", b"1", None, b"2"]
    assert c("LRANGE", "rs:l", 0, -1) == [b"x"]
    for key in ("rs:a", "rs:b", "rs:new", "rs:l"):
        assert history(c, key, "REV", "COUNT", 1)[0][b"version"] == before + 1
    assert c("TS.RESTORE", "VERSION", v, "MATCH", "rs:*") == 0
    assert c.version() == before + 1
    assert c("TS.RESTORE", "VERSION", v) == 1  # only keep:c still differs
    assert c("GET", "keep:c") == b"1"
    # Restoring the state before everything empties the database, as one version.
    assert c("TS.RESTORE", "VERSION", v - 2) == 4
    assert c("DBSIZE") == 0
    assert c.err("TS.RESTORE", "VERSION", v, "MATCH") == ERR_SYNTAX
    assert c.err("TS.RESTORE", "VERSION", v, "COUNT", 1) == ERR_SYNTAX
    assert c.err("TS.RESTORE", "VERSION", v, "MATCH", "x", "y") == ERR_SYNTAX
    assert c.err("TS.RESTORE", "VERSION") == (
        "ERR wrong number of arguments for 'ts.restore' command"
    )


# --------------------------------------------------------------------------- retention


def pruned(key: str, lsn: int) -> str:
    return f"PRUNED version {lsn} of {key} is no longer retained"


def test_pruned_under_versions_2(pruning_server: ServerProcess, resp: int) -> None:
    c = Conn(pruning_server.port, resp)
    key = f"pr:{resp}"
    c("SET", f"{key}:other", "x")
    lsns = []
    for i in range(10):
        c("SET", key, str(i))
        lsns.append(c.version())
    first = lsns[0]
    assert c("SAVE") == b"OK"
    h = history(c, key)
    assert 2 <= len(h) <= 4 and h[-1][b"version"] == lsns[-1]
    # The floor (the newest version dropped) is still readable: the oldest retained
    # version's undo rebuilds it. Anything older is PRUNED, never answered wrongly.
    floor = h[0][b"version"] - 1
    assert c("TS.ASOF", key, "VERSION", floor) == str(lsns.index(floor)).encode()
    assert c("TS.ASOF", key, "BACK", len(h)) == str(lsns.index(floor)).encode()
    assert c.err("TS.ASOF", key, "VERSION", floor - 1) == pruned(key, floor - 1)
    assert c.err("TS.ASOF", key, "VERSION", first) == pruned(key, first)
    assert c.err("TS.ASOF", key, "BACK", len(h) + 1) == pruned(key, floor)
    assert c.err("TS.ASOF", key, "BACK", 9) == pruned(key, floor)
    assert c.err("TS.HISTORY", key, "FROM", "BACK", 9) == pruned(key, floor)
    # TIME 1 is LSN 0, the empty state before the first write: known whatever retention
    # dropped, so it reads as "no key" rather than PRUNED.
    assert c("TS.ASOF", key, "TIME", 1) is None
    assert c.err("TS.CHECKOUT", "AT", "VERSION", first) == pruned(key, first)
    assert c("GET", key) == b"9"  # the failed checkout left the connection live
    assert c.err("TS.DIFF", "VERSION", first, "VERSION", lsns[-1]) == pruned(key, first)
    assert c.err("TS.DIFF", "VERSION", lsns[-1], "VERSION", first, "MATCH", key) == pruned(
        key, first
    )
    # Keys whose history is intact still answer.
    assert as_map(c("TS.DIFF", "VERSION", first, "VERSION", lsns[-1], "MATCH", "nothing*")) == {}
    head = c.version()
    assert c.err("TS.REVERT", key, "VERSION", first) == pruned(key, first)
    assert c.err("TS.RESTORE", "VERSION", first) == pruned(key, first)
    assert c.version() == head and c("GET", key) == b"9"
    c.close()


def test_snapshot_pins_history(pruning_server: ServerProcess, resp: int) -> None:
    c = Conn(pruning_server.port, resp)
    key = f"pin:{resp}"
    name = f"pin-{resp}"
    c("SET", key, "sealed")
    sealed = c("TS.SEAL", name)
    lsns = []
    for i in range(12):
        c("SET", key, str(i))
        lsns.append(c.version())
    # Every version since the seal is kept, and the sealed state reads back.
    assert c("TS.ASOF", key, "SNAPSHOT", name) == b"sealed"
    assert c("TS.ASOF", key, "VERSION", sealed) == b"sealed"
    assert [c("TS.ASOF", key, "VERSION", v) for v in lsns] == [str(i).encode() for i in range(12)]
    assert [e[b"version"] for e in history(c, key)][-12:] == lsns
    assert c("TS.CHECKOUT", "AT", "SNAPSHOT", name) == b"OK"
    assert c("GET", key) == b"sealed"
    c("TS.CHECKOUT", "HEAD")
    assert c("TS.REVERT", key, "SNAPSHOT", name) == 1
    assert c("GET", key) == b"sealed"
    # Unsealed, the pin is gone: the next trims drop what the snapshot kept.
    assert c("TS.UNSEAL", name) == 1
    for i in range(6):
        c("SET", key, f"after-{i}")
    assert c("SAVE") == b"OK"
    assert c.err("TS.ASOF", key, "VERSION", sealed) == pruned(key, sealed)
    assert len(history(c, key)) <= 4
    c.close()


def test_select_into_pruned_history_under_a_view(pruning_server: ServerProcess, resp: int) -> None:
    """SELECT under TS.CHECKOUT AT builds the other database's view: where that
    database's history is gone it answers PRUNED and the connection stays where it
    was (it used to answer an internal error and leave `db` and the view apart)."""
    c = Conn(pruning_server.port, resp)
    db = 2 + resp  # databases of their own (the other tests use 0)
    c("SELECT", db)
    c("FLUSHDB")
    c("SET", "sp:a", "here")
    v = c.version()
    c("SELECT", db + 5)
    key = f"sp:{resp}"
    for i in range(10):
        c("SET", key, str(i))
    c("SELECT", db)
    assert c("TS.CHECKOUT", "AT", "VERSION", v) == b"OK"
    assert c.err("SELECT", db + 5) == pruned(key, v)
    assert f"db={db} " in c("CLIENT", "INFO").decode()
    assert c("GET", "sp:a") == b"here"
    assert c("GET", key) is None
    c("TS.CHECKOUT", "HEAD")
    assert c("SELECT", db + 5) == b"OK" and c("GET", key) == b"9"
    c.close()


# --------------------------------------------------------------------------- persistence


def _observe(c: Conn, keys: list[str], names: list[str], times: list[int]) -> dict[str, Any]:
    """Everything temporal a restart must bring back, as raw bytes."""
    out: dict[str, Any] = {"snapshots": c.raw("TS.SNAPSHOTS")}
    for key in keys:
        out[f"history {key}"] = c.raw("TS.HISTORY", key, "WITHVALUES")
        for t in times:
            out[f"time {key} {t}"] = c.raw("TS.ASOF", key, "TIME", t)
        for name in names:
            out[f"snap {key} {name}"] = c.raw("TS.ASOF", key, "SNAPSHOT", name)
        for n in range(4):
            out[f"back {key} {n}"] = c.raw("TS.ASOF", key, "BACK", n)
    for name in names:
        out[f"diff {name}"] = c.raw("TS.DIFF", "SNAPSHOT", name, "VERSION", 0)
    return out


def wait_checkpoint(c: Conn, lsn: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        info = c("INFO", "persistence").decode()
        m = re.search(r"last_checkpoint_lsn:(\d+)", info)
        assert m is not None, info
        if int(m.group(1)) >= lsn:
            return
        time.sleep(0.05)
    raise AssertionError(f"no checkpoint reached LSN {lsn}")


@pytest.mark.parametrize(
    ("how", "checkpoints"),
    [("sigterm", False), ("kill9", False), ("kill9", True)],
    ids=["sigterm", "kill9", "kill9-after-checkpoint"],
)
def test_restart_keeps_history_snapshots_and_meta(
    tmp_path: Path, how: str, checkpoints: bool
) -> None:
    extra = ["--history", "all"]
    if checkpoints:
        extra += ["--checkpoint-every-records", "5"]
    p = start_temporalstore(extra, workdir=tmp_path)
    try:
        c = Conn(p.port, 3)
        times = [int(time.time() * 1000)]
        c("TS.META", "AUTHOR", "agent", "MESSAGE", "first")
        c("SET", "p:s", "1")
        c("HSET", "p:h", "f", "1")
        c("TS.SEAL", "before", "TRIGGER", "test", "META", "episode", "7", "agent", "planner")
        c("TS.SEAL", "dropped")
        c("TS.META", "AUTHOR", "agent-2")
        c("SET", "p:s", "2")
        c("ZADD", "p:z", "1", "a")
        c("XADD", "p:x", "1-1", "f", "v")
        c("XADD", "p:x", "2-1", "f", "w")
        c("XDEL", "p:x", "1-1")
        c("TS.UNSEAL", "dropped")
        if checkpoints:
            # A checkpoint now, so the restart replays a checkpoint and then segments.
            wait_checkpoint(c, c.version())
        time.sleep(0.005)
        times.append(int(time.time() * 1000))
        c("MULTI")
        c("SET", "p:s", "3")
        c("APPEND", "p:s", "!")
        c("HDEL", "p:h", "f")
        c("EXEC")
        c("TS.META", "RESET")
        c("SET", "p:exp", "v", "PX", 100_000)
        c("TS.REVERT", "p:s", "SNAPSHOT", "before")
        c("SET", "p:last", "x")
        head = c.version()
        assert c("TS.WAITDURABLE", 0) == head
        seen = _observe(c, ["p:s", "p:h", "p:z", "p:x", "p:exp"], ["before"], times)
        assert history(c, "p:s")[0][b"author"] == b"agent"
        c.close()
        if how == "sigterm":
            p.stop()
        else:
            p.proc.send_signal(signal.SIGKILL)
            p.proc.wait(10)
            p.stop()
        p = start_temporalstore(extra, workdir=tmp_path)
        c = Conn(p.port, 3)
        # Every start commits one empty version of its own (the writer epoch's marker).
        assert c.version() == head + 1
        assert _observe(c, ["p:s", "p:h", "p:z", "p:x", "p:exp"], ["before"], times) == seen
        assert c.err("TS.ASOF", "p:s", "SNAPSHOT", "dropped") == "ERR no such snapshot 'dropped'"
        assert c.err("TS.SEAL", "before") == "ERR snapshot 'before' already exists"
        # Versions carry on from where they were.
        v = c.version()
        c("SET", "p:s", "after restart")
        assert c.version() == v + 1
        assert history(c, "p:s", "REV", "COUNT", 1)[0][b"version"] == v + 1
        c.close()
    finally:
        p.stop()


# --------------------------------------------------------------------------- property test

S_KEYS = ["s1", "s2"]
N_KEYS = ["n1"]
H_KEYS = ["h1", "h2"]
L_KEYS = ["l1"]
T_KEYS = ["t1"]
Z_KEYS = ["z1"]
ALL_KEYS = S_KEYS + N_KEYS + H_KEYS + L_KEYS + T_KEYS + Z_KEYS
VALS = st.sampled_from([b"", b"a", b"bc", b"12"])
FIELDS = st.sampled_from([b"f", b"g", b"h"])
MEMBERS = st.sampled_from([b"m", b"n", b"o", b"1"])
SCORES = st.sampled_from([0.0, 1.0, -2.5, 3.25, float("inf")])


def _op(name: str, *parts: Any) -> st.SearchStrategy[tuple[Any, ...]]:
    return st.tuples(
        st.just(name), *[p if isinstance(p, st.SearchStrategy) else st.just(p) for p in parts]
    )


def _keys(keys: list[str]) -> st.SearchStrategy[bytes]:
    return st.sampled_from([k.encode() for k in keys])


SIMPLE_OPS = st.one_of(
    _op("SET", _keys(S_KEYS), VALS),
    _op("APPEND", _keys(S_KEYS), VALS),
    _op("INCRBY", _keys(N_KEYS), st.integers(-5, 5)),
    _op("HSET", _keys(H_KEYS), FIELDS, VALS),
    _op("HDEL", _keys(H_KEYS), FIELDS),
    _op("RPUSH", _keys(L_KEYS), VALS),
    _op("LPUSH", _keys(L_KEYS), VALS),
    _op("LPOP", _keys(L_KEYS)),
    _op("SADD", _keys(T_KEYS), MEMBERS),
    _op("SREM", _keys(T_KEYS), MEMBERS),
    _op("ZADD", _keys(Z_KEYS), SCORES, MEMBERS),
    _op("ZREM", _keys(Z_KEYS), MEMBERS),
    _op("DEL", _keys(ALL_KEYS)),
    _op("EXPIRE", _keys(ALL_KEYS), st.sampled_from([1000, -1])),
    _op("PERSIST", _keys(ALL_KEYS)),
)
OPS = st.one_of(
    SIMPLE_OPS, st.lists(SIMPLE_OPS, min_size=1, max_size=4).map(lambda b: ("MULTI", b))
)

Model = tuple[dict[bytes, Any], frozenset[bytes]]  # values, keys with a TTL


def _apply(values: dict[bytes, Any], ttl: set[bytes], op: tuple[Any, ...]) -> None:
    """Redis' effect of one command on the model."""
    name, key = op[0], op[1]
    cur = values.get(key)
    if name == "SET":
        values[key] = op[2]
        ttl.discard(key)
    elif name == "APPEND":
        values[key] = (cur or b"") + op[2]
    elif name == "INCRBY":
        values[key] = str(int(cur or b"0") + op[2]).encode()
    elif name == "HSET":
        values[key] = {**(cur or {}), op[2]: op[3]}
    elif name == "HDEL" and cur is not None:
        cur = {f: v for f, v in cur.items() if f != op[2]}
        values[key] = cur
    elif name in ("RPUSH", "LPUSH"):
        cur = list(cur or [])
        if name == "RPUSH":
            cur.append(op[2])
        else:
            cur.insert(0, op[2])
        values[key] = cur
    elif name == "LPOP" and cur is not None:
        values[key] = cur = cur[1:]
    elif name == "SADD":
        values[key] = (cur or frozenset()) | {op[2]}
    elif name == "SREM" and cur is not None:
        values[key] = cur = cur - {op[2]}
    elif name == "ZADD":
        values[key] = {**(cur or {}), op[3]: op[2]}
    elif name == "ZREM" and cur is not None:
        values[key] = cur = {m: s for m, s in cur.items() if m != op[2]}
    elif name == "DEL":
        values.pop(key, None)
        ttl.discard(key)
    elif name == "EXPIRE" and cur is not None:
        if op[2] > 0:
            ttl.add(key)
        else:
            values.pop(key)
            ttl.discard(key)
    elif name == "PERSIST":
        ttl.discard(key)
    if key in values and not values[key] and not isinstance(values[key], bytes):
        del values[key]  # an emptied collection is no key
    if key not in values:
        ttl.discard(key)


def _args(op: tuple[Any, ...]) -> tuple[Any, ...]:
    if op[0] == "ZADD":
        return ("ZADD", op[1], repr(op[2]) if op[2] != float("inf") else "inf", op[3])
    return op


def _shape(key: bytes, reply: Any) -> Any:
    """A TS.ASOF or read-command reply in the model's terms, by the key's type."""
    if reply is None:
        return None
    kind = key[:1]
    if kind == b"h":
        return as_map(reply)
    if kind == b"t":
        return frozenset(reply)
    if kind == b"z":
        if reply and isinstance(reply[0], list):  # RESP3 pairs
            return [(m, float(s)) for m, s in reply]
        return [(m, float(s)) for m, s in zip(reply[0::2], reply[1::2], strict=True)]
    return reply


def _model_shape(key: bytes, value: Any) -> Any:
    if value is None:
        return None
    if key[:1] == b"z":
        return sorted(((m, s) for m, s in value.items()), key=lambda x: (x[1], x[0]))
    return value


def key_state(states: dict[int, Model], v: int, k: bytes) -> tuple[Any, bool]:
    values, ttl = states[v]
    return values.get(k), k in ttl


READ_BY_PREFIX = {
    b"s": ("GET",),
    b"n": ("GET",),
    b"h": ("HGETALL",),
    b"l": ("LRANGE", 0, -1),
    b"t": ("SMEMBERS",),
    b"z": ("ZRANGE", 0, -1, "WITHSCORES"),
}
TYPE_BY_PREFIX = {b"s": b"string", b"n": b"string", b"h": b"hash", b"l": b"list", b"t": b"set"}


@pytest.fixture(scope="module")
def history_all_server() -> Iterator[ServerProcess]:
    p = start_temporalstore(["--history", "all"])
    yield p
    p.stop()


WARMUP = {
    b"h": lambda k, i: ("HSET", k, "w", i),
    b"l": lambda k, i: ("RPUSH", k, i),
    b"t": lambda k, i: ("SADD", k, i),
    b"z": lambda k, i: ("ZADD", k, i, "m"),
}


@pytest.mark.parametrize("proto", [2, 3], ids=["resp2", "resp3"])
def test_property_every_version_reads_back(history_all_server: ServerProcess, proto: int) -> None:
    """Random writes (strings, hashes, lists, sets, sorted sets, DEL, EXPIRE, PERSIST,
    MULTI/EXEC blocks) against a model of the full state after every version; then
    every key at every version through TS.ASOF, some versions through TS.CHECKOUT AT
    (every key's read command, TYPE, PEXPIRETIME, KEYS, DBSIZE, EXISTS), and each
    key's TS.HISTORY and BACK points."""
    c = Conn(history_all_server.port, proto)
    keys = [k.encode() for k in ALL_KEYS]
    seen = {"examples": 0, "versions": 0, "asof": 0, "checkouts": 0}

    @settings(
        max_examples=200,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(
        ops=st.lists(OPS, min_size=10, max_size=40),
        # Versions each collection has before the example starts: collections keep a
        # full copy every 64 versions, and the example's writes should meet one.
        warm=st.one_of(st.integers(0, 70), st.integers(50, 64)),
        # Versions to check out, as indices (the LSNs differ from run to run).
        picks=st.lists(st.integers(0, 1 << 16), min_size=1, max_size=3),
    )
    # The full copy taken by a MULTI/EXEC block that writes the key twice.
    @example(
        ops=[("RPUSH", b"l1", b"a"), ("MULTI", [("RPUSH", b"l1", b"b"), ("LPOP", b"l1")])]
        + [("RPUSH", b"l1", b"c")] * 8,
        warm=61,
        picks=[0, 1],
    )
    def run(ops: list[tuple[Any, ...]], warm: int, picks: list[int]) -> None:
        # Keys of their own for each example, so an example does not depend on the
        # histories earlier ones left (and Hypothesis can replay and shrink it).
        seen["examples"] += 1
        prefix = b"e%d:" % seen["examples"]

        def wire(op: tuple[Any, ...]) -> tuple[Any, ...]:
            args = _args(op)
            return (args[0], prefix + args[1], *args[2:])

        c.pipe([WARMUP[k[:1]](prefix + k, i) for k in keys if k[:1] in WARMUP for i in range(warm)])
        c("FLUSHALL")
        base = c.version()
        values: dict[bytes, Any] = {}
        ttl: set[bytes] = set()
        states: dict[int, Model] = {base: ({}, frozenset())}
        named: dict[int, set[bytes]] = {}  # version -> the keys its commands named
        last = base
        for op in ops:
            before = (copy.deepcopy(values), frozenset(ttl))
            if op[0] == "MULTI":
                replies = c.pipe([("MULTI",), *[wire(o) for o in op[1]], ("EXEC",)])
                assert not any(isinstance(r, ReplyError) for r in replies), replies
                for o in op[1]:
                    _apply(values, ttl, o)
            else:
                c(*wire(op))
                _apply(values, ttl, op)
            v = c.version()
            if v != last:
                named[v] = {o[1] for o in op[1]} if op[0] == "MULTI" else {op[1]}
            changed = (values, frozenset(ttl)) != before
            assert v in (last, last + 1), (op, last, v)
            if changed:
                assert v == last + 1, (op, "changed the state but made no version")
            if v != last:
                states[v] = (copy.deepcopy(values), frozenset(ttl))
            else:
                assert states[v] == (values, frozenset(ttl)), (op, "state changed, same version")
            last = v
        assert sorted(states) == list(range(base, last + 1))
        # Every key at every version, through TS.ASOF.
        seen["versions"] += len(states) - 1
        cmds = [("TS.ASOF", prefix + k, "VERSION", v) for v in states for k in keys]
        seen["asof"] += len(cmds)
        for (_, pk, _, v), got in zip(cmds, c.pipe(cmds), strict=True):
            k = pk.removeprefix(prefix)
            assert _shape(k, got) == _model_shape(k, states[v][0].get(k)), (k, v)
        # Some versions through a checkout: every key with its read command, the
        # keyspace (KEYS, DBSIZE, EXISTS, TYPE) and which keys have an expiry.
        ordered = sorted(states)
        phys = [prefix + k for k in keys]
        for v in (ordered[i % len(ordered)] for i in picks):
            want, want_ttl = states[v]
            assert c("TS.CHECKOUT", "AT", "VERSION", v) == b"OK"
            seen["checkouts"] += 1
            cmds = [
                (*READ_BY_PREFIX[k[:1]][:1], pk, *READ_BY_PREFIX[k[:1]][1:])
                for k, pk in zip(keys, phys, strict=True)
            ]
            cmds += [("TYPE", pk) for pk in phys] + [("PEXPIRETIME", pk) for pk in phys]
            cmds += [("KEYS", "*"), ("DBSIZE",), ("EXISTS", *phys)]
            got = c.pipe(cmds)
            n = len(keys)
            for k, reply in zip(keys, got[:n], strict=True):
                if not reply and k[:1] not in (b"s", b"n"):
                    reply = None  # an empty collection reply: no such key
                assert _shape(k, reply) == _model_shape(k, want.get(k)), (k, v)
            for k, t in zip(keys, got[n : 2 * n], strict=True):
                assert t == (TYPE_BY_PREFIX.get(k[:1], b"zset") if k in want else b"none"), k
            for k, pt in zip(keys, got[2 * n : 3 * n], strict=True):
                assert (pt > 0) if k in want_ttl else pt == (-1 if k in want else -2), (k, pt)
            assert sorted(got[-3]) == sorted(prefix + k for k in want)
            assert got[-2] == len(want) and got[-1] == len(want)
            assert c("TS.CHECKOUT", "HEAD") == b"OK"
        # Each key's history since the flush: a version wherever its state changed,
        # only where a command named it; BACK n reads the state n versions back.
        for k in keys:
            hist = c("TS.HISTORY", prefix + k, "FROM", "VERSION", base)
            hv = [v for v in (as_map(e)[b"version"] for e in hist) if v > base]
            assert len(hv) == len(set(hv)), (k, hv)  # one entry per version
            changed = {
                v
                for v in states
                if v > base and key_state(states, v, k) != key_state(states, v - 1, k)
            }
            assert changed <= set(hv) <= {v for v in states if k in named.get(v, ())}, k
            backs = c.pipe([("TS.ASOF", prefix + k, "BACK", n) for n in range(len(hv) + 1)])
            want_back = [states[last][0].get(k)] + [states[v][0].get(k) for v in hv[-2::-1]]
            if hv:
                want_back.append(None)  # before this example's first version: flushed
            assert [_shape(k, b) for b in backs] == [_model_shape(k, w) for w in want_back], k

    try:
        run()
    finally:
        c.close()
    print(seen)
    assert seen["examples"] >= 200 and seen["versions"] >= 1500, seen
