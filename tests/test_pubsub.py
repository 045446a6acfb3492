"""Differential tests of pub/sub against redis-server, RESP2 and RESP3: extra raw
connections to both servers, subscribing on some and publishing on others, and
comparing every byte each connection receives."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from tests.conftest import Differ
from tests.resp_client import RawClient, encode_command, parse


class Pair:
    """One more connection to each server, driven in lockstep (same protocol as
    the `diff` fixture unless `resp` says otherwise)."""

    def __init__(self, diff: Differ, resp: int | None = None) -> None:
        self.ref = RawClient(diff.ref.sock.getpeername()[1])
        self.ours = RawClient(diff.ours.sock.getpeername()[1])
        self.resp = diff.resp if resp is None else resp
        if self.resp == 3:
            self.check("HELLO", "3", normalize=True)

    def close(self) -> None:
        self.ref.close()
        self.ours.close()

    def send(self, *args: Any) -> None:
        data = encode_command(*args)
        self.ref.send(data)
        self.ours.send(data)

    def send_raw(self, data: bytes) -> None:
        self.ref.send(data)
        self.ours.send(data)

    def read(self) -> bytes:
        """The next reply (or push) on each connection; they must be identical."""
        ref, ours = self.ref.read_reply(), self.ours.read_reply()
        assert ours == ref, f"(RESP{self.resp})\nredis: {ref!r}\nours:  {ours!r}"
        return ref

    def check(self, *args: Any, frames: int = 1, normalize: bool = False) -> bytes:
        """Send one command; compare the next `frames` frames (SUBSCRIBE a b: 2)."""
        self.send(*args)
        if normalize:  # HELLO: the client id differs
            self.ref.read_reply()
            self.ours.read_reply()
            return b""
        return b"".join(self.read() for _ in range(frames))

    def read_unordered(self, n: int) -> None:
        """The next `n` frames, whose names (element 1: channel or pattern) Redis sends
        in hash-table order: the same names, and the same sequence without them."""

        def take(c: RawClient) -> tuple[list[Any], list[Any]]:
            frames = [parse(c.read_reply()) for _ in range(n)]
            names = sorted(items[1] for _kind, items in frames)
            shape = [(kind, items[:1] + items[2:]) for kind, items in frames]
            return names, shape

        ref, ours = take(self.ref), take(self.ours)
        assert ours == ref, f"(RESP{self.resp})\nredis: {ref!r}\nours:  {ours!r}"


@pytest.fixture
def pairs(diff: Differ) -> Iterator[Any]:
    """A factory of extra connection pairs, closed after the test."""
    made: list[Pair] = []

    def make(resp: int | None = None) -> Pair:
        p = Pair(diff, resp)
        made.append(p)
        return p

    yield make
    for p in made:
        p.close()


def wait_numsub(diff: Differ, channel: str, n: int) -> None:
    """Closed connections are cleaned up asynchronously: wait until both agree."""
    deadline = time.monotonic() + 5
    while True:
        ref, ours = diff.both("PUBSUB", "NUMSUB", channel)
        want = b"*2\r\n$%d\r\n%b\r\n:%d\r\n" % (len(channel), channel.encode(), n)
        if ref == ours == want or time.monotonic() > deadline:
            assert ours == ref == want
            return
        time.sleep(0.02)


def test_subscribe_publish(diff: Differ, pairs: Any) -> None:
    sub = pairs()
    sub.check("SUBSCRIBE", "news")
    sub.check("SUBSCRIBE", "news", "sport", "news", frames=3)
    diff.run("""
        PUBLISH news hello
        PUBLISH sport ""
        PUBLISH nobody x
        PUBLISH News x
        PUBSUB NUMSUB news sport nobody
        PUBSUB NUMSUB
        PUBSUB NUMPAT
        PUBSUB CHANNELS nob*
        PUBLISH
        PUBLISH news
        PUBLISH news a b
    """)
    sub.read()
    sub.read()
    diff.check("PUBLISH", "news", b"bin\x00\r\n\xff")
    sub.read()
    diff.check("PUBSUB", "CHANNELS", unordered=1)
    diff.check("PUBSUB", "CHANNELS", "*s*", unordered=1)
    diff.check("PUBSUB", "CHANNELS", "s?ort")
    # The subscriber's replies and the messages interleave in one stream.
    sub.check("PING")
    sub.check("PING", "hi")
    diff.check("PUBLISH", "sport", "goal")
    sub.read()
    sub.check("UNSUBSCRIBE", "news", "nothing", frames=2)
    diff.run("""
        PUBLISH news gone
        PUBLISH sport still
        PUBSUB NUMSUB news sport
    """)
    sub.read()
    sub.check("UNSUBSCRIBE")
    sub.check("UNSUBSCRIBE")
    sub.check("PUNSUBSCRIBE")
    diff.check("PUBLISH", "sport", "gone")
    sub.check("PING")


def test_several_subscribers_in_order(diff: Differ, pairs: Any) -> None:
    a, b, c = pairs(), pairs(), pairs()
    a.check("SUBSCRIBE", "ch")
    b.check("PSUBSCRIBE", "c*")
    c.check("SUBSCRIBE", "ch")
    c.check("PSUBSCRIBE", "c*", "?h", frames=2)
    diff.check("PUBLISH", "ch", "m1")
    a.read()
    b.read()
    c.read()
    c.read_unordered(2)  # two patterns match: Redis delivers in hash-table order
    diff.run("""
        PUBSUB NUMSUB ch
        PUBSUB NUMPAT
        PUBLISH cx m2
        PUBLISH xh m3
    """)
    b.read()
    c.read()
    c.read()
    c.check("PUNSUBSCRIBE", "c*")
    diff.check("PUBSUB", "NUMPAT")
    diff.check("PUBLISH", "ch", "m4")
    a.read()
    b.read()
    c.read()
    c.read()
    for p in (a, b, c):
        p.check("PING")


def test_patterns(diff: Differ, pairs: Any) -> None:
    sub = pairs()
    sub.check("PSUBSCRIBE", "h?llo", "h[ae]llo", "h[^e]llo", r"lit\*", "x[a-c]y", "*", frames=6)
    sub.check("PSUBSCRIBE", "h?llo")
    sub.check("SUBSCRIBE", "hello")
    diff.check("PUBSUB", "NUMPAT")
    for channel, hits in (
        ("hello", 4),
        ("hallo", 4),
        ("hxllo", 3),
        ("lit*", 2),
        ("litx", 1),
        ("xby", 2),
        ("xdy", 1),
    ):
        diff.check("PUBLISH", channel, "m")
        sub.read_unordered(hits)
    diff.check("PUBSUB", "CHANNELS", "h*")
    # Without arguments, patterns are dropped in subscription order.
    sub.check("PUNSUBSCRIBE", "x[a-c]y", "nope", frames=2)
    sub.check("PUNSUBSCRIBE", frames=5)
    sub.check("PUNSUBSCRIBE")
    diff.check("PUBSUB", "NUMPAT")
    sub.check("UNSUBSCRIBE")
    sub.check("PING")


def test_pattern_never_matches_empty_channel(diff: Differ, pairs: Any) -> None:
    """Redis' matcher: the empty channel matches no pattern, not even `*`."""
    sub = pairs()
    sub.check("PSUBSCRIBE", "*", "**", frames=2)
    diff.check("PUBLISH", "", "m")
    diff.check("PUBLISH", "x", "m")
    sub.read_unordered(2)
    sub.check("PUNSUBSCRIBE", frames=2)


def test_unsubscribe_all_channels(diff: Differ, pairs: Any) -> None:
    sub = pairs()
    sub.check("SUBSCRIBE", "u1", "u2", "u3", "u4", frames=4)
    sub.check("PSUBSCRIBE", "u*")
    sub.send("UNSUBSCRIBE")
    sub.read_unordered(4)  # hash-table order in Redis; the counts go down in order
    sub.check("UNSUBSCRIBE", "u1")
    sub.check("PUNSUBSCRIBE", "u*")
    diff.check("PUBLISH", "u1", "x")
    sub.check("PING")


def test_subscribe_context(diff: Differ, pairs: Any) -> None:
    sub = pairs()
    sub.check("SUBSCRIBE", "ctx")
    # RESP2 allows only (P)(UN)SUBSCRIBE, PING, QUIT and RESET; RESP3 anything.
    sub.check("GET", "k")
    sub.check("SET", "k", "v")
    sub.check("PUBSUB", "NUMSUB", "ctx")
    sub.check("MULTI")
    sub.check("DISCARD")
    sub.check("PUBLISH", "ctx", "self")  # RESP3: our own message comes first
    if diff.resp == 3:
        sub.read()
    sub.check("PING")
    sub.check("PING", "a", "b")
    sub.check("SUBSCRIBE")
    sub.check("PSUBSCRIBE")
    sub.check("UNSUBSCRIBE", "ctx")
    sub.check("GET", "k")
    sub.check("PING")


def test_publish_to_self_keeps_reply_order(diff: Differ, pairs: Any) -> None:
    c = pairs(3)
    c.check("SUBSCRIBE", "me")
    c.check("PSUBSCRIBE", "m*")
    c.send_raw(
        encode_command("PING")
        + encode_command("PUBLISH", "me", "x")
        + encode_command("PING", "after")
    )
    c.read()
    c.read_unordered(2)
    for _ in range(2):
        c.read()
    c.check("PUNSUBSCRIBE")
    c.send_raw(encode_command("PUBLISH", "me", "y") + encode_command("ECHO", "z"))
    for _ in range(3):
        c.read()


def test_subscribe_inside_multi(diff: Differ, pairs: Any) -> None:
    c = pairs()
    c.check("MULTI")
    c.check("SUBSCRIBE", "t1", "t2")  # queued: one reply
    c.check("PUBLISH", "t1", "inside")
    c.check("PING")
    # Redis counts SUBSCRIBE as one reply of EXEC but writes one frame per channel,
    # and the message to ourselves lands in the middle of the EXEC reply.
    c.check("EXEC")
    for _ in range(2):
        c.read()
    c.check("UNSUBSCRIBE", "t1")
    c.check("UNSUBSCRIBE", "t2")
    c.check("PING")


def test_reset_and_disconnect_clean_up(diff: Differ, pairs: Any) -> None:
    a, b = pairs(), pairs()
    a.check("SUBSCRIBE", "gone")
    a.check("PSUBSCRIBE", "gon?")
    a.check("RESET")
    diff.check("PUBLISH", "gone", "x")
    diff.check("PUBSUB", "NUMPAT")
    a.check("PUNSUBSCRIBE")
    a.check("GET", "k")
    b.check("SUBSCRIBE", "gone")
    diff.check("PUBLISH", "gone", "y")
    b.read()
    b.check("QUIT")
    assert b.ref.read_closed() and b.ours.read_closed()
    wait_numsub(diff, "gone", 0)
    diff.check("PUBLISH", "gone", "z")


def test_pubsub_introspection_errors(diff: Differ) -> None:
    diff.run("""
        PUBSUB
        PUBSUB FOO
        PUBSUB CHANNELS a b
        PUBSUB channels a b c
        PUBSUB NUMPAT x
        PUBSUB HELP
        PUBSUB help x
        PUBSUB SHARDCHANNELS
        PUBSUB SHARDCHANNELS x*
        PUBSUB SHARDCHANNELS a b
        PUBSUB SHARDNUMSUB
        PUBSUB SHARDNUMSUB a b
        PUBSUB NUMSUB a a
        PUBSUB CHANNELS
        SUBSCRIBE
        PSUBSCRIBE
        UNSUBSCRIBE
        PUNSUBSCRIBE
    """)


def test_channel_patterns(diff: Differ, pairs: Any) -> None:
    """PUBSUB CHANNELS and PUBLISH use Redis' glob matching, odd patterns included."""
    names = ["a", "b", "ab", "a[", "[", "a-c", "a\\", "*", "x?y", "A", "b]", "^"]
    sub = pairs()
    sub.check("SUBSCRIBE", *names, frames=len(names))
    for pat in (
        "[",
        "a[",
        "[^]",
        "\\",
        "a\\",
        "[z-a]",
        "[]]",
        "[!a]",
        "\\*",
        "?",
        "[\\]]",
        "a[-c]",
        "[^a]",
        "[A-a]",
        "a*[",
        "*\\",
        "[a",
        "[\\",
    ):
        diff.check("PUBSUB", "CHANNELS", pat, unordered=1)
    sub.check("UNSUBSCRIBE", *names, frames=len(names))


def test_range_ending_in_bracket(diff: Differ, pairs: Any) -> None:
    """Redis reads `[a-]` as the range `]`..`a` (the `]` ends the range, not the class)."""
    names = ["a", "-", "^", "]", "b"]
    sub = pairs()
    sub.check("SUBSCRIBE", *names, frames=len(names))
    diff.check("PUBSUB", "CHANNELS", "[a-]", unordered=1)
    sub.check("PSUBSCRIBE", "[a-]")
    diff.check("PUBLISH", "^", "x")
    sub.read_unordered(2)
    sub.check("UNSUBSCRIBE", *names, frames=len(names))
    sub.check("PUNSUBSCRIBE")
