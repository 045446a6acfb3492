"""Client-side caching (CLIENT TRACKING) against redis-server, RESP2 and RESP3.

Each scenario opens the same named connections on both servers and drives them in
lockstep; every reply, and every invalidation push or `__redis__:invalidate` message
a connection receives, is compared byte for byte. `settle` sends PING and reads
everything up to its PONG, so a message that is missing, extra or out of place
(before instead of after a reply) shows. Client ids differ between the servers:
`@name` in a command stands for that connection's id on each side, and replies that
carry an id are compared with it replaced.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import Differ, ServerProcess, until
from tests.resp_client import RawClient, encode_command, parse

PONGS = (b"+PONG\r\n", b"*2\r\n$4\r\npong\r\n$0\r\n\r\n")


class Conns:
    """Named connections, one on each server, driven in lockstep."""

    def __init__(self, diff: Differ) -> None:
        self.diff = diff
        self.ports = (diff.ref.sock.getpeername()[1], diff.ours.sock.getpeername()[1])
        self.conns: dict[str, tuple[RawClient, RawClient]] = {}
        self.ids: dict[str, tuple[int, int]] = {}

    def open(self, name: str, resp: int = 2) -> None:
        pair = (RawClient(self.ports[0]), RawClient(self.ports[1]))
        for c in pair:
            if resp == 3:
                assert c.call("HELLO", "3").startswith(b"%")
        self.conns[name] = pair
        self.ids[name] = (
            int(pair[0].call("CLIENT", "ID")[1:-2]),
            int(pair[1].call("CLIENT", "ID")[1:-2]),
        )

    def close(self) -> None:
        for pair in self.conns.values():
            for c in pair:
                c.close()

    def _args(self, side: int, args: tuple[Any, ...]) -> bytes:
        out = [
            str(self.ids[a[1:]][side])
            if isinstance(a, str) and a[1:] in self.ids and a[0] == "@"
            else a
            for a in args
        ]
        return encode_command(*out)

    def _norm(self, side: int, raw: bytes) -> bytes:
        for name, ids in self.ids.items():
            raw = raw.replace(b":%d\r\n" % ids[side], b":@" + name.encode() + b"\r\n")
        return raw

    def send(self, name: str, *args: Any) -> None:
        ref, ours = self.conns[name]
        ref.send(self._args(0, args))
        ours.send(self._args(1, args))

    def read(self, name: str, frames: int = 1, ids: bool = False) -> list[bytes]:
        got = []
        for side, c in enumerate(self.conns[name]):
            raw = [c.read_reply() for _ in range(frames)]
            got.append([self._norm(side, r) for r in raw] if ids else raw)
        self.diff.record(frames, got[0] == got[1])
        assert got[0] == got[1], (
            f"{name} (RESP{self.diff.resp})\nredis: {got[0]!r}\nours:  {got[1]!r}"
        )
        return got[0]

    def call(self, name: str, *args: Any, frames: int = 1, ids: bool = False) -> bytes:
        self.send(name, *args)
        return b"".join(self.read(name, frames, ids))

    def settle(self, name: str, ids: bool = False) -> list[bytes]:
        """PING, and every frame up to its reply: the messages that were due."""
        self.send(name, "PING")
        got = []
        for side, c in enumerate(self.conns[name]):
            frames = []
            while (f := c.read_reply()) not in PONGS:
                frames.append(self._norm(side, f) if ids else f)
            got.append(frames)
        self.diff.record(1, got[0] == got[1])
        assert got[0] == got[1], (
            f"{name} (RESP{self.diff.resp})\nredis: {got[0]!r}\nours:  {got[1]!r}"
        )
        return got[0]

    def script(self, name: str, text: str) -> None:
        """One command per line (split on spaces), replies compared."""
        for line in text.strip().splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                self.call(name, *line.split())


@pytest.fixture
def conns(diff: Differ) -> Iterator[Conns]:
    c = Conns(diff)
    c.open("w")  # a writer that tracks nothing
    yield c
    c.close()
    diff.check("CONFIG", "SET", "tracking-table-max-keys", "1000000")
    diff.check("FLUSHALL")


def push(*keys: bytes) -> bytes:
    return b">2\r\n$10\r\ninvalidate\r\n*%d\r\n" % len(keys) + b"".join(
        b"$%d\r\n%b\r\n" % (len(k), k) for k in keys
    )


def test_options_and_errors(diff: Differ, conns: Conns) -> None:
    conns.open("t", diff.resp)
    conns.open("x")
    for args in (
        ["CLIENT", "TRACKING"],
        ["CLIENT", "TRACKING", "maybe"],
        ["CLIENT", "TRACKING", "on", "foo"],
        ["CLIENT", "TRACKING", "on", "REDIRECT"],
        ["CLIENT", "TRACKING", "on", "REDIRECT", "abc"],
        ["CLIENT", "TRACKING", "on", "REDIRECT", "0"],
        ["CLIENT", "TRACKING", "on", "REDIRECT", "-5"],
        ["CLIENT", "TRACKING", "on", "REDIRECT", "99999999"],
        ["CLIENT", "TRACKING", "on", "REDIRECT", "@x", "REDIRECT", "@x"],
        ["CLIENT", "TRACKING", "on", "PREFIX", "a"],
        ["CLIENT", "TRACKING", "on", "PREFIX"],
        ["CLIENT", "TRACKING", "on", "BCAST", "OPTIN"],
        ["CLIENT", "TRACKING", "on", "BCAST", "optout"],
        ["CLIENT", "TRACKING", "on", "OPTIN", "OPTOUT"],
        ["CLIENT", "TRACKING", "off", "foo"],
        ["CLIENT", "TRACKING", "off", "BCAST", "PREFIX", "a"],
        ["CLIENT", "CACHING"],
        ["CLIENT", "CACHING", "yes"],
        ["CLIENT", "CACHING", "yes", "no"],
        ["CLIENT", "GETREDIR", "x"],
        ["CLIENT", "GETREDIR"],
        ["CLIENT", "TRACKINGINFO"],
        ["CLIENT", "TRACKING", "on"],
        ["CLIENT", "CACHING", "yes"],
        ["CLIENT", "CACHING", "no"],
        ["CLIENT", "CACHING", "maybe"],
        ["CLIENT", "TRACKING", "on", "BCAST"],
        ["CLIENT", "TRACKING", "on", "OPTIN"],
        ["CLIENT", "TRACKING", "on", "OPTOUT"],
        ["CLIENT", "CACHING", "no"],
        ["CLIENT", "CACHING", "yes"],
        ["CLIENT", "TRACKINGINFO"],
        ["CLIENT", "GETREDIR"],
        ["CLIENT", "TRACKING", "on", "NOLOOP", "REDIRECT", "@x"],
        ["CLIENT", "TRACKINGINFO"],
        ["CLIENT", "GETREDIR"],
        ["CLIENT", "TRACKING", "off"],
        ["CLIENT", "TRACKING", "off"],
        ["CLIENT", "GETREDIR"],
        ["CLIENT", "TRACKING", "on", "OPTOUT"],
        ["CLIENT", "CACHING", "no"],
        ["CLIENT", "TRACKINGINFO"],
        ["CLIENT", "TRACKING", "off"],
        ["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a", "PREFIX", "ab"],
        ["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "ab", "PREFIX", "a"],
        ["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a", "PREFIX", "a"],
        ["CLIENT", "TRACKINGINFO"],
        ["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "y", "PREFIX", "x"],
        ["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "xa"],
        ["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", ""],
        ["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "w", "NOLOOP"],
        ["CLIENT", "TRACKING", "on"],
        ["CLIENT", "TRACKINGINFO"],
        ["CLIENT", "TRACKING", "off"],
        ["CLIENT", "TRACKING", "on", "BCAST"],
        ["CLIENT", "TRACKINGINFO"],
        ["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "q"],
        ["CLIENT", "TRACKING", "off"],
        ["CLIENT", "TRACKINGINFO"],
    ):
        conns.call("t", *args, ids=True)
    # Redis' prefix check returns the index of a clash among the new prefixes as its
    # verdict: a clash found past the first prefix is reported, then OK (all added).
    conns.call(
        "t",
        "CLIENT",
        "TRACKING",
        "on",
        "BCAST",
        "PREFIX",
        "x",
        "PREFIX",
        "y",
        "PREFIX",
        "yz",
        frames=2,
    )
    conns.call("t", "CLIENT", "TRACKINGINFO")
    conns.call("t", "CLIENT", "TRACKING", "off")


def _text(raw: bytes) -> bytes:
    """A bulk or verbatim string's text."""
    kind, value = parse(raw)
    assert isinstance(value, bytes)
    return value[4:] if kind == "=" else value


def _client_fields(conns: Conns, name: str) -> list[tuple[bytes, bytes]]:
    """CLIENT INFO's flags= and redir= of `name` on each side (redir as a name)."""
    out = []
    for side, c in enumerate(conns.conns[name]):
        line = _text(c.call("CLIENT", "INFO"))
        fields = dict(f.split(b"=", 1) for f in line.split())
        redir = int(fields[b"redir"])
        names = [n for n, ids in conns.ids.items() if ids[side] == redir]
        out.append((fields[b"flags"], names[0].encode() if names else fields[b"redir"]))
    return out


def test_client_list_flags(diff: Differ, conns: Conns) -> None:
    conns.open("t", diff.resp)
    conns.open("r")
    for args, want in (
        ([], (b"N", b"-1")),
        (["on"], (b"t", b"0")),
        (["on", "REDIRECT", "@r"], (b"t", b"r")),
        (["off"], (b"N", b"-1")),
        (["on", "BCAST", "PREFIX", "p"], (b"tB", b"0")),
    ):
        if args:
            conns.call("t", "CLIENT", "TRACKING", *args)
        ref, ours = _client_fields(conns, "t")
        assert ref == ours == want, (ref, ours)
    conns.call("t", "CLIENT", "TRACKING", "off")
    # A redirect client gone: R once a message was due.
    conns.call("t", "CLIENT", "TRACKING", "on", "REDIRECT", "@r")
    conns.call("t", "GET", "k")
    for c in conns.conns["r"]:
        c.close()
    until(
        lambda: all(
            b"id=" not in c.call("CLIENT", "LIST", "ID", str(conns.ids["r"][i]))
            for i, c in enumerate(conns.conns["w"])
        )
    )
    conns.call("w", "SET", "k", "1")
    assert conns.settle("t", ids=True) == (
        [b">2\r\n$21\r\ntracking-redir-broken\r\n:@r\r\n"] if diff.resp == 3 else []
    )
    ref, ours = _client_fields(conns, "t")
    assert ref == ours == (b"tR", b"r"), (ref, ours)
    conns.call("t", "CLIENT", "TRACKINGINFO", ids=True)
    del conns.conns["r"]


def test_default_mode(diff: Differ, conns: Conns) -> None:
    """Reads remembered, writes of every kind invalidating, messages after the reply
    of the client's own command (and of its EXEC), FLUSHDB/FLUSHALL null."""
    resp3 = diff.resp == 3
    conns.open("t", diff.resp)
    conns.script(
        "w",
        """
        SET k1 1
        SET k2 2
        HSET h f 1
        RPUSH l a b
        SADD s a
        ZADD z 1 a
        XADD x 1-1 f v
        """,
    )
    conns.call("t", "CLIENT", "TRACKING", "on")
    conns.call("t", "GET", "k1")
    conns.call("t", "MGET", "k1", "k2", "k3")
    conns.call("w", "SET", "k1", "x")
    assert conns.settle("t") == ([push(b"k1")] if resp3 else [])
    conns.call("w", "MSET", "k3", "a", "k2", "b", "k1", "c")  # k1 is no longer tracked
    assert conns.settle("t") == ([push(b"k3"), push(b"k2")] if resp3 else [])
    # Reads of every type, by key specs; a write (even one that reads) remembers nothing.
    conns.script(
        "t",
        """
        HGET h f
        LRANGE l 0 -1
        SISMEMBER s a
        ZSCORE z a
        XRANGE x - +
        EXISTS k1 k2
        GETSET k3 v
        STRLEN k2
        SINTER s nokey
        """,
    )
    conns.script(
        "w",
        """
        HDEL h f
        LPOP l
        SREM s a
        ZINCRBY z 1 a
        XDEL x 1-1
        APPEND k3 z
        EXPIRE k2 100
        DEL k1 nokey
        """,
    )
    conns.settle("t")
    # The client's own write: the message follows its reply.
    conns.call("t", "GET", "k2")
    conns.call("t", "SET", "k2", "own", frames=2 if resp3 else 1)
    conns.call("t", "HSET", "h2", "f", "1")
    conns.call("t", "HGET", "h2", "f")
    conns.call("t", "HDEL", "h2", "f", frames=2 if resp3 else 1)
    # A pipeline: each message right after the reply of the command that caused it.
    conns.send("t", "GET", "k2")
    conns.send("t", "SET", "k2", "p1")
    conns.send("t", "GET", "k2")
    conns.send("t", "APPEND", "k2", "p2")
    conns.send("t", "GET", "k2")
    conns.read("t", frames=7 if resp3 else 5)
    # MULTI/EXEC: after EXEC's reply; a key read again in the block stays tracked.
    conns.call("t", "MSET", "a", "1", "b", "2")
    conns.call("t", "GET", "a")
    conns.script("t", "MULTI\nINCR a\nGET b\nGET a\nSET c 1")
    conns.call("t", "EXEC", frames=2 if resp3 else 1)
    conns.call("w", "SET", "a", "9")
    conns.call("w", "SET", "b", "9")
    conns.settle("t")
    # Other databases share the table (as Redis: keys, not database and key); SWAPDB
    # invalidates nothing in Redis 7.0.
    conns.call("t", "GET", "k2")
    conns.call("w", "SWAPDB", "0", "1")
    conns.call("w", "SWAPDB", "0", "1")
    assert conns.settle("t") == []
    conns.call("w", "SELECT", "3")
    conns.call("w", "SET", "k2", "other db")
    conns.call("w", "SELECT", "0")
    conns.settle("t")
    # RENAME, RESTORE, a script's writes, a store command.
    conns.call("t", "MGET", "k1", "k2", "k3", "b")
    conns.call("w", "RENAME", "k3", "k9")
    conns.call(
        "w",
        "EVAL",
        "redis.call('set', KEYS[1], 'x') return redis.call('incr', KEYS[2])",
        "2",
        "k1",
        "b",
    )
    conns.call("w", "SUNIONSTORE", "k2", "s")
    conns.settle("t")
    # FLUSHDB inside MULTI: the null invalidation after EXEC's reply; FLUSHALL by another.
    conns.call("t", "GET", "a")
    conns.script("t", "MULTI\nFLUSHDB")
    conns.call("t", "EXEC", frames=2 if resp3 else 1)
    conns.call("w", "FLUSHALL")
    conns.settle("t")
    conns.call("t", "CLIENT", "TRACKING", "off")


def _tracker(diff: Differ, conns: Conns) -> tuple[list[str], str]:
    """Open "t" in the test's protocol: in RESP3 it reads its own messages; in RESP2
    they go to "r", subscribed to __redis__:invalidate. (its TRACKING options, reader)"""
    if diff.resp == 3:
        conns.open("t", 3)
        return [], "t"
    conns.open("r")
    conns.call("r", "SUBSCRIBE", "__redis__:invalidate")
    conns.open("t", 2)
    return ["REDIRECT", "@r"], "r"


def test_scripts_and_modes(diff: Differ, conns: Conns) -> None:
    """A script remembers its declared keys once it runs a read-only command (Redis 7.0);
    NOLOOP; OPTIN/OPTOUT with CLIENT CACHING, which holds for one command or block."""
    opts, reader = _tracker(diff, conns)
    conns.call("t", "CLIENT", "TRACKING", "on", *opts)
    conns.call("t", "EVAL", "redis.call('set', 'k3', 'bar')", "2", "k1", "k2")
    conns.call("w", "MSET", "k1", "2", "k2", "2", "k3", "2")
    assert conns.settle(reader) == []
    conns.call("t", "EVAL", "return redis.call('get', 'k3')", "2", "k1", "k2")
    conns.call("t", "EVAL_RO", "return redis.call('ping')", "1", "k4")
    conns.call("w", "MSET", "k1", "3", "k2", "3", "k3", "3", "k4", "3")
    assert len(conns.settle(reader)) == 2
    conns.call("t", "CLIENT", "TRACKING", "on", "NOLOOP", *opts)
    conns.call("t", "MGET", "k1", "k2")
    conns.call("t", "SET", "k1", "mine")
    conns.call("w", "SET", "k2", "theirs")
    assert len(conns.settle(reader)) == 1
    conns.call("t", "CLIENT", "TRACKING", "off")
    conns.call("t", "CLIENT", "TRACKING", "on", "OPTIN", *opts)
    conns.call("t", "GET", "k1")
    conns.call("t", "CLIENT", "CACHING", "yes")
    conns.call("t", "GET", "k2")
    conns.call("t", "GET", "k3")  # CACHING held for one command only
    conns.call("t", "CLIENT", "CACHING", "yes")
    conns.script("t", "MULTI\nGET k4\nGET k5")
    conns.call("t", "EXEC")
    conns.call("w", "MSET", "k1", "4", "k2", "4", "k3", "4", "k4", "4", "k5", "4")
    assert len(conns.settle(reader)) == 3
    conns.call("t", "CLIENT", "TRACKING", "off")
    conns.call("t", "CLIENT", "TRACKING", "on", "OPTOUT", *opts)
    conns.call("t", "CLIENT", "CACHING", "no")
    conns.call("t", "GET", "k1")
    conns.call("t", "GET", "k2")
    conns.call("w", "MSET", "k1", "5", "k2", "5")
    assert len(conns.settle(reader)) == 1
    conns.call("t", "CLIENT", "TRACKING", "off")


def test_redirect(diff: Differ, conns: Conns) -> None:
    """To a RESP2 subscriber (a message on __redis__:invalidate), to a RESP3 client (a
    push, subscribed or not), to a RESP2 client not subscribed (nothing)."""
    conns.open("t", diff.resp)
    conns.open("r2")
    conns.open("r3", 3)
    conns.open("plain")
    conns.call("r2", "SUBSCRIBE", "__redis__:invalidate")
    for target in ("r2", "r3", "plain"):
        conns.call("t", "CLIENT", "TRACKING", "on", "REDIRECT", f"@{target}")
        conns.call("t", "MGET", "a", "b")
        conns.call("w", "SET", "a", "1")
        conns.call("t", "SET", "b", "1")
        conns.call("w", "FLUSHALL")
        conns.settle(target)
        assert conns.settle("t") == []
        conns.call("t", "CLIENT", "TRACKING", "off")


def test_bcast(diff: Differ, conns: Conns) -> None:
    """One message per prefix with the keys modified under it (sorted), once the
    server is done with the requests at hand; NOLOOP leaves out the client's own."""
    opts, reader = _tracker(diff, conns)
    conns.call("t", "CLIENT", "TRACKING", "on", "BCAST", *opts)
    conns.call("w", "MSET", "c", "1", "a", "2", "b", "3")
    conns.settle(reader)
    conns.call("t", "CLIENT", "TRACKING", "off")
    conns.call("t", "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "a:", "PREFIX", "b:", *opts)
    conns.script("w", "MULTI\nINCR b:2\nINCR a:2\nINCR a:1\nINCR c:1\nDEL b:1")
    conns.call("w", "EXEC")
    conns.settle(reader)
    conns.call("t", "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "c:", *opts)
    conns.call("w", "SET", "c:1", "x")
    conns.settle(reader)
    conns.call("t", "CLIENT", "TRACKING", "off")
    conns.call("t", "CLIENT", "TRACKING", "on", "BCAST", "NOLOOP", *opts)
    conns.call("t", "MSET", "mine1", "1", "mine2", "2")
    conns.call("w", "SET", "theirs", "1")
    conns.settle(reader)
    conns.call("t", "CLIENT", "TRACKING", "off")


def _info(c: RawClient) -> dict[str, int]:
    text = _text(c.call("INFO"))
    return {
        k: int(v)
        for k, _, v in (line.partition(":") for line in text.decode().splitlines())
        if k.startswith("tracking_")
    }


def test_info_and_table_limit(diff: Differ, conns: Conns) -> None:
    conns.open("t", diff.resp)
    conns.open("b", diff.resp)
    conns.open("r")
    conns.call("r", "SUBSCRIBE", "__redis__:invalidate")
    conns.call("t", "CLIENT", "TRACKING", "on", "REDIRECT", "@r")
    conns.call("t", "MGET", "k1", "k2", "k3")
    conns.call("b", "CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "p:", "PREFIX", "q:")
    ref, ours = (_info(c) for c in conns.conns["w"])
    assert (
        ref
        == ours
        == {
            "tracking_clients": 2,
            "tracking_total_keys": 3,
            "tracking_total_items": 3,
            "tracking_total_prefixes": 2,
        }
    ), (ref, ours)
    # Past tracking-table-max-keys, keys are invalidated (Redis picks them at random).
    conns.call("w", "CONFIG", "SET", "tracking-table-max-keys", "1")
    conns.call("w", "CONFIG", "GET", "tracking-table-max-keys")
    for c in conns.conns["r"]:
        keys = [parse(c.read_reply())[1][2][1][0][1] for _ in range(2)]
        assert set(keys) < {b"k1", b"k2", b"k3"}
    ref, ours = (_info(c)["tracking_total_keys"] for c in conns.conns["w"])
    assert ref == ours == 1
    conns.call("b", "CLIENT", "TRACKING", "off")
    conns.call("t", "CLIENT", "TRACKING", "off")
    ref, ours = (_info(c) for c in conns.conns["w"])
    assert ref == ours and ref["tracking_clients"] == 0 and ref["tracking_total_prefixes"] == 0


def test_expiry(diff: Differ, conns: Conns) -> None:
    """Active expiry invalidates (both servers' active expiry, within seconds)."""
    conns.open("t", 3)
    conns.call("t", "CLIENT", "TRACKING", "on")
    conns.call("w", "SET", "e", "v", "PX", "300")
    conns.call("t", "GET", "e", frames=1)
    for c in conns.conns["t"]:
        assert c.read_reply() == push(b"e")
    conns.call("t", "CLIENT", "TRACKING", "off")


# -- our own: the temporal verbs, and the path a server without tracking takes --------


def test_temporal_verbs_invalidate(ts_server: ServerProcess) -> None:
    t, w = RawClient(ts_server.port), RawClient(ts_server.port)
    try:
        w.call("FLUSHALL")
        t.call("HELLO", "3")
        w.call("SET", "a", "1")
        assert w.call("TS.SEAL", "trk-snap").startswith(b":")
        w.call("SET", "a", "2")
        t.call("CLIENT", "TRACKING", "on")
        assert t.call("GET", "a") == b"$1\r\n2\r\n"
        w.call("TS.REVERT", "a", "BACK", "1")
        assert t.read_reply() == push(b"a")
        assert t.call("GET", "a") == b"$1\r\n1\r\n"
        w.call("SET", "a", "3")
        assert t.read_reply() == push(b"a")
        assert t.call("GET", "a") == b"$1\r\n3\r\n"
        w.call("TS.RESTORE", "SNAPSHOT", "trk-snap")
        assert t.read_reply() == push(b"a")
        t.call("CLIENT", "TRACKING", "off")
        w.call("TS.UNSEAL", "trk-snap")
    finally:
        t.close()
        w.close()


@pytest.fixture(params=["ours", "redis"])
def either_server(
    request: pytest.FixtureRequest, ts_server: ServerProcess, redis_ref: ServerProcess
) -> ServerProcess:
    return ts_server if request.param == "ours" else redis_ref


def test_redis_py_client_side_cache(
    either_server: ServerProcess, monkeypatch: pytest.MonkeyPatch
) -> None:
    """redis-py's RESP3 client-side cache: a read served from the cache, a write by
    another connection, and the next read sees the new value; FLUSHALL empties it.
    redis-py 8 enables its cache only for servers reporting 7.4 or later; both servers
    here report 7.0.15, so the gate is lowered (the same for redis-server as for us)."""
    import redis
    from redis.cache import CacheConfig
    from redis.connection import CacheProxyConnection

    monkeypatch.setattr(CacheProxyConnection, "MIN_ALLOWED_VERSION", "7.0.0")
    port = either_server.port
    cached = redis.Redis(port=port, protocol=3, cache_config=CacheConfig())
    other = redis.Redis(port=port)
    try:
        other.set("csc:key", "v1")
        assert cached.get("csc:key") == b"v1"
        cache = cached.get_cache()
        assert cache is not None and cache.size == 1
        other.set("csc:unrelated", "x")
        gets = other.info("commandstats")["cmdstat_get"]["calls"]
        assert cached.get("csc:key") == b"v1"
        assert cached.get("csc:key") == b"v1"
        # Served from the cache: the server saw no GET.
        assert other.info("commandstats")["cmdstat_get"]["calls"] == gets
        other.set("csc:key", "v2")
        deadline = time.monotonic() + 5
        while cached.get("csc:key") != b"v2":
            assert time.monotonic() < deadline, "the cache kept the old value"
            time.sleep(0.01)
        other.flushall()
        deadline = time.monotonic() + 5
        while cached.get("csc:key") is not None:
            assert time.monotonic() < deadline, "FLUSHALL did not reach the cache"
            time.sleep(0.01)
    finally:
        cached.close()
        other.close()


def test_idle_server_has_no_tracking_state() -> None:
    """The dispatcher's fast path: `ServerState.tracking` is None until a client tracks,
    and None again once no client tracks and nothing is tracked or pending."""
    from commands import families  # noqa: F401 (the command table)
    from commands.cleanup import session_closed
    from commands.dispatch import DISPATCHER
    from commands.session import ServerState, Session
    from store import Store

    server = ServerState(Store())
    a, b = Session(server), Session(server)
    a.resp = 3
    server.clients.update({a.id: a, b.id: b})
    run = DISPATCHER.execute
    run(b, [b"SET", b"k", b"1"])
    run(a, [b"GET", b"k"])
    assert server.tracking is None
    assert run(a, [b"CLIENT", b"TRACKING", b"on"]) == b"OK"
    assert server.tracking is not None
    run(a, [b"GET", b"k"])
    assert len(server.tracking.table) == 1
    run(a, [b"CLIENT", b"TRACKING", b"off"])
    assert server.tracking is not None  # the table still holds k (as in Redis)
    run(b, [b"SET", b"k", b"2"])  # k invalidated (nobody to tell): the table is empty
    assert server.tracking is None
    run(a, [b"CLIENT", b"TRACKING", b"on", b"BCAST"])
    assert server.tracking is not None
    session_closed(a)
    assert server.tracking is None


def test_keys_at_positions_agree_with_key_specs() -> None:
    """Where tracking takes a command's keys from its first/last/step (no key-spec
    walk), those are the keys the key specs find, for calls of several lengths."""
    from commands import families  # noqa: F401 (the command table)
    from commands.getkeys import get_keys, keys_at_positions
    from commands.registry import COMMANDS

    cmds = [c for top in COMMANDS.values() for c in (top.subcommands or {top.name: top}).values()]
    plain = [c for c in cmds if keys_at_positions(c)]
    assert len(plain) > 100
    for c in plain:
        words = c.name.encode().split(b"|")
        arity = abs(c.arity)
        for n in [arity] if c.arity > 0 else range(arity, arity + 5):
            if n < len(words):
                continue
            argv = [*words, *(b"a%d" % i for i in range(n - len(words)))]
            assert [i for i, _f in get_keys(argv)] == [argv.index(k) for k in c.keys(argv)], argv


def test_replica_invalidates_replicated_writes() -> None:
    """A client tracking on a replica hears of the keys its primary's writes change."""
    import shutil
    import tempfile
    from pathlib import Path

    from tests.conftest import start_temporalstore

    workdir = Path(tempfile.mkdtemp(prefix="ts-trk-repl-"))
    primary = start_temporalstore([], workdir=workdir)
    replica = start_temporalstore(["--replicaof", f"127.0.0.1 {primary.port}"], workdir=workdir)
    p, t = RawClient(primary.port), RawClient(replica.port)
    try:
        p.call("SET", "rk", "1")
        t.call("HELLO", "3")
        until(lambda: t.call("GET", "rk") == b"$1\r\n1\r\n")
        t.call("CLIENT", "TRACKING", "on")
        assert t.call("MGET", "rk", "other") == b"*2\r\n$1\r\n1\r\n_\r\n"
        p.call("SET", "rk", "2")
        assert t.read_reply() == push(b"rk")
        assert t.call("GET", "rk") == b"$1\r\n2\r\n"
        p.call("DEL", "rk")
        assert t.read_reply() == push(b"rk")
    finally:
        p.close()
        t.close()
        replica.stop()
        primary.stop()
        shutil.rmtree(workdir, ignore_errors=True)
