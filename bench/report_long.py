"""The sections and Targets rows of `make bench-long` (`python -m bench.run --items L,p`,
bench/memrestart.py `item_long`): 1M keys x 10 versions (item 4 at the target's size)
and restarts from a checkpoint plus segments (item 5 at 1M and 10M records); the
profile section (bench/report.py) opens with the same dated line.

`make bench` does not run them (10M records twice take longer than its 10 minutes);
its report keeps their sections and Targets rows from the last `make bench-long`,
each section saying when and on which commit it was measured.
"""

from __future__ import annotations

from typing import Any

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

HOW = "Run by `make bench-long` (`python -m bench.run --items L,p`), not by `make bench`"


def long_targets(res: dict[str, Any]) -> list[tuple[str, str, str, bool | None]]:
    """(item, target, measured, ok) of the long measurements in `res`."""
    out: list[tuple[str, str, str, bool | None]] = []
    v = res.get("versions")
    if _ok(v):
        assert v is not None
        n = v["rounds"]
        r = v[f"round{n}"]["rss"] / v["redis_latest"]["rss"]
        tiered = v.get("tiered")
        if tiered is not None:
            t = tiered[f"round{n}"]["rss"] / v["redis_latest"]["rss"]
            out.append(
                (
                    LONG_VERSIONS_ITEM,
                    f"memory (RSS), {v['keys']:,} keys x {n} versions <= 4x redis holding"
                    f" the latest values (measured; `--history-memory {v['history_memory']}`)",
                    _x(t),
                    t <= 4,
                )
            )
        out.append(
            (
                LONG_VERSIONS_ITEM,
                f"memory (RSS), {v['keys']:,} keys x {n} versions, all history in memory"
                " (the default: older versions frozen into compressed pages past"
                " `--history-hot-memory`) <= 3x redis holding the latest values (issue 29)",
                _x(r),
                r <= 3,
            )
        )
    ck = res.get("checkpoint_restart")
    if _ok(ck):
        assert ck is not None
        for c in ck["sizes"]:
            rate = c["ours_records_per_s"]
            out.append(
                (
                    LONG_CHECKPOINT_ITEM,
                    f"restart from checkpoint + segments, {c['records']:,} records:"
                    " >= 1,000,000 records/s",
                    f"{_n(rate)} records/s ({c['ours_serving_s']:.2f} s to serving)",
                    rate >= 1_000_000,
                )
            )
            out.append(
                (
                    LONG_CHECKPOINT_ITEM,
                    f"restart from checkpoint + segments, {c['records']:,} records: faster"
                    " than redis from its AOF in the same run",
                    f"{c['ours_serving_s']:.2f} s vs {c['redis_serving_s']:.2f} s",
                    c["ours_serving_s"] < c["redis_serving_s"],
                )
            )
            if c["records"] >= 10_000_000:
                out.append(
                    (
                        LONG_CHECKPOINT_ITEM,
                        f"{c['records']:,} records, serving in < 15 s",
                        f"{c['ours_serving_s']:.1f} s (measured)",
                        c["ours_serving_s"] < 15,
                    )
                )
    return out


def measured_by_long(res: dict[str, Any], runs: bool = False) -> str:
    """The first line of a section of `make bench-long`: how it is run, when it was."""
    code = res.get("code")
    return (
        f"{HOW}; measured on {res['generated']}"
        + (f", {_code_measured(code, subject=False)}" if code else "")
        + (f"; {res['settings']['runs']} restarts per server and size, medians." if runs else ".")
    )


def long_versions(v: dict[str, Any] | None, res: dict[str, Any]) -> list[str]:
    L = ["## 4b. Memory of retained versions (make bench-long)", ""]
    if not _ok(v):
        return L + _failed("item 4, versions: make bench-long", v)
    assert v is not None
    rounds = v["rounds"]
    L += [
        measured_by_long(res),
        "",
        f"{rounds} versions per key over {v['keys']:,} keys ({rounds} rounds of SETs of"
        f" every key by the item 4 loader, {v['keys'] * rounds:,} writes), ours with the"
        f" default history `versions:64` which retains all {rounds}, once with all of it in"
        " memory (the default: past `--history-hot-memory`, 64 MiB of plain entries,"
        " older versions are frozen into compressed pages) and once with older versions"
        " moved to a local spill file"
        " past `--history-memory` (the checkpoint child on the load CPU); redis holds the"
        " latest values of the same keys (one round). Measured at this size, not"
        " extrapolated.",
        "",
    ]
    extra = v["bytes_per_extra_version"]
    redis_rss = v["redis_latest"]["rss"]
    last = f"round{rounds}"
    rows = [
        ["ours RSS, 1 version per key", _mib(v["round1"]["rss"])],
        [f"ours RSS, {rounds} versions per key", _mib(v[last]["rss"])],
        ["redis RSS, latest values of the same keys", _mib(redis_rss)],
        [f"ours ({rounds} versions) / redis (latest), RSS", _x(v[last]["rss"] / redis_rss)],
        ["bytes per additional retained version", f"{extra:.0f}"],
        ["ours load time, all rounds", f"{v['load_seconds']:.0f} s"],
    ]
    tiered = v.get("tiered")
    if tiered is not None:
        hm = v["history_memory"]
        h = tiered["history"]
        rows += [
            [
                f"with `--history-memory {hm}`: RSS, 1 version per key",
                _mib(tiered["round1"]["rss"]),
            ],
            [
                f"with `--history-memory {hm}`: RSS, {rounds} versions per key (settled)",
                _mib(tiered[last]["rss"]),
            ],
            [
                f"with `--history-memory {hm}`: ours / redis (latest), RSS",
                _x(tiered[last]["rss"] / redis_rss),
            ],
            [f"with `--history-memory {hm}`: peak RSS seen", _mib(tiered["peak_rss"])],
            [
                f"with `--history-memory {hm}`: versions out of memory, spill file",
                f"{int(h['history_cold_versions']):,}, {_mib(int(h['history_spill_file_bytes']))}",
            ],
            [
                f"with `--history-memory {hm}`: bytes per additional retained version",
                f"{tiered['bytes_per_extra_version']:.0f}",
            ],
            [
                f"with `--history-memory {hm}`: load time, all rounds; settling after",
                f"{tiered['load_seconds']:.0f} s; {tiered[last]['settle_seconds']:.0f} s",
            ],
        ]
    L += _table(["measure", "value"], rows)
    L += ["", *_code(v["server"])]
    if tiered is not None:
        L += _code(tiered["server"])
    L += [
        "",
        "Settled: measured once writes are durable, no checkpoint is being written and"
        " history in memory is within the budget (INFO persistence"
        " `checkpoint_in_progress`, INFO history). The peak is the highest RSS read"
        " after a round or while settling: a checkpoint's object passes through the"
        " server's memory on its way to storage.",
        "",
    ]
    return L


def long_checkpoint(ck: dict[str, Any] | None, res: dict[str, Any]) -> list[str]:
    L = ["## 5b. Restart from a checkpoint plus segments (make bench-long)", ""]
    if not _ok(ck):
        return L + _failed("item 5, from a checkpoint: make bench-long", ck)
    assert ck is not None
    sizes = ck["sizes"]
    L += [
        measured_by_long(res, runs=True),
        "",
        "Ours with its default checkpointing (a checkpoint every 1,000,000 records,"
        " built by a forked child while the server keeps serving, on the load CPU:"
        " `--checkpoint-cpulist`, as redis' AOF rewrites and saves get"
        " `--aof_rewrite_cpulist` and `--bgsave_cpulist`) takes N SETs of"
        " distinct keys (the item 4 loader), is killed with `kill -9` once they are"
        " durable, and restarts from its newest checkpoint plus the segments after it;"
        " redis restarts from an AOF of the same writes (`--appendonly yes"
        " --appendfsync no`). Timed from process creation to the first `+PONG`,"
        " restarts alternate, medians. Records/s = records the restarted server holds"
        " (its last LSN) / start-to-serving time.",
        "",
    ]
    rows = []
    for c in sizes:
        r0 = c["ours_runs"][0]
        rows.append(
            [
                f"{c['records']:,}",
                f"{c['redis_serving_s']:.2f} s",
                f"{c['ours_serving_s']:.2f} s",
                _n(c["redis_records_per_s"]),
                _n(c["ours_records_per_s"]),
                f"{r0['checkpoint_lsn']:,} + {r0['replay_records']:,}",
                f"{c['checkpoints_written']}",
                _mib(med_of([r["rss"] for r in c["ours_runs"]])),
                f"{c['ours_load_s']:.0f} s",
            ]
        )
    L += _table(
        [
            "records",
            "redis (AOF) to serving",
            "ours to serving",
            "redis records/s",
            "ours records/s",
            "ours: checkpoint LSN + records replayed",
            "checkpoints while loading",
            "ours RSS after restart",
            "ours load time",
        ],
        rows,
    )
    if sizes:
        L += ["", *_code(sizes[0]["redis_server"], sizes[0]["ours_server"]), ""]
    return L
