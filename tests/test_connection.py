"""Connection commands and CLIENT against redis-server, RESP2 and RESP3.

Differential where the reply is deterministic; CLIENT LIST/INFO and HELLO carry ids,
addresses and ages, so they are compared field by field (names, order, the values both
servers must agree on)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from tests.conftest import Differ, ServerProcess, start_redis, start_temporalstore
from tests.resp_client import RawClient, parse


def hello_normalized(raw: bytes) -> bytes:
    """HELLO's reply with the client id masked."""
    return re.sub(rb"(\$2\r\nid\r\n):\d+", rb"\1:ID", raw)


def text_of(raw: bytes) -> str:
    kind, value = parse(raw)
    assert kind in ("$", "="), raw
    body: bytes = value[4:] if kind == "=" else value
    if kind == "=":
        assert value[:4] == b"txt:", raw
    return body.decode()


def fields(line: str) -> list[tuple[str, str]]:
    return [tuple(f.split("=", 1)) for f in line.split(" ")]  # type: ignore[misc]


# -- PING, ECHO, SELECT, QUIT, RESET ----------------------------------------------------------


def test_ping_echo_select(diff: Differ) -> None:
    diff.run("""
        PING
        PING hello
        PING ""
        PING a b
        ECHO x
        ECHO ""
        ECHO
        ECHO a b
        SELECT 1
        SET k v
        SELECT 0
        GET k
        SELECT 1
        GET k
        SELECT 15
        SELECT 16
        SELECT -1
        SELECT abc
        SELECT 1.5
        SELECT 99999999999
        SELECT 2147483648
        SELECT -2147483649
        SELECT
        SELECT 0 1
        SELECT 0
    """)


def test_ping_in_subscribe_context(diff: Differ) -> None:
    diff.run("""
        SUBSCRIBE ch
        PING
        PING hi
        ECHO x
        UNSUBSCRIBE ch
        PING
    """)


def test_quit(redis_ref: ServerProcess, ts_server: ServerProcess) -> None:
    for port in (redis_ref.port, ts_server.port):
        c = RawClient(port)
        assert c.call("QUIT") == b"+OK\r\n"
        assert c.read_closed()
        c.close()
    ref, ours = RawClient(redis_ref.port), RawClient(ts_server.port)
    try:
        for c in (ref, ours):
            c.call("MULTI")
        assert ref.call("QUIT", "x") == ours.call("QUIT", "x") == b"+OK\r\n"  # not queued
        assert ref.read_closed() and ours.read_closed()
    finally:
        ref.close()
        ours.close()


def test_reset(diff: Differ) -> None:
    diff.run("""
        SELECT 2
        CLIENT SETNAME conn
        WATCH k
        MULTI
        SET k v
        RESET
        CLIENT GETNAME
        SET k v
        GET k
        SELECT 0
        GET k
        EXEC
        SUBSCRIBE a b
        PSUBSCRIBE p*
        RESET
        PING
        RESET x
    """)


def test_reset_returns_to_resp2(redis_ref: ServerProcess, ts_server: ServerProcess) -> None:
    ref, ours = RawClient(redis_ref.port), RawClient(ts_server.port)
    try:
        for c in (ref, ours):
            c.call("HELLO", "3")
        for cmd in (("HGETALL", "nokey"), ("RESET",), ("HGETALL", "nokey"), ("CLIENT", "INFO")):
            r, o = ref.call(*cmd), ours.call(*cmd)
            if cmd[0] == "CLIENT":
                assert fields(text_of(r).strip())[-1] == fields(text_of(o).strip())[-1]
            else:
                assert r == o, cmd
    finally:
        ref.close()
        ours.close()


# -- HELLO and AUTH ------------------------------------------------------------------------------


def test_hello(redis_ref: ServerProcess, ts_server: ServerProcess) -> None:
    ref, ours = RawClient(redis_ref.port), RawClient(ts_server.port)
    try:
        script = [
            ("HELLO",),
            ("HELLO", "2"),
            ("HELLO", "3"),
            ("HELLO",),
            ("HELLO", "1"),
            ("HELLO", "4"),
            ("HELLO", "0"),
            ("HELLO", "-1"),
            ("HELLO", "abc"),
            ("HELLO", "3.0"),
            ("HELLO", "99999999999999999999"),
            ("HELLO", "2", "FOO"),
            ("HELLO", "2", "AUTH", "default"),
            ("HELLO", "2", "AUTH", "default", "anything"),
            ("HELLO", "2", "AUTH", "bob", "pw"),
            ("HELLO", "2", "SETNAME"),
            ("HELLO", "2", "SETNAME", "bad name"),
            ("HELLO", "3", "SETNAME", "good", "AUTH", "default", "x"),
            ("CLIENT", "GETNAME"),
            ("HELLO", "2", "setname", "other"),
            ("CLIENT", "GETNAME"),
            ("HELLO", "2", "SETNAME", ""),
            ("CLIENT", "GETNAME"),
        ]
        for cmd in script:
            r, o = ref.call(*cmd), ours.call(*cmd)
            assert hello_normalized(o) == hello_normalized(r), (cmd, r, o)
        assert ours.call("HELLO") == ours.call("HELLO")
        cid = ours.call("CLIENT", "ID")
        assert b"\r\n:" + cid[1:] in ours.call("HELLO")
    finally:
        ref.close()
        ours.close()


def test_auth_without_password(diff: Differ) -> None:
    diff.run("""
        AUTH pw
        AUTH default pw
        AUTH bob pw
        AUTH a b c
        AUTH
        PING
    """)


@pytest.fixture(scope="module")
def password_pair() -> Iterator[tuple[ServerProcess, ServerProcess]]:
    ref = start_redis(["--requirepass", "s3cret"])
    ours = start_temporalstore(["--requirepass", "s3cret"])
    yield ref, ours
    ref.stop()
    ours.stop()


@pytest.mark.parametrize("resp", [2, 3])
def test_auth_with_password(password_pair: tuple[ServerProcess, ServerProcess], resp: int) -> None:
    ref, ours = RawClient(password_pair[0].port), RawClient(password_pair[1].port)
    script = [
        ("PING",),
        ("GET", "k"),
        ("CLIENT", "ID"),
        ("HELLO", str(resp)),
        ("HELLO", str(resp), "SETNAME", "x"),
        ("HELLO", str(resp), "AUTH", "default", "wrong"),
        ("AUTH", "wrong"),
        ("AUTH", "bob", "s3cret"),
        ("PING",),
        ("AUTH", "s3cret"),
        ("PING",),
        ("AUTH", "wrong"),
        ("PING",),
        ("RESET",),
        ("PING",),
        ("HELLO", str(resp), "AUTH", "default", "s3cret", "SETNAME", "me"),
        ("CLIENT", "GETNAME"),
        ("AUTH", "default", "s3cret"),
        ("PING",),
        # Not CONFIG GET requirepass: Redis answers with the password, we deliberately do
        # not (README, Security); asserted on its own below.
        ("QUIT",),
    ]
    try:
        for cmd in script:
            r, o = ref.call(*cmd), ours.call(*cmd)
            assert hello_normalized(o) == hello_normalized(r), (cmd, r, o)
        shown = RawClient(password_pair[1].port)
        assert shown.call("AUTH", "s3cret") == b"+OK\r\n"
        assert shown.call("CONFIG", "GET", "requirepass") == (
            b"*2\r\n$11\r\nrequirepass\r\n$10\r\n<redacted>\r\n"
        )
        shown.close()
    finally:
        ref.close()
        ours.close()


# -- CLIENT ------------------------------------------------------------------------------------


def test_client_names_and_errors(diff: Differ) -> None:
    diff.run("""
        CLIENT GETNAME
        CLIENT SETNAME myname
        CLIENT GETNAME
        CLIENT SETNAME "two words"
        CLIENT SETNAME "new\\nline"
        CLIENT SETNAME "tab\\there"
        CLIENT GETNAME
        CLIENT SETNAME ""
        CLIENT GETNAME
        CLIENT SETNAME a b
        CLIENT GETNAME x
        CLIENT
        CLIENT FOO
        CLIENT ID x
        CLIENT INFO x
        CLIENT HELP
        CLIENT help
        CLIENT HELP x
        CLIENT NO-EVICT on
        CLIENT NO-EVICT OFF
        CLIENT NO-EVICT maybe
        CLIENT NO-EVICT
        CLIENT REPLY ON
        CLIENT REPLY on
        CLIENT REPLY maybe
        CLIENT REPLY
        CLIENT GETREDIR
        CLIENT TRACKINGINFO
        CLIENT LIST TYPE foo
        CLIENT LIST TYPE
        CLIENT LIST ID
        CLIENT LIST ID abc
        CLIENT LIST ID 1 abc
        CLIENT LIST ID 999999
        CLIENT LIST TYPE master
        CLIENT LIST TYPE replica
        CLIENT LIST TYPE slave
        CLIENT LIST TYPE pubsub
        CLIENT LIST foo
        CLIENT LIST TYPE normal extra
    """)


def test_client_kill_errors(diff: Differ) -> None:
    diff.run("""
        CLIENT KILL
        CLIENT KILL 1.2.3.4:5
        CLIENT KILL ID
        CLIENT KILL ID abc
        CLIENT KILL ID 0
        CLIENT KILL ID -1
        CLIENT KILL ID 999999
        CLIENT KILL ID 999999 TYPE foo
        CLIENT KILL TYPE foo
        CLIENT KILL TYPE master
        CLIENT KILL TYPE replica
        CLIENT KILL SKIPME maybe
        CLIENT KILL USER bob
        CLIENT KILL FOO bar
        CLIENT KILL ID 1 TYPE
        CLIENT KILL ADDR 1.2.3.4:5
        CLIENT KILL LADDR 1.2.3.4:5
        CLIENT KILL ADDR 1.2.3.4:5 SKIPME no
    """)


def test_client_no_touch_is_redis_7_2(diff: Differ) -> None:
    """CLIENT NO-TOUCH arrived in Redis 7.2: 7.0 does not know it, nor do we."""
    diff.run("""
        CLIENT NO-TOUCH on
        CLIENT NO-TOUCH off
        CLIENT NO-TOUCH
        COMMAND INFO client|no-touch
    """)


def test_client_setinfo(ts_server: ServerProcess) -> None:
    """A Redis 7.2 subcommand (7.0 does not have it): checked against 7.2's code."""
    c = RawClient(ts_server.port)
    try:
        assert c.call("CLIENT", "SETINFO", "LIB-NAME", "redis-py") == b"+OK\r\n"
        assert c.call("CLIENT", "SETINFO", "lib-ver", "5.0.1") == b"+OK\r\n"
        assert c.call("CLIENT", "SETINFO", "lib-ver", "") == b"+OK\r\n"
        assert c.call("CLIENT", "SETINFO", "foo", "x") == b"-ERR Unrecognized option 'foo'\r\n"
        assert c.call("CLIENT", "SETINFO", "lib-name", "a b") == (
            b"-ERR lib-name cannot contain spaces, newlines or special characters.\r\n"
        )
        assert c.call("CLIENT", "SETINFO", "lib-name") == (
            b"-ERR wrong number of arguments for 'client|setinfo' command\r\n"
        )
        assert "flags=N " in text_of(c.call("CLIENT", "INFO"))
        # CLIENT REPLY OFF answers nothing; ON answers again (tests/test_pause.py).
        c.send(b"*3\r\n$6\r\nCLIENT\r\n$5\r\nREPLY\r\n$3\r\nOFF\r\n")
        assert c.call("CLIENT", "REPLY", "ON") == b"+OK\r\n"
    finally:
        c.close()


def _client_info(c: RawClient) -> dict[str, str]:
    lines = text_of(c.call("CLIENT", "INFO")).split("\n")
    assert lines[1:] == [""]
    return dict(fields(lines[0]))


@pytest.mark.parametrize("resp", [2, 3])
def test_client_info_and_list_layout(
    redis_ref: ServerProcess, ts_server: ServerProcess, resp: int
) -> None:
    """Same fields in the same order as Redis; the values both must agree on agree."""
    pairs = [(RawClient(p), RawClient(p)) for p in (redis_ref.port, ts_server.port)]
    try:
        infos = []
        for me, other in pairs:
            if resp == 3:
                assert me.call("HELLO", "3").startswith(b"%")
            me.call("SELECT", "3")
            me.call("CLIENT", "SETNAME", "me")
            me.call("CLIENT", "NO-EVICT", "on")
            other.call("SUBSCRIBE", "a", "b")
            other.call("PSUBSCRIBE", "p*")
            info = _client_info(me)
            assert info["id"] == me.call("CLIENT", "ID")[1:-2].decode()
            listing = text_of(me.call("CLIENT", "LIST")).split("\n")
            assert listing[-1] == ""
            rows = [dict(fields(line)) for line in listing[:-1]]
            mine = next(r for r in rows if r["id"] == info["id"])
            theirs = next(r for r in rows if r["name"] == "")
            by_type = text_of(me.call("CLIENT", "LIST", "TYPE", "pubsub")).split("\n")
            by_id = text_of(me.call("CLIENT", "LIST", "ID", info["id"], "999999", info["id"]))
            infos.append((info, mine, theirs, by_type, by_id))
        (r_info, r_mine, r_other, r_type, r_id), (o_info, o_mine, o_other, o_type, o_id) = infos
        assert list(o_info) == list(r_info)
        assert list(o_mine) == list(r_mine) and list(o_other) == list(r_other)
        same = ["name", "flags", "db", "sub", "psub", "ssub", "multi", "events", "user", "redir"]
        same += ["resp", "cmd", "argv-mem", "qbuf", "multi-mem", "obl", "oll", "omem"]
        for k in same:
            assert o_info[k] == r_info[k], k
        assert (o_info["name"], o_info["flags"], o_info["db"]) == ("me", "e", "3")
        assert o_info["cmd"] == "client|info" and o_mine["cmd"] == "client|list"
        for k in ["name", "flags", "db", "sub", "psub", "multi", "user", "resp"]:
            assert o_other[k] == r_other[k], k
        assert (o_other["flags"], o_other["sub"], o_other["psub"]) == ("P", "2", "1")
        ours_me = pairs[1][0]
        assert o_info["addr"] == o_mine["addr"] and o_info["laddr"].endswith(f":{ts_server.port}")
        assert len(o_type) == len(r_type) == 2 and "flags=P" in o_type[0]
        assert o_id.count("\n") == r_id.count("\n") == 2
        assert ours_me.call("CLIENT", "KILL", "ID", o_other["id"]) == b":1\r\n"
        assert pairs[1][1].read_closed()
        assert f"id={o_other['id']} " not in text_of(ours_me.call("CLIENT", "LIST"))
    finally:
        for me, other in pairs:
            me.close()
            other.close()


def test_client_list_multi_flags(redis_ref: ServerProcess, ts_server: ServerProcess) -> None:
    results = []
    for port in (redis_ref.port, ts_server.port):
        a, b = RawClient(port), RawClient(port)
        try:
            b.call("MULTI")
            b.call("SET", "k", "v")
            b.call("GET", "k")
            bid = b.call("CLIENT", "ID")  # queued
            assert bid == b"+QUEUED\r\n"
            listing = text_of(a.call("CLIENT", "LIST")).split("\n")
            row = next(dict(fields(x)) for x in listing if "flags=x" in x)
            results.append((row["flags"], row["multi"]))
            b.call("DISCARD")
        finally:
            a.close()
            b.close()
    assert results[0] == results[1] == ("x", "3")


def test_client_kill(redis_ref: ServerProcess, ts_server: ServerProcess) -> None:
    for port in (redis_ref.port, ts_server.port):
        me, v1, v2, v3 = (RawClient(port) for _ in range(4))
        try:
            ids = [c.call("CLIENT", "ID")[1:-2].decode() for c in (me, v1, v2, v3)]
            infos = [dict(fields(text_of(c.call("CLIENT", "INFO")).strip())) for c in (v1, v2)]
            assert me.call("CLIENT", "KILL", infos[0]["addr"]) == b"+OK\r\n"
            assert v1.read_closed()
            assert me.call("CLIENT", "KILL", infos[0]["addr"]) == b"-ERR No such client\r\n"
            assert me.call("CLIENT", "KILL", "ADDR", infos[1]["addr"], "ID", ids[2]) == b":1\r\n"
            assert v2.read_closed()
            assert me.call("CLIENT", "KILL", "ID", ids[3], "USER", "default") == b":1\r\n"
            assert v3.read_closed()
            # SKIPME yes (the default) spares the caller; SKIPME no does not.
            assert me.call("CLIENT", "KILL", "ID", ids[0]) == b":0\r\n"
            assert me.call("CLIENT", "KILL", "ID", ids[0], "SKIPME", "no") == b":1\r\n"
            assert me.read_closed()
        finally:
            for c in (me, v1, v2, v3):
                c.close()
        me = RawClient(port)
        try:
            info = dict(fields(text_of(me.call("CLIENT", "INFO")).strip()))
            assert me.call("CLIENT", "KILL", info["addr"]) == b"+OK\r\n"  # old form: itself
            assert me.read_closed()
        finally:
            me.close()
