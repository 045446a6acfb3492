"""LATENCY, INFO latencystats, LOLWUT and MODULE against redis-server, RESP2 and RESP3:
deterministic replies byte for byte; timings (histograms, samples, graphs) by their
shape on both servers."""

from __future__ import annotations

import random
import re
from collections.abc import Iterator
from typing import Any

import pytest

from commands.lolwut import Canvas, braille
from tests.conftest import Differ
from tests.resp_client import RawClient, parse

# A script that keeps the server busy for some milliseconds on both servers.
BUSY = "local i = 0 while i < tonumber(ARGV[1]) do i = i + 1 end return i"


@pytest.fixture
def lat(diff: Differ) -> Iterator[Differ]:
    yield diff
    for c in (diff.ref, diff.ours):
        c.call("CONFIG", "SET", "latency-monitor-threshold", "0", "latency-tracking", "yes")
        c.call("CONFIG", "SET", "latency-tracking-info-percentiles", "50 99 99.9")
        c.call("LATENCY", "RESET")


def _plain(v: Any) -> Any:
    """A parsed reply as plain values (maps as dicts, in RESP2 from flat arrays)."""
    kind, body = v[0], v[1] if len(v) > 1 else None
    if kind in ("*", "~") and body is not None:
        return [_plain(x) for x in body]
    if kind == "%":
        return {_plain(body[i]): _plain(body[i + 1]) for i in range(0, len(body), 2)}
    if kind == ":":
        return int(body)
    return body


def _histogram(c: RawClient, resp: int, *names: str) -> dict[bytes, Any]:
    got = _plain(parse(c.call("LATENCY", "HISTOGRAM", *names)))
    if resp == 2:  # flat arrays: name, [calls, n, histogram_usec, [bound, count ...]]
        out = {}
        for name, body in zip(got[::2], got[1::2], strict=True):
            fields = dict(zip(body[::2], body[1::2], strict=True))
            h = fields[b"histogram_usec"]
            fields[b"histogram_usec"] = dict(zip(h[::2], h[1::2], strict=True))
            out[name] = fields
        return out
    assert isinstance(got, dict)
    return got


def _check_histogram(h: dict[bytes, Any]) -> dict[bytes, int]:
    """Each command's histogram: cumulative counts up to its calls at growing powers
    of two of µs; returns the calls by command."""
    calls = {}
    for name, fields in h.items():
        assert list(fields) == [b"calls", b"histogram_usec"]
        bounds = list(fields[b"histogram_usec"].items())
        assert bounds and bounds[-1][1] == fields[b"calls"]
        assert [b for b, _ in bounds] == sorted(b for b, _ in bounds)
        assert [n for _, n in bounds] == sorted(n for _, n in bounds)
        for b, _ in bounds:
            assert b in {((1024 << k) + (8 << k) - 1) // 1000 for k in range(21)}, b
        calls[name] = fields[b"calls"]
    return calls


def test_latency_errors_and_help(lat: Differ) -> None:
    lat.run("""
        LATENCY
        LATENCY HELP
        LATENCY HELP xxx
        LATENCY FOO
        LATENCY HISTORY
        LATENCY HISTORY blabla
        LATENCY RESET blabla
        LATENCY RESET
        LATENCY LATEST
        LATENCY GRAPH blabla
        LATENCY GRAPH
        LATENCY DOCTOR x
        LATENCY DOCTOR
        CONFIG SET latency-monitor-threshold -1
        CONFIG SET latency-tracking maybe
        CONFIG SET latency-tracking-info-percentiles "10.0 50.0 a"
        CONFIG SET latency-tracking-info-percentiles "10.0 50.0 101.0"
        CONFIG SET latency-tracking-info-percentiles "10.0 -1"
        CONFIG GET latency-tracking-info-percentiles
        CONFIG SET latency-tracking-info-percentiles "0.0 50.0 100.0"
        CONFIG GET latency-tracking-info-percentiles
        CONFIG SET latency-tracking-info-percentiles "99.99 1e1 .5"
        CONFIG GET latency-tracking-info-percentiles
        CONFIG SET latency-tracking-info-percentiles ""
        CONFIG GET latency-tracking-info-percentiles
    """)


def test_latency_histogram(lat: Differ) -> None:
    seen = []
    for c in (lat.ref, lat.ours):
        c.call("CONFIG", "RESETSTAT")
        first = _histogram(c, lat.resp)
        c.call("SET", "a", "b")
        c.call("SET", "c", "d")
        c.call("GET", "a")
        c.call("CLIENT", "ID")
        c.call("CLIENT", "GETNAME")
        c.call("HSET", "hh", "k", "v")
        every = _check_histogram(_histogram(c, lat.resp))
        some = _check_histogram(_histogram(c, lat.resp, "set", "hset", "zadd", "blabla"))
        sub = _check_histogram(_histogram(c, lat.resp, "client"))
        one = _check_histogram(_histogram(c, lat.resp, "client|id", "GET"))
        seen.append((_check_histogram(first), every, some, sub, one))
    assert seen[0] == seen[1], f"redis: {seen[0]}\nours:  {seen[1]}"
    assert seen[1][0] == {b"config|resetstat": 1}
    lat.record(6, True)


def _latencystats(c: RawClient) -> dict[str, str]:
    text = parse(c.call("INFO", "latencystats"))[1].decode().removeprefix("txt:")
    return dict(
        line.split(":", 1) for line in text.split("\r\n") if line and not line.startswith("#")
    )


def test_info_latencystats(lat: Differ) -> None:
    shapes = []
    for c in (lat.ref, lat.ours):
        c.call("CONFIG", "RESETSTAT")
        c.call("CONFIG", "SET", "latency-tracking", "no")
        c.call("SET", "a", "b")
        off = _latencystats(c)
        c.call("CONFIG", "SET", "latency-tracking", "yes")
        c.call("SET", "a", "b")
        c.call("EVAL", BUSY, "0", "3000000")
        on = _latencystats(c)
        c.call("CONFIG", "SET", "latency-tracking-info-percentiles", "0.0 50.0 100.0")
        other = _latencystats(c)
        values = re.fullmatch(
            r"p0=([\d.]+),p50=([\d.]+),p100=([\d.]+)", other["latency_percentiles_usec_eval"]
        )
        assert values is not None
        low, mid, high = (float(v) for v in values.groups())
        assert 1000 < low <= mid <= high  # the busy script took milliseconds
        c.call("CONFIG", "RESETSTAT")
        reset = _latencystats(c)
        shapes.append(
            [{k: re.sub(r"[\d.]+", "N", v) for k, v in d.items()} for d in (off, on, other, reset)]
        )
    assert shapes[0] == shapes[1], f"redis: {shapes[0]}\nours:  {shapes[1]}"
    assert "latency_percentiles_usec_set" in shapes[1][1]
    assert shapes[1][0] == {}  # nothing while latency-tracking is no
    assert shapes[1][3] == {"latency_percentiles_usec_config|resetstat": "pN=N,pN=N,pN=N"}
    lat.record(4, True)


def test_latency_monitor_events(lat: Differ) -> None:
    replies = []
    for c in (lat.ref, lat.ours):
        c.call("LATENCY", "RESET")
        c.call("CONFIG", "SET", "latency-monitor-threshold", "1")
        c.call("EVAL", BUSY, "0", "3000000")
        latest = _plain(parse(c.call("LATENCY", "LATEST")))
        history = _plain(parse(c.call("LATENCY", "HISTORY", "command")))
        graph = parse(c.call("LATENCY", "GRAPH", "command"))[1].decode().removeprefix("txt:")
        doctor = parse(c.call("LATENCY", "DOCTOR"))[1].decode().removeprefix("txt:")
        [[event, when, ms, worst]] = [e for e in latest if e[0] == b"command"]
        assert ms >= 1 and worst >= ms and abs(when - history[-1][0]) <= 1
        head, rule, *art = graph.split("\n")
        assert re.fullmatch(r"command - high \d+ ms, low \d+ ms \(all time high \d+ ms\)", head)
        assert rule == "-" * 80
        assert "1. command: 1 latency spikes" in doctor
        replies.append((event, len(history), len(art), re.sub(r"\d+", "N", doctor.split("\n")[2])))
        assert c.call("LATENCY", "RESET", "COMMAND") == b":1\r\n"
        assert c.call("LATENCY", "LATEST") == (b"*0\r\n")
    assert replies[0] == replies[1], f"redis: {replies[0]}\nours:  {replies[1]}"
    lat.record(6, True)


def test_module(diff: Differ) -> None:
    diff.run("""
        MODULE
        MODULE LIST
        MODULE LIST x
        MODULE HELP
        MODULE FOO
        MODULE LOAD /nonexistent.so
        MODULE LOAD /nonexistent.so a b
        MODULE LOADEX /nonexistent.so CONFIG a b
        MODULE UNLOAD nosuchmodule
        MODULE UNLOAD
    """)


def test_lolwut(diff: Differ) -> None:
    diff.run("""
        LOLWUT
        LOLWUT foo
        LOLWUT VERSION
        LOLWUT VERSION x
        LOLWUT VERSION 4
        LOLWUT VERSION 7
        LOLWUT VERSION 5 x
        LOLWUT VERSION 6 10 x
    """)
    for args in (
        ("5",),
        ("4294967301",),
        ("5", "10", "4", "3"),
        ("5", "1", "1", "1"),
        ("6", "12", "5"),
        ("6",),
    ):
        ref, ours = diff.both("LOLWUT", "VERSION", *args)
        ref_text, ours_text = (parse(r)[1].decode().removeprefix("txt:") for r in (ref, ours))
        ref_lines, our_lines = ref_text.split("\n"), ours_text.split("\n")
        assert len(our_lines) == len(ref_lines), args
        assert our_lines[-3:] == ref_lines[-3:]  # the caption
        for a, b in zip(ref_lines[:-3], our_lines[:-3], strict=True):
            if args[0] != "6":
                assert len(a) == len(b) and all(0x2800 <= ord(ch) <= 0x28FF for ch in b)
            else:
                assert a.count("\033[0m") == b.count("\033[0m")
        diff.record(1, True)


def _braille_pixel_by_pixel(canvas: Canvas) -> str:
    """lolwut5.c's renderCanvas, one pixel at a time."""
    rows = []
    for y in range(0, canvas.height, 4):
        chars = []
        for x in range(0, canvas.width, 2):
            bits = 0
            for (dx, dy), bit in (((0, 0), 0), ((0, 1), 1), ((0, 2), 2), ((1, 0), 3)):
                bits |= canvas.get(x + dx, y + dy) << bit
            for (dx, dy), bit in (((1, 1), 4), ((1, 2), 5), ((0, 3), 6), ((1, 3), 7)):
                bits |= canvas.get(x + dx, y + dy) << bit
            chars.append(chr(0x2800 + bits))
        rows.append("".join(chars))
    return "\n".join(rows) + ("\n" if (canvas.height - 1) % 4 else "")


@pytest.mark.parametrize("size", [(1, 1), (2, 4), (3, 5), (7, 9), (132, 138), (20, 3)])
def test_braille_rendering(size: tuple[int, int]) -> None:
    rng = random.Random(size[0] * 1000 + size[1])
    canvas = Canvas(*size, 0)
    for i in range(len(canvas.pixels)):
        canvas.pixels[i] = rng.getrandbits(1)
    assert braille(canvas) == _braille_pixel_by_pixel(canvas)
