"""Differential tests of the stream family against redis-server, RESP2 and RESP3,
plus in-process checks that every stream op's undo restores the exact prior value."""

from __future__ import annotations

import random
import time

from store.keyspace import Database
from store.ops import apply_op
from store.stream import MAX_ID, MIN_ID, Stream, format_id
from tests.conftest import Differ
from tests.resp_client import RawClient, parse


def test_xadd_ids_and_errors(diff: Differ) -> None:
    diff.run("""
        XADD s 1-1 f v
        XADD s 1-1 f v
        XADD s 1-0 f v
        XADD s 1-2 f v g w
        XADD s 1 f v
        XADD s 2 f v
        XADD s 2-* f v
        XADD s 5-* f v
        XADD s 5-* a b
        XADD s 4-* f v
        XADD s 0-0 f v
        XADD s 0 f v
        XADD new 0-* f v
        XADD new2 0-0 f v
        XADD s 00010-0007 f v
        XADD s +20-+1 f v
        XADD s " 30-  2" f v
        XADD s 40--1 f v
        XADD s 40--01 f v
        XADD s 18446744073709551615-18446744073709551614 f v
        XADD s 18446744073709551615-* f v
        XADD s 18446744073709551615-* f v
        XADD s * f v
        XADD s 18446744073709551616-0 f v
        XADD s -1 f v
        XADD s - f v
        XADD s + f v
        XADD s 1-2-3 f v
        XADD s 1-x f v
        XADD s x-1 f v
        XADD s "" f v
        XADD s "7 " f v
        XADD s 1-** f v
        XADD s *-1 f v
        XLEN s
        XRANGE s - +
        XADD s2 * f
        XADD s2 * f v g
        XADD s2 1-1
        XADD s2 NOMKSTREAM
        XADD s2 NOMKSTREAM NOMKSTREAM NOMKSTREAM
        XADD s2
        XADD s2 1-1 f
        XADD missing NOMKSTREAM * f v
        XADD missing NOMKSTREAM 1-1 f v
        XLEN missing
        XADD s2 nomkstream 3-3 f v
        XRANGE s2 - +
        SET str x
        XADD str * f v
        XADD str NOMKSTREAM 1-1 f v
        XADD str 0-0 f v
        XADD str 1-1 f
    """)


def test_xadd_seq_exhausted(diff: Differ) -> None:
    diff.run("""
        XADD s 5-18446744073709551615 f v
        XADD s 5-* f v
        XADD s 5-5 f v
        XADD s 6-* f v
        XADD t 18446744073709551615-18446744073709551615 f v
        XADD t * f v
        XADD t 1-1 f v
        XADD t NOMKSTREAM 1-* f v
        XLEN t
    """)


def test_xadd_auto_id(diff: Differ) -> None:
    # An ID in the future: "*" continues its sequence on both servers.
    diff.run("""
        XADD f 99999999999999-5 a 1
        XADD f * a 2
        XADD f * a 3
        XRANGE f - +
        XADD g 99999999999999-18446744073709551615 a 1
        XADD g * a 2
    """)
    # Otherwise "*" is the current time in ms, sequence 0 (or the next sequence).
    before = int(time.time() * 1000)
    for _ in range(3):
        ref, ours = diff.both("XADD", "auto", "*", "f", "v")
        ids = []
        for raw in (ref, ours):
            kind, value = parse(raw)
            assert kind == "$"
            ms, _, seq = value.partition(b"-")
            ids.append((int(ms), int(seq)))
        after = int(time.time() * 1000)
        for ms, seq in ids:
            assert before - 5 <= ms <= after + 5 and seq < 1000
    ref, ours = diff.both("XLEN", "auto")
    assert ref == ours == b":3\r\n"
    diff.check("XADD", "auto", "1-1", "f", "v")


def test_xadd_trimming(diff: Differ) -> None:
    diff.run("""
        XADD s MAXLEN 2 1-1 a 1
        XADD s MAXLEN 2 2-1 a 2
        XADD s MAXLEN = 2 3-1 a 3
        XRANGE s - +
        XADD s MAXLEN ~ 1 4-1 a 4
        XLEN s
        XADD s MINID 3-1 5-1 a 5
        XRANGE s - +
        XADD s MINID = 5 6-1 a 6
        XRANGE s - +
        XADD s MINID ~ 6-1 7-1 a 7
        XLEN s
        XADD s MAXLEN 0 8-1 a 8
        XLEN s
        XADD s MAXLEN ~ 0 LIMIT 10 9-1 a 9
        XADD s maxlen 1 minid 1 10-1 a 10
        XADD s minid 1 maxlen 1 10-1 a 10
        XADD s MAXLEN -1 10-1 a 10
        XADD s MAXLEN x 10-1 a 10
        XADD s MAXLEN ~ x 10-1 a 10
        XADD s MAXLEN ~ 1 LIMIT -1 10-1 a 10
        XADD s MAXLEN ~ 1 LIMIT x 10-1 a 10
        XADD s MAXLEN 1 LIMIT 10 10-1 a 10
        XADD s LIMIT 10 10-1 a 10
        XADD s LIMIT 0 10-1 a 10
        XADD s MAXLEN ~ 1 LIMIT 0 10-1 a 10
        XADD s MINID x 11-1 a 10
        XADD s MINID - 11-1 a 10
        XADD s MINID ~ + 11-1 a 10
        XADD s MINID ~ 5-* 11-1 a 10
        XADD s MAXLEN ~ * a b
        XADD s MAXLEN
        XADD s MAXLEN 5
        XADD s NOMKSTREAM MAXLEN 1 12-1 a 12
        XRANGE s - +
        XADD m MAXLEN 0 1-1 a 1
        XLEN m
        XRANGE m - +
        XADD m MAXLEN 0 1-1 a 1
        XADD m MAXLEN 0 2-1 a 1
        XADD m NOMKSTREAM MINID 3 3-1 a 1
        XLEN m
    """)


def test_xrange_xrevrange(diff: Differ) -> None:
    diff.run("""
        XADD s 1-1 a 1
        XADD s 1-2 b 2 c 3
        XADD s 2-0 a 4
        XADD s 3-5 a 5
        XADD s 3-6 a 6
        XADD s 18446744073709551615-0 z 1
        XRANGE s - +
        XREVRANGE s + -
        XRANGE s 1 2
        XRANGE s 1-2 3-5
        XRANGE s (1-1 (3-6
        XRANGE s (1-2 +
        XRANGE s - (2-0
        XRANGE s 3 3
        XREVRANGE s 3 3
        XREVRANGE s (3-6 (1-1
        XREVRANGE s 3-5 -
        XRANGE s 3 1
        XREVRANGE s 1 3
        XRANGE s - + COUNT 2
        XRANGE s - + COUNT 0
        XRANGE s - + COUNT -1
        XRANGE s - + count 1 COUNT 3
        XREVRANGE s + - COUNT 2
        XREVRANGE s + - COUNT 0
        XRANGE s - + COUNT
        XRANGE s - + COUNT x
        XRANGE s - + LIMIT 1
        XRANGE s - + COUNT 1 x
        XRANGE s ( +
        XRANGE s (- +
        XRANGE s - (+
        XRANGE s (18446744073709551615-18446744073709551615 +
        XRANGE s - (0-0
        XRANGE s (18446744073709551615 +
        XRANGE s - (0
        XREVRANGE s (0 -
        XREVRANGE s + (18446744073709551615-18446744073709551615
        XRANGE s x +
        XRANGE s - x
        XRANGE s 1-x +
        XRANGE s 18446744073709551616 +
        XRANGE s " 1" "+3"
        XRANGE missing - +
        XRANGE missing - + COUNT 0
        XREVRANGE missing + -
        XRANGE missing x +
        XRANGE missing - + COUNT x
        SET str x
        XRANGE str - +
        XREVRANGE str + - COUNT 0
        XRANGE s -
        XREVRANGE s +
        XRANGE
    """)


def test_xlen_xdel(diff: Differ) -> None:
    diff.run("""
        XLEN s
        XDEL s 1-1
        XDEL s bad
        XADD s 1-1 a 1
        XADD s 2-1 a 2
        XADD s 3-1 a 3
        XADD s 4-1 a 4
        XLEN s
        XDEL s 2-1
        XDEL s 2-1
        XDEL s 1-1 3-1 1-1 9-9
        XDEL s 4-1 bad
        XDEL s 4-1 -
        XDEL s 4-1 +
        XDEL s 4-* 4-1
        XLEN s
        XRANGE s - +
        XDEL s 4
        XDEL s 4-1
        XLEN s
        XRANGE s - +
        XADD s 3-1 a 3
        XADD s 4-2 a 3
        XLEN s
        XDEL s
        XLEN
        XLEN a b
        SET str x
        XLEN str
        XDEL str 1-1
        XDEL str bad
    """)


def test_xtrim(diff: Differ) -> None:
    for i in range(1, 21):
        diff.check("XADD", "s", f"{i}-1", "f", str(i))
    diff.run("""
        XTRIM s MAXLEN 18
        XTRIM s MAXLEN = 18
        XTRIM s MAXLEN ~ 2
        XTRIM s MAXLEN ~ 2 LIMIT 0
        XTRIM s MINID 5
        XTRIM s MINID = 5-1
        XTRIM s MINID (7
        XTRIM s MINID 7-*
        XTRIM s MINID ~ 19
        XTRIM s MINID 8-2
        XRANGE s - + COUNT 2
        XLEN s
        XTRIM s MAXLEN 100
        XTRIM s MINID 0
        XTRIM s MINID -
        XTRIM s MINID +
        XTRIM s MAXLEN -1
        XTRIM s MAXLEN x
        XTRIM s MAXLEN 1 LIMIT 2
        XTRIM s MAXLEN ~ 1 LIMIT -2
        XTRIM s LIMIT 2
        XTRIM s LIMIT 0 MAXLEN 1
        XTRIM s MAXLEN 1 MINID 1
        XTRIM s MINID 1 MAXLEN 1
        XTRIM s MAXLEN 1 NOMKSTREAM
        XTRIM s * MAXLEN 1
        XTRIM s FOO 1
        XTRIM s MAXLEN
        XTRIM s MAXLEN ~
        XTRIM s MAXLEN 1 LIMIT
        XTRIM s
        XTRIM missing MAXLEN 1
        XTRIM missing MAXLEN x
        XTRIM missing FOO
        XLEN s
        XTRIM s MINID 100
        XLEN s
        XRANGE s - +
        XADD s 30-1 f v
        XTRIM s MAXLEN 0
        XLEN s
        SET str x
        XTRIM str MAXLEN 1
        XTRIM str MAXLEN x
    """)


def test_approximate_trimming_whole_nodes(diff: Differ) -> None:
    # Nodes close at 100 entries: "~" removes only whole nodes.
    for i in range(1, 251):
        diff.check("XADD", "s", f"{i}-0", "f", "v")
    diff.run("""
        XTRIM s MAXLEN ~ 200
        XTRIM s MAXLEN ~ 140
        XLEN s
        XTRIM s MAXLEN ~ 140 LIMIT 50
        XTRIM s MAXLEN ~ 100 LIMIT 100
        XLEN s
        XADD s MAXLEN ~ 10 251-0 f v
        XLEN s
        XTRIM s MINID ~ 240
        XTRIM s MINID 240
        XLEN s
        XRANGE s - + COUNT 3
    """)
    # Deleted entries still occupy their node; an exact trim leaves tombstones too.
    for i in range(1, 151):
        diff.check("XADD", "t", f"{i}-0", "f", "v")
    diff.run("""
        XTRIM t MAXLEN 120
        XDEL t 31-0 32-0 101-0
        XTRIM t MAXLEN ~ 60
        XLEN t
        XADD t 151-0 f v
        XTRIM t MINID ~ 150
        XLEN t
        XRANGE t - + COUNT 2
    """)


def test_approximate_trimming_node_bytes(diff: Differ) -> None:
    # Nodes also close at 4096 bytes: big values make small nodes.
    big = "x" * 700
    for i in range(1, 31):
        diff.check("XADD", "s", f"{i}-0", "f", big if i % 3 else str(i * 1000))
    diff.run("""
        XTRIM s MAXLEN ~ 25
        XLEN s
        XTRIM s MAXLEN ~ 10
        XLEN s
        XTRIM s MINID ~ 22
        XLEN s
    """)
    for i in range(1, 41):
        fields = ["f", "1", "g", "x" * 40] if i % 4 else ["other", "x" * 90]
        diff.check("XADD", "t", f"{i}-{i}", *fields)
    diff.run("""
        XTRIM t MAXLEN ~ 30
        XTRIM t MAXLEN ~ 1
        XLEN t
    """)


def test_node_size_boundaries(diff: Differ) -> None:
    """Where a node closes depends on its exact listpack size. A first entry padded
    to P bytes, a probe entry, then a tiny entry: the tiny one opens a new node iff
    the node already weighs 4096 bytes or more. Find the P where redis-server starts
    splitting, then check both sides of it on both servers, for probes covering
    every integer and string width, ID deltas and differing fields."""
    values = (
        "7", "127", "128", "-1", "4095", "4096", "-4096", "-4097", "32767", "32768",
        "-32769", "8388607", "8388608", "2147483647", "2147483648", "-2147483649",
        "9223372036854775807", "9223372036854775808", "-0", "01", "x" * 63, "x" * 64,
        "-9223372036854775808", "x" * 125, "x" * 126,
    )  # fmt: skip
    deltas = ((0, 1), (127, 0), (128, 5), (4096, 4095), (40000, 0), (2**31, 0), (2**63, 0))
    probes = [((1, 0), ["f", v]) for v in values]
    probes += [((1, 0), [v, "1"]) for v in values[:4] + values[-4:]]
    probes += [(d, ["f", "1"]) for d in deltas]
    probes += [((1, 0), ["f", "1", "g", "2"])]
    ref = diff.ref
    n = 0

    def splits(pad: int, delta: tuple[int, int], fv: list[str], check: bool) -> bool:
        nonlocal n
        n += 1
        key = f"b{n}"
        cmds = [
            ("XADD", key, "1-1000", "f", "p" * pad),
            ("XADD", key, f"{1 + delta[0]}-{1000 + delta[1]}", *fv),
            ("XADD", key, f"{2**64 - 1}-0", "f", "z"),
            ("XTRIM", key, "MAXLEN", "~", "1"),
        ]
        reply = b""
        for c in cmds:
            reply = diff.check(*c) if check else ref.call(*c)
        return reply != b":0\r\n"

    for delta, fv in probes:
        lo, hi = 3000, 4095  # splits(lo) is False, splits(hi) is True
        assert not splits(lo, delta, fv, False) and splits(hi, delta, fv, False)
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if splits(mid, delta, fv, False):
                hi = mid
            else:
                lo = mid
        assert not splits(lo, delta, fv, True)
        assert splits(hi, delta, fv, True)


def test_layout_matches_redis_randomized(diff: Differ) -> None:
    """XADD/XDEL/XTRIM in a random mix: the counts approximate trims return reveal
    whether our node layout matches Redis' byte for byte."""
    rnd = random.Random(7)
    ms = 0
    ids: list[str] = []
    for _ in range(600):
        k = rnd.random()
        if k < 0.75:
            ms += rnd.randint(1, 1 << rnd.randint(1, 36))
            sid = f"{ms}-{rnd.randint(0, 1 << rnd.randint(1, 40))}"
            fv: list[str] = []
            for _ in range(rnd.randint(1, 3)):
                size = rnd.choice((1, 5, 30, 70, 300, 1500))
                value = str(rnd.randint(-(10**9), 10**12)) if size == 1 else "v" * size
                fv += [rnd.choice(("a", "b", "c")), value]
            diff.check("XADD", "s", sid, *fv)
            ids.append(sid)
        elif k < 0.85 and ids:
            diff.check("XDEL", "s", *rnd.sample(ids, min(len(ids), 3)))
        else:
            approx = rnd.choice(("~", "~", "="))
            if rnd.random() < 0.5:
                args = ["MAXLEN", approx, str(rnd.randint(0, max(len(ids) - 20, 1)))]
            else:
                args = ["MINID", approx, rnd.choice(ids) if ids else "0"]
            if approx == "~" and rnd.random() < 0.3:
                args += ["LIMIT", str(rnd.choice((0, 30, 120)))]
            diff.check("XTRIM", "s", *args)
    diff.run("""
        XLEN s
        XRANGE s - + COUNT 5
        XREVRANGE s + - COUNT 5
    """)


def test_xread(diff: Differ) -> None:
    diff.run("""
        XREAD STREAMS s 0
        XADD s 1-1 a 1
        XADD s 2-1 a 2 b 3
        XADD t 5-5 x y
        XREAD STREAMS s 0
        XREAD STREAMS s 1-1
        XREAD STREAMS s 1
        XREAD STREAMS s 2-1
        XREAD STREAMS s $
        XREAD COUNT 1 STREAMS s 0
        XREAD COUNT 0 STREAMS s 0
        XREAD COUNT -5 STREAMS s 0
        XREAD STREAMS s t 0 0
        XREAD STREAMS t s 0 0
        XREAD STREAMS s missing t 0 0 5-4
        XREAD STREAMS s t 2-1 0
        XREAD STREAMS s s 0 1-1
        XREAD COUNT 1 STREAMS s t missing $ 0 $
        XREAD streams s 0
        XREAD count 1 count 2 STREAMS s 0
        XREAD BLOCK 10 STREAMS s 0
        XREAD BLOCK 0 COUNT 1 STREAMS s t 0 0
        XREAD STREAMS s 18446744073709551615-18446744073709551615
        XREAD STREAMS s
        XREAD STREAMS s t 0
        XREAD STREAMS s -
        XREAD STREAMS s +
        XREAD STREAMS s >
        XREAD STREAMS s 1-*
        XREAD STREAMS s x
        XREAD STREAMS missing x
        XREAD COUNT x STREAMS s 0
        XREAD BLOCK x STREAMS s 0
        XREAD BLOCK -1 STREAMS s 0
        XREAD BLOCK 1.5 STREAMS s 0
        XREAD GROUP g c STREAMS s 0
        XREAD GROUP g STREAMS s 0
        XREAD NOACK STREAMS s 0
        XREAD FOO STREAMS s 0
        XREAD COUNT 1 s 0
        XREAD COUNT 1 BLOCK
        XREAD STREAMS
        XREAD s 0
        SET str x
        XREAD STREAMS str 0
        XREAD STREAMS s str 0 x
        XREAD STREAMS s str x 0
        XREAD STREAMS str s 0 >
    """)
    # A stream whose entries were all deleted has nothing to read.
    diff.run("""
        XADD e 1-1 a 1
        XDEL e 1-1
        XREAD STREAMS e 0
        XLEN e
        XADD e 1-2 a 1
        XADD e 2-2 a 1
        XDEL e 2-2
        XREAD STREAMS e 1-2
        XREAD STREAMS e 1-1
    """)


def test_xread_in_multi_does_not_block(diff: Differ) -> None:
    diff.run("""
        MULTI
        XREAD BLOCK 0 STREAMS s $
        XREAD BLOCK 100 STREAMS s 0
        XADD s 1-1 a 1
        XREAD BLOCK 0 STREAMS s 0
        XREAD BLOCK 0 STREAMS s $
        EXEC
    """)


def _pair(diff: Differ) -> tuple[list[RawClient], list[RawClient]]:
    """A blocking client and a writer for each server (ref first), in diff's protocol."""
    ports = (diff.ref.sock.getpeername()[1], diff.ours.sock.getpeername()[1])
    readers = [RawClient(p) for p in ports]
    writers = [RawClient(p) for p in ports]
    if diff.resp == 3:
        for c in readers + writers:
            c.call("HELLO", "3")
    return readers, writers


def _replies(clients: list[RawClient]) -> list[bytes]:
    return [c.read_reply() for c in clients]


def _wait_blocked(writers: list[RawClient]) -> None:
    """Until redis-server reports the reader blocked (and a moment for ours)."""
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:
        if b"blocked_clients:1\r" in writers[0].call("INFO", "clients"):
            break
        time.sleep(0.01)
    time.sleep(0.05)


def test_xread_block(diff: Differ) -> None:
    readers, writers = _pair(diff)
    try:
        diff.run("XADD s 1-1 a 1")
        # "$": only what arrives after the call.
        for r in readers:
            r.send(_cmd("XREAD", "BLOCK", "0", "STREAMS", "s", "$"))
        _wait_blocked(writers)
        # Writes that add nothing past our ID do not wake the reader.
        for w in writers:
            assert w.call("XDEL", "s", "1-1") == b":1\r\n"
            assert w.call("SET", "other", "x") == b"+OK\r\n"
        time.sleep(0.05)
        for w in writers:
            assert w.call("XADD", "s", "2-1", "b", "2") == b"$3\r\n2-1\r\n"
        ref, ours = _replies(readers)
        assert ours == ref and b"2-1" in ref and b"1-1" not in ref

        # Several keys, a missing one among them; COUNT limits the reply.
        for r in readers:
            r.send(_cmd("XREAD", "COUNT", "1", "BLOCK", "0", "STREAMS", "nokey", "s", "$", "$"))
        _wait_blocked(writers)
        for w in writers:
            w.call("MULTI")
            w.call("XADD", "nokey", "7-1", "k", "1")
            w.call("XADD", "nokey", "7-2", "k", "2")
            w.call("EXEC")
        ref, ours = _replies(readers)
        assert ours == ref and b"7-1" in ref and b"7-2" not in ref and b"$1\r\ns\r\n" not in ref

        # An explicit ID above the stream's last: woken only once passed.
        for r in readers:
            r.send(_cmd("XREAD", "BLOCK", "0", "STREAMS", "s", "5-0"))
        _wait_blocked(writers)
        for w in writers:
            w.call("XADD", "s", "4-1", "c", "3")
        time.sleep(0.05)
        for w in writers:
            w.call("XADD", "s", "6-1", "c", "4")
        ref, ours = _replies(readers)
        assert ours == ref and b"6-1" in ref and b"4-1" not in ref

        # The key becomes another type: still waiting, woken by a new stream.
        for r in readers:
            r.send(_cmd("XREAD", "BLOCK", "0", "STREAMS", "t", "$"))
        _wait_blocked(writers)
        for w in writers:
            w.call("SET", "t", "string")
        time.sleep(0.05)
        for w in writers:
            w.call("SET", "t", "again")
            w.call("FLUSHALL")
        time.sleep(0.05)
        for w in writers:
            w.call("XADD", "t", "1-1", "x", "y")
        ref, ours = _replies(readers)
        assert ours == ref and b"1-1" in ref

        # A deleted last entry: the reader waits past the valid entries; an XDEL
        # does not wake it, a later XADD does.
        for w in writers:
            w.call("XADD", "d", "1-1", "a", "1")
            w.call("XADD", "d", "2-1", "a", "2")
            w.call("XDEL", "d", "2-1")
        for r in readers:
            r.send(_cmd("XREAD", "BLOCK", "0", "STREAMS", "d", "1-1"))
        _wait_blocked(writers)
        for w in writers:
            w.call("XDEL", "d", "1-1")
        time.sleep(0.05)
        for w in writers:
            w.call("XADD", "d", "3-1", "a", "3")
        ref, ours = _replies(readers)
        assert ours == ref and b"3-1" in ref

        # Added then deleted in one transaction: woken with no entries.
        for r in readers:
            r.send(_cmd("XREAD", "BLOCK", "0", "STREAMS", "d", "$"))
        _wait_blocked(writers)
        for w in writers:
            w.call("MULTI")
            w.call("XADD", "d", "4-1", "a", "4")
            w.call("XDEL", "d", "4-1")
            w.call("EXEC")
        ref, ours = _replies(readers)
        assert ours == ref and b"4-1" not in ref

        # Timeout: the null array (RESP3 null).
        for r in readers:
            r.send(_cmd("XREAD", "BLOCK", "100", "STREAMS", "s", "$"))
        ref, ours = _replies(readers)
        assert ours == ref == (b"*-1\r\n" if diff.resp == 2 else b"_\r\n")

        # Requests sent while blocked run after the wake-up, in order.
        for r in readers:
            r.send(_cmd("XREAD", "BLOCK", "0", "STREAMS", "s", "$") + _cmd("XLEN", "s"))
        _wait_blocked(writers)
        for w in writers:
            w.call("XADD", "s", "9-9", "late", "1")
        for _ in range(2):
            ref, ours = _replies(readers)
            assert ours == ref
    finally:
        for c in readers + writers:
            c.close()


def _cmd(*args: str) -> bytes:
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a.encode()
        out.append(b"$%d\r\n%b\r\n" % (len(b), b))
    return b"".join(out)


# -- the ops: apply then undo gives back the exact prior value -----------------------


def _undo(db: Database, key: bytes, undo: tuple[tuple[object, ...], ...]) -> None:
    for op in reversed(undo):
        apply_op(db, key, op)


def test_ops_undo_exactly() -> None:
    rnd = random.Random(3)
    db = Database(0)
    key = b"s"
    ms = 0
    for step in range(3000):
        st = db.data.get(key)
        before = st.copy() if st is not None else None
        k = rnd.random()
        if k < 0.7 or st is None:
            ms += rnd.randint(1, 3)
            fv = tuple(b"x" * rnd.choice((1, 50, 900)) for _ in range(2 * rnd.randint(1, 3)))
            op: tuple[object, ...] = ("xadd", (ms, step), fv)
        elif k < 0.85:
            if not st.entries:
                continue
            op = ("xdel", tuple(rnd.sample(list(st.entries), min(len(st.entries), 4))))
        else:
            approx = rnd.random() < 0.5
            if rnd.random() < 0.5:
                plan = st.plan_trim(rnd.randint(0, len(st)), MIN_ID, approx, 0)
            else:
                plan = st.plan_trim(None, (ms - rnd.randint(0, 200), 0), approx, 0)
            if not (plan[0] or plan[1]):
                continue
            op = ("xtrim", plan[0], plan[1])
        undo = apply_op(db, key, op)
        after = db.data[key].copy()
        assert len(after) == len(after.range(MIN_ID, MAX_ID))
        redo = [u for o in reversed(undo) for u in apply_op(db, key, o)]
        if before is None:
            assert key not in db.data
        else:
            assert db.data[key] == before
        _undo(db, key, tuple(redo))
        assert db.data[key] == after
    st = db.data[key]
    assert isinstance(st, Stream) and st.copy() == st
    assert st.last_id[0] == ms and format_id(st.last_id).startswith(b"%d-" % ms)
