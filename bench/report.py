"""Targets (PASS/FAIL) and docs/benchmarks.md from the results of bench/run.py."""

from __future__ import annotations

import math
import re
from typing import Any

from bench.report_long import long_checkpoint, long_targets, long_versions, measured_by_long
from bench.reportfmt import (
    LONG_CHECKPOINT_ITEM,
    LONG_VERSIONS_ITEM,
    _code,
    _code_measured,
    _failed,
    _mib,
    _n,
    _ok,
    _table,
    _x,
    med_of,
)
from bench.shared import DEFAULT_ITEMS

HAND_WRITTEN = (
    "<!-- Hand-written from here on: bench/run.py keeps everything below this line "
    "when it regenerates the file. -->"
)
DEFAULT_HAND_WRITTEN = """
## Where the time goes

(Not written yet: run `python -m bench.profile` and describe the hot spots here.)
"""
FLUSH_INTERVAL_MS = 100  # the server default, used by every run


def _verdict(ok: bool | None) -> str:
    return "n/a" if ok is None else ("PASS" if ok else "FAIL")


# Issue 13's throughput targets: ours/redis at -P 1 and -P 16, by redis-benchmark test.
THROUGHPUT_GOALS = {
    (1, "set"): 0.8,
    (1, "get"): 0.8,
    (1, "incr"): 0.7,
    (1, "lpush"): 0.7,
    (1, "hset"): 0.7,
    (1, "zadd"): 0.7,
    (16, "get"): 0.5,
    (16, "set"): 0.3,
    (16, "incr"): 0.3,
    (16, "lpush"): 0.3,
    (16, "hset"): 0.3,
    (16, "zadd"): 0.3,
}


def evaluate(res: dict[str, Any]) -> list[dict[str, Any]]:

    out: list[dict[str, Any]] = []

    def add(target: str, measured: str, ok: bool | None, item: str) -> None:
        out.append({"target": target, "measured": measured, "verdict": _verdict(ok), "item": item})

    tp = res.get("throughput")
    if _ok(tp):
        assert tp is not None
        sm = tp["summary"]
        for (p, t), goal in THROUGHPUT_GOALS.items():
            r = sm[f"P{p}:{t}"]["ratio"]
            add(f"{t.upper()} at -P {p} >= {goal}x redis", _x(r), r >= goal, "1")
        for pp in ("P1", "P16"):
            lag = tp["flush_lag"][pp]["p99_ms"]
            limit = 3 * FLUSH_INTERVAL_MS
            add(
                f"p99 flush lag under SET load ({pp}) <= 3x flush interval ({limit} ms)",
                f"{_n(lag)} ms",
                None if math.isnan(lag) else lag <= limit,
                "8",
            )
    mem = res.get("memory")
    if _ok(mem):
        assert mem is not None
        r = mem["ours"]["loaded"]["rss"] / mem["redis"]["loaded"]["rss"]
        add(f"memory (RSS), {mem['keys']:,} latest-value keys <= 2x redis", _x(r), r <= 2, "4")
        add(
            f"memory (RSS), {mem['keys']:,} latest-value keys <= 1.5x redis (issue 29)",
            _x(r),
            r <= 1.5,
            "4",
        )
    rs = res.get("restart")
    if _ok(rs):
        assert rs is not None
        rate = rs["ours_records_per_s_replay"]
        add(
            "segments only (no checkpoint): replay >= 1,000,000 records/s",
            f"{_n(rate)} records/s (replay phase; {_n(rs['ours_records_per_s_end_to_end'])}"
            " end to end)",
            rate >= 1_000_000,
            "5",
        )
    ow = res.get("overwrite_restart")
    if _ok(ow):
        assert ow is not None
        ours, redis = ow["ours_serving_s"], ow["redis_serving_s"]
        add(
            f"restart after {ow['sets']:,} SETs over {ow['keyspace']:,} random keys: ours faster"
            " than redis from its AOF in the same run (medians)",
            f"{ours:.2f} s vs {redis:.2f} s ({_x(ours / redis)} redis' time; ours"
            f" {_spread([r['serving_s'] for r in ow['ours_runs']])}, redis"
            f" {_spread(ow['redis_runs'])})",
            ours < redis,
            "5c",
        )
    for item, target, measured, ok in long_targets(res):
        add(target, measured, ok, item)
    du = _sync_results(res)
    if _ok(du):
        assert du is not None
        rp = du["raw_put"]
        one = du["summary"]["s3-sync"]["set:c1:P1"]["p50_ms"]
        add(
            "sync SET, 1 client: p50 <= 1.5x the p50 of one PUT of the same size (same store)",
            f"{rp['sync_over_put']:.2f}x ({one:.2f} ms vs {rp['p50_ms']:.2f} ms,"
            f" {rp['bytes']:.0f}-byte segments)",
            rp["sync_over_put"] <= 1.5,
            "6",
        )
        many = max(c for c, _n in res["settings"]["sync_clients"])
        sync = du["summary"]["s3-sync"][f"set:c{many}:P1"]["rps"]
        asyn = du["summary"]["s3-async"][f"set:c{many}:P1"]["rps"]
        add(
            f"sync SET, {many} clients >= 50% of async (same S3 store)",
            f"{sync / asyn:.0%} ({_n(sync)} vs {_n(asyn)} SET/s)",
            sync / asyn >= 0.5,
            "6",
        )
    hi = res.get("history")
    if _ok(hi):
        assert hi is not None
        for key, what in [
            ("ratio_str_deep", f"TS.ASOF, {hi['deep_versions']:,}-version string vs GET"),
            ("ratio_hash_deep", f"TS.ASOF, {hi['hash_versions']:,}-version hash vs HGETALL"),
        ]:
            r = hi[key]
            add(f"{what}: within 2x (>= 0.5x)", _x(r), r >= 0.5, "7")
    bd = res.get("bounded")
    if _ok(bd):
        assert bd is not None
        for target, measured, ok in _bounded_targets(bd):
            add(target, measured, ok, "9")
    rp = res.get("replicas")
    if _ok(rp):
        assert rp is not None
        for target, measured, ok in _replica_targets(rp):
            add(target, measured, ok, "10")
    mv = res.get("cluster_move")
    if _ok(mv):
        assert mv is not None
        w = mv["writer"]
        add(
            "writes lost during a slot move: 0",
            f"{w['lost']} of {w['acked']:,} acknowledged ({w['acked_during_move']:,} during"
            f" the move, {w['tryagain']:,} -TRYAGAIN); {mv['readable_on_target']:,} of"
            f" {mv['keys_loaded']:,} moved keys read back",
            w["lost"] == 0 and mv["readable_on_target"] == mv["keys_loaded"],
            "11m",
        )
    return out


FAILOVER_LIMIT_S = 10
NO_LOSS_MODES = ("sync", "raft")


def _replica_targets(rp: dict[str, Any]) -> list[tuple[str, str, bool | None]]:
    out: list[tuple[str, str, bool | None]] = []
    fo = rp["failover"]
    if _ok(fo):
        out.append(
            (
                f"failover (kill -9 of the primary, {fo['rounds']} rounds): median time until"
                f" writes succeed again <= {FAILOVER_LIMIT_S} s",
                f"{fo['median_s']:.2f} s median, {fo['max_s']:.2f} s max",
                fo["median_s"] <= FAILOVER_LIMIT_S,
            )
        )
        for mode in NO_LOSS_MODES:
            m = fo["modes"][mode]
            out.append(
                (
                    f"acknowledged writes to a {mode} table lost on failover == 0",
                    f"{m['lost']:,} of {m['acknowledged']:,}",
                    m["lost"] == 0,
                )
            )
    return out


def _bounded_targets(bd: dict[str, Any]) -> list[tuple[str, str, bool | None]]:
    out: list[tuple[str, str, bool | None]] = []
    wr = bd["writes"]
    if _ok(wr):
        for case, by in wr["summary"].items():
            base = by["0 seals"]["rps"]
            for cfg, r in by.items():
                if cfg != "0 seals":
                    out.append(
                        (
                            f"SET throughput, {case}, {_SEAL_LABELS[cfg]}: >= 0.9x no seal",
                            f"{_x(r['ratio'])} ({_n(r['rps'])} vs {_n(base)} SET/s)",
                            r["ratio"] >= 0.9,
                        )
                    )
    wk = bd["walk"]
    if _ok(wk):
        sm = wk["summary"]
        for kind, unit in (("string", "version"), ("hash", "version"), ("hash", "field")):
            sizes = wk[f"{kind}_versions"]
            lo, hi = sm[f"{kind} {min(sizes)}"], sm[f"{kind} {max(sizes)}"]
            r = hi[f"us_per_{unit}"] / lo[f"us_per_{unit}"]
            what = "a string" if kind == "string" else "a hash gaining a field per version"
            measured = f"{_x(r)} ({hi[f'us_per_{unit}']:,.2f} vs {lo[f'us_per_{unit}']:,.2f} µs)"
            ok: bool | None = r <= 2
            if kind == "hash" and unit == "version":
                # Not flat by construction: version n's value has n fields.
                ok = None
                measured += "; the reply holds n(n+1)/2 fields, see the field row"
            out.append(
                (
                    f"TS.HISTORY WITHVALUES, {what}: time per returned {unit} at"
                    f" {max(sizes):,} versions <= 2x at {min(sizes):,}",
                    measured,
                    ok,
                )
            )
    vw = bd["views"]
    if _ok(vw):
        d = vw["diff"]
        out.append(
            (
                f"TS.DIFF COUNT 10 over {vw['keys']:,} keys, 10 changed: well under 100 ms",
                f"{d['ms_median']:.2f} ms median, {d['ms_max']:.2f} ms max",
                d["ms_max"] < 100,
            )
        )
    st = bd["stalls"]
    if _ok(st):
        for verb in _STALL_VERBS:
            r = st[verb]
            out.append(
                (
                    f"PING p99 while {verb} runs ({_stall_work(st, verb)}) <= 50 ms",
                    f"{r['p99_ms']:,.1f} ms (max {r['max_ms']:,.0f} ms; {r['pings']} PINGs"
                    f" over {r['seconds']:.2f} s)",
                    r["p99_ms"] <= 50,
                )
            )
    sp = bd["sampling"]
    if _ok(sp):
        for name, r in sp["summary"].items():
            out.append(
                (
                    f"{name} key -{sp['count']:,} ({sp['members']:,} members): ours <= redis time",
                    f"{_x(r['ratio'])} ({r['ours_s']:.2f} s vs {r['redis_s']:.2f} s)",
                    r["ratio"] <= 1,
                )
            )
    fz = bd.get("frozen")
    if _ok(fz):
        assert fz is not None
        out += _frozen_targets(fz)
    return out


def _frozen_targets(fz: dict[str, Any]) -> list[tuple[str, str, bool | None]]:
    """Issue 29's rows for reads of frozen history (bench.bounded `_frozen_reads`)."""
    wk = fz["walk"]
    sizes = sorted(int(n) for n in wk if n != "ratio")
    lo, hi = wk[str(sizes[0])], wk[str(sizes[-1])]
    out: list[tuple[str, str, bool | None]] = [
        (
            f"TS.HISTORY WITHVALUES of frozen history: time per version at {sizes[-1]:,}"
            f" versions <= 1.5x at {sizes[0]:,} (issue 29)",
            f"{_x(wk['ratio'])} ({hi['us_per_version']:,.2f} vs {lo['us_per_version']:,.2f} µs)",
            wk["ratio"] <= 1.5,
        )
    ]
    for case, what in (("asof_many_keys", "20,000 keys"), ("asof_deep_key", "one key")):
        r = fz[case]
        out.append(
            (
                f"TS.ASOF into frozen history ({what}): <= 50 µs in the server (issue 29)",
                f"{r['server_us_per_call']:,.1f} µs per call in the server (INFO"
                f" commandstats, a mean); round trip p50 {r['p50_us']:,.0f} µs, GET's"
                f" {fz['get']['p50_us']:,.0f} µs (redis' {fz['redis_get']['p50_us']:,.0f} µs)",
                r["server_us_per_call"] <= 50,
            )
        )
    return out


# -- rendering -------------------------------------------------------------------------------


def render(res: dict[str, Any], old: str) -> str:

    m = res["machine"]
    s = res["settings"]
    L: list[str] = [
        "# Benchmarks: TemporalStore side by side with redis-server",
        "",
        "Generated by `make bench` (`python -m bench.run`, source in `bench/`) on "
        f"{res['generated']}; the whole run took {res['total_seconds']:.0f} s"
        + (" (**--quick**: small sizes, not the real numbers)" if res.get("quick") else "")
        + ". Machine-readable results: `bench-results.json` (git-ignored).",
        "",
        f"- Machine: {m['cores']} cores ({m['cpu_model']}), {m['memory_bytes'] / 2**30:.1f} GiB,"
        f" Linux {m['kernel']}, Python {m['python']}, {m['redis_server']}.",
    ]
    code = res.get("code")
    if code:
        L.append(f"- Code measured: {_code_measured(code)}.")
        if res.get("code_changed_during_run"):
            L.append(CODE_CHANGED)
    if m["pinned"]:
        L.append(
            f"- Pinning: every server runs on CPU {m['server_cpu']} (`taskset -c "
            f"{m['server_cpu']}`); redis-benchmark, the loader, the INFO samplers, moto and etcd "
            f"run on CPU {m['load_cpu']} (`taskset -c {m['load_cpu']}`)."
        )
    else:
        L.append("- Pinning: **not pinned** (fewer than 2 cores or no taskset).")
    L += [
        "- Run it: `make bench` (every item but the long ones; the goal is under 10 minutes"
        " with the set-up of a fresh clone); `make bench-long` (1M keys x 10 versions and restarts"
        " from a checkpoint at 1M and 10M records, sections 4b and 5b, and the profile: about"
        " 10 minutes more; `make bench` keeps their last figures); `python -m bench.run --quick`"
        " (small sizes, checks the suite); `python -m bench.run --items 9` (one part: the"
        " report keeps the other sections from the last run); `python -m bench.run --items 6`"
        " (sync mode against S3 alone, about a minute; `make bench` measures it in item 2);"
        " `python -m bench.profile`"
        " (the py-spy profile alone);"
        " `python -m bench.experiments gc|replay` (the garbage-collector experiments cited"
        ' in "Where the time goes", not part of `make bench`).',
        f"- Runs: items 1, 3, 8 and the restarts of item 5 are medians of {s['runs']} runs;"
        f" items 2, 6, 7, 9, 10 and 11 of {s.get('other_runs', s['runs'])}"
        + (" (the median of 2 is their mean)" if s.get("other_runs") == 2 else "")
        + "; runs of the two servers (and of the storage configurations)"
        " alternate so that drift affects all alike. Memory is measured once (it varies by"
        " a few MiB). Each section says its load.",
        "- Ours: async durability, local directory storage (`file://`), default history"
        " (`versions:64`), flush interval 100 ms, unless a section says otherwise. Redis:"
        " `--save '' --appendonly no`.",
        "",
        "## Targets",
        "",
    ]
    L += _table(
        ["item", "target", "measured", "verdict"],
        [[t["item"], t["target"], t["measured"], f"**{t['verdict']}**"] for t in res["targets"]],
    )
    L += [""]
    L += _throughput(res.get("throughput"), s)
    L += _durability(res.get("durability"), s)
    L += _latency(res.get("throughput"))
    L += _memory(res.get("memory"))
    L += long_versions(res.get("versions"), res)
    L += _restart(res.get("restart"))
    L += long_checkpoint(res.get("checkpoint_restart"), res)
    L += _overwrite_restart(res.get("overwrite_restart"))
    L += _sync(_sync_results(res), s)
    L += _history(res.get("history"))
    L += _flush_lag(res.get("throughput"), res.get("durability"))
    L += _bounded(res.get("bounded"))
    L += _replicas(res.get("replicas"))
    L += _cluster(res.get("cluster"))
    L += _cluster_move(res.get("cluster_move"))
    L += _profile(res.get("profile"), res)
    L += ["## This run", ""]
    L += _table(
        ["part", "seconds", "CPU used by other processes on the machine meanwhile"],
        [
            [
                k,
                f"{v['wall_s']:.0f}",
                f"{v['other_cpu_s']:.0f} CPU-s ({v['other_share_of_machine']:.0%} of"
                f" {m['cores']} cores)",
            ]
            for k, v in res["other_load"].items()
        ],
    )
    L += [
        "",
        "The last column is busy time from /proc/stat minus the benchmark's own processes:"
        " work of other users of the machine that competed with the benchmark. When it is"
        " large, the absolute numbers (and, less so, the alternated ratios) are noisy.",
        "",
    ]
    generated = "\n".join(L)
    if HAND_WRITTEN in old:
        generated = _keep_unmeasured(generated, old.split(HAND_WRITTEN, 1)[0].rstrip("\n"), res)
    hand = old.split(HAND_WRITTEN, 1)[1] if HAND_WRITTEN in old else DEFAULT_HAND_WRITTEN
    return generated + "\n" + HAND_WRITTEN + "\n" + hand.lstrip("\n").rstrip() + "\n"


# -- a subset run (--items) keeps the other sections of the existing report ------------------

NOT_RUN = "_Not run in this invocation"
CODE_CHANGED = (
    "- **Warning: the server's source files changed while this run was going;"
    " parts of it measured different code.**"
)
REMEASURED = "- Re-measured "
# Which results each Targets row comes from (the `item` column), in the order
# `evaluate` lists them.
# (Item 6's rows come from "sync" when `--items 6` ran alone: see _measured.)
TARGET_SOURCES = {
    "1": "throughput",
    "8": "throughput",
    "4": "memory",
    "5": "restart",
    "5c": "overwrite_restart",
    LONG_VERSIONS_ITEM: "versions",
    LONG_CHECKPOINT_ITEM: "checkpoint_restart",
    "6": "durability",
    "7": "history",
    "9": "bounded",
    "10": "replicas",
    "11m": "cluster_move",
}


def _measured(res: dict[str, Any], item: str) -> bool:
    """Whether this run measured the results a Targets row of `item` comes from."""
    if item == "6" and res.get("sync") is not None:
        return True
    return res.get(TARGET_SOURCES.get(item, "")) is not None


def _split_sections(text: str) -> tuple[list[str], dict[str, list[str]]]:
    """(the lines before the first `## ` heading, {heading: its lines}), in order."""
    pre: list[str] = []
    sections: dict[str, list[str]] = {}
    body = pre
    for line in text.split("\n"):
        if line.startswith("## "):
            body = sections[line] = []
        else:
            body.append(line)
    return pre, sections


def _rows(body: list[str]) -> tuple[int, int, list[str]]:
    """The first table of a section: (index of its first row, index past its last
    row, the rows), header and separator excluded."""
    start = next(i for i, line in enumerate(body) if line.startswith("| ")) + 2
    end = start
    while end < len(body) and body[end].startswith("| "):
        end += 1
    return start, end, body[start:end]


def _first_cell(row: str) -> str:
    return row[2:].split(" | ", 1)[0]


def _keep_unmeasured(new: str, old: str, res: dict[str, Any]) -> str:
    """A run of some items (--items) rewrites their sections only: every section the
    run left out ("Not run in this invocation") is taken from the existing report, with
    its Targets rows and its line of "This run", and the header says what was
    re-measured when. A whole `make bench` leaves out the long items (make bench-long):
    it writes its own header and keeps their sections, which say when they were run."""

    new_pre, new_secs = _split_sections(new)
    old_pre, old_secs = _split_sections(old)
    kept = [
        h
        for h, body in new_secs.items()
        if any(line.startswith(NOT_RUN) for line in body)
        and h in old_secs
        and not any(line.startswith(NOT_RUN) for line in old_secs[h])
    ]
    if not kept:
        return new
    for h in kept:
        new_secs[h] = old_secs[h]

    # Targets: the new rows, and the old ones of results this run did not measure.
    order = list(TARGET_SOURCES)
    start, end, rows = _rows(new_secs["## Targets"])
    rows += [
        r
        for r in _rows(old_secs.get("## Targets", ["| item |", "| --- |"]))[2]
        if not _measured(res, _first_cell(r))
    ]
    rows.sort(key=lambda r: order.index(c) if (c := _first_cell(r)) in order else len(order))
    body = new_secs["## Targets"]
    new_secs["## Targets"] = body[:start] + rows + body[end:]

    # This run: the parts run now, and the old lines of the others.
    start, end, rows = _rows(new_secs["## This run"])
    now = {_first_cell(r): r for r in rows}
    merged = [now.pop(_first_cell(r), r) for r in _rows(old_secs["## This run"])[2]]
    body = new_secs["## This run"]
    new_secs["## This run"] = body[:start] + merged + list(now.values()) + body[end:]

    # The header: the old run's, then what was re-measured since (and on what).
    items = [str(k) for k in res.get("items", [])]
    measured = [h[3:] for h in new_secs if h not in kept and h not in ("## Targets", "## This run")]
    machine = next(x for x in new_pre if x.startswith("- Machine:"))
    line = (
        f"{REMEASURED}on {res['generated']} by `python -m bench.run --items {','.join(items)}"
        + (" --quick`" if res.get("quick") else "`")
        + f" ({res['total_seconds']:.0f} s): {'; '.join(measured)}."
        + (f" Code: {_code_measured(res['code'], subject=False)}." if res.get("code") else "")
        + ("" if machine in old_pre else " M" + machine[3:])
        + (" " + CODE_CHANGED[2:] if res.get("code_changed_during_run") else "")
    )

    def current(old_line: str) -> bool:
        """An older re-measured line whose items this run did not all measure again."""
        m = re.search(r"--items ([\w,]+)", old_line)
        return m is None or not set(m.group(1).split(",")) <= set(items)

    if set(DEFAULT_ITEMS) <= set(items):
        # A whole `make bench`: its own header, and the older lines of what it left out
        # (`make bench-long`'s).
        pre = list(new_pre)
        older = [x for x in old_pre if x.startswith(REMEASURED) and current(x)]
        at = max(
            i for i, x in enumerate(pre) if x.startswith(("- Machine", "- Code", "- **Warning"))
        )
        pre[at + 1 : at + 1] = older
        return "\n".join(pre + [x for h, body in new_secs.items() for x in (h, *body)])
    pre = [x for x in old_pre if current(x) or not x.startswith(REMEASURED)]
    at = max(i for i, x in enumerate(pre) if x.startswith(("- Code", "- **Warning", REMEASURED)))
    pre.insert(at + 1, line)
    run_it = next((x for x in new_pre if x.startswith("- Run it:")), None)
    pre = [run_it if run_it and x.startswith("- Run it:") else x for x in pre]
    return "\n".join(pre + [x for h, body in new_secs.items() for x in (h, *body)])


def _throughput(tp: dict[str, Any] | None, s: dict[str, Any]) -> list[str]:
    L = ["## 1. Throughput", ""]
    if not _ok(tp):
        return L + _failed("item 1", tp)
    assert tp is not None
    for p in (1, 16):
        more = ""
        if p > 1 and tp["redis_pipelined_factor"] != 1:
            ours = tp.get("ours_pipelined_factor", 1)
            more = f" (redis: {tp['redis_pipelined_factor']}x as many" + (
                f", ours {ours}x, see below)" if ours != 1 else ", see below)"
            )
        L += [
            f"### -P {p}, 50 clients, {tp['requests']:,} requests for SET and GET,"
            f" {tp['other_requests']:,} for the others{more}",
            "",
        ]
        rows = []
        for t in ("set", "get", "incr", "lpush", "hset", "zadd"):
            r = tp["summary"][f"P{p}:{t}"]
            g = THROUGHPUT_GOALS.get((p, t))
            verdict = "" if g is None else f"{'PASS' if r['ratio'] >= g else 'FAIL'} (>= {g}x)"
            runs = ", ".join(f"{x:.2f}" for x in r["run_ratios"])
            rows.append(
                [
                    t.upper(),
                    _n(r["redis_rps"]),
                    _n(r["ours_rps"]),
                    _x(r["ratio"]),
                    runs,
                    verdict,
                    f"{r['redis_cpu']:.0%} / {r['ours_cpu']:.0%}",
                ]
            )
        L += _table(
            [
                "command",
                "redis req/s",
                "ours req/s",
                "ours/redis",
                "paired runs",
                "target",
                "server CPU redis / ours",
            ],
            rows,
        )
        L += [""]
    c = tp["commands"]
    L += [
        'Medians of the runs; "paired runs" are ours/redis of each run (the two servers'
        " measured seconds apart). \"Server CPU\" is the server's CPU time over the run's"
        " wall time (its one pinned core): well below 100 % the server was not the"
        " bottleneck, the load generator on the other core was, so at -P 1 redis's numbers"
        " are a lower bound of what it can do and the ratio flatters ours. Commands: for"
        " each run and pipeline depth both servers start fresh side by side; each test"
        " then runs against one server and then the"
        " other (the order alternates from test to test and run to run), tests in this"
        f" order. At -P 16 redis gets {tp['redis_pipelined_factor']}x the requests and"
        f" ours {tp.get('ours_pipelined_factor', 1)}x: at several 100,000 req/s a run of"
        " the -P 1 size is over in a fraction of a second, too short to measure"
        " (connection set-up and one scheduling hiccup weigh on it; throughput is a rate,"
        " so the ratio stays comparable).",
        "",
        *_code(
            c["server_redis"],
            c["server_ours"],
            *[
                c[f"P{p}_{t}_{k}"]
                for p in (1, 16)
                for t in ("set", "get", "incr", "lpush", "hset", "zadd")
                for k in (("ours",) if p == 1 else ("ours", "redis"))
            ],
        ),
        "",
    ]
    return L


def _moto_start(s: dict[str, Any]) -> str:
    """How items 2 and 6 started moto (`bench.run --moto`; runs before the option
    existed used moto's own start)."""
    if s.get("moto", "close") == "keepalive":
        return (
            "`python -m bench.motoserver`: moto's own S3 application served over kept HTTP/1.1"
            " connections, as S3 and MinIO serve; `python -m moto.server` answers every"
            " request with `Connection: close`, so each PUT paid a new TCP connection on both"
            " sides, and moto's dispatcher listed its package directory on every request,"
            " which bench/motoserver.py does once"
        )
    return "`python -m moto.server`: a new TCP connection for every request"


def _durability(du: dict[str, Any] | None, s: dict[str, Any]) -> list[str]:
    L = ["## 2. What durability costs (ours only)", ""]
    if not _ok(du):
        return L + _failed("item 2", du)
    assert du is not None
    sm = du["summary"]
    L += [
        "SET and GET, 50 clients, against ours with each storage and durability mode (one"
        " server per configuration and run: -P 1, then -P 16; configurations rotate from run"
        f" to run). Async SET and all GET runs send {s['store_requests']:,} requests, sync SET"
        f" runs {s['sync_requests']:,};"
        f" S3 is a local moto server on the load CPU ({_moto_start(s)}), so a PUT costs"
        " a local HTTP round trip, not a real S3 one. The ratio is against file-async.",
        "",
    ]
    rows = []
    base = sm["file-async"]
    for cfg in ("file-async", "s3-async", "file-sync", "s3-sync"):
        row = [cfg]
        for key in ("set:c50:P1", "get:c50:P1", "set:c50:P16", "get:c50:P16"):
            v = sm[cfg][key]["rps"]
            row.append(f"{_n(v)} ({_x(v / base[key]['rps'])})")
        row.append(f"{sm[cfg]['set:c50:P1']['p99_ms']:.2f}")
        ppw = sm[cfg]["set:c50:P1"]["puts_per_write"]
        row.append("n/a" if ppw is None else f"{ppw:.4f}")
        rows.append(row)
    L += _table(
        [
            "store",
            "SET -P 1",
            "GET -P 1",
            "SET -P 16",
            "GET -P 16",
            "SET -P 1 p99 ms",
            "PUTs per write (SET -P 1)",
        ],
        rows,
    )
    c = du["commands"]
    L += [
        "",
        "Commands:",
        "",
        *_code(
            du["moto"],
            "# bucket created with boto3; AWS_ACCESS_KEY_ID=testing AWS_SECRET_ACCESS_KEY=testing"
            " AWS_DEFAULT_REGION=us-east-1",
            *[c[k] for k in sorted(c) if k.startswith("server_")],
            c["set_c50_P1_async"],
            c["set_c50_P1_sync"],
            c["set_c50_P16_async"],
            c["set_c50_P16_sync"],
            c["get_P1"],
            c["get_P16"],
        ),
        "",
    ]
    return L


def _latency(tp: dict[str, Any] | None) -> list[str]:
    L = ["## 3. Latency at -P 1 (50 clients)", ""]
    if not _ok(tp):
        return L + _failed("item 1", tp)
    assert tp is not None
    rows = []
    for t in ("set", "get"):
        r = tp["summary"][f"P1:{t}"]
        rows.append(
            [
                t.upper(),
                f"{r['redis_p50_ms']:.3f}",
                f"{r['ours_p50_ms']:.3f}",
                f"{r['redis_p99_ms']:.3f}",
                f"{r['ours_p99_ms']:.3f}",
                _x(r["ours_p99_ms"] / r["redis_p99_ms"]),
            ]
        )
    L += _table(
        ["command", "redis p50 ms", "ours p50 ms", "redis p99 ms", "ours p99 ms", "p99 ours/redis"],
        rows,
    )
    L += [
        "",
        "From the same `-P 1` runs as item 1 (redis-benchmark `--csv` prints the"
        " percentiles; medians of the runs).",
        "",
    ]
    return L


def _memory(mem: dict[str, Any] | None) -> list[str]:
    L = ["## 4. Memory", ""]
    if not _ok(mem):
        return L + _failed("item 4", mem)
    assert mem is not None
    rows = []
    for kind in ("redis", "ours"):
        r = mem[kind]
        rows.append(
            [
                kind,
                _mib(r["empty"]["rss"]),
                _mib(r["loaded"]["rss"]),
                _mib(r["loaded"]["used_memory"]),
                f"{(r['loaded']['rss'] - r['empty']['rss']) / mem['keys']:.0f}",
                _n(mem["keys"] / r["load_seconds"]),
            ]
        )
    L += [
        f"{mem['keys']:,} keys with {mem['value_bytes']}-byte values, loaded by the"
        f" {mem['loader']}. RSS from `/proc/PID/status` (VmRSS), `used_memory` from"
        " `INFO memory` (ours reports its RSS there).",
        "",
    ]
    L += _table(
        [
            "server",
            "RSS empty",
            "RSS loaded",
            "used_memory loaded",
            "bytes/key over empty",
            "load keys/s",
        ],
        rows,
    )
    ratio = mem["ours"]["loaded"]["rss"] / mem["redis"]["loaded"]["rss"]
    used = mem["ours"]["loaded"]["used_memory"] / mem["redis"]["loaded"]["used_memory"]
    delta = (mem["ours"]["loaded"]["rss"] - mem["ours"]["empty"]["rss"]) / (
        mem["redis"]["loaded"]["rss"] - mem["redis"]["empty"]["rss"]
    )
    L += [
        "",
        f"Ours/redis: RSS {_x(ratio)} (the target's measure), used_memory {_x(used)}, growth"
        f" over the empty process {_x(delta)}.",
        "",
    ]
    L += ["", "Commands:", "", *_code(mem["redis"]["server"], mem["ours"]["server"]), ""]
    return L


def _restart(rs: dict[str, Any] | None) -> list[str]:
    L = ["## 5. Restart", ""]
    if not _ok(rs):
        return L + _failed("item 5", rs)
    assert rs is not None
    L += [
        "### Segments only: the replay rate",
        "",
        f"Both servers take {rs['records']:,} SETs (the item 4 loader), then `kill -9`"
        " (ours after `durable_lsn` reached `last_lsn`, so there is no final checkpoint and"
        " a huge `--checkpoint-every-records` means none was written: replay reads segments"
        " only; redis with `--appendonly yes --appendfsync no`, AOF of"
        f" {_mib(rs['aof_bytes'])}). Then each is restarted with the same command line and"
        " timed from process creation to the first `+PONG` (not `-LOADING`), polling every"
        " 2 ms; each restart is killed with `kill -9` again, restarts alternate.",
        "",
    ]
    L += _table(
        ["measure", "redis (AOF)", "ours (segments)"],
        [
            [
                "process start to serving (median)",
                f"{rs['redis_serving_s']:.2f} s",
                f"{rs['ours_serving_s']:.2f} s",
            ],
            ["records replayed", f"{rs['records']:,}", f"{rs['ours_replay_records']:,}"],
            ["replay phase (INFO `replay_seconds`)", "", f"{rs['ours_replay_s']:.2f} s"],
            [
                "records/s, end to end",
                _n(rs["redis_records_per_s_end_to_end"]),
                _n(rs["ours_records_per_s_end_to_end"]),
            ],
            ["records/s, replay phase", "", _n(rs["ours_records_per_s_replay"])],
            [
                "RSS after replay",
                "",
                _mib(med_of([r["rss"] for r in rs["ours_runs"]])),
            ],
        ],
    )
    L += [
        "",
        "Commands:",
        "",
        *_code(rs["redis_server"], rs["ours_server"]),
        "",
    ]
    return L


def _spread(xs: list[float]) -> str:
    """The runs' range, in seconds."""
    return f"{min(xs):.2f}-{max(xs):.2f} s" if len(xs) > 1 else f"{xs[0]:.2f} s"


def _overwrite_restart(ow: dict[str, Any] | None) -> list[str]:
    L = ["## 5c. Restart after overwriting SETs", ""]
    if not _ok(ow):
        return L + _failed("item 5c", ow)
    assert ow is not None
    runs = ow["ours_runs"]
    L += [
        f"Both servers take `{ow['loader']}` ({ow['sets']:,} SETs of 3-byte values over"
        f" {ow['keyspace']:,} random keys: most SETs overwrite a key; ours held"
        f" {ow['keys']:,} keys at LSN {ow['written_lsn']:,} and had written"
        f" {ow['checkpoints_written']} checkpoint(s), the last at LSN"
        f" {ow['last_checkpoint_lsn']:,}; redis {ow['redis_keys']:,} keys). Ours runs with its"
        " default checkpointing, redis with `--appendonly yes --appendfsync no` and its default"
        f" RDB preamble (AOF of {_mib(ow['aof_bytes'])}, base and increments); both servers'"
        " children (checkpoints; AOF rewrites and saves) run on the load CPU, as in 5b. Each is"
        " killed with `kill -9` once nothing is in flight (ours: every write durable, no"
        " checkpoint running; redis: no AOF rewrite running, 1.5 s after the load), then"
        " restarted with the same command line, timed from process creation to the first"
        " `+PONG` and checked to hold every key it held (DBSIZE); restarts alternate, each"
        " killed with `kill -9` again.",
        "",
    ]
    L += _table(
        ["measure", "redis (AOF)", "ours (checkpoint + segments)"],
        [
            [
                "process start to serving, median",
                f"{ow['redis_serving_s']:.2f} s",
                f"{ow['ours_serving_s']:.2f} s",
            ],
            [
                "each run",
                ", ".join(f"{x:.2f}" for x in ow["redis_runs"]) + " s",
                ", ".join(f"{r['serving_s']:.2f}" for r in runs) + " s",
            ],
            [
                "ours: checkpoint LSN + records replayed",
                "",
                f"{runs[0]['checkpoint_lsn']:,} + {runs[0]['replay_records']:,}",
            ],
            [
                "ours: checkpoint load and replay (INFO `replay_seconds`), median",
                "",
                f"{med_of([r['replay_seconds'] for r in runs]):.2f} s",
            ],
            [
                "load time (redis-benchmark)",
                f"{ow['redis_load_s']:.1f} s",
                f"{ow['ours_load_s']:.1f} s",
            ],
            ["ours: RSS after restart", "", _mib(med_of([r["rss"] for r in runs]))],
        ],
    )
    L += ["", "Commands:", "", *_code(ow["redis_server"], ow["ours_server"]), ""]
    return L


def _sync_results(res: dict[str, Any]) -> dict[str, Any] | None:
    """Item 6's results: from `--items 6` (sync mode alone) or from item 2."""
    r: dict[str, Any] | None = res.get("sync") or res.get("durability")
    return r


def _sync(du: dict[str, Any] | None, s: dict[str, Any]) -> list[str]:
    L = ["## 6. Sync mode against S3 (moto)", ""]
    if not _ok(du):
        return L + _failed("item 2 or 6", du)
    assert du is not None
    sm = du["summary"]
    rows = []
    for clients, n in s["sync_clients"]:
        r = sm["s3-sync"][f"set:c{clients}:P1"]
        a = sm["s3-async"][f"set:c{clients}:P1"]
        ppw = r["puts_per_write"]
        rows.append(
            [
                str(clients),
                f"{n:,}",
                _n(r["rps"]),
                f"{r['p50_ms']:.2f}",
                f"{r['p99_ms']:.2f}",
                f"{ppw:.3f}",
                f"{1 / ppw:.1f}" if ppw else "n/a",
                _n(a["rps"]),
                f"{a['p50_ms']:.2f}",
                f"{r['rps'] / a['rps']:.1%}",
            ]
        )
    L += _table(
        [
            "clients",
            "requests",
            "sync SET/s",
            "sync p50 ms",
            "sync p99 ms",
            "PUTs per write",
            "writes per PUT",
            "async SET/s",
            "async p50 ms",
            "sync of async",
        ],
        rows,
    )
    L += _sync_costs(sm, s)
    rp = du["raw_put"]
    c = du["commands"]
    L += [
        "",
        f"One raw PUT of {rp['bytes']:.0f} bytes (the mean segment of the 1-client sync run),"
        " one at a time through the server's own object store client (aiobotocore,"
        " put-if-absent), pinned to the server's CPU, in rounds alternating with the"
        f" 1-client sync SET runs ({len(rp['runs'])} rounds of a fifth of the requests"
        f" each): p50 {rp['p50_ms']:.2f} ms, p99 {rp['p99_ms']:.2f} ms. A 1-client sync"
        f" SET's p50 is {rp['sync_over_put']:.2f}x of it (the median of each round's"
        " sync p50 over its raw-PUT p50).",
        "",
        "SET at -P 1 with `--durability sync`: a reply waits until the segment holding the"
        " write is stored. A PUT starts at the end of the event loop's pass in which a"
        " sync write began to wait, with every write queued by then; up to 4 run at once,"
        " fewer while the store serves PUTs one at a time (`flusher/putlimit.py`: moto on"
        " a busy core does), the durable LSN moves only over the oldest that have all"
        " landed, and writes that arrive while they run share the next one (group commit)."
        " When a PUT lands while writes wait, the next PUT starts before the writers it"
        " released get their replies. PUTs per"
        " acknowledged write = delta of INFO persistence `object_puts` / delta of"
        f" `last_lsn` over the run. moto: {_moto_start(s)}.",
        "",
        *_code(
            du["moto"],
            c["server_s3-sync"],
            c["server_s3-async"],
            *[c[f"set_c{k}_P1_sync"] for k, _ in s["sync_clients"]],  # async: the same
            c["raw_put"],
        ),
        "",
    ]
    return L


def _sync_costs(sm: dict[str, Any], s: dict[str, Any]) -> list[str]:
    """What each S3 run cost the server and moto (results from before these were
    counted have none)."""
    parts = []
    # The most clients only: /proc counts CPU time in 10 ms ticks, too coarse for
    # the short 1-client runs.
    for clients in [max(c for c, _count in s["sync_clients"])]:
        for mode in ("sync", "async"):
            r = sm[f"s3-{mode}"][f"set:c{clients}:P1"]
            if "server_us_per_write" not in r:
                return []
            parts.append(
                f"{clients} client{'s' if clients > 1 else ''} {mode}: server"
                f" {r['server_us_per_write']:.1f} µs CPU per write ({r['server_cpu_share']:.0%}"
                f" of its core), {r['puts_per_s']:.0f} PUTs/s, moto {r['moto_ms_per_put']:.2f}"
                f" ms CPU per PUT ({r['moto_cpu_share']:.0%} of its core)"
                + (
                    f", PUTs in flight allowed at the end {r['put_limit']:.0f} (PutLimit"
                    f" lowered it {r['limit_lowered']:.0f} times)"
                    if mode == "sync" and "put_limit" in r
                    else ""
                )
            )
    return [
        "",
        "Where the time goes (CPU time of each process over the run, medians): "
        + "; ".join(parts)
        + ". moto shares its core with redis-benchmark.",
    ]


def _history(hi: dict[str, Any] | None) -> list[str]:
    L = ["## 7. History reads", ""]
    if not _ok(hi):
        return L + _failed("item 7", hi)
    assert hi is not None
    sm = hi["summary"]
    L += [
        f"Ours with `--history all`: `deep:str` has {hi['deep_versions']:,} versions"
        f" (100-byte values), `deep:hash` has {hi['hash_fields']:,} fields and"
        f" {hi['hash_versions']:,} versions (one HSET of all fields, then one field per"
        " version). `<version N>` is the LSN of the key's N-th version (oldest = 1). 50"
        " clients, -P 1.",
        "",
    ]
    rows = []
    for name, base in [
        (hi["str_get"], None),
        (hi["str_deep"], hi["str_get"]),
        (hi["str_mid"], hi["str_get"]),
        (hi["hash_get"], None),
        (hi["hash_deep"], hi["hash_get"]),
    ]:
        r = sm[name]
        ratio = "" if base is None else _x(r["rps"] / sm[base]["rps"])
        rows.append([f"`{name}`", _n(r["rps"]), f"{r['p99_ms']:.2f}", ratio])
    L += _table(["command", "req/s", "p99 ms", "vs the plain read"], rows)
    c = hi["commands"]
    L += ["", "Commands:", "", *_code(hi["server"], *c.values()), ""]
    return L


_SEAL_LABELS = {
    "0 seals": "no seal",
    "1 seal": "1 seal",
    "100 seals": "100 seals",
    "pinned": "pinned history",
}
_STALL_VERBS = ["TS.RESTORE SNAPSHOT", "TS.MERGE", "TS.HISTORY WITHVALUES", "SRANDMEMBER"]


def _stall_work(st: dict[str, Any], verb: str) -> str:
    return {
        "TS.RESTORE SNAPSHOT": f"{st['keys']:,} keys",
        "TS.MERGE": f"{st['keys']:,} keys",
        "TS.HISTORY WITHVALUES": f"{st['history_versions']:,} versions",
        "SRANDMEMBER": f"key -{st['count']:,}",
    }[verb]


def _bounded(bd: dict[str, Any] | None) -> list[str]:
    L = ["## 9. History at bounded cost (issue 11)", ""]
    if not _ok(bd):
        return L + _failed("item 9", bd)
    assert bd is not None
    L += [
        "Ours with the default history (`versions:64`), `file://` storage, async"
        " durability, unless a case says otherwise; every server is fresh for its case."
        " Replies of many elements are read unparsed (the client reads bytes until an"
        " `ECHO` of a random token sent right behind the command comes back), so the times"
        " are the server's, not the client's parser's.",
        "",
    ]
    L += _bounded_writes(bd["writes"])
    L += _bounded_walk(bd["walk"])
    L += _bounded_views(bd["views"])
    L += _bounded_stalls(bd["stalls"])
    L += _bounded_sampling(bd["sampling"])
    if "frozen" in bd:
        L += _bounded_frozen(bd["frozen"])
    return L


def _bounded_frozen(fz: dict[str, Any]) -> list[str]:
    L = ["### Reads of frozen history (issue 29)", ""]
    if not _ok(fz):
        return L + _failed("frozen reads", fz)
    h = fz["history"]
    L += [
        "Ours with `--history all --history-hot-memory 1`: every version but each key's"
        " newest frozen into compressed pages in memory (`INFO history`"
        f" `history_cold_versions` {int(h['history_cold_versions']):,},"
        f" `history_frozen_bytes` {_mib(int(h['history_frozen_bytes']))}). Two strings of"
        " 1,000 and 100,000 versions (100-byte values), and 20,000 keys written in 10"
        " rounds of the item 4 loader. `TS.HISTORY key WITHVALUES` as in the table above;"
        " `TS.ASOF key VERSION v` at random keys and versions of the newer half, one at a"
        " time: the round trip from a Python client (p50, p99) and the server's own mean"
        " time per call (`INFO commandstats`, reset before); GET round trips of the same"
        " keys on ours and on redis-server in the same run for scale.",
        "",
    ]
    rows = [
        [f"TS.HISTORY WITHVALUES, {n} versions", f"{r['us_per_version']:,.2f} µs per version"]
        for n, r in fz["walk"].items()
        if n != "ratio"
    ]
    for case, what in (
        ("asof_many_keys", "TS.ASOF, 20,000 keys"),
        ("asof_deep_key", "TS.ASOF, 100,000-version key"),
        ("get", "GET (ours)"),
        ("redis_get", "GET (redis)"),
    ):
        r = fz[case]
        rows.append(
            [
                what,
                f"p50 {r['p50_us']:,.0f} µs, p99 {r['p99_us']:,.0f} µs round trip;"
                f" {r['server_us_per_call']:,.1f} µs per call in the server",
            ]
        )
    L += _table(["read", "time"], rows)
    L += ["", *_code(fz["server"]), ""]
    return L


def _bounded_writes(wr: dict[str, Any]) -> list[str]:
    L = ["### Writes under seals and pinned history", ""]
    if not _ok(wr):
        return L + _failed("writes", wr)
    L += [
        f"{wr['writes']:,} pipelined `SET`s (100-byte values, the item 1 loader's pipeline"
        f" of 1,000) on one key (`w:one`), and cycling over {wr['keys']:,} keys. Four"
        " servers run side by side, each first given every key once, then: nothing; one"
        " `TS.SEAL`; 100 `TS.SEAL`s; or one `TS.SEAL` followed by"
        f" {wr['pinned_versions']:,} SETs of the one key and as many across the"
        f" {wr['keys']:,} keys, all pinned by the seal (pinned history). Each case then"
        " runs on each server in turn, the order rotating from case to case and run to"
        " run, after the server's flusher has caught up. Every write after a seal is"
        " pinned too, so the pinned history grows as the runs go (INFO history"
        " `history_pinned_versions`, before the first run and after the last, below)."
        ' Medians of the runs; "paired" lists the ratio to no seal of each run.',
        "",
    ]
    rows = []
    for case, by in wr["summary"].items():
        for cfg, r in by.items():
            rows.append(
                [
                    case,
                    _SEAL_LABELS[cfg],
                    _n(r["rps"]),
                    _x(r["ratio"]),
                    ", ".join(f"{x:.2f}" for x in r["run_ratios"]),
                    f"{wr['pinned_before'][cfg]:,} / {wr['pinned_after'][cfg]:,}",
                    ""
                    if cfg == "0 seals"
                    else f"{'PASS' if r['ratio'] >= 0.9 else 'FAIL'} (>= 0.9x)",
                ]
            )
    L += _table(
        [
            "writes",
            "server",
            "SET/s",
            "vs no seal",
            "paired",
            "pinned versions before / after",
            "target",
        ],
        rows,
    )
    L += ["", *_code(wr["server"]), ""]
    return L


def _bounded_walk(wk: dict[str, Any]) -> list[str]:
    L = ["### TS.HISTORY WITHVALUES: time per returned version", ""]
    if not _ok(wk):
        return L + _failed("history walk", wk)
    L += [
        "Ours with `--history all`. `walk:str:N` has N versions (`SET`s of 100-byte"
        " values); `walk:hash:N` gained one field per version (`HSET key f<i> v<i>`),"
        " so version i holds i fields and the whole reply n(n+1)/2: its time per"
        " version grows with n by construction, and what stays flat if each step is one"
        " undo is the time per returned field. 100,000 versions of such a hash would"
        " make a reply of 5 billion fields, so the hash stops at"
        f" {max(wk['hash_versions']):,} versions. `TS.HISTORY key WITHVALUES`, the whole"
        " history in one reply; a run lists a history of n versions (deepest / n) times"
        " and keeps the median, the table shows the median of the runs.",
        "",
    ]
    rows = []
    for r in wk["summary"].values():
        rows.append(
            [
                r["kind"],
                f"{r['versions']:,}",
                _mib(r["reply_bytes"]),
                f"{r['seconds'] * 1000:,.1f}",
                f"{r['us_per_version']:,.1f}",
                f"{r['fields']:,}",
                f"{r['us_per_field']:,.2f}",
            ]
        )
    L += _table(
        [
            "key",
            "versions",
            "reply",
            "ms",
            "µs per version",
            "values/fields returned",
            "µs per value/field",
        ],
        rows,
    )
    L += ["", *_code(wk["server"]), ""]
    return L


def _bounded_views(vw: dict[str, Any]) -> list[str]:
    L = ["### TS.CHECKOUT AT and TS.DIFF", ""]
    if not _ok(vw):
        return L + _failed("checkout and diff", vw)
    ck, d = vw["checkout"], vw["diff"]
    L += [
        f"{vw['keys']:,} keys loaded by the item 4 loader (one version each; RSS"
        f" {_mib(vw['rss_loaded'])}). {ck['connections']} connections are opened"
        " (and PINGed), then each in turn runs `TS.CHECKOUT AT VERSION <v>` at its own"
        f" point of the load and `GET`s {ck['reads_per_connection']} keys (4 written"
        " before the point, 1 after it, checked). Creation time is the round trip of the"
        " `TS.CHECKOUT`; memory is the RSS growth from the open connections to all of"
        f" them checked out and read. Then {d['changed']} keys are rewritten between"
        f" versions a and b, and `{d['command']}` runs {d['calls']} times (its reply is"
        " checked: exactly those keys, `changed`).",
        "",
    ]
    L += _table(
        ["measure", "value"],
        [
            ["`TS.CHECKOUT AT` creation, median", f"{ck['create_ms_median']:.3f} ms"],
            ["`TS.CHECKOUT AT` creation, max", f"{ck['create_ms_max']:.3f} ms"],
            ["`GET` under a view, median", f"{ck['read_ms_median']:.3f} ms"],
            [
                f"RSS growth per connection ({ck['connections']} on different points)",
                f"{ck['bytes_per_connection'] / 2**20:.5f} MiB"
                f" ({_n(ck['bytes_per_connection'])} bytes; RSS counts 4 KiB pages)",
            ],
            [
                "INFO history: views, bytes they cache",
                f"{ck['views']}, {_n(ck['views_bytes'])}",
            ],
            [f"`TS.DIFF` ... `COUNT {d['changed']}`, median", f"{d['ms_median']:.3f} ms"],
            [f"`TS.DIFF` ... `COUNT {d['changed']}`, max", f"{d['ms_max']:.3f} ms"],
        ],
    )
    L += ["", *_code(vw["server"]), ""]
    return L


def _bounded_stalls(st: dict[str, Any]) -> list[str]:
    L = ["### PING latency while a long verb runs", ""]
    if not _ok(st):
        return L + _failed("stalls", st)
    L += [
        "One server: the item 4 loader writes"
        f" {st['keys']:,} keys, `TS.SEAL before`, the loader rewrites them all;"
        " `TS.RESTORE SNAPSHOT before` restores them. Then `TS.BRANCH CREATE what-if`,"
        f" a connection on the branch rewrites the {st['keys']:,} keys and `TS.MERGE"
        " what-if` merges them. Then a table `TS.TABLE CREATE bench:deep RETAIN ALL`"
        f" and {st['history_versions']:,} SETs of `bench:deep:str`, listed by"
        " `TS.HISTORY bench:deep:str WITHVALUES`. Then `SRANDMEMBER rand:set"
        f" -{st['count']:,}` on a 1,000-member set, also against a redis-server for"
        " comparison. While each runs, a second client (a thread of the runner) sends"
        " PINGs one at a time; the PINGs in flight at any time during the verb count."
        " Each verb runs once, its reply checked.",
        "",
    ]
    rows = []
    for verb in [*_STALL_VERBS, "SRANDMEMBER (redis-server)"]:
        r = st[verb]
        target = ""
        if verb in _STALL_VERBS:
            target = f"{'PASS' if r['p99_ms'] <= 50 else 'FAIL'} (<= 50 ms)"
        rows.append(
            [
                f"`{verb}`",
                _stall_work(st, verb.split(" (")[0]),
                f"{r['seconds']:.2f}",
                str(r["pings"]),
                f"{r['p50_ms']:,.1f}",
                f"{r['p99_ms']:,.1f}",
                f"{r['max_ms']:,.1f}",
                target,
            ]
        )
    L += _table(
        [
            "verb",
            "work",
            "verb s",
            "PINGs",
            "PING p50 ms",
            "PING p99 ms",
            "PING max ms",
            "target",
        ],
        rows,
    )
    L += ["", *_code(st["server"], st["redis_server"]), ""]
    return L


def _bounded_sampling(sp: dict[str, Any]) -> list[str]:
    L = ["### Random sampling with a huge count: ours vs redis-server", ""]
    if not _ok(sp):
        return L + _failed("sampling", sp)
    L += [
        f"A set and a sorted set of {sp['members']:,} 5-byte members on both servers (side"
        " by side, the order alternating); the time is from sending the command to the"
        f" last byte of its reply ({_mib(sp['reply_bytes'])}, its size checked to the"
        " byte). Medians of the runs.",
        "",
    ]
    rows = []
    for name, r in sp["summary"].items():
        rows.append(
            [
                f"`{sp['commands'][name]}`",
                f"{r['redis_s']:.2f}",
                f"{r['ours_s']:.2f}",
                _x(r["ratio"]),
                f"{'PASS' if r['ratio'] <= 1 else 'FAIL'} (<= 1x)",
            ]
        )
    L += _table(["command", "redis s", "ours s", "ours/redis", "target"], rows)
    L += ["", *_code(sp["servers"]["redis"], sp["servers"]["ours"]), ""]
    return L


def _flush_lag(tp: dict[str, Any] | None, du: dict[str, Any] | None) -> list[str]:
    L = ["## 8. Flush lag under SET load", ""]
    if not _ok(tp):
        return L + _failed("item 1", tp)
    assert tp is not None
    L += [
        "INFO persistence `flush_lag_ms` (age of the oldest write not yet durable) sampled"
        " every 50 ms over another connection while the item 1 SET runs (and the item 2"
        " async SET runs) were going. Flush interval 100 ms; target p99 <= 300 ms.",
        "",
    ]
    rows = []
    for p in ("P1", "P16"):
        f = tp["flush_lag"][p]
        rows.append(
            [f"file, SET {p}", str(f["samples"]), _n(f["p50_ms"]), _n(f["p99_ms"]), _n(f["max_ms"])]
        )
    if _ok(du):
        assert du is not None
        for cfg, f in du["flush_lag"].items():
            rows.append(
                [f"{cfg}, SET P1+P16", str(f["samples"]), _n(f["p50_ms"]), _n(f["p99_ms"]), ""]
            )
    L += _table(["load", "samples", "p50 ms", "p99 ms", "max ms"], rows)
    L += [""]
    return L


def _profile(pr: dict[str, Any] | None, res: dict[str, Any]) -> list[str]:

    L = ["## Profile of the server under SET load (py-spy)", ""]
    if not _ok(pr):
        return L + _failed("profile: make bench-long", pr)
    assert pr is not None
    L += [measured_by_long(res), ""]
    for p, r in pr.items():
        if "skipped" in r:
            L += [f"{p}: skipped: {r['skipped']}", ""]
            continue
        L += [
            f"### SET {p}: {r['samples']:,} samples, server busy"
            f" {min(r['busy_share'], 1):.0%} of the time",
            "",
            *_code(r["load"], r["profiler"]),
            "",
            "By area (innermost frame of our code):",
            "",
        ]
        L += _table(["area", "share"], [[a["function"], f"{a['share']:.1%}"] for a in r["areas"]])
        L += ["", "Self time (top 12):", ""]
        L += _table(
            ["function", "share"],
            [[f"`{a['function']}`", f"{a['share']:.1%}"] for a in r["self"][:12]],
        )
        L += ["", "Inclusive time (top 12):", ""]
        L += _table(
            ["function", "share"],
            [[f"`{a['function']}`", f"{a['share']:.1%}"] for a in r["inclusive"][:12]],
        )
        L += [""]
    return L


def _replicas(rp: dict[str, Any] | None) -> list[str]:
    L = ["## 10. Replicas and failover (issue 12)", ""]
    if not _ok(rp):
        return L + _failed("item 10", rp)
    assert rp is not None
    L += _replica_lag(rp["lag"])
    L += _failover(rp["failover"])
    return L


def _replica_lag(lg: dict[str, Any]) -> list[str]:
    L = ["### Replica lag under SET load", ""]
    if not _ok(lg):
        return L + _failed("replica lag", lg)
    L += [
        "A primary and a replica (`--replicaof`, the same `--storage`), both fresh for each"
        " run and both on the server CPU, and redis-benchmark SET (the item 1 load: 50"
        f" clients, {lg['requests']:,} requests at -P 1 and then"
        f" {lg.get('requests_pipelined', lg['requests']):,} at -P 16 on the same servers:"
        " both SET the one key `key:__rand_int__`) on the load CPU against the primary. Every"
        f" {lg['interval_ms']} ms a sampler (a thread of the runner) reads `TS.VERSION` on"
        " the primary and sends `TS.WAITLSN <that version> 30000` to the replica; the lag"
        " is the time from the primary's reply to the replica's, i.e. what a client that"
        " reads its own write on the replica waits, the replica's round trip included."
        " Beside it INFO temporalstore `replica_lag_ms` on the replica (its own figure:"
        " commit on the primary to apply here, in whole ms) is sampled every 50 ms. The"
        " same load also runs against a primary alone (the sampler reading `TS.VERSION`"
        " only), the two alternating: the ratio is what feeding a replica that shares the"
        ' core costs the primary. "Replica CPU" is its CPU time over the run\'s wall time.'
        " Lag percentiles pool the samples of all runs; throughputs are medians.",
        "",
    ]
    rows = []
    for pp, r in lg["summary"].items():
        rows.append(
            [
                f"SET -P {pp[1:]}",
                f"{r['samples']:,}" + (f" ({r['timeouts']} timed out)" if r["timeouts"] else ""),
                f"{r['lag_p50_ms']:,.1f}",
                f"{r['lag_p99_ms']:,.1f}",
                f"{r['lag_max_ms']:,.1f}",
                f"{_n(r['info_lag_p50_ms'])} / {_n(r['info_lag_p99_ms'])}",
                _n(r["rps_alone"]),
                _n(r["rps_replica"]),
                _x(r["ratio"]),
                ", ".join(f"{x:.2f}" for x in r["run_ratios"]),
                f"{r['replica_cpu']:.0%}",
            ]
        )
    L += _table(
        [
            "load",
            "samples",
            "lag p50 ms",
            "lag p99 ms",
            "lag max ms",
            "INFO replica_lag_ms p50 / p99",
            "SET/s alone",
            "SET/s with a replica",
            "with / alone",
            "paired",
            "replica CPU",
        ],
        rows,
    )
    c = lg["commands"]
    L += ["", *_code(c["primary"], c["replica"], *[c[f"P{p}"] for p in (1, 16)]), ""]
    return L


def _failover(fo: dict[str, Any]) -> list[str]:
    L = ["### Failover: kill -9 of the primary", ""]
    if not _ok(fo):
        return L + _failed("failover", fo)
    tables = fo["tables"]
    L += [
        "One etcd member (`tests/etcd.py`, on the load CPU) and three nodes of a group"
        " (on the server CPU) on one `file://` storage directory (lease 3 s); on the"
        " primary `"
        + "`, `".join(tables[m] for m in NO_LOSS_MODES)
        + "`. Three writers (threads of the runner), one per durability mode, each with"
        " its own redis-py `Sentinel` client over the three nodes (`master_for`, no"
        " retries inside redis-py), write `<prefix>:<n>` one SET at a time: `s:t:<n>`"
        " (sync table), `r:t:<n>` (raft table), `a:<n>` (the default table: async); a"
        " failed SET is sent again after 10 ms. Each round writes for"
        f" {fo['write_s']:g} s, kills the primary with -9 and waits until every writer has"
        " a write acknowledged that it sent after the kill: the time to that"
        ' acknowledgement is "writes back after" (the round\'s figure is its slowest'
        " mode). The killed node then restarts with an empty memory and rejoins as a"
        " replica (process start to `ROLE` slave). At the end every acknowledged write is"
        " read back from the last primary.",
        "",
    ]
    rows = []
    for i, r in enumerate(fo["runs"], 1):
        b = r["by_mode"]
        rows.append(
            [
                str(i),
                *[f"{b[m]:.2f}" for m in ("sync", "raft", "async")],
                f"**{r['seconds']:.2f}**",
                f"{r['rejoin_s']:.2f}",
            ]
        )
    L += _table(
        [
            "round",
            "sync writes back after s",
            "raft s",
            "async s",
            "all modes s",
            "old primary rejoined after s",
        ],
        rows,
    )
    L += [""]
    rows = []
    for mode, m in fo["modes"].items():
        if mode in NO_LOSS_MODES:
            target = f"{'PASS' if m['lost'] == 0 else 'FAIL'} (0 lost)"
        else:
            target = "measured, not a target"
            if m["lost"]:
                target += (
                    f"; the lost writes were acknowledged at most"
                    f" {m['lost_max_age_ms']:,.0f} ms before a kill"
                )
        rows.append(
            [
                mode,
                f"{m['acknowledged']:,}",
                f"{m['lost']:,}",
                f"{m['median_s']:.2f} / {m['max_s']:.2f}",
                f"{m['failed_attempts']:,}",
                target,
            ]
        )
    L += _table(
        [
            "mode",
            "writes acknowledged",
            "acknowledged, then lost",
            "writes back after s, median / max",
            "failed SETs (each sent again)",
            "target",
        ],
        rows,
    )
    L += [
        "",
        f"Failover: **{fo['median_s']:.2f} s median, {fo['max_s']:.2f} s max** over"
        f" {fo['rounds']} rounds (target: median <= {FAILOVER_LIMIT_S} s); the killed node"
        f" rejoined as a replica in {fo['rejoin_median_s']:.2f} s (median). The async loss"
        " bound is what neither object storage nor the promoted replica had received.",
        "",
        *_code(fo["server"]),
        "",
    ]
    return L


def _cluster(cl: dict[str, Any] | None) -> list[str]:
    L = ["## 11. Cluster mode: 1 and 2 shards (issue 28)", ""]
    if not _ok(cl):
        return L + _failed("item 11", cl)
    assert cl is not None
    L += [
        "A fresh cluster per run and per count of shards: ours (`--cluster-enabled yes`, one"
        " etcd member, each node on its own `file://` storage, `temporalstore cluster"
        " create`) and redis-server's (`--cluster-enabled yes`, the same slot ranges given"
        " with CLUSTER ADDSLOTSRANGE, joined with CLUSTER MEET: `redis-cli --cluster create`"
        " wants three masters). `redis-benchmark --cluster` (50 clients, the item 1"
        " requests) runs against the first node and sends each key to its slot's master"
        " (for one shard plain redis-benchmark: `--cluster` refuses a cluster of one node)."
        " **Pinning on this 2-core machine:** the first shard on the server CPU and"
        " redis-benchmark on the load CPU, as in item 1; the second shard on the load CPU"
        " too, beside redis-benchmark (there is no third core), so two shards get the"
        " second core less what the load generator takes of it. The two servers' runs"
        " alternate; figures are medians (requests per second).",
        "",
    ]
    rows = []
    for key, r in cl["summary"].items():
        pp, test = key.split(":")
        rows.append(
            [
                f"{test.upper()} -P {pp[1:]}",
                _n(r["redis_1"]),
                _n(r["redis_2"]),
                _x(r["redis_scale"]),
                _n(r["ours_1"]),
                _n(r["ours_2"]),
                _x(r["ours_scale"]),
            ]
        )
    L += _table(
        [
            "load",
            "redis 1 shard",
            "redis 2 shards",
            "redis 2 / 1",
            "ours 1 shard",
            "ours 2 shards",
            "ours 2 / 1",
        ],
        rows,
    )
    c = cl["commands"]
    shown = [c["server_redis"], c["server_ours"], c["P1_set_ours_2"], c["P16_set_ours_2"]]
    L += ["", *_code(*shown), ""]
    return L


def _cluster_move(mv: dict[str, Any] | None) -> list[str]:
    L = ["## 11m. Cluster mode: moving 1,000 slots holding 1M keys (issue 28)", ""]
    if not _ok(mv):
        return L + _failed("item 11m", mv)
    assert mv is not None
    sp, w, fe = mv["split"], mv["writer"], mv["fence"]
    L += [
        "A 2-shard cluster of ours (one etcd member, each node on its own `file://`"
        " storage, async durability, the first shard on the server CPU, the second on the"
        f" load CPU). Slots {mv['first']}-{mv['last']} (the first shard's) are loaded with"
        f" {mv['keys_loaded']:,} keys in all, {mv['keys_per_slot']:,} per slot: keys"
        " `{tag}:NNNNNN` whose hash tag is chosen to land in each slot (plain `key:N` names"
        " would put only about 61 keys in each slot), values of"
        f" {mv['value_bytes']} random bytes, by the bench's pipelined loader (1,000 deep,"
        f" {mv['load_s']:.0f} s), then flushed. The source shard holds those keys only"
        f" ({mv['source_keys_before']:,} before the move, {mv['source_keys_after']:,} after):"
        " the target replays the source's whole stream, so a source holding more keys"
        " outside the range would take longer. Then `temporalstore cluster move` runs"
        " while one writer sends `SET` to the moved slots one at a time, as a cluster"
        " client does: -TRYAGAIN retried 10 ms later, -MOVED followed. The time is from"
        " starting the command to its exit 0; the split comes from the nodes' logs"
        " (`--log-level info`). The target pre-copies the range while the source still"
        " takes writes to it, so the writer is refused only during the short fence: it"
        " writes far more during the move than when the fence came first (each write a"
        " new key of the range, which the pre-copy's rounds take again), and the move"
        " takes longer than one without writes would. The machine is shared with other"
        " work and may have been loaded"
        ' during the run: see the CPU other processes used meanwhile in "This run"; the'
        " import's seconds in particular are CPU-bound Python on a contended core.",
        "",
    ]
    L += _table(
        ["figure", "value"],
        [
            ["time to move (`cluster move` start to exit 0)", f"**{mv['seconds']:.1f} s**"],
            [
                "keys moved (the loaded ones and the writer's written before the fence)",
                f"{mv['keys_moved']:,}",
            ],
            ["keys per second", f"{mv['keys_per_s']:,.0f}"],
            [
                "keys read back on the target afterwards (MGET, value compared)",
                f"{mv['readable_on_target']:,} of {mv['keys_loaded']:,}",
            ],
            ["writes acknowledged during the move", f"{w['acked_during_move']:,}"],
            ["writes acknowledged in all (before, during, 1 s after)", f"{w['acked']:,}"],
            ["acknowledged writes lost", f"**{w['lost']}**"],
            ["-TRYAGAIN answers seen by the writer", f"{w['tryagain']:,}"],
            [
                "writes to the range refused: the source's fence to the map change",
                f"**{fe['fence_to_map_s']:.1f} s**",
            ],
            [
                "the writer's first -TRYAGAIN to its last",
                f"{fe['writer_tryagain_s']:.1f} s",
            ],
            [
                "keys pre-copied (then rounds taking again the keys written meanwhile);"
                " keys taken again from the tail after the fence",
                f"{fe['precopied_keys']:,} (+{fe.get('precopy_rounds', 0)} rounds);"
                f" {fe['tail_keys']:,}",
            ],
            ["-MOVED answers seen by the writer", f"{w['moved']:,}"],
        ],
    )
    L += ["", "Where the time went:", ""]
    rows = [["the command's start-up and checks, until the next step", f"{sp['start_s']:.1f}"]]
    if "precopy_replay_s" in sp:
        rows += [
            [
                "pre-copy: the target replays the source's stream (then its rounds' tails)",
                f"{sp['precopy_replay_s']:.1f}",
            ],
            [
                "pre-copy: the target imports the range's keys (then those written meanwhile)",
                f"{sp['precopy_import_s']:.1f}",
            ],
            ["pre-copy: the imports made durable", f"{sp['precopy_durable_s']:.1f}"],
            ["until the source fences (it polls etcd)", f"{sp['until_fence_s']:.1f}"],
        ]
    rows += [
        ["the source's fence and flush", f"{sp['fence_flush_s']:.1f}"],
        [
            "until the target goes on (it polls etcd for the move record)",
            f"{sp['target_poll_s']:.1f}",
        ],
        [
            "the target replays the source's stream (its tail after a pre-copy)",
            f"{sp['replay_s']:.1f}",
        ],
        ["the target imports the keys (those written in the tail)", f"{sp['import_s']:.1f}"],
        ["the import made durable", f"{sp['durable_s']:.1f}"],
        ["the slot map changed (etcd transaction, refresh)", f"{sp['map_s']:.2f}"],
        [
            "the source sees the new map, forgets the range (a FORGET record, made"
            " durable) and deletes the move record",
            f"{sp['source_forget_s']:.1f}",
        ],
        ["the command notices (it polls every 0.1 s) and exits", f"{sp['exit_s']:.1f}"],
    ]
    L += _table(["step", "seconds"], rows)
    c = mv["commands"]
    L += ["", *_code(c["server"], c["move"]), ""]
    return L
