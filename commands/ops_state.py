"""Server-wide state of the introspection and control commands: the SLOWLOG entries,
the LATENCY monitor's event series, the per-command latency histograms' settings, the
MONITOR clients and a CLIENT PAUSE in force (`ServerState.ops`), and what the
dispatcher reads of them on every command (`ServerState.slow_ns`,
`latency_tracking`, `monitors`, `gate`).

Timing (the dispatcher, `commands.dispatch`): every command's duration is known with
one clock read. A batch of requests read together starts with one read
(`ServerState.clock_mark`); each command's end is read once and is the next command's
start. So a command's time runs from the end of the one before it in the batch: it
includes that command's reply encoding and its own dispatch checks, a few
microseconds. Commands run inside EXEC or by a script read the clock at their start
too (two reads), so a script's Lua time between two `redis.call`s is never charged
to the second call.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from commands.registry import bucket_high

# What nothing reaches: the slow path's threshold when nothing records slow commands.
NEVER = 1 << 62

LATENCY_TS_LEN = 160  # samples kept per latency event, as Redis

PAUSE_OFF = 0
PAUSE_WRITE = 1
PAUSE_ALL = 2

# CLIENT REPLY modes (Session.reply_mode); 0 is ON.
REPLY_OFF = 1
REPLY_SKIP_NEXT = 2  # set by CLIENT REPLY SKIP: the next command's reply is dropped
REPLY_SKIP = 3  # ... this one's
# A MONITOR client whose replies are on: the lines of its own commands wait in
# `Session.extra[MONITOR_LINES]` to follow the command's reply, as in Redis.
REPLY_MONITOR = 4
MONITOR_LINES = "monitor.lines"


@dataclass(slots=True)
class SlowEntry:
    id: int
    time: int  # unix seconds
    duration: int  # microseconds
    argv: list[bytes]
    peer: bytes
    name: bytes


@dataclass(slots=True)
class LatencySeries:
    """One event's latest samples (unix second, ms), at most one per second."""

    samples: deque[tuple[int, int]] = field(default_factory=lambda: deque(maxlen=LATENCY_TS_LEN))
    max: int = 0


@dataclass
class PauseState:
    kind: int = PAUSE_OFF
    end: float = 0.0  # time.monotonic() when it ends
    # Connections' wake-ups, in the order their commands were paused.
    waiters: list[Callable[[], None]] = field(default_factory=list)


class OpsState:
    """SLOWLOG, LATENCY and CLIENT PAUSE state of one server."""

    def __init__(self, params: dict[str, str]) -> None:
        self.slowlog: deque[SlowEntry] = deque()
        self.slowlog_next_id = 0
        self.slowlog_us = int(params.get("slowlog-log-slower-than", "10000"))
        self.slowlog_max = int(params.get("slowlog-max-len", "128"))
        self.latency_ms = int(params.get("latency-monitor-threshold", "0"))
        self.events: dict[str, LatencySeries] = {}
        self.percentiles = parse_percentiles(
            params.get("latency-tracking-info-percentiles", "50 99 99.9")
        )
        self.pause = PauseState()

    def slow_ns(self) -> int:
        """The shortest duration (ns) the slowlog or the latency monitor records."""
        limits = []
        if self.slowlog_us >= 0:
            limits.append(self.slowlog_us * 1000)
        if self.latency_ms > 0:
            limits.append(self.latency_ms * 1_000_000)
        return min(limits, default=NEVER)

    def add_latency(self, event: str, ms: int) -> None:
        """Redis' latencyAddSampleIfNeeded: `ms` joins the event's series when the
        monitor is on and it reaches the threshold (one sample per second: the
        largest)."""
        if not self.latency_ms or ms < self.latency_ms:
            return
        ts = self.events.get(event)
        if ts is None:
            ts = self.events[event] = LatencySeries()
        ts.max = max(ts.max, ms)
        now = int(time.time())
        if ts.samples and ts.samples[-1][0] == now:
            if ms > ts.samples[-1][1]:
                ts.samples[-1] = (now, ms)
            return
        ts.samples.append((now, ms))


def parse_percentiles(value: str) -> list[float]:
    """latency-tracking-info-percentiles as Redis reads it (ValueError: its reason)."""
    words = value.split()
    out = []
    for w in words:
        try:
            p = float(w)
        except ValueError:
            raise ValueError("Invalid latency-tracking-info-percentiles parameters") from None
        if p != p or p in (float("inf"), float("-inf")):
            raise ValueError("Invalid latency-tracking-info-percentiles parameters")
        if p > 100.0 or p < 0.0:
            raise ValueError(
                "latency-tracking-info-percentiles parameters should sit between [0.0,100.0]"
            )
        out.append(p)
    return out


def format_percentile(p: float) -> str:
    """`%f` with the trailing zeros (and point) trimmed, as Redis' trimDoubleString."""
    text = f"{p:f}"
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def normalize_percentiles(value: str) -> str:
    """The value CONFIG GET shows after CONFIG SET (ValueError: Redis' reason)."""
    return " ".join(format_percentile(p) for p in parse_percentiles(value))


# -- latency histograms (CommandStats.hist, filled by the dispatcher) --------------------

HIST_MAX_NS = 1_000_000_000  # Redis tracks 1 ns .. 1 s; longer calls count as 1 s


def hist_percentile(hist: list[int], p: float) -> int:
    """Redis' hdr_value_at_percentile: the highest duration (ns) of the bucket holding
    the call at percentile `p`."""
    total = sum(hist)
    want = max(1, int(p / 100 * total + 0.5))
    seen = 0
    for i, n in enumerate(hist):
        seen += n
        if n and seen >= want:
            return min(bucket_high(i), HIST_MAX_NS)
    return 0


def hist_cdf(hist: list[int]) -> list[tuple[int, int]]:
    """LATENCY HISTOGRAM's histogram_usec: (bound in µs, calls under it) for the powers
    of two from 1024 ns up, where the cumulative count grows."""
    total = sum(hist)
    out = []
    cum = 0
    prev = 0
    for b, n in enumerate(hist):
        cum += n
        if b < 10:
            continue  # inside the first bucket (up to 1024 ns)
        bound = 1 << b  # every call counted so far took less
        if bound > HIST_MAX_NS * 2:
            cum = total  # past 1 s: all the rest (Redis caps at 1 s)
        if cum > prev:
            # Redis names the step by the highest value its HDR histogram (2
            # significant digits) holds in the bucket of 2**b: 2**b + 2**(b-7) - 1.
            out.append(((bound + (bound >> 7) - 1) // 1000, cum))
            prev = cum
        if cum == total:
            break
    return out
