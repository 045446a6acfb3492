"""Random sampling with huge negative counts (issue 11): SRANDMEMBER, ZRANDMEMBER and
HRANDFIELD encode each distinct element once and join the picks in C. The replies
have Redis' shape (length, element kinds, RESP2 flat pairs, RESP3 nested pairs and
doubles) and every element is one of the key's, with its own score or value."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from tests.conftest import ServerProcess, start_redis, start_temporalstore
from tests.resp_client import RawClient, parse

MEMBERS = [f"m{i}" for i in range(10)]
SCORES = {m: i / 2 for i, m in enumerate(MEMBERS)}


@pytest.fixture(scope="module")
def servers() -> Any:
    ref, ours = start_redis(), start_temporalstore()
    try:
        yield ref, ours
    finally:
        ref.stop()
        ours.stop()


def _client(server: ServerProcess, resp: int) -> RawClient:
    c = RawClient(server.port, timeout=60)
    if resp == 3:
        c.call("HELLO", "3")
    c.call("DEL", "s", "z", "h")
    c.call("SADD", "s", *MEMBERS)
    c.call("ZADD", "z", *[x for m in MEMBERS for x in (SCORES[m], m)])
    c.call("HSET", "h", *[x for m in MEMBERS for x in (m, f"v{m}")])
    return c


def _shape(reply: Any) -> tuple[str, int, list[Any]]:
    kind, items = reply
    return kind, len(items), sorted({repr(_kinds(x)) for x in items})


def _kinds(x: Any) -> Any:
    return (x[0], [_kinds(y) for y in x[1]]) if isinstance(x[1], list) else x[0]


def _check_members(cmd: tuple[Any, ...], resp: int, reply: Any) -> Counter[bytes]:
    """Every element is a member (with its own score or value); the members picked."""
    _kind, items = reply
    picked: Counter[bytes] = Counter()
    pairs = len(cmd) == 4
    if pairs and resp == 2:
        items = [("*", [items[i], items[i + 1]]) for i in range(0, len(items), 2)]
    for item in items:
        if not pairs:
            picked[item[1]] += 1
            continue
        (_, (_m_kind, member), (v_kind, value)) = (item[0], *item[1])
        m = member.decode()
        if cmd[0] == "ZRANDMEMBER":
            assert float(value) == SCORES[m]
            assert v_kind == ("$" if resp == 2 else ",")
        else:
            assert value == f"v{m}".encode()
        picked[member] += 1
    assert set(picked) <= {m.encode() for m in MEMBERS}
    return picked


CASES = [
    ("SRANDMEMBER", "s", -25),
    ("ZRANDMEMBER", "z", -25),
    ("ZRANDMEMBER", "z", -25, "WITHSCORES"),
    ("HRANDFIELD", "h", -25),
    ("HRANDFIELD", "h", -25, "WITHVALUES"),
]


@pytest.mark.parametrize("resp", [2, 3])
@pytest.mark.parametrize("cmd", CASES, ids=lambda c: " ".join(map(str, c)))
def test_many_picks_have_redis_shape(servers: Any, resp: int, cmd: tuple[Any, ...]) -> None:
    ref, ours = servers
    r, o = _client(ref, resp), _client(ours, resp)
    ref_reply, our_reply = parse(r.call(*cmd)), parse(o.call(*cmd))
    assert _shape(our_reply) == _shape(ref_reply)
    _check_members(cmd, resp, our_reply)
    r.close()
    o.close()


@pytest.mark.parametrize("resp", [2, 3])
def test_a_huge_count_in_slices(servers: Any, resp: int) -> None:
    """Past one slice the reply is built in slices (other clients get in between);
    it is still one well-formed array of uniformly picked members."""
    _ref, ours = servers
    c = _client(ours, resp)
    other = RawClient(ours.port)
    n = 600_000
    for cmd in (("SRANDMEMBER", "s", -n), ("ZRANDMEMBER", "z", -n, "WITHSCORES")):
        reply = parse(c.call(*cmd))
        expected = n * 2 if resp == 2 and len(cmd) == 4 else n
        assert reply[0] == "*" and len(reply[1]) == expected
        picked = _check_members(cmd, resp, reply)
        # Uniform: each of 10 members about n/10 times (far inside 5 sigma).
        assert all(abs(k - n / 10) < 5 * (n * 0.09) ** 0.5 for k in picked.values()), picked
        assert other.call("PING") == b"+PONG\r\n"
    # Pipelined after a sliced reply: answered in order.
    c.send(b"SRANDMEMBER s -300000\r\nPING\r\n")
    assert c.read_reply().startswith(b"*300000\r\n")
    assert c.read_reply() == (b"+PONG\r\n")
    c.close()
    other.close()


def test_count_range_errors_match_redis(servers: Any) -> None:
    ref, ours = servers
    r, o = _client(ref, 2), _client(ours, 2)
    for cmd in (
        ("SRANDMEMBER", "s", "-9223372036854775808"),
        ("ZRANDMEMBER", "z", "-9223372036854775808"),
        ("ZRANDMEMBER", "z", "-4611686018427387905", "WITHSCORES"),
        ("HRANDFIELD", "h", "-9223372036854775808"),
        ("HRANDFIELD", "h", "-4611686018427387905", "WITHVALUES"),
    ):
        assert o.call(*cmd) == r.call(*cmd), cmd
    r.close()
    o.close()
