"""LATENCY, as Redis 7.0.15 answers it.

LATENCY LATEST · LATENCY HISTORY event · LATENCY RESET [event ...] · LATENCY GRAPH event
LATENCY DOCTOR · LATENCY HISTOGRAM [command ...] · LATENCY HELP
    The monitor (latency-monitor-threshold ms; 0: off) keeps, per event, the latest 160
    samples (one per second: the largest) and the all-time maximum. Events recorded
    here: `command` and `fast-command` (a command's duration, commands.ops_log) and
    `expire-cycle` (one pass of active expiry, proxy.server's cron). HISTOGRAM
    answers from the per-command latency histograms the dispatcher keeps while
    latency-tracking is yes (commands.registry `CommandStats.hist`), which INFO
    latencystats reads too.
"""

from __future__ import annotations

import os
import time
from typing import Any

from commands.common import help_reply
from commands.errors import CommandError
from commands.ops_state import LatencySeries, hist_cdf
from commands.registry import Flag, command, container, lookup_by_name
from commands.replies import PairsMap, Reply, Verbatim
from commands.session import ServerCore, Session

LATENCY_FLAGS = Flag.ADMIN | Flag.NOSCRIPT | Flag.LOADING | Flag.STALE
NO_SAMPLES = "ERR No samples available for event '{}'"
GRAPH_COLS = 80

LATENCY_HELP = [
    "DOCTOR",
    "    Return a human readable latency analysis report.",
    "GRAPH <event>",
    "    Return an ASCII latency graph for the <event> class.",
    "HISTORY <event>",
    "    Return time-latency samples for the <event> class.",
    "LATEST",
    "    Return the latest latency samples for all events.",
    "RESET [<event> ...]",
    "    Reset latency data of one or more <event> classes.",
    "    (default: reset all data for all event classes)",
    "HISTOGRAM [COMMAND ...]",
    "    Return a cumulative distribution of latencies in the format of a histogram for "
    "the specified command names.",
    "    If no commands are specified then all histograms are replied.",
]

container("latency", -2)


@command("latency|latest", 2, LATENCY_FLAGS)
def cmd_latency_latest(s: Session, argv: list[bytes]) -> Reply:
    return [
        [name.encode(), ts.samples[-1][0], ts.samples[-1][1], ts.max]
        for name, ts in s.server.ops.events.items()
    ]


@command("latency|history", 3, LATENCY_FLAGS)
def cmd_latency_history(s: Session, argv: list[bytes]) -> Reply:
    ts = s.server.ops.events.get(argv[2].decode("utf-8", "replace"))
    return [] if ts is None else [[t, ms] for t, ms in ts.samples]


@command("latency|reset", -2, LATENCY_FLAGS)
def cmd_latency_reset(s: Session, argv: list[bytes]) -> Reply:
    events = s.server.ops.events
    if len(argv) == 2:
        n = len(events)
        events.clear()
        return n
    resets = 0
    for arg in argv[2:]:
        wanted = arg.decode("utf-8", "replace").lower()
        for name in [e for e in events if e.lower() == wanted]:
            del events[name]
            resets += 1
    return resets


@command("latency|graph", 3, LATENCY_FLAGS)
def cmd_latency_graph(s: Session, argv: list[bytes]) -> Reply:
    name = argv[2].decode("utf-8", "replace")
    ts = s.server.ops.events.get(name)
    if ts is None:
        raise CommandError(NO_SAMPLES.format(name))
    return Verbatim(graph(name, ts).encode())


@command("latency|doctor", 2, LATENCY_FLAGS)
def cmd_latency_doctor(s: Session, argv: list[bytes]) -> Reply:
    return Verbatim(doctor(s.server).encode())


@command("latency|histogram", -2, LATENCY_FLAGS)
def cmd_latency_histogram(s: Session, argv: list[bytes]) -> Reply:
    stats = s.server.command_stats
    names: list[str] = []
    if len(argv) == 2:
        names = sorted(n for n, st in stats.items() if any(st.hist))
    else:
        for arg in argv[2:]:
            cmd = lookup_by_name(arg)
            if cmd is None:
                continue
            names.append(cmd.name)
            if cmd.subcommands is not None:
                names += sorted({c.name for c in cmd.subcommands.values()})
    pairs: list[tuple[bytes, Any]] = []
    for name in names:
        st = stats.get(name)
        if st is None or not any(st.hist):
            continue
        cdf: dict[int, int] = dict(hist_cdf(st.hist))
        pairs.append((name.encode(), {b"calls": sum(st.hist), b"histogram_usec": cdf}))
    return PairsMap(pairs)


@command("latency|help", 2, Flag.LOADING | Flag.STALE)
def cmd_latency_help(s: Session, argv: list[bytes]) -> Reply:
    return help_reply(argv[0], LATENCY_HELP)


# -- GRAPH -------------------------------------------------------------------------------


def _ago(elapsed: int) -> str:
    if elapsed < 60:
        return f"{elapsed}s"
    if elapsed < 3600:
        return f"{elapsed // 60}m"
    if elapsed < 3600 * 24:
        return f"{elapsed // 3600}h"
    return f"{elapsed // (3600 * 24)}d"


def sparkline(samples: list[tuple[float, str]], columns: int, rows: int) -> str:
    """Redis' sparklineRender with SPARKLINE_FILL: rows of `_o#|` and labels below."""
    if not samples:
        return ""
    values = [v for v, _ in samples]
    lo, hi = min(values), max(values)
    relmax = (hi - lo) or 1.0
    steps = 3 * rows
    labels = any(label for _, label in samples)
    out = []
    for start in range(0, len(samples), columns):
        if start:
            out.append("\n")
        part = samples[start : start + columns]
        row = 0
        while True:
            chars = [" "] * len(part)
            more = False
            for j, (value, label) in enumerate(part):
                step = int(int((value - lo) * steps) / relmax)
                step = min(max(step, 0), steps - 1)
                if row < rows:
                    more = True
                    idx = step - (rows - row - 1) * 3
                    if 0 <= idx < 3:
                        chars[j] = "_o#"[idx]
                    elif idx >= 3:
                        chars[j] = "|"
                else:
                    if labels and row - rows < 1:
                        more = True
                        break
                    k = row - rows - 1
                    if len(label) > k:
                        more = True
                        chars[j] = label[k]
            if not more:
                break
            row += 1
            out.append("".join(chars) + "\n")
    return "".join(out)


def graph(name: str, ts: LatencySeries) -> str:
    now = int(time.time())
    samples = [(float(ms), _ago(now - t)) for t, ms in ts.samples]
    values = [ms for _, ms in ts.samples]
    head = (
        f"{name} - high {max(values, default=0)} ms, low {min(values, default=0)} ms "
        f"(all time high {ts.max} ms)\n" + "-" * GRAPH_COLS + "\n"
    )
    return head + sparkline(samples, GRAPH_COLS, 4)


# -- DOCTOR ------------------------------------------------------------------------------

DISABLED = (
    "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis "
    'instance. You may use "CONFIG SET latency-monitor-threshold <milliseconds>." in order '
    "to enable it. If we weren't in a deep space mission I'd suggest to take a look at "
    "https://redis.io/topics/latency-monitor.\n"
)
ADVICE_SLOWLOG_ENABLE = (
    "- There are latency issues with potentially slow commands you are using. Try to "
    "enable the Slow Log Redis feature using the command 'CONFIG SET "
    "slowlog-log-slower-than {}'. If the Slow log is disabled Redis is not able to log "
    "slow commands execution for you.\n"
)
ADVICE_SLOWLOG_TUNE = (
    "- Your current Slow Log configuration only logs events that are slower than your "
    "configured latency monitor threshold. Please use 'CONFIG SET "
    "slowlog-log-slower-than {}'.\n"
)
ADVICE_SLOWLOG_INSPECT = (
    "- Check your Slow Log to understand what are the commands you are running which are "
    "too slow to execute. Please check https://redis.io/commands/slowlog for more "
    "information.\n"
)
ADVICE_SCHEDULER = (
    "- The system is slow to execute Redis code paths not containing system calls. This "
    "usually means the system does not provide Redis CPU time to run for long periods. "
    "You should try to:\n"
    "  1) Lower the system load.\n"
    "  2) Use a computer / VM just for Redis if you are running other software in the "
    "same system.\n"
    '  3) Check if you have a "noisy neighbour" problem.\n'
    "  4) Check with 'redis-cli --intrinsic-latency 100' what is the intrinsic latency "
    "in your system.\n"
    "  5) Check if the problem is allocator-related by recompiling Redis with "
    "MALLOC=libc, if you are using Jemalloc. However this may create fragmentation "
    "problems.\n"
)
ADVICE_HZ = (
    "- In order to make the Redis keys expiring process more incremental, try to set the "
    "'hz' configuration parameter to 100 using 'CONFIG SET hz 100'.\n"
)
ADVICE_LARGE_OBJECTS = (
    "- Deleting, expiring or evicting (because of maxmemory policy) large objects is a "
    "blocking operation. If you have very large objects that are often deleted, expired, "
    "or evicted, try to fragment those objects into multiple smaller objects.\n"
)
ADVICE_THP = (
    "- I detected a non zero amount of anonymous huge pages used by your process. This "
    "creates very serious latency events in different conditions, especially when Redis "
    "is persisting on disk. To disable THP support use the command 'echo never > "
    "/sys/kernel/mm/transparent_hugepage/enabled', make sure to also add it into "
    "/etc/rc.local so that the command will be executed again after a reboot. Note that "
    "even if you have already disabled THP, you still need to restart the Redis process "
    "to get rid of the huge pages already created.\n"
)
NO_SPIKES = (
    "Dave, no latency spike was observed during the lifetime of this Redis instance, not "
    "in the slightest bit. I honestly think you ought to sit down calmly, take a stress "
    "pill, and think things over.\n"
)
NO_FIX = (
    "\nWhile there are latency events logged, I'm not able to suggest any easy fix. Please "
    "use the Redis community to get some help, providing this report in your help "
    "request.\n"
)


def _anon_huge_pages() -> int:
    """AnonHugePages of this process (kB), as Redis' THPGetAnonHugePagesSize."""
    try:
        with open(f"/proc/{os.getpid()}/smaps_rollup") as f:
            for line in f:
                if line.startswith("AnonHugePages:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0


def _event_line(n: int, name: str, ts: LatencySeries) -> str:
    values = [ms for _, ms in ts.samples]
    count = len(values)
    avg = sum(values) // count if count else 0
    mad = sum(abs(avg - v) for v in values) // count if count else 0
    period = 0
    if count:
        period = max(int(time.time()) - min(t for t, _ in ts.samples), 1)
    per = period / count if count else float("nan")
    return (
        f"{n}. {name}: {count} latency spikes (average {avg}ms, mean deviation {mad}ms, "
        f"period {per:.2f} sec). Worst all time event {ts.max}ms."
    )


def doctor(server: ServerCore) -> str:
    """Redis' createLatencyReport for the events recorded here."""
    ops = server.ops
    if not ops.events and not ops.latency_ms:
        return DISABLED
    report = []
    advice: dict[str, bool] = {}
    for n, (name, ts) in enumerate(ops.events.items(), 1):
        if n == 1:
            report.append(
                "Dave, I have observed latency spikes in this Redis instance. You don't "
                "mind talking about it, do you Dave?\n\n"
            )
        report.append(_event_line(n, name, ts) + "\n")
        if name == "command":
            if ops.slowlog_us < 0:
                advice["slowlog_enable"] = True
            elif ops.slowlog_us // 1000 > ops.latency_ms:
                advice["slowlog_tune"] = True
            advice["slowlog_inspect"] = advice["large_objects"] = True
        elif name == "fast-command":
            advice["scheduler"] = True
        elif name == "expire-cycle":
            advice["hz"] = advice["large_objects"] = True
    if _anon_huge_pages() > 0:
        advice["thp"] = True
    if not ops.events and not advice:
        return "".join(report) + NO_SPIKES
    if not advice:
        return "".join(report) + NO_FIX
    report.append("\nI have a few advices for you:\n\n")
    threshold_us = ops.latency_ms * 1000
    texts = [
        ("slowlog_enable", ADVICE_SLOWLOG_ENABLE.format(threshold_us)),
        ("slowlog_tune", ADVICE_SLOWLOG_TUNE.format(threshold_us)),
        ("slowlog_inspect", ADVICE_SLOWLOG_INSPECT),
        ("scheduler", ADVICE_SCHEDULER),
        ("hz", ADVICE_HZ if int(server.config.params.get("hz", "10")) < 100 else ""),
        ("large_objects", ADVICE_LARGE_OBJECTS),
        ("thp", ADVICE_THP),
    ]
    report += [text for key, text in texts if advice.get(key)]
    return "".join(report)
