"""Differential tests of the list family against redis-server, RESP2 and RESP3,
including the blocking commands (two raw clients per server)."""

from __future__ import annotations

import random
import time
from collections import deque
from collections.abc import Callable

import commands.families  # noqa: F401  (fills the command table)
from commands.dispatch import DISPATCHER
from tests.conftest import Differ, ServerProcess
from tests.helpers import make_session
from tests.resp_client import RawClient, encode_command


def test_push_pop(diff: Differ) -> None:
    diff.run("""
        LPUSH l a b c
        RPUSH l d e
        LRANGE l 0 -1
        LLEN l
        LPUSHX l x y
        RPUSHX l z
        LPUSHX missing a
        RPUSHX missing a
        EXISTS missing
        LRANGE l 0 -1
        LPOP l
        RPOP l
        LPOP l 2
        RPOP l 2
        LPOP l 0
        RPOP l 0
        LPOP l -1
        RPOP l abc
        LPOP l 1 2
        RPOP l 1 2
        LPOP l 9223372036854775807
        EXISTS l
        LPOP l
        RPOP l
        LPOP l 1
        RPOP l 0
        LPOP l -1
        RPUSH n 1 2 3 4 5
        RPOP n 10
        LLEN n
        RPUSH n 1 2 3
        LPOP n 10
        LPUSH
        LPUSH k
        RPUSH k
        LPUSHX k
        RPUSHX k
        LPOP
        RPOP
        LLEN
        LLEN a b
    """)


def test_wrong_type(diff: Differ) -> None:
    diff.run("""
        SET s v
        HSET h f v
        LPUSH s a
        RPUSH s a
        LPUSHX s a
        RPUSHX s a
        LPOP s
        RPOP s 2
        LPOP s 0
        LPOP s -1
        LLEN s
        LRANGE s 0 -1
        LRANGE s a b
        LINDEX s 0
        LINDEX s abc
        LSET s 0 x
        LSET s abc x
        LREM s 0 x
        LTRIM s 0 1
        LINSERT s BEFORE a b
        LINSERT s MIDDLE a b
        LPOS s a
        LPOS s a RANK 0
        LMOVE s d LEFT LEFT
        LMOVE h d LEFT LEFT
        RPOPLPUSH s d
        RPUSH src a
        LMOVE src s LEFT RIGHT
        RPOPLPUSH src h
        LRANGE src 0 -1
        LMPOP 1 s LEFT
        LMPOP 2 nothere s LEFT
        BLPOP s 0
        BRPOP nothere s 0
        BLMOVE s d LEFT LEFT 0
        BLMOVE src s LEFT LEFT 0
        BRPOPLPUSH s d 0
        BLMPOP 0 1 s LEFT
        GET s
    """)


def test_lrange_lindex(diff: Differ) -> None:
    diff.run("""
        RPUSH l a b c d e f g
        LRANGE l 0 -1
        LRANGE l 0 0
        LRANGE l 2 4
        LRANGE l -3 -1
        LRANGE l -100 100
        LRANGE l 5 2
        LRANGE l 7 10
        LRANGE l -1 -3
        LRANGE l 0 -8
        LRANGE l -7 -7
        LRANGE l 6 9223372036854775807
        LRANGE l -9223372036854775808 1
        LRANGE l a 1
        LRANGE l 1 1.5
        LRANGE l 0 9223372036854775808
        LRANGE missing 0 -1
        LRANGE missing a b
        LRANGE l 0
        LINDEX l 0
        LINDEX l 6
        LINDEX l 7
        LINDEX l -1
        LINDEX l -7
        LINDEX l -8
        LINDEX l abc
        LINDEX l 1.0
        LINDEX missing 0
        LINDEX missing abc
        LINDEX l
        OBJECT ENCODING l
        TYPE l
    """)


def test_lset(diff: Differ) -> None:
    diff.run("""
        RPUSH l a b c
        LSET l 0 x
        LSET l -1 z
        LSET l 1 y
        LRANGE l 0 -1
        LSET l 3 q
        LSET l -4 q
        LSET l abc q
        LSET missing 0 q
        LSET missing abc q
        LSET l 0
        LRANGE l 0 -1
    """)


def test_lrem(diff: Differ) -> None:
    diff.run("""
        RPUSH l a b a c a d a
        LREM l 2 a
        LRANGE l 0 -1
        LREM l -1 a
        LRANGE l 0 -1
        LREM l 0 a
        LRANGE l 0 -1
        LREM l 0 zz
        LREM l 1 b
        LRANGE l 0 -1
        LREM l 0 c
        LREM l 0 d
        EXISTS l
        LREM l 0 d
        LREM l x d
        RPUSH m x 1 2 3 x 4 5 x
        EXPIRE m 1000
        LREM m 0 x
        LRANGE m 0 -1
        TTL m
        RPUSH m x
        LREM m -5 x
        LRANGE m 0 -1
        LREM m 9223372036854775807 1
        LREM m -9223372036854775808 5
        LRANGE m 0 -1
        TTL m
        LREM m 0
        RPUSH t a a a
        LREM t 0 a
        EXISTS t
    """)


def test_lrem_long_lists(diff: Differ) -> None:
    items = [str(i % 10) for i in range(300)]
    diff.check("RPUSH", "big", *items)
    diff.check("EXPIRE", "big", "1000")
    for args in (
        ("LREM", "big", "3", "9"),  # near the head
        ("LREM", "big", "-3", "0"),  # near the tail
        ("LREM", "big", "-1", "5"),
        ("LREM", "big", "1", "5"),
        ("LREM", "big", "0", "7"),  # across the whole list
        ("LREM", "big", "5", "notthere"),
        ("LRANGE", "big", "0", "-1"),
        ("LLEN", "big"),
        ("TTL", "big"),
        ("OBJECT", "ENCODING", "big"),
    ):
        diff.check(*args)


def test_ltrim(diff: Differ) -> None:
    diff.run("""
        RPUSH l a b c d e f g
        EXPIRE l 1000
        LTRIM l 1 -2
        LRANGE l 0 -1
        LTRIM l 0 -1
        LRANGE l 0 -1
        LTRIM l -100 100
        LTRIM l 1 1
        LRANGE l 0 -1
        TTL l
        LTRIM l 5 10
        EXISTS l
        RPUSH l a b c d
        LTRIM l 2 1
        EXISTS l
        RPUSH l a b c d
        LTRIM l -2 -1
        LRANGE l 0 -1
        LTRIM l 0 -3
        EXISTS l
        LTRIM l 0 1
        LTRIM l a 1
        LTRIM l 0 b
        LTRIM missing a b
        LTRIM l 0
        RPUSH cap 1 2 3 4 5 6 7 8 9 10
        LPUSH cap 0
        LTRIM cap 0 4
        LRANGE cap 0 -1
    """)


def test_linsert(diff: Differ) -> None:
    diff.run("""
        RPUSH l a b c
        EXPIRE l 1000
        LINSERT l BEFORE a x
        LINSERT l after c y
        LINSERT l AFTER b z
        LINSERT l before b w
        LRANGE l 0 -1
        LINSERT l BEFORE nope q
        LINSERT l MIDDLE a q
        LINSERT missing BEFORE a q
        LINSERT missing MIDDLE a q
        EXISTS missing
        TTL l
        RPUSH d a b a
        LINSERT d AFTER a q
        LRANGE d 0 -1
        LINSERT l BEFORE a
        LINSERT l BEFORE a b c
    """)
    items = [str(i) for i in range(200)]
    diff.check("RPUSH", "big", *items)
    for args in (
        ("LINSERT", "big", "BEFORE", "190", "x"),
        ("LINSERT", "big", "AFTER", "199", "y"),
        ("LINSERT", "big", "AFTER", "10", "z"),
        ("LINSERT", "big", "BEFORE", "0", "w"),
        ("LRANGE", "big", "0", "-1"),
    ):
        diff.check(*args)


def test_lpos(diff: Differ) -> None:
    diff.run("""
        RPUSH l a b c 1 2 3 c c
        LPOS l c
        LPOS l c RANK 2
        LPOS l c RANK -1
        LPOS l c RANK -3
        LPOS l c RANK 4
        LPOS l c RANK -4
        LPOS l c COUNT 0
        LPOS l c COUNT 2
        LPOS l c COUNT 2 RANK 2
        LPOS l c COUNT 0 RANK -1
        LPOS l c COUNT 2 RANK -2
        LPOS l c COUNT 1 MAXLEN 3
        LPOS l c COUNT 0 MAXLEN 7
        LPOS l c MAXLEN 2
        LPOS l c MAXLEN 3
        LPOS l c RANK -1 MAXLEN 1
        LPOS l c RANK -1 MAXLEN 3 COUNT 0
        LPOS l c MAXLEN 0
        LPOS l zz
        LPOS l zz COUNT 5
        LPOS l 1
        LPOS l c RANK 0
        LPOS l c RANK abc
        LPOS l c RANK 9223372036854775807
        LPOS l c RANK -9223372036854775808
        LPOS l c RANK -9223372036854775808 COUNT 1
        LPOS l c RANK -9223372036854775807 COUNT 1
        LPOS l c COUNT -1
        LPOS l c COUNT abc
        LPOS l c MAXLEN -1
        LPOS l c MAXLEN abc
        LPOS l c RANK
        LPOS l c COUNT
        LPOS l c FOO 1
        LPOS l c rank 1 count 1 maxlen 0
        LPOS l c RANK 1 RANK 2
        LPOS missing c
        LPOS missing c COUNT 0
        LPOS missing c RANK 0
        LPOS missing c COUNT -1
        LPOS l
    """)


def test_lmove_rpoplpush(diff: Differ) -> None:
    diff.run("""
        RPUSH s a b c
        LMOVE s d LEFT RIGHT
        LMOVE s d RIGHT LEFT
        LMOVE s d left left
        LMOVE s d Right Right
        LRANGE d 0 -1
        EXISTS s
        LMOVE s d LEFT RIGHT
        LMOVE s d UP LEFT
        LMOVE s d LEFT DOWN
        RPUSH r 1 2 3
        LMOVE r r LEFT RIGHT
        LRANGE r 0 -1
        LMOVE r r RIGHT LEFT
        LRANGE r 0 -1
        LMOVE r r LEFT LEFT
        LMOVE r r RIGHT RIGHT
        LRANGE r 0 -1
        RPOPLPUSH r r
        LRANGE r 0 -1
        RPUSH one x
        EXPIRE one 1000
        LMOVE one one LEFT RIGHT
        RPOPLPUSH one one
        LRANGE one 0 -1
        TTL one
        RPOPLPUSH r other
        RPOPLPUSH r other
        LRANGE other 0 -1
        RPOPLPUSH missing other
        RPOPLPUSH one new
        EXISTS one
        LRANGE new 0 -1
        LMOVE s d LEFT
        RPOPLPUSH s
    """)


def test_lmpop(diff: Differ) -> None:
    diff.run("""
        RPUSH a 1 2 3
        RPUSH b 4 5 6 7
        LMPOP 2 none a LEFT
        LMPOP 2 none b RIGHT COUNT 2
        LMPOP 1 a left COUNT 10
        EXISTS a
        LMPOP 2 a none LEFT
        LMPOP 2 a b right count 1
        LMPOP 0 a LEFT
        LMPOP -1 a LEFT
        LMPOP abc a LEFT
        LMPOP 2 a LEFT
        LMPOP 9223372036854775807 a LEFT
        LMPOP 1 a MIDDLE
        LMPOP 1 a LEFT COUNT 0
        LMPOP 1 a LEFT COUNT -1
        LMPOP 1 a LEFT COUNT abc
        LMPOP 1 a LEFT COUNT
        LMPOP 1 a LEFT COUNT 1 COUNT 1
        LMPOP 1 a LEFT FOO
        LMPOP 1 a
        LMPOP 1
        BLMPOP 0 0 a LEFT
        BLMPOP 0 2 a LEFT
        BLMPOP 0 1 a MIDDLE
        BLMPOP 0 1 a LEFT COUNT 0
        BLMPOP abc 1 a LEFT
        BLMPOP -1 1 a LEFT
        BLMPOP abc 0 a LEFT
        BLMPOP 0 1 b LEFT COUNT 2
        BLMPOP 0.01 1 b RIGHT COUNT 9
        BLMPOP 0.01 1 b RIGHT
        BLMPOP 0 1 a
    """)


def test_blocking_immediate_and_errors(diff: Differ) -> None:
    diff.run("""
        RPUSH a 1 2
        RPUSH b 3
        BLPOP none a b 0
        BRPOP none b a 0
        BLPOP a 0
        EXISTS a
        BLPOP none 0.01
        BRPOP none 0.01
        BLPOP a abc
        BLPOP a -1
        BLPOP a -0.5
        BLPOP a inf
        BLPOP a -inf
        BLPOP a 1e30
        BLPOP a nan
        BLPOP a ""
        BLPOP a 1e5000
        BRPOP a " 1"
        BLPOP a
        BRPOP
        RPUSH s x y
        BLMOVE s d RIGHT LEFT 0
        BLMOVE s d LEFT LEFT 0.5
        LRANGE d 0 -1
        EXISTS s
        BLMOVE s d LEFT LEFT 0.01
        BRPOPLPUSH s d 0.01
        BLMOVE s d UP LEFT abc
        BLMOVE s d LEFT UP abc
        BLMOVE s d LEFT LEFT abc
        BLMOVE s d LEFT LEFT -1
        BRPOPLPUSH s d abc
        BRPOPLPUSH s d -1
        RPUSH s z
        BRPOPLPUSH s d 0
        LRANGE d 0 -1
        BRPOPLPUSH d d 0
        LRANGE d 0 -1
        BLMOVE s d LEFT LEFT
        BRPOPLPUSH s d
    """)


def test_blocking_inside_multi(diff: Differ) -> None:
    diff.run("""
        MULTI
        BLPOP none 0
        BRPOP none 0
        BLMOVE none d LEFT LEFT 0
        BRPOPLPUSH none d 0
        BLMPOP 0 1 none LEFT
        BLPOP none abc
        RPUSH q 1 2
        BLPOP q 0
        BLMOVE q d LEFT LEFT 0
        BLPOP q 0
        EXEC
        LRANGE d 0 -1
    """)


# -- blocking with two clients -------------------------------------------------------------


def _client(port: int, resp: int) -> RawClient:
    c = RawClient(port)
    if resp == 3:
        c.call("HELLO", "3")
    return c


def _wait_blocked(c: RawClient, n: int = 1) -> None:
    """Wait until `n` clients are blocked (INFO clients), so a push comes after them."""
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        info = c.call("INFO", "clients")
        if b"blocked_clients:%d\r\n" % n in info:
            return
        time.sleep(0.01)
    raise AssertionError("client did not block")


Scenario = Callable[[int, int], list[bytes]]


def _both(diff: Differ, redis_ref: ServerProcess, ts: ServerProcess, run: Scenario) -> list[bytes]:
    """Run a scenario against each server; the transcripts must be identical."""
    ref = run(redis_ref.port, diff.resp)
    ours = run(ts.port, diff.resp)
    diff.record(len(ref), ours == ref)
    assert ours == ref, f"RESP{diff.resp}\nredis: {ref!r}\nours:  {ours!r}"
    return ref


def _blpop_push(port: int, resp: int) -> list[bytes]:
    a, b = _client(port, resp), _client(port, resp)
    try:
        a.send(encode_command("BLPOP", "bk1", "bk2", "0"))
        _wait_blocked(b)
        out = [b.call("RPUSH", "bk2", "x", "y")]
        out.append(a.read_reply())
        out.append(b.call("LRANGE", "bk2", "0", "-1"))
        a.send(encode_command("BRPOP", "bk1", "bk2", "5"))
        out.append(a.read_reply())  # served at once: bk2 still holds y
        a.send(encode_command("BRPOP", "bk1", "bk2", "5"))
        _wait_blocked(b)
        out.append(b.call("LPUSH", "bk1", "p", "q"))
        out.append(a.read_reply())
        out.append(b.call("LRANGE", "bk1", "0", "-1"))
        out.append(a.call("PING"))
        return out
    finally:
        a.close()
        b.close()


def test_blpop_served_by_push(
    diff: Differ, redis_ref: ServerProcess, ts_server: ServerProcess
) -> None:
    out = _both(diff, redis_ref, ts_server, _blpop_push)
    assert out[1] == b"*2\r\n$3\r\nbk2\r\n$1\r\nx\r\n"
    assert out[5] == b"*2\r\n$3\r\nbk1\r\n$1\r\np\r\n"


def _timeouts(port: int, resp: int) -> list[bytes]:
    a = _client(port, resp)
    try:
        out = []
        for cmd in (
            ("BLPOP", "tk", "0.1"),
            ("BRPOP", "tk", "tk2", "0.1"),
            ("BLMOVE", "tk", "td", "LEFT", "RIGHT", "0.1"),
            ("BRPOPLPUSH", "tk", "td", "0.1"),
            ("BLMPOP", "0.1", "2", "tk", "tk2", "LEFT", "COUNT", "3"),
        ):
            t0 = time.monotonic()
            out.append(a.call(*cmd))
            assert time.monotonic() - t0 >= 0.09, cmd
        out.append(a.call("EXISTS", "td"))
        return out
    finally:
        a.close()


def test_blocking_timeouts(
    diff: Differ, redis_ref: ServerProcess, ts_server: ServerProcess
) -> None:
    out = _both(diff, redis_ref, ts_server, _timeouts)
    null = b"*-1\r\n" if diff.resp == 2 else b"_\r\n"
    assert out[:5] == [null] * 5


def _blmove_push(port: int, resp: int) -> list[bytes]:
    a, b = _client(port, resp), _client(port, resp)
    try:
        a.send(encode_command("BLMOVE", "ms", "md", "RIGHT", "LEFT", "0"))
        _wait_blocked(b)
        out = [b.call("RPUSH", "ms", "a", "b")]
        out.append(a.read_reply())
        out.append(b.call("LRANGE", "ms", "0", "-1"))
        out.append(b.call("LRANGE", "md", "0", "-1"))
        a.send(encode_command("BRPOPLPUSH", "ms2", "md", "0"))
        _wait_blocked(b)
        out.append(b.call("LPUSH", "ms2", "c"))
        out.append(a.read_reply())
        out.append(b.call("LRANGE", "md", "0", "-1"))
        out.append(b.call("EXISTS", "ms2"))
        return out
    finally:
        a.close()
        b.close()


def test_blmove_served_by_push(
    diff: Differ, redis_ref: ServerProcess, ts_server: ServerProcess
) -> None:
    out = _both(diff, redis_ref, ts_server, _blmove_push)
    assert out[1] == b"$1\r\nb\r\n"
    assert out[3] == b"*1\r\n$1\r\nb\r\n"


def _blmpop_push(port: int, resp: int) -> list[bytes]:
    a, b = _client(port, resp), _client(port, resp)
    try:
        a.send(encode_command("BLMPOP", "0", "2", "mp1", "mp2", "RIGHT", "COUNT", "5"))
        _wait_blocked(b)
        out = [b.call("LPUSH", "mp2", "1", "2", "3")]
        out.append(a.read_reply())
        out.append(b.call("EXISTS", "mp2"))
        return out
    finally:
        a.close()
        b.close()


def test_blmpop_served_by_push(
    diff: Differ, redis_ref: ServerProcess, ts_server: ServerProcess
) -> None:
    out = _both(diff, redis_ref, ts_server, _blmpop_push)
    assert out[1] == b"*2\r\n$3\r\nmp2\r\n*3\r\n$1\r\n1\r\n$1\r\n2\r\n$1\r\n3\r\n"


def _fifo(port: int, resp: int) -> list[bytes]:
    a1, a2, b = _client(port, resp), _client(port, resp), _client(port, resp)
    try:
        a1.send(encode_command("BLPOP", "fq", "0"))
        _wait_blocked(b, 1)
        a2.send(encode_command("BLPOP", "fq", "0"))
        _wait_blocked(b, 2)
        out = [b.call("RPUSH", "fq", "x", "y", "z")]
        out.append(a1.read_reply())
        out.append(a2.read_reply())
        out.append(b.call("LRANGE", "fq", "0", "-1"))
        return out
    finally:
        for c in (a1, a2, b):
            c.close()


def test_blocked_clients_served_in_order(
    diff: Differ, redis_ref: ServerProcess, ts_server: ServerProcess
) -> None:
    out = _both(diff, redis_ref, ts_server, _fifo)
    assert out[1].endswith(b"$1\r\nx\r\n") and out[2].endswith(b"$1\r\ny\r\n")


def _wrong_type_while_blocked(port: int, resp: int) -> list[bytes]:
    a, b = _client(port, resp), _client(port, resp)
    try:
        a.send(encode_command("BLPOP", "wt", "0"))
        _wait_blocked(b)
        out = [b.call("SET", "wt", "str")]
        _wait_blocked(b)  # still blocked: a string does not serve it
        out.append(b.call("DEL", "wt"))
        # A push and pop in one transaction leaves nothing to serve.
        out.append(b.call("MULTI"))
        out.append(b.call("RPUSH", "wt", "gone"))
        out.append(b.call("LPOP", "wt"))
        out.append(b.call("EXEC"))
        _wait_blocked(b)
        out.append(b.call("RPUSH", "wt", "v"))
        out.append(a.read_reply())
        return out
    finally:
        a.close()
        b.close()


def test_blocked_ignores_other_types(
    diff: Differ, redis_ref: ServerProcess, ts_server: ServerProcess
) -> None:
    out = _both(diff, redis_ref, ts_server, _wrong_type_while_blocked)
    assert out[-1] == b"*2\r\n$2\r\nwt\r\n$1\r\nv\r\n"


def _blmove_wrong_destination(port: int, resp: int) -> list[bytes]:
    a, b = _client(port, resp), _client(port, resp)
    try:
        a.send(encode_command("BLMOVE", "ws", "wd", "LEFT", "LEFT", "0"))
        _wait_blocked(b)
        out = [b.call("SET", "wd", "str")]
        out.append(b.call("RPUSH", "ws", "v"))
        out.append(a.read_reply())
        out.append(b.call("LRANGE", "ws", "0", "-1"))
        out.append(a.call("PING"))
        return out
    finally:
        a.close()
        b.close()


def test_blmove_wrong_destination(
    diff: Differ, redis_ref: ServerProcess, ts_server: ServerProcess
) -> None:
    out = _both(diff, redis_ref, ts_server, _blmove_wrong_destination)
    assert out[2].startswith(b"-WRONGTYPE")


def _chain(port: int, resp: int) -> list[bytes]:
    a, c, b = _client(port, resp), _client(port, resp), _client(port, resp)
    try:
        a.send(encode_command("BLMOVE", "c1", "c2", "LEFT", "RIGHT", "0"))
        _wait_blocked(b, 1)
        c.send(encode_command("BLPOP", "c2", "0"))
        _wait_blocked(b, 2)
        out = [b.call("RPUSH", "c1", "v")]
        out.append(a.read_reply())
        out.append(c.read_reply())
        out.append(b.call("EXISTS", "c1", "c2"))
        return out
    finally:
        for x in (a, c, b):
            x.close()


def test_blmove_wakes_the_next_waiter(
    diff: Differ, redis_ref: ServerProcess, ts_server: ServerProcess
) -> None:
    out = _both(diff, redis_ref, ts_server, _chain)
    assert out[2].endswith(b"$2\r\nc2\r\n$1\r\nv\r\n")


def _pipelined_after_block(port: int, resp: int) -> list[bytes]:
    a, b = _client(port, resp), _client(port, resp)
    try:
        a.send(
            encode_command("BRPOP", "pk", "0")
            + encode_command("LLEN", "pk")
            + encode_command("PING")
        )
        _wait_blocked(b)
        out = [b.call("RPUSH", "pk", "1", "2")]
        out += [a.read_reply(), a.read_reply(), a.read_reply()]
        return out
    finally:
        a.close()
        b.close()


def test_commands_after_a_blocked_one_wait(
    diff: Differ, redis_ref: ServerProcess, ts_server: ServerProcess
) -> None:
    out = _both(diff, redis_ref, ts_server, _pipelined_after_block)
    assert out[2] == b":1\r\n"


# -- randomized --------------------------------------------------------------------------

_ALPHABET = ["a", "b", "c", "1", "22"]


def _random_command(rng: random.Random) -> list[str]:
    key = rng.choice(["r1", "r2"])
    ele = rng.choice(_ALPHABET)
    idx = str(rng.randint(-12, 12))
    pick = rng.randrange(12)
    if pick == 0:
        return [rng.choice(["LPUSH", "RPUSH"]), key, *rng.choices(_ALPHABET, k=rng.randint(1, 6))]
    if pick == 1:
        return ["LREM", key, str(rng.randint(-3, 3)), ele]
    if pick == 2:
        return ["LINSERT", key, rng.choice(["BEFORE", "AFTER"]), ele, rng.choice(_ALPHABET)]
    if pick == 3:
        return ["LTRIM", key, idx, str(rng.randint(-12, 12))]
    if pick == 4:
        return ["LSET", key, idx, ele]
    if pick == 5:
        other = rng.choice(["r1", "r2"])
        return ["LMOVE", key, other, rng.choice(["LEFT", "RIGHT"]), rng.choice(["LEFT", "RIGHT"])]
    if pick == 6:
        return [rng.choice(["LPOP", "RPOP"]), key, str(rng.randint(0, 4))]
    if pick == 7:
        opts = []
        if rng.random() < 0.5:
            opts += ["RANK", str(rng.choice([-3, -2, -1, 1, 2, 3]))]
        if rng.random() < 0.5:
            opts += ["COUNT", str(rng.randint(0, 3))]
        if rng.random() < 0.5:
            opts += ["MAXLEN", str(rng.randint(0, 8))]
        return ["LPOS", key, ele, *opts]
    if pick == 8:
        return ["LRANGE", key, idx, str(rng.randint(-12, 12))]
    if pick == 9:
        return ["LINDEX", key, idx]
    if pick == 10:
        return ["LMPOP", "2", key, "r1", rng.choice(["LEFT", "RIGHT"]), "COUNT", "2"]
    return ["RPOPLPUSH", key, rng.choice(["r1", "r2"])]


def test_random_edits(diff: Differ) -> None:
    rng = random.Random(7 + diff.resp)
    diff.check("RPUSH", "r1", *rng.choices(_ALPHABET, k=20))
    diff.check("RPUSH", "r2", *rng.choices(_ALPHABET, k=20))
    for _ in range(250):
        diff.check(*_random_command(rng))
        if rng.random() < 0.1:
            diff.check("EXPIRE", "r1", "1000")
        diff.check("LRANGE", "r1", "0", "-1")
        diff.check("LRANGE", "r2", "0", "-1")
    diff.check("TTL", "r1")


def test_edits_undo_exactly() -> None:
    """Every command's ops, rolled back, restore the exact prior keyspace (the version
    chain rebuilds history from these undos)."""
    s, _sink = make_session()
    rng = random.Random(11)
    DISPATCHER.execute(s, [b"RPUSH", b"r1", *(x.encode() for x in rng.choices(_ALPHABET, k=30))])
    DISPATCHER.execute(s, [b"EXPIRE", b"r1", b"1000"])
    for _ in range(400):
        argv = [a.encode() for a in _random_command(rng)]
        before = ({k: deque(v) for k, v in s.db.data.items()}, dict(s.db.expires))
        s.in_exec = True  # keep the ops pending
        first = DISPATCHER.execute(s, argv)
        s.store.rollback_to()
        s.in_exec = False
        assert ({k: deque(v) for k, v in s.db.data.items()}, dict(s.db.expires)) == before, argv
        assert DISPATCHER.execute(s, argv) == first, argv


def _other_database(port: int, resp: int) -> list[bytes]:
    a, b = _client(port, resp), _client(port, resp)
    try:
        out = [a.call("SELECT", "1")]
        a.send(encode_command("BLPOP", "dbk", "dbk", "0"))
        _wait_blocked(b)
        out.append(b.call("RPUSH", "dbk", "db0"))  # database 0: not the one waited on
        _wait_blocked(b)
        out.append(b.call("SELECT", "1"))
        out.append(b.call("RPUSH", "dbk", "db1"))
        out.append(a.read_reply())
        out.append(b.call("SELECT", "0"))
        out.append(b.call("LRANGE", "dbk", "0", "-1"))
        out.append(a.call("SELECT", "0"))
        out.append(a.call("FLUSHDB"))
        return out
    finally:
        a.close()
        b.close()


def test_blocking_is_per_database(
    diff: Differ, redis_ref: ServerProcess, ts_server: ServerProcess
) -> None:
    out = _both(diff, redis_ref, ts_server, _other_database)
    assert out[4].endswith(b"$3\r\ndb1\r\n")
